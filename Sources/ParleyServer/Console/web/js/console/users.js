// Users: GET /v1/users in uid order, or GET /v1/search/users for what is typed in the search field, a page at a time,
// each deletable (DELETE /v1/users/{uid}, after a confirmation); whom the app's users find when they search
// (PATCH /v1/app `userDirectory`) and what becomes of a deleted user's messages (`deletedUserMessages`).

import { h, replace } from '../dom.js';
import { ApiError } from '../api.js';
import { formatDateTime } from '../format.js';
import { avatar, card, CursorPager, errorBox, loading, pageHead, table } from './ui.js';

export const PAGE_SIZE = 50;

const DIRECTORY = {
    everyone: 'Everyone in the app',
    contacts: 'Only people they share a conversation with',
};

const DELETED_MESSAGES = {
    tombstone: 'Tombstones that still show who sent them',
    erase: 'Erased: tombstones that no longer name them',
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
                [{ label: 'User' }, { label: 'Name' }, { label: 'Avatar URL' }, { label: 'Created' }, { label: 'Updated' }, { label: '' }],
                users.map((user) => ({
                    dataset: { uid: user.uid },
                    cells: [
                        h('div', { class: 'who' }, avatar(user.uid, true), h('span', { class: 'mono user-uid' }, user.uid)),
                        user.name,
                        user.avatarURL ? h('span', { class: 'mono muted' }, user.avatarURL) : h('span', { class: 'muted' }, '—'),
                        formatDateTime(user.createdAt),
                        formatDateTime(user.updatedAt),
                        h(
                            'div',
                            { class: 'row-actions' },
                            h('button', { class: 'btn btn-ghost btn-sm', type: 'button', dataset: { action: 'export-user' }, onclick: () => exportUser(user) }, 'Export'),
                            h('button', { class: 'btn btn-ghost btn-sm', type: 'button', dataset: { action: 'delete-user' }, onclick: () => deleteUser(user) }, 'Delete…'),
                        ),
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
    const notice = h('div', { id: 'users-notice' });
    /**
     * Exports a user's data: every page of GET /v1/users/{uid}/export, saved as one JSON file (profile, memberships,
     * the messages they sent; their files are named by the messages' file parts: `parley admin export` saves them).
     */
    async function exportUser(user) {
        try {
            let page = await context.call('GET', `/v1/users/${encodeURIComponent(user.uid)}/export`, { query: { limit: 200 } });
            const memberships = page.memberships || [];
            const messages = [...page.messages];
            while (page.nextCursor) {
                page = await context.call('GET', `/v1/users/${encodeURIComponent(user.uid)}/export`, { query: { limit: 200, cursor: page.nextCursor } });
                messages.push(...page.messages);
            }
            const document_ = { exportedAt: Date.now(), user: page.user, memberships, messages };
            const link = h('a', {
                href: URL.createObjectURL(new Blob([JSON.stringify(document_, null, 2)], { type: 'application/json' })),
                download: `parley-export-${user.uid}.json`,
                id: 'export-link',
                dataset: { messages: String(messages.length), memberships: String(memberships.length) },
            }, `parley-export-${user.uid}.json`);
            replace(notice, h('div', { class: 'alert alert-success', role: 'status' }, `Exported ${user.uid}: ${memberships.length} conversation(s), ${messages.length} message(s). `, link));
            link.click();
        } catch (error) {
            replace(notice, errorBox(error instanceof ApiError ? error : new ApiError(0, 'ERROR', String(error))));
        }
    }

    /** Deletes a user after a confirmation (it cannot be undone), then shows the page again. */
    async function deleteUser(user) {
        const ok = await context.confirm({
            title: `Delete ${user.uid}?`,
            body: [
                `${user.uid} is taken out of every conversation, each message they sent becomes a tombstone (as “Deleted users’ messages” below says) and their files, devices, tokens and profile are removed.`,
                'This cannot be undone.',
            ],
            confirmLabel: 'Delete user',
            danger: true,
        });
        if (!ok) return;
        try {
            const deletion = await context.call('DELETE', `/v1/users/${encodeURIComponent(user.uid)}`);
            replace(notice, h('div', { class: 'alert alert-success', role: 'status' }, `${deletion.user.uid} was deleted: out of ${deletion.conversationsLeft} conversation(s), ${deletion.messagesDeleted} message(s) ${deletion.messages === 'erase' ? 'erased' : 'deleted'}.`));
            await pager.go(pager.index || 0);
        } catch (error) {
            replace(notice, errorBox(error instanceof ApiError ? error : new ApiError(0, 'ERROR', String(error))));
        }
    }
    const directory = new AppSetting(context, {
        key: 'userDirectory',
        id: 'user-directory',
        messageId: 'directory-message',
        cardId: 'directory-card',
        label: 'Whom users find',
        options: DIRECTORY,
        title: 'Finding users',
        subtitle: 'Whom the app’s users find when they search for people (a “new chat” picker). Blocked users are never found.',
    });
    const deletedMessages = new AppSetting(context, {
        key: 'deletedUserMessages',
        id: 'deleted-user-messages',
        label: 'What becomes of a deleted user’s messages',
        options: DELETED_MESSAGES,
        title: 'Deleted users’ messages',
        subtitle: 'When you delete a user, each message they sent loses its content; this says whether it still names them.',
    });
    page.append(
        pageHead('Users', 'Every user of the app, in uid order; a search finds them by the beginnings of the words of their name or uid.'),
        notice,
        card({ body: h('div', { class: 'card-body' }, form) }),
        card({ body, foot: [h('span', { class: 'muted' }, `${PAGE_SIZE} per page`), pager.controls] }),
        directory.card,
        deletedMessages.card,
    );
    await Promise.all([pager.go(0), directory.load(), deletedMessages.load()]);
}

/** One of the app's settings (`PATCH /v1/app`), changed as soon as another option is picked. */
class AppSetting {
    constructor(context, { key, id, messageId, cardId, label, options, title, subtitle }) {
        this.context = context;
        this.key = key;
        this.options = options;
        this.message = h('div', { id: messageId || `${id}-message` });
        this.select = h(
            'select',
            { id, 'aria-label': label, disabled: true, onchange: () => this.save() },
            Object.entries(options).map(([value, text]) => h('option', { value }, text)),
        );
        this.card = card({ title, subtitle, id: cardId || `${id}-card`, body: h('div', { class: 'card-body' }, this.message, this.select) });
    }

    async load() {
        try {
            const app = await this.context.call('GET', '/v1/app');
            this.select.value = app[this.key];
            this.select.disabled = false;
        } catch (error) {
            replace(this.message, errorBox(error));
        }
    }

    async save() {
        this.select.disabled = true;
        try {
            const app = await this.context.call('PATCH', '/v1/app', { body: { [this.key]: this.select.value } });
            this.select.value = app[this.key];
            replace(this.message, h('div', { class: 'alert alert-success', role: 'status' }, `Saved: ${this.options[app[this.key]]}.`));
        } catch (error) {
            replace(this.message, errorBox(error));
        } finally {
            this.select.disabled = false;
        }
    }
}
