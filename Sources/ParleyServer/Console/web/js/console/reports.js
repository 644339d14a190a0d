// Reports: GET /v1/reports (open, resolved or all, oldest first), resolve or reopen with PATCH /v1/reports/{id},
// and the moderation the API has: delete the reported message, ban the reported user from the group.

import { seg } from '../api.js';
import { h, replace } from '../dom.js';
import { formatDateTime, messageText } from '../format.js';
import { card, CursorPager, errorBox, loading, pageHead } from './ui.js';

export const PAGE_SIZE = 25;

const REASONS = {
    spam: 'Spam',
    harassment: 'Harassment',
    hate: 'Hate',
    violence: 'Violence',
    sexual: 'Sexual content',
    selfHarm: 'Self-harm',
    impersonation: 'Impersonation',
    other: 'Other',
};

export async function renderReports(context, page) {
    let state = 'open';
    const conversationTypes = new Map(); // conversationId → 'direct' | 'group' | null (unreadable)
    const body = h('div', { id: 'reports-body' }, loading());
    const message = h('div', { id: 'reports-message' });
    const say = (node) => replace(message, node);

    const conversationType = async (conversationId) => {
        if (!conversationTypes.has(conversationId)) {
            try {
                const conversation = await context.call('GET', `/v1/conversations/${seg(conversationId)}`);
                conversationTypes.set(conversationId, conversation.type);
            } catch {
                conversationTypes.set(conversationId, null);
            }
        }
        return conversationTypes.get(conversationId);
    };

    const pager = new CursorPager({
        context,
        body,
        info: 'reports',
        load: async (cursor) => {
            const answer = await context.call('GET', '/v1/reports', { query: { limit: PAGE_SIZE, cursor, state: state === 'all' ? null : state } });
            await Promise.all(answer.reports.filter((report) => report.conversationId).map((report) => conversationType(report.conversationId)));
            return { items: answer.reports, nextCursor: answer.nextCursor };
        },
        render: (reports) =>
            reports.length
                ? h('div', { id: 'reports-list' }, reports.map((report) => renderReport(report)))
                : h('div', { class: 'empty-state', id: 'reports-list' }, state === 'open' ? 'No open reports. All clear.' : 'No reports here.'),
    });

    const renderReport = (report) => {
        const resolution = h('input', { type: 'text', placeholder: report.state === 'open' ? 'Resolution note (optional)' : 'New note (optional)', 'aria-label': 'Resolution note' });
        const isGroup = report.conversationId && conversationTypes.get(report.conversationId) === 'group';
        const actions = [
            resolution,
            report.state === 'open'
                ? h('button', { class: 'btn btn-primary btn-sm', type: 'button', dataset: { action: 'resolve' }, onclick: () => update(report, 'resolved', resolution.value) }, 'Resolve')
                : h('button', { class: 'btn btn-sm', type: 'button', dataset: { action: 'reopen' }, onclick: () => update(report, 'open', resolution.value) }, 'Reopen'),
            report.state === 'open' ? h('button', { class: 'btn btn-sm', type: 'button', dataset: { action: 'dismiss' }, onclick: () => update(report, 'resolved', resolution.value || 'Dismissed: no action needed.') }, 'Dismiss') : null,
            report.messageId && report.message && !report.message.deletedAt
                ? h('button', { class: 'btn btn-sm', type: 'button', dataset: { action: 'delete-message' }, onclick: () => deleteMessage(report) }, 'Delete message')
                : null,
            isGroup ? h('button', { class: 'btn btn-sm', type: 'button', dataset: { action: 'ban' }, onclick: () => ban(report) }, `Ban ${report.uid} from the group`) : null,
        ];
        return h(
            'article',
            { class: 'report', dataset: { id: report.id, state: report.state } },
            h(
                'div',
                { class: 'report-head' },
                h('span', { class: 'badge badge-danger' }, REASONS[report.reason] || report.reason),
                h('span', { class: report.state === 'open' ? 'badge badge-warning' : 'badge badge-success' }, report.state),
                h('span', { class: 'mono muted' }, report.id),
                h('span', { class: 'spacer' }),
                h('span', { class: 'muted' }, formatDateTime(report.createdAt)),
            ),
            h(
                'p',
                { class: 'report-line' },
                h('strong', {}, report.reporter),
                report.messageId ? ' reported a message by ' : ' reported the user ',
                h('strong', {}, report.uid),
                report.conversationId ? [' in ', h('a', { href: `#/conversations/${encodeURIComponent(report.conversationId)}`, class: 'mono' }, report.conversationId)] : null,
            ),
            report.message
                ? h('div', { class: 'quote' }, h('div', { class: 'quote-meta' }, `#${report.message.seq} · ${report.message.sender} · ${formatDateTime(report.message.sentAt)} · as the reporter saw it`), messageText(report.message))
                : null,
            report.details ? h('p', { class: 'report-line' }, h('span', { class: 'muted' }, 'Details: '), report.details) : null,
            report.state === 'resolved'
                ? h('p', { class: 'report-line' }, h('span', { class: 'muted' }, `Resolved ${formatDateTime(report.resolvedAt)}${report.resolution ? ': ' : ''}`), report.resolution || '')
                : null,
            h('div', { class: 'report-actions' }, actions),
        );
    };

    const update = async (report, newState, note) => {
        try {
            const body = { state: newState };
            if (note && note.trim()) body.resolution = note.trim();
            await context.call('PATCH', `/v1/reports/${seg(report.id)}`, { body });
            say(h('div', { class: 'alert alert-success', role: 'status' }, newState === 'resolved' ? `Report ${report.id} resolved.` : `Report ${report.id} reopened.`));
            await pager.reload();
        } catch (error) {
            say(errorBox(error));
        }
    };

    const deleteMessage = async (report) => {
        const ok = await context.confirm({
            title: 'Delete the reported message?',
            body: [`The message by ${report.uid} is deleted for everyone (the report keeps its copy).`],
            confirmLabel: 'Delete message',
            danger: true,
        });
        if (!ok) return;
        try {
            await context.call('DELETE', `/v1/conversations/${seg(report.conversationId)}/messages/${seg(report.messageId)}`);
            say(h('div', { class: 'alert alert-success', role: 'status' }, 'The message was deleted. Resolve the report when you are done.'));
        } catch (error) {
            say(errorBox(error));
        }
    };

    const ban = async (report) => {
        const reason = await context.confirm({
            title: `Ban ${report.uid} from the group?`,
            body: [`${report.uid} is removed from the group and kept out until the ban is lifted (Conversations page).`],
            confirmLabel: 'Ban',
            danger: true,
            input: { placeholder: 'Reason (optional)', value: REASONS[report.reason] || '' },
        });
        if (reason === null) return;
        try {
            await context.call('PUT', `/v1/conversations/${seg(report.conversationId)}/bans/${seg(report.uid)}`, { body: reason ? { reason } : {} });
            say(h('div', { class: 'alert alert-success', role: 'status' }, `${report.uid} is banned from ${report.conversationId}.`));
        } catch (error) {
            say(errorBox(error));
        }
    };

    const filterButtons = ['open', 'resolved', 'all'].map((value) =>
        h('button', { class: 'tab', type: 'button', role: 'tab', 'aria-selected': String(value === state), dataset: { state: value }, onclick: () => {
            state = value;
            for (const button of filterButtons) button.setAttribute('aria-selected', String(button.dataset.state === state));
            pager.cursors = [null];
            pager.nextCursor = null;
            say(null);
            pager.go(0);
        } }, value[0].toUpperCase() + value.slice(1)),
    );

    page.append(
        pageHead('Reports', 'What users reported, oldest first. Resolve, dismiss, or act on the message or its sender.', h('div', { class: 'filters', role: 'tablist' }, filterButtons)),
        message,
        card({ body, foot: [h('span', { class: 'muted' }, `${PAGE_SIZE} per page`), pager.controls] }),
    );
    await pager.go(0);
}
