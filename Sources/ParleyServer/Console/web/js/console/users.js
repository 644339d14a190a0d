// Users: GET /v1/users in uid order, or GET /v1/search/users for what is typed in the search field, a page at a time;
// and whom the app's users find when they search (PATCH /v1/app `userDirectory`).

import { h, replace } from '../dom.js';
import { formatDateTime } from '../format.js';
import { avatar, card, CursorPager, errorBox, loading, pageHead, table } from './ui.js';

export const PAGE_SIZE = 50;

const DIRECTORY = {
    everyone: 'Everyone in the app',
    contacts: 'Only people they share a conversation with',
};

export async function renderUsers(context, page) {
    let query = '';
    const body = h('div', { id: 'users-body' }, loading());
    const pager = new CursorPager({
        context,
        body,
        info: 'users',
        load: async (cursor) => {
            const answer = query
                ? await context.call('GET', '/v1/search/users', { query: { q: query, limit: PAGE_SIZE, cursor } })
                : await context.call('GET', '/v1/users', { query: { limit: PAGE_SIZE, cursor } });
            return { items: answer.users, nextCursor: answer.nextCursor };
        },
        render: (users) =>
            table(
                [{ label: 'User' }, { label: 'Name' }, { label: 'Avatar URL' }, { label: 'Created' }, { label: 'Updated' }],
                users.map((user) => ({
                    dataset: { uid: user.uid },
                    cells: [
                        h('div', { class: 'who' }, avatar(user.uid, true), h('span', { class: 'mono user-uid' }, user.uid)),
                        user.name,
                        user.avatarURL ? h('span', { class: 'mono muted' }, user.avatarURL) : h('span', { class: 'muted' }, '—'),
                        formatDateTime(user.createdAt),
                        formatDateTime(user.updatedAt),
                    ],
                })),
                {
                    id: 'users-table',
                    empty: query ? `Nobody's name or uid has words beginning with “${query}”.` : 'No users yet. Users appear when they log in or your server creates them.',
                },
            ),
    });
    const search = h('input', { type: 'search', id: 'users-search', placeholder: 'Find by name or uid', 'aria-label': 'Find users by name or uid', maxlength: '64', spellcheck: 'false' });
    const form = h(
        'form',
        { class: 'inline-form', id: 'users-search-form', onsubmit: (event) => {
            event.preventDefault();
            query = search.value.trim();
            pager.cursors = [null];
            pager.nextCursor = null;
            pager.go(0);
        } },
        search,
        h('button', { class: 'btn', type: 'submit', id: 'users-search-go' }, 'Search'),
    );
    const directory = new DirectorySetting(context);
    page.append(
        pageHead('Users', 'Every user of the app, in uid order; a search finds them by the beginnings of the words of their name or uid.'),
        card({ body: h('div', { class: 'card-body' }, form) }),
        card({ body, foot: [h('span', { class: 'muted' }, `${PAGE_SIZE} per page`), pager.controls] }),
        directory.card,
    );
    await Promise.all([pager.go(0), directory.load()]);
}

/** The app's `userDirectory`, changed as soon as another option is picked. */
class DirectorySetting {
    constructor(context) {
        this.context = context;
        this.message = h('div', { id: 'directory-message' });
        this.select = h(
            'select',
            { id: 'user-directory', 'aria-label': 'Whom users find', disabled: true, onchange: () => this.save() },
            Object.entries(DIRECTORY).map(([value, label]) => h('option', { value }, label)),
        );
        this.card = card({
            title: 'Finding users',
            subtitle: 'Whom the app’s users find when they search for people (a “new chat” picker). Blocked users are never found.',
            id: 'directory-card',
            body: h('div', { class: 'card-body' }, this.message, this.select),
        });
    }

    async load() {
        try {
            const app = await this.context.call('GET', '/v1/app');
            this.select.value = app.userDirectory;
            this.select.disabled = false;
        } catch (error) {
            replace(this.message, errorBox(error));
        }
    }

    async save() {
        this.select.disabled = true;
        try {
            const app = await this.context.call('PATCH', '/v1/app', { body: { userDirectory: this.select.value } });
            this.select.value = app.userDirectory;
            replace(this.message, h('div', { class: 'alert alert-success', role: 'status' }, `Saved: ${DIRECTORY[app.userDirectory]}.`));
        } catch (error) {
            replace(this.message, errorBox(error));
        } finally {
            this.select.disabled = false;
        }
    }
}
