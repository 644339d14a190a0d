// Conversations: the app's list (GET /v1/conversations with the key), and one conversation: its participants (with
// mute and ban for groups), its bans and its messages (paged backwards, deletable by the operator).

import { ApiError, seg } from '../api.js';
import { h, replace } from '../dom.js';
import { formatDate, formatDateTime, formatShort, messageText } from '../format.js';
import { avatar, card, CursorPager, errorBox, loading, pageHead, table } from './ui.js';

export const PAGE_SIZE = 50;

export function conversationTitle(conversation) {
    if (conversation.name) return conversation.name;
    return conversation.type === 'direct' ? 'Direct conversation' : 'Untitled group';
}

function typeBadge(conversation) {
    return conversation.type === 'direct'
        ? h('span', { class: 'badge' }, 'direct')
        : h('span', { class: 'badge badge-accent' }, conversation.isPublic ? 'public group' : 'group');
}

/** "alice · bob" for a direct conversation, filled in when its participants arrive (the list does not carry them). */
function directNames(context, conversationId) {
    const element = h('span', { class: 'who-names' });
    participantsQueue.push(async () => {
        if (!context.alive) return;
        try {
            const { participants } = await context.call('GET', `/v1/conversations/${seg(conversationId)}/participants`);
            element.textContent = ` · ${participants.map((participant) => participant.uid).join(' & ')}`;
        } catch {
            // The title stays generic.
        }
    });
    drainParticipantsQueue();
    return element;
}

const participantsQueue = [];
let participantsRunning = 0;

function drainParticipantsQueue() {
    while (participantsRunning < 6 && participantsQueue.length) {
        const job = participantsQueue.shift();
        participantsRunning += 1;
        job().finally(() => {
            participantsRunning -= 1;
            drainParticipantsQueue();
        });
    }
}

export async function renderConversations(context, page) {
    const body = h('div', { id: 'conversations-body' }, loading());
    const pager = new CursorPager({
        context,
        body,
        info: 'conversations',
        load: async (cursor) => {
            const answer = await context.call('GET', '/v1/conversations', { query: { limit: PAGE_SIZE, cursor } });
            return { items: answer.conversations, nextCursor: answer.nextCursor };
        },
        render: (conversations) =>
            table(
                [
                    { label: 'Conversation' },
                    { label: 'Type' },
                    { label: 'Participants', class: 'num' },
                    { label: 'Last seq', class: 'num' },
                    { label: 'Created by' },
                    { label: 'Created' },
                ],
                conversations.map((conversation) => ({
                    dataset: { id: conversation.id },
                    onclick: () => {
                        location.hash = `#/conversations/${encodeURIComponent(conversation.id)}`;
                    },
                    cells: [
                        h(
                            'div',
                            {},
                            h('a', { class: 'who-name', href: `#/conversations/${encodeURIComponent(conversation.id)}` }, conversationTitle(conversation)),
                            conversation.type === 'direct' ? directNames(context, conversation.id) : null,
                            h('div', { class: 'who-sub mono conversation-id' }, conversation.id),
                        ),
                        typeBadge(conversation),
                        String(conversation.participantCount),
                        String(conversation.lastSeq),
                        h('span', { class: 'mono' }, conversation.createdBy),
                        formatDateTime(conversation.createdAt),
                    ],
                })),
                { id: 'conversations-table', empty: 'No conversations yet.' },
            ),
    });
    page.append(
        pageHead('Conversations', 'Every conversation of the app that is not deleted, newest first.'),
        card({ body, foot: [h('span', { class: 'muted' }, `${PAGE_SIZE} per page`), pager.controls] }),
    );
    await pager.go(0);
}

export async function renderConversation(context, page, conversationId) {
    const base = `/v1/conversations/${seg(conversationId)}`;
    page.append(h('a', { class: 'crumb', href: '#/conversations' }, '← All conversations'), loading());
    let conversation;
    try {
        conversation = await context.call('GET', base);
    } catch (error) {
        if (!context.alive) return;
        replace(page, h('a', { class: 'crumb', href: '#/conversations' }, '← All conversations'), errorBox(error));
        return;
    }
    if (!context.alive) return;
    const isGroup = conversation.type === 'group';
    const actionMessage = h('div', { id: 'conversation-message' });
    const say = (node) => {
        replace(actionMessage, node);
        actionMessage.scrollIntoView({ block: 'nearest' });
    };

    // Details
    const details = card({
        title: 'Details',
        body: h(
            'div',
            { class: 'card-body' },
            h(
                'dl',
                { class: 'kv' },
                h('dt', {}, 'ID'),
                h('dd', { class: 'mono' }, conversation.id),
                h('dt', {}, 'Type'),
                h('dd', {}, typeBadge(conversation)),
                conversation.description ? [h('dt', {}, 'Description'), h('dd', {}, conversation.description)] : null,
                h('dt', {}, 'Created by'),
                h('dd', { class: 'mono' }, conversation.createdBy),
                h('dt', {}, 'Created'),
                h('dd', {}, formatShort(conversation.createdAt)),
                h('dt', {}, 'Last activity'),
                h('dd', {}, formatShort(conversation.updatedAt)),
                h('dt', {}, 'Last seq'),
                h('dd', {}, String(conversation.lastSeq)),
            ),
        ),
    });

    // Participants
    const participantsBody = h('div', { id: 'participants-body' }, loading());
    const loadParticipants = async () => {
        try {
            const { participants } = await context.call('GET', `${base}/participants`);
            if (!context.alive) return;
            if (!conversation.name && conversation.type === 'direct') {
                title.textContent = participants.map((participant) => participant.uid).join(' & ');
            }
            replace(
                participantsBody,
                table(
                    [{ label: 'User' }, { label: 'Role' }, { label: 'Read / delivered', class: 'num' }, { label: 'Joined' }, { label: '', class: 'actions' }],
                    participants.map((participant) => ({
                        dataset: { uid: participant.uid },
                        cells: [
                            h('div', { class: 'who' }, avatar(participant.uid, true), h('span', { class: 'mono' }, participant.uid), participant.muted ? h('span', { class: 'badge badge-warning' }, 'muted') : null),
                            h('span', { class: participant.role === 'member' ? 'badge' : 'badge badge-accent' }, participant.role),
                            `${participant.readSeq} / ${participant.deliveredSeq}`,
                            formatDate(participant.joinedAt),
                            isGroup && participant.role !== 'owner'
                                ? [
                                      h('button', { class: 'btn btn-sm', type: 'button', onclick: () => toggleMute(participant) }, participant.muted ? 'Unmute' : 'Mute'),
                                      h('button', { class: 'btn btn-sm', type: 'button', onclick: () => ban(participant.uid) }, 'Ban'),
                                  ]
                                : null,
                        ],
                    })),
                    { id: 'participants-table', empty: 'No participants.' },
                ),
            );
        } catch (error) {
            if (context.alive) replace(participantsBody, h('div', { class: 'card-body' }, errorBox(error)));
        }
    };
    const toggleMute = async (participant) => {
        try {
            if (participant.muted) await context.call('DELETE', `${base}/participants/${seg(participant.uid)}/mute`);
            else await context.call('PUT', `${base}/participants/${seg(participant.uid)}/mute`, { body: {} });
            say(h('div', { class: 'alert alert-success', role: 'status' }, participant.muted ? `${participant.uid} is no longer muted.` : `${participant.uid} is muted: they read, but cannot write.`));
            await loadParticipants();
        } catch (error) {
            say(errorBox(error));
        }
    };
    const ban = async (uid) => {
        const reason = await context.confirm({
            title: `Ban ${uid}?`,
            body: [`${uid} is removed from the group and cannot join, be added or read it until the ban is lifted.`],
            confirmLabel: 'Ban',
            danger: true,
            input: { placeholder: 'Reason (optional)' },
        });
        if (reason === null) return;
        try {
            await context.call('PUT', `${base}/bans/${seg(uid)}`, { body: reason ? { reason } : {} });
            say(h('div', { class: 'alert alert-success', role: 'status' }, `${uid} is banned from this group.`));
            await Promise.all([loadParticipants(), loadBans()]);
        } catch (error) {
            say(errorBox(error));
        }
    };

    // Bans (groups)
    const bansBody = h('div', { id: 'bans-body' }, loading());
    const loadBans = async () => {
        if (!isGroup) return;
        try {
            const { bans } = await context.call('GET', `${base}/bans`);
            if (!context.alive) return;
            replace(
                bansBody,
                table(
                    [{ label: 'User' }, { label: 'Reason' }, { label: 'Until' }, { label: 'Since' }, { label: '', class: 'actions' }],
                    bans.map((entry) => ({
                        dataset: { uid: entry.uid },
                        cells: [
                            h('span', { class: 'mono' }, entry.uid),
                            entry.reason || h('span', { class: 'muted' }, '—'),
                            entry.until ? formatDateTime(entry.until) : 'until lifted',
                            formatDateTime(entry.createdAt),
                            h('button', { class: 'btn btn-sm', type: 'button', onclick: () => unban(entry.uid) }, 'Lift'),
                        ],
                    })),
                    { id: 'bans-table', empty: 'Nobody is banned.' },
                ),
            );
        } catch (error) {
            if (context.alive) replace(bansBody, h('div', { class: 'card-body' }, errorBox(error)));
        }
    };
    const unban = async (uid) => {
        try {
            await context.call('DELETE', `${base}/bans/${seg(uid)}`);
            say(h('div', { class: 'alert alert-success', role: 'status' }, `The ban of ${uid} is lifted; they may join or be added again.`));
            await loadBans();
        } catch (error) {
            say(errorBox(error));
        }
    };

    // Messages
    const messages = new MessageLog(context, base, say);

    const head = pageHead(conversationTitle(conversation), `${conversation.participantCount} participants · ${conversation.type}`);
    const title = head.querySelector('h1');
    title.id = 'conversation-title';
    replace(
        page,
        h('a', { class: 'crumb', href: '#/conversations' }, '← All conversations'),
        head,
        actionMessage,
        h('div', { class: 'grid-detail' }, details, card({ title: 'Participants', subtitle: 'Each one\'s role, and how far they read and received (sequence numbers).', body: participantsBody })),
        h('div', { class: 'stack' }, isGroup ? card({ title: 'Bans', subtitle: 'Bans in force.', body: bansBody }) : null, messages.card),
    );
    await Promise.all([loadParticipants(), loadBans(), messages.loadOlder()]);
}

/** The conversation's history, newest at the bottom; "Load older" pages backwards. */
class MessageLog {
    constructor(context, base, say) {
        this.context = context;
        this.base = base;
        this.say = say;
        this.messages = [];
        this.cursor = undefined;
        this.done = false;
        this.list = h('div', { class: 'message-log', id: 'messages-log' }, loading());
        this.older = h('button', { class: 'btn btn-sm', type: 'button', id: 'messages-older', onclick: () => this.loadOlder() }, 'Load older messages');
        this.olderRow = h('div', { class: 'load-older' }, this.older);
        this.olderRow.hidden = true;
        this.card = card({ title: 'Messages', subtitle: 'As participants see them, oldest at the top.', body: h('div', {}, this.olderRow, this.list) });
    }

    async loadOlder() {
        this.older.disabled = true;
        try {
            const page = await this.context.call('GET', `${this.base}/messages`, { query: { limit: PAGE_SIZE, cursor: this.cursor } });
            if (!this.context.alive) return;
            this.messages = page.messages.concat(this.messages);
            this.cursor = page.nextCursor;
            this.done = !page.nextCursor;
            this.render();
        } catch (error) {
            if (this.context.alive) replace(this.list, h('div', { class: 'card-body' }, errorBox(error)));
        } finally {
            this.older.disabled = false;
            this.olderRow.hidden = this.done;
        }
    }

    render() {
        if (!this.messages.length) {
            replace(this.list, h('div', { class: 'empty-state' }, 'No messages yet.'));
            return;
        }
        replace(
            this.list,
            this.messages.map((message) =>
                h(
                    'div',
                    { class: 'log-item', dataset: { id: message.id, seq: String(message.seq) } },
                    avatar(message.system ? 'app' : message.sender, true),
                    h(
                        'div',
                        { class: 'log-main' },
                        h(
                            'div',
                            { class: 'log-meta' },
                            h('span', { class: 'log-sender' }, message.system ? 'the app (system)' : message.sender),
                            message.silent ? h('span', { class: 'badge' }, 'silent') : null,
                            h('span', { class: 'log-time' }, formatDateTime(message.sentAt)),
                            h('span', { class: 'log-seq' }, `#${message.seq}`),
                            message.replyTo ? h('span', { class: 'badge' }, 'reply') : null,
                            message.editedAt ? h('span', { class: 'badge' }, 'edited') : null,
                            message.pin ? h('span', { class: 'badge badge-warning', title: formatDateTime(message.pin.pinnedAt) }, message.pin.pinnedBy ? `pinned by ${message.pin.pinnedBy}` : 'pinned by the app') : null,
                            message.deletedAt ? h('span', { class: 'badge badge-danger' }, message.deletedBy ? `deleted by ${message.deletedBy}` : 'deleted by the app') : null,
                        ),
                        h('div', { class: message.deletedAt ? 'log-text deleted' : 'log-text' }, messageText(message)),
                    ),
                    message.deletedAt
                        ? null
                        : h(
                              'div',
                              { class: 'log-actions' },
                              h('button', { class: 'btn btn-ghost btn-sm', type: 'button', dataset: { action: 'pin' }, onclick: () => this.setPinned(message, !message.pin) }, message.pin ? 'Unpin' : 'Pin'),
                              h('button', { class: 'btn btn-ghost btn-sm', type: 'button', onclick: () => this.remove(message) }, 'Delete'),
                          ),
                ),
            ),
        );
    }

    /** Pins or unpins a message as the app (every participant gets `conversationMessage.pinned` / `.unpinned`). */
    async setPinned(message, pinned) {
        try {
            const path = `${this.base}/messages/${seg(message.id)}/pin`;
            const pin = pinned ? await this.context.call('PUT', path) : (await this.context.call('DELETE', path), undefined);
            this.messages = this.messages.map((item) => (item.id === message.id ? { ...item, pin } : item));
            this.render();
            this.say(h('div', { class: 'alert alert-success', role: 'status' }, `Message #${message.seq} was ${pinned ? 'pinned' : 'unpinned'}.`));
        } catch (error) {
            this.say(errorBox(error instanceof ApiError ? error : new ApiError(0, 'ERROR', String(error))));
        }
    }

    async remove(message) {
        const ok = await this.context.confirm({
            title: 'Delete this message?',
            body: [`Message #${message.seq} by ${message.sender} is replaced by a tombstone for everyone. Its content is not kept.`],
            confirmLabel: 'Delete',
            danger: true,
        });
        if (!ok) return;
        try {
            const tombstone = await this.context.call('DELETE', `${this.base}/messages/${seg(message.id)}`);
            // Deleting a message unpins it.
            this.messages = this.messages.map((item) => (item.id === tombstone.id ? tombstone : item));
            this.render();
            this.say(h('div', { class: 'alert alert-success', role: 'status' }, `Message #${message.seq} was deleted.`));
        } catch (error) {
            this.say(errorBox(error instanceof ApiError ? error : new ApiError(0, 'ERROR', String(error))));
        }
    }
}
