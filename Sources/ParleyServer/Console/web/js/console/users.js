// Users: GET /v1/users, in uid order, a page at a time.

import { h } from '../dom.js';
import { formatDateTime } from '../format.js';
import { avatar, card, CursorPager, loading, pageHead, table } from './ui.js';

export const PAGE_SIZE = 50;

export async function renderUsers(context, page) {
    const body = h('div', { id: 'users-body' }, loading());
    const pager = new CursorPager({
        context,
        body,
        info: 'users',
        load: async (cursor) => {
            const answer = await context.call('GET', '/v1/users', { query: { limit: PAGE_SIZE, cursor } });
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
                { id: 'users-table', empty: 'No users yet. Users appear when they log in or your server creates them.' },
            ),
    });
    page.append(
        pageHead('Users', 'Every user of the app, in uid order.'),
        card({ body, foot: [h('span', { class: 'muted' }, `${PAGE_SIZE} per page`), pager.controls] }),
    );
    await pager.go(0);
}
