// The chat page: a user signs in (Auth Key in development, or an auth token), sees their conversations with unread
// counts and presence, opens one (history, older pages, live messages), sends (through the client's outbox), and
// sees typing and receipts both ways.
//
// What a reload keeps (localStorage): the session (uid and token), the stream positions the client resumes from, and
// the outbox of messages not yet acknowledged. What a conversation shows is its history (REST) plus the events after
// the history's `lastSeq`, keyed by message id: a message is shown once, whichever way it arrived.
//
// User data is only ever set as text (textContent) or as an attribute value: never parsed as HTML.

import { api, ApiError, seg } from '../api.js';
import { byId, h, NodeCache, reconcile, replace, show } from '../dom.js';
import { fileLabel, formatAgo, formatTime, hueOf, initials, messageText } from '../format.js';
import { ChatClient } from './client.js';

const SESSION_KEY = 'parley.chat.session';
const LAST_APP_KEY = 'parley.chat.lastAppId';
const PAGE_SIZE = 50;
const TYPING_REPEAT_MS = 3000; // the server turns typing off 5 s after the last `typing` frame
const TYPING_IDLE_MS = 4000;

let session = null; // { uid, token, appId }
let client = null;
let openId = null;
let renderTimer = null;
const conversations = new Map(); // id → Conversation record (below)
const presence = new Map(); // uid → { online, lastSeenAt }
const names = new Map(); // uid → display name
const outgoingTyping = { conversationId: null, on: false, lastSentAt: 0, idleTimer: null };
const listNodes = new NodeCache(); // conversation buttons, kept while their content is the same
const messageNodes = new NodeCache(); // message bubbles of the open conversation
let renderedConversationId = null;
let listLoaded = false; // the conversation list came; else it is asked again at the next caughtUp

// MARK: Session

function loadSession() {
    try {
        const saved = JSON.parse(localStorage.getItem(SESSION_KEY) || 'null');
        return saved && saved.token && saved.uid ? saved : null;
    } catch {
        return null;
    }
}

function errorBox(error) {
    const code = error instanceof ApiError ? error.code : 'ERROR';
    return h('div', { class: 'alert', role: 'alert', 'data-error-code': code }, h('span', { class: 'alert-code' }, code), error.message || String(error));
}

function showLogin(error) {
    show(byId('chat'), false);
    show(byId('login'), true);
    replace(byId('login-error'), error ? errorBox(error) : null);
    const appId = byId('login-app-id');
    if (!appId.value) appId.value = localStorage.getItem(LAST_APP_KEY) || '';
    (appId.value ? byId('login-uid') : appId).focus();
}

function selectTab(which) {
    byId('tab-key').setAttribute('aria-selected', String(which === 'key'));
    byId('tab-token').setAttribute('aria-selected', String(which === 'token'));
    show(byId('login-key-form'), which === 'key');
    show(byId('login-token-form'), which === 'token');
    replace(byId('login-error'));
}

async function loginWithKey(event) {
    event.preventDefault();
    const appId = byId('login-app-id').value.trim();
    const uid = byId('login-uid').value.trim();
    const authKey = byId('login-auth-key').value.trim();
    const button = byId('login-key-submit');
    button.disabled = true;
    try {
        const answer = await api('POST', '/v1/login', { body: { appId, uid, authKey } });
        localStorage.setItem(LAST_APP_KEY, appId);
        byId('login-auth-key').value = '';
        begin({ uid: answer.user.uid, token: answer.authToken, appId });
    } catch (error) {
        replace(byId('login-error'), errorBox(error));
    } finally {
        button.disabled = false;
    }
}

async function loginWithToken(event) {
    event.preventDefault();
    const token = byId('login-token').value.trim();
    const button = byId('login-token-submit');
    button.disabled = true;
    try {
        const user = await api('GET', '/v1/me', { token });
        byId('login-token').value = '';
        begin({ uid: user.uid, token, appId: null });
    } catch (error) {
        replace(byId('login-error'), errorBox(error));
    } finally {
        button.disabled = false;
    }
}

function begin(newSession) {
    session = newSession;
    localStorage.setItem(SESSION_KEY, JSON.stringify(session));
    startChat();
}

async function logout() {
    const ending = session;
    stopChat();
    session = null;
    localStorage.removeItem(SESSION_KEY);
    localStorage.removeItem('parley.chat.cursors');
    localStorage.removeItem('parley.chat.outbox');
    if (location.hash) history.replaceState(null, '', location.pathname);
    showLogin();
    try {
        await api('DELETE', '/v1/me/session', { token: ending.token }); // revokes the token
    } catch {
        // Already invalid or unreachable: forgetting it here is what matters.
    }
}

function stopChat() {
    if (client) client.stop();
    client = null;
    conversations.clear();
    presence.clear();
    names.clear();
    listNodes.nodes.clear();
    messageNodes.nodes.clear();
    renderedConversationId = null;
    listLoaded = false;
    openId = null;
}

// MARK: Start

async function startChat() {
    stopChat();
    show(byId('login'), false);
    show(byId('chat'), true);
    const me = session.uid;
    byId('me-uid').textContent = me;
    paintAvatar(byId('me-avatar'), me);
    try {
        const user = await api('GET', '/v1/me', { token: session.token });
        names.set(user.uid, user.name);
    } catch (error) {
        if (error instanceof ApiError && error.status === 401) {
            localStorage.removeItem(SESSION_KEY);
            session = null;
            showLogin(error);
            return;
        }
        // Unreachable: go on; the socket retries and the lists load when it is back.
    }
    client = new ChatClient({ token: session.token, uid: me });
    client.on('status', ({ status, detail }) => paintConnection(status, detail));
    client.on('event', onEvent);
    client.on('caughtUp', onCaughtUp);
    client.on('resync', ({ conversationId }) => {
        const record = conversations.get(conversationId);
        if (record) {
            record.loaded = false;
            if (conversationId === openId) loadHistory(record);
        }
    });
    client.on('outbox', scheduleRender);
    client.on('ack', (frame) => {
        // The stored message, at once (its event follows, or came first: either way it is shown once, by id).
        const message = frame.message;
        const entry = message && conversations.get(message.conversationId);
        if (entry && entry.loaded && !entry.messages.has(message.id) && message.sender === session.uid && !frame.duplicate) {
            entry.messages.set(message.id, message);
        }
        scheduleRender();
    });
    client.on('hello', (frame) => {
        if (frame.user) names.set(frame.user.uid, frame.user.name);
    });
    client.on('authFailed', ({ reason }) => {
        stopChat();
        localStorage.removeItem(SESSION_KEY);
        session = null;
        showLogin(new ApiError(401, reason || 'ERR_AUTH_TOKEN_INVALID', 'Your session ended: sign in again.'));
    });
    client.on('frameError', (frame) => notice(`${frame.code}: ${frame.message}`));
    client.start();
    paintConnection(client.status, '');
    await loadConversations();
    routeFromHash();
}

function paintConnection(status, detail) {
    const element = byId('connection');
    element.dataset.status = status;
    const text = {
        connected: 'Connected',
        syncing: 'Catching up…',
        connecting: 'Connecting…',
        reconnecting: 'Reconnecting…',
        failed: 'Disconnected',
        disconnected: 'Offline',
    }[status] || status;
    byId('connection-text').textContent = text;
    element.title = detail || '';
}

function paintAvatar(element, uid, large) {
    element.textContent = initials(names.get(uid) || uid);
    element.style.backgroundColor = `hsl(${hueOf(uid)} 55% 52%)`;
    if (large) element.classList.add('avatar-lg');
}

// MARK: Conversations

/** The record of a conversation, created on first sight (its details load in the background). */
function record(id, conversation) {
    let entry = conversations.get(id);
    if (!entry) {
        entry = {
            id,
            conversation: null,
            participants: new Map(),
            detailsLoaded: null,
            lastMessage: null,
            activityAt: 0,
            unread: 0,
            loaded: false,
            loading: false,
            buffer: [],
            messages: new Map(),
            pins: new Map(),
            syncedSeq: 0,
            olderCursor: null,
            typing: new Map(),
            readSent: 0,
            deliveredTarget: 0,
            deliveredSent: 0,
            deliveredTimer: null,
        };
        conversations.set(id, entry);
    }
    if (conversation) {
        entry.conversation = conversation;
        entry.activityAt = Math.max(entry.activityAt, conversation.updatedAt || 0);
        if (conversation.participants) for (const participant of conversation.participants) entry.participants.set(participant.uid, participant);
    }
    if (!entry.detailsLoaded) entry.detailsLoaded = loadDetails(entry);
    return entry;
}

async function loadDetails(entry) {
    const base = `/v1/conversations/${seg(entry.id)}`;
    try {
        const [conversation, participants, latest] = await Promise.all([
            entry.conversation ? Promise.resolve(entry.conversation) : api('GET', base, { token: session.token }),
            api('GET', `${base}/participants`, { token: session.token }),
            api('GET', `${base}/messages`, { token: session.token, query: { limit: 1 } }),
        ]);
        if (conversations.get(entry.id) !== entry) return;
        entry.conversation = entry.conversation || conversation;
        for (const participant of participants.participants) mergeParticipant(entry, participant);
        const last = latest.messages[latest.messages.length - 1];
        if (last && (!entry.lastMessage || last.seq >= entry.lastMessage.seq)) entry.lastMessage = last;
        if (last) entry.activityAt = Math.max(entry.activityAt, last.sentAt);
        const mine = entry.participants.get(session.uid);
        if (mine) entry.readSent = Math.max(entry.readSent, mine.readSeq);
        await Promise.all(otherUids(entry).filter((uid) => !presence.has(uid)).map(loadPresence));
    } catch (error) {
        entry.detailsLoaded = null; // try again on the next sight
        if (error instanceof ApiError && (error.code === 'ERR_CONVERSATION_NOT_FOUND' || error.code === 'ERR_BANNED')) forget(entry.id);
    }
    scheduleRender();
}

async function loadPresence(uid) {
    try {
        const answer = await api('GET', `/v1/users/${seg(uid)}/presence`, { token: session.token });
        if (!presence.has(uid)) presence.set(uid, answer);
    } catch {
        // Shown as unknown.
    }
}

function mergeParticipant(entry, participant) {
    const known = entry.participants.get(participant.uid);
    if (known) {
        participant = { ...participant, deliveredSeq: Math.max(participant.deliveredSeq || 0, known.deliveredSeq || 0), readSeq: Math.max(participant.readSeq || 0, known.readSeq || 0) };
    }
    entry.participants.set(participant.uid, participant);
}

function otherUids(entry) {
    return Array.from(entry.participants.keys()).filter((uid) => uid !== session.uid);
}

function titleOf(entry) {
    const conversation = entry.conversation;
    if (conversation && conversation.type === 'group') return conversation.name || 'Untitled group';
    const other = otherUids(entry)[0];
    if (other) return names.get(other) && names.get(other) !== other ? `${names.get(other)} (${other})` : other;
    return conversation ? 'Direct conversation' : 'Loading…';
}

function isDirect(entry) {
    return entry.conversation && entry.conversation.type === 'direct';
}

function forget(id) {
    conversations.delete(id);
    if (openId === id) closePane();
    scheduleRender();
}

async function loadConversations() {
    try {
        const [list, unread] = await Promise.all([
            api('GET', '/v1/conversations', { token: session.token, query: { limit: PAGE_SIZE } }),
            api('GET', '/v1/me/unread', { token: session.token }),
        ]);
        for (const conversation of list.conversations) record(conversation.id, conversation);
        applyUnread(unread.conversations);
        listLoaded = true;
        await Promise.all(Array.from(conversations.values(), (entry) => entry.detailsLoaded));
    } catch (error) {
        if (error instanceof ApiError && error.status === 401) return; // the socket's 4001 signs out
        replace(byId('conversation-list'), h('div', { class: 'side-empty' }, errorBox(error)));
        return;
    }
    scheduleRender();
}

function applyUnread(list) {
    for (const item of list || []) {
        const entry = conversations.get(item.conversationId);
        if (entry) entry.unread = item.unread;
    }
    scheduleRender();
}

async function startDirect(event) {
    event.preventDefault();
    const input = byId('new-chat-uid');
    const uid = input.value.trim();
    if (!uid) return;
    replace(byId('new-chat-error'));
    try {
        const conversation = await api('POST', '/v1/conversations', { token: session.token, body: { type: 'direct', participants: [uid] } });
        input.value = '';
        record(conversation.id, conversation);
        openConversation(conversation.id);
    } catch (error) {
        replace(byId('new-chat-error'), errorBox(error));
    }
}

// MARK: Opening a conversation

function routeFromHash() {
    const match = /^#c=(.+)$/.exec(location.hash);
    if (match) openConversation(decodeURIComponent(match[1]));
    else closePane();
}

function openConversation(id) {
    if (!session) return;
    if (openId && openId !== id) stopTyping();
    const entry = record(id);
    openId = id;
    const hash = `#c=${encodeURIComponent(id)}`;
    if (location.hash !== hash) history.replaceState(null, '', hash);
    show(byId('pane-empty'), false);
    show(byId('pane-conversation'), true);
    replace(byId('pane-notice'));
    byId('pane-conversation').dataset.id = id;
    byId('composer-input').value = '';
    autosize();
    if (!entry.loaded && !entry.loading) loadHistory(entry);
    renderNow();
    byId('composer-input').focus();
}

function closePane() {
    openId = null;
    show(byId('pane-empty'), true);
    show(byId('pane-conversation'), false);
    scheduleRender();
}

async function loadHistory(entry) {
    entry.loading = true;
    entry.buffer = [];
    replace(byId('message-list'), h('div', { class: 'pane-note' }, 'Loading messages…'));
    try {
        const [page, pins] = await Promise.all([
            api('GET', `/v1/conversations/${seg(entry.id)}/messages`, { token: session.token, query: { limit: PAGE_SIZE } }),
            api('GET', `/v1/conversations/${seg(entry.id)}/pins`, { token: session.token }),
        ]);
        if (conversations.get(entry.id) !== entry) return;
        entry.messages = new Map(page.messages.map((message) => [message.id, message]));
        entry.pins = new Map(pins.messages.map((message) => [message.id, message]));
        // Events after the earlier of the two reads apply to both (applying one twice changes nothing).
        entry.syncedSeq = Math.min(page.lastSeq || 0, pins.lastSeq || 0);
        entry.olderCursor = page.nextCursor || null;
        entry.loaded = true;
        const last = page.messages[page.messages.length - 1];
        if (last && (!entry.lastMessage || last.seq >= entry.lastMessage.seq)) entry.lastMessage = last;
        entry.loading = false;
        // Events that arrived while the page was read: those after its lastSeq apply now.
        const buffered = entry.buffer;
        entry.buffer = [];
        for (const event of buffered) applyToView(entry, event);
        entry.stickToBottom = true;
    } catch (error) {
        entry.loading = false;
        if (entry.id === openId) replace(byId('message-list'), h('div', { class: 'pane-note' }, errorBox(error)));
        return;
    }
    renderNow();
}

async function loadOlder() {
    const entry = conversations.get(openId);
    if (!entry || !entry.olderCursor) return;
    const button = byId('load-older');
    button.disabled = true;
    const scroller = byId('messages');
    const fromBottom = scroller.scrollHeight - scroller.scrollTop;
    try {
        const page = await api('GET', `/v1/conversations/${seg(entry.id)}/messages`, { token: session.token, query: { limit: PAGE_SIZE, cursor: entry.olderCursor } });
        for (const message of page.messages) if (!entry.messages.has(message.id)) entry.messages.set(message.id, message);
        entry.olderCursor = page.nextCursor || null;
        renderNow();
        scroller.scrollTop = scroller.scrollHeight - fromBottom;
    } catch (error) {
        notice(`${error.code || 'ERROR'}: ${error.message}`);
    } finally {
        button.disabled = false;
    }
}

// MARK: Events

function onCaughtUp() {
    // Typing indicators may have ended while the socket was away.
    for (const entry of conversations.values()) entry.typing.clear();
    if (!listLoaded) {
        loadConversations().then(() => {
            if (openId && !conversations.get(openId)?.loaded) routeFromHash();
        });
        return;
    }
    api('GET', '/v1/me/unread', { token: session.token })
        .then((unread) => applyUnread(unread.conversations))
        .catch(() => {});
    scheduleRender();
}

/** Applies a durable event to the open view of a conversation, once (events up to the view's lastSeq are in it). */
function applyToView(entry, event) {
    if (entry.loading) {
        entry.buffer.push(event);
        return;
    }
    if (!entry.loaded || event.seq <= entry.syncedSeq) return;
    entry.syncedSeq = event.seq;
    const payload = event.payload || {};
    switch (event.name) {
        case 'conversationMessage.sent':
            entry.messages.set(payload.id, payload);
            break;
        case 'conversationMessage.update':
        case 'conversationMessage.delete':
            if (entry.messages.has(payload.id)) entry.messages.set(payload.id, { ...entry.messages.get(payload.id), ...payload, parts: payload.parts });
            // Deleting a pinned message unpins it.
            if (event.name === 'conversationMessage.delete') entry.pins.delete(payload.id);
            else if (entry.pins.has(payload.id)) entry.pins.set(payload.id, { ...entry.pins.get(payload.id), ...payload, parts: payload.parts });
            break;
        case 'conversationMessage.pinned':
        case 'conversationMessage.unpinned': {
            const pinned = event.name === 'conversationMessage.pinned';
            const message = entry.messages.get(payload.messageId);
            if (message) entry.messages.set(message.id, { ...message, pin: pinned ? payload : undefined });
            if (!pinned) entry.pins.delete(payload.messageId);
            else if (message) entry.pins.set(message.id, { ...message, pin: payload });
            else loadPinned(entry, payload);
            break;
        }
        case 'conversationMessage.reactionAdded':
        case 'conversationMessage.reactionRemoved': {
            const message = entry.messages.get(payload.messageId);
            if (!message) break;
            const reactions = (message.reactions || []).filter((reaction) => reaction.key !== payload.key);
            const previous = (message.reactions || []).find((reaction) => reaction.key === payload.key);
            if (payload.count > 0) {
                const mine = payload.uid === session.uid ? event.name.endsWith('Added') : Boolean(previous && previous.reacted);
                const updated = { key: payload.key, count: payload.count, reacted: mine };
                const index = (message.reactions || []).findIndex((reaction) => reaction.key === payload.key);
                if (index >= 0) reactions.splice(index, 0, updated);
                else reactions.push(updated);
            }
            entry.messages.set(message.id, { ...message, reactions });
            break;
        }
        default:
            break;
    }
}

/** A message pinned that the open page does not hold: read it, and show it as pinned unless it changed since. */
async function loadPinned(entry, pin) {
    try {
        const message = await api('GET', `/v1/conversations/${seg(entry.id)}/messages/${seg(pin.messageId)}`, { token: session.token });
        if (message.pin && !message.deletedAt) {
            entry.pins.set(message.id, message);
            scheduleRender();
        }
    } catch {
        // Gone or no longer readable: nothing to show.
    }
}

function onEvent(event) {
    const payload = event.payload || {};
    const me = session.uid;
    const id = event.conversationId;
    switch (event.name) {
        case 'conversationMessage.sent': {
            const entry = record(id);
            applyToView(entry, event);
            if (!entry.lastMessage || payload.seq >= entry.lastMessage.seq) entry.lastMessage = payload;
            entry.activityAt = Math.max(entry.activityAt, payload.sentAt || event.timestamp);
            if (payload.sender !== me) {
                entry.typing.delete(payload.sender);
                markDelivered(entry, payload.seq);
            }
            // Sending marks the conversation read up to the message for its sender (docs/PROTOCOL.md, receipts), with
            // no receipt event: their positions move here.
            const sender = entry.participants.get(payload.sender);
            if (sender) {
                entry.participants.set(payload.sender, {
                    ...sender,
                    deliveredSeq: Math.max(sender.deliveredSeq || 0, payload.seq),
                    readSeq: Math.max(sender.readSeq || 0, payload.seq),
                });
            }
            break;
        }
        case 'conversationMessage.update':
        case 'conversationMessage.delete': {
            const entry = record(id);
            applyToView(entry, event);
            if (entry.lastMessage && entry.lastMessage.id === payload.id) entry.lastMessage = payload;
            break;
        }
        case 'conversationMessage.reactionAdded':
        case 'conversationMessage.reactionRemoved':
        case 'conversationMessage.pinned':
        case 'conversationMessage.unpinned':
            applyToView(record(id), event);
            break;
        case 'conversation.create':
        case 'conversation.update':
        case 'conversation.undelete': {
            const entry = record(id, payload);
            if (event.name === 'conversation.update') entry.conversation = { ...entry.conversation, ...payload };
            applyToView(entry, event);
            break;
        }
        case 'conversation.delete':
            forget(id);
            break;
        case 'conversation.participantAdded':
        case 'conversation.participantUpdated': {
            const entry = record(id);
            mergeParticipant(entry, payload);
            applyToView(entry, event);
            if (payload.uid !== me && !presence.has(payload.uid)) loadPresence(payload.uid).then(scheduleRender);
            break;
        }
        case 'conversation.participantRemoved':
        case 'conversation.participantBanned':
            if (payload.uid === me) {
                forget(id);
            } else if (conversations.has(id)) {
                const entry = conversations.get(id);
                entry.participants.delete(payload.uid);
                applyToView(entry, event);
            }
            break;
        case 'conversation.participantTyping':
        case 'conversation.participantTypingOff': {
            const entry = conversations.get(id);
            if (!entry || payload.uid === me) break;
            if (event.name === 'conversation.participantTyping') entry.typing.set(payload.uid, Date.now());
            else entry.typing.delete(payload.uid);
            break;
        }
        case 'conversationMessage.delivered':
        case 'conversationMessage.read': {
            const entry = conversations.get(id);
            if (!entry) break;
            const known = entry.participants.get(payload.uid) || { uid: payload.uid, role: 'member', deliveredSeq: 0, readSeq: 0 };
            const updated = { ...known, deliveredSeq: Math.max(known.deliveredSeq || 0, payload.seq) };
            if (event.name === 'conversationMessage.read') updated.readSeq = Math.max(known.readSeq || 0, payload.seq);
            entry.participants.set(payload.uid, updated);
            if (payload.uid === me && event.name === 'conversationMessage.read') entry.readSent = Math.max(entry.readSent, payload.seq);
            break;
        }
        case 'presence.update':
            presence.set(payload.uid, { uid: payload.uid, online: payload.online, lastSeenAt: payload.lastSeenAt });
            break;
        case 'unread.update':
            applyUnread(payload.conversations);
            break;
        case 'profile.update':
            names.set(payload.uid, payload.name);
            break;
        default:
            break; // Unknown events are ignored (docs/PROTOCOL.md).
    }
    scheduleRender();
}

// MARK: Receipts and typing

function markDelivered(entry, seq) {
    entry.deliveredTarget = Math.max(entry.deliveredTarget, seq);
    if (entry.deliveredTimer) return;
    entry.deliveredTimer = setTimeout(() => {
        entry.deliveredTimer = null;
        if (!client || entry.deliveredTarget <= Math.max(entry.deliveredSent, entry.readSent)) return;
        entry.deliveredSent = entry.deliveredTarget;
        client.receipt(entry.id, { deliveredSeq: entry.deliveredTarget });
    }, 150);
}

/** The open conversation, visible: everything in it is read. */
function markReadIfVisible() {
    const entry = conversations.get(openId);
    if (!client || !entry || !entry.loaded || document.visibilityState !== 'visible') return;
    if (entry.syncedSeq > entry.readSent) {
        entry.readSent = entry.syncedSeq;
        client.receipt(entry.id, { readSeq: entry.syncedSeq });
    }
}

function onComposerInput() {
    autosize();
    const text = byId('composer-input').value;
    if (!openId || !client) return;
    clearTimeout(outgoingTyping.idleTimer);
    if (!text.trim()) {
        stopTyping();
        return;
    }
    const now = Date.now();
    if (!outgoingTyping.on || outgoingTyping.conversationId !== openId || now - outgoingTyping.lastSentAt >= TYPING_REPEAT_MS) {
        if (outgoingTyping.on && outgoingTyping.conversationId !== openId) stopTyping();
        if (client.typing(openId, true)) {
            outgoingTyping.on = true;
            outgoingTyping.conversationId = openId;
            outgoingTyping.lastSentAt = now;
        }
    }
    outgoingTyping.idleTimer = setTimeout(stopTyping, TYPING_IDLE_MS);
}

function stopTyping() {
    clearTimeout(outgoingTyping.idleTimer);
    if (outgoingTyping.on && client) client.typing(outgoingTyping.conversationId, false);
    outgoingTyping.on = false;
    outgoingTyping.conversationId = null;
}

function send(event) {
    event.preventDefault();
    const input = byId('composer-input');
    const text = input.value;
    if (!text.trim() || !openId || !client) return;
    client.sendText(openId, text);
    // The server turns typing off when the message arrives.
    clearTimeout(outgoingTyping.idleTimer);
    outgoingTyping.on = false;
    input.value = '';
    autosize();
    const entry = conversations.get(openId);
    if (entry) entry.stickToBottom = true;
    renderNow();
}

function autosize() {
    const input = byId('composer-input');
    input.style.height = 'auto';
    input.style.height = `${Math.min(input.scrollHeight + 2, 160)}px`;
}

function notice(text) {
    const area = byId('pane-notice');
    replace(area, h('div', { class: 'alert banner', role: 'alert' }, text));
    setTimeout(() => {
        if (area.textContent === text) replace(area);
    }, 6000);
}

// MARK: Rendering

function scheduleRender() {
    if (renderTimer) return;
    renderTimer = setTimeout(renderNow, 16);
}

function renderNow() {
    clearTimeout(renderTimer);
    renderTimer = null;
    if (!session) return;
    renderList();
    renderPane();
    const total = Array.from(conversations.values()).reduce((sum, entry) => sum + (entry.unread || 0), 0);
    document.title = total ? `(${total}) Parley chat` : 'Parley chat';
}

function avatarFor(entry) {
    const direct = isDirect(entry);
    const other = otherUids(entry)[0];
    const key = direct && other ? other : entry.id;
    const label = direct && other ? names.get(other) || other : titleOf(entry);
    const element = h('span', { class: 'avatar' }, initials(label));
    element.style.backgroundColor = `hsl(${hueOf(key)} 55% 52%)`;
    if (direct && other) {
        const state = presence.get(other);
        element.append(h('span', { class: state && state.online ? 'presence-dot online' : 'presence-dot', title: state && state.online ? 'online' : 'offline' }));
    }
    return element;
}

function previewOf(entry) {
    if (entry.typing.size) return { text: `${Array.from(entry.typing.keys()).join(', ')} typing…`, typing: true };
    const message = entry.lastMessage;
    if (!message) return { text: 'No messages yet', typing: false };
    const who = message.system ? '' : message.sender === session.uid ? 'You: ' : isDirect(entry) ? '' : `${message.sender}: `;
    return { text: who + messageText(message).replace(/\s+/g, ' '), typing: false };
}

function renderList() {
    const list = byId('conversation-list');
    const entries = Array.from(conversations.values())
        .filter((entry) => entry.conversation)
        .sort((a, b) => b.activityAt - a.activityAt || a.id.localeCompare(b.id));
    if (!entries.length) {
        replace(list, h('div', { class: 'side-empty' }, 'No conversations yet. Start one with a uid above.'));
        return;
    }
    const nodes = entries.map((entry) => {
        const preview = previewOf(entry);
        const when = entry.lastMessage ? entry.lastMessage.sentAt : entry.activityAt;
        const other = isDirect(entry) ? otherUids(entry)[0] : null;
        const online = other && presence.get(other) ? presence.get(other).online : null;
        const title = titleOf(entry);
        const signature = JSON.stringify([title, when, preview, entry.unread, entry.id === openId, other, online]);
        const button = listNodes.get(entry.id, signature, () => {
            const classes = ['conv', entry.id === openId ? 'active' : null, entry.unread ? 'has-unread' : null];
            return h(
                'button',
                { class: classes, type: 'button', dataset: { id: entry.id, unread: String(entry.unread || 0) } },
                avatarFor(entry),
                h(
                    'div',
                    { class: 'conv-text' },
                    h('div', { class: 'conv-top' }, h('span', { class: 'conv-name' }, title), h('span', { class: 'conv-time' }, when ? formatTime(when) : '')),
                    h(
                        'div',
                        { class: 'conv-bottom' },
                        h('span', { class: preview.typing ? 'conv-preview typing-now' : 'conv-preview' }, preview.text),
                        entry.unread ? h('span', { class: 'unread', 'aria-label': `${entry.unread} unread` }, String(entry.unread)) : null,
                    ),
                ),
            );
        });
        return button;
    });
    listNodes.sweep();
    reconcile(list, nodes);
}

function receiptStatus(entry, seq) {
    const others = otherUids(entry).map((uid) => entry.participants.get(uid));
    if (!others.length) return { status: 'sent', readers: 0, others: 0 };
    const readers = others.filter((participant) => (participant.readSeq || 0) >= seq).length;
    const delivered = others.filter((participant) => (participant.deliveredSeq || 0) >= seq).length;
    const status = readers === others.length ? 'read' : delivered === others.length ? 'delivered' : 'sent';
    return { status, readers, others: others.length };
}

function receiptLabel(entry, receipt) {
    if (receipt.others > 1 && receipt.status !== 'read') {
        return receipt.readers ? `Read by ${receipt.readers} of ${receipt.others}` : receipt.status === 'delivered' ? 'Delivered' : 'Sent';
    }
    return { read: 'Read', delivered: 'Delivered', sent: 'Sent' }[receipt.status];
}

function dayLabel(ms) {
    const date = new Date(ms);
    const today = new Date();
    const yesterday = new Date(Date.now() - 86400000);
    if (date.toDateString() === today.toDateString()) return 'Today';
    if (date.toDateString() === yesterday.toDateString()) return 'Yesterday';
    return date.toLocaleDateString([], { weekday: 'long', month: 'short', day: 'numeric' });
}

/** A message's files, each a button that asks for a signed link and opens the file in a new tab. */
function fileChips(message) {
    const files = (message.parts || []).filter((part) => part.type === 'file' && part.file).map((part) => part.file);
    if (!files.length) return null;
    return h(
        'div',
        { class: 'msg-files' },
        files.map((file) =>
            h(
                'button',
                {
                    type: 'button',
                    class: 'file-chip',
                    dataset: { file: file.id },
                    title: `${file.contentType} — open`,
                    onclick: async (event) => {
                        const button = event.currentTarget;
                        // Opened before the request, so that the browser keeps it a user's action (no pop-up block).
                        const tab = window.open('about:blank', '_blank');
                        try {
                            const path = `/v1/conversations/${seg(message.conversationId)}/attachments/${seg(file.id)}`;
                            const link = await api('GET', path, { token: session.token });
                            if (tab) {
                                tab.opener = null;
                                tab.location = new URL(link.url, location.origin).href;
                            }
                            button.classList.remove('failed');
                        } catch (error) {
                            if (tab) tab.close();
                            button.classList.add('failed');
                            button.title = error instanceof ApiError ? `${error.code}: ${error.message}` : String(error);
                        }
                    },
                },
                fileLabel(file),
            ),
        ),
    );
}

function renderMessage(entry, message, { mine, receipt, label, follow, showSender, showReceipt }) {
    // A system message is the app's, shown as a note across the conversation.
    if (message.system) {
        return h(
            'div',
            { class: ['msg-system', message.deletedAt ? 'deleted' : null], dataset: { id: message.id, seq: String(message.seq), system: 'true' } },
            h('span', { class: 'msg-system-text' }, messageText(message, { files: false })),
            h('span', { class: 'msg-time', title: new Date(message.sentAt).toLocaleString() }, formatTime(message.sentAt)),
        );
    }
    const classes = ['msg', mine ? 'mine' : 'theirs', message.deletedAt ? 'deleted' : null, follow ? 'follow' : null];
    return h(
        'div',
        { class: classes, dataset: { id: message.id, seq: String(message.seq), sender: message.sender, status: receipt ? receipt.status : null } },
        showSender ? h('div', { class: 'msg-sender' }, names.get(message.sender) || message.sender) : null,
        h(
            'div',
            { class: 'bubble' },
            h('div', { class: 'msg-text' }, messageText(message, { files: false })),
            message.deletedAt ? null : fileChips(message),
            h(
                'div',
                { class: 'msg-meta' },
                message.pin ? h('span', { class: 'msg-pin', title: `Pinned by ${message.pin.pinnedBy ? names.get(message.pin.pinnedBy) || message.pin.pinnedBy : 'the app'}` }, 'pinned') : null,
                message.editedAt && !message.deletedAt ? h('span', {}, 'edited') : null,
                h('span', { class: 'msg-time', title: new Date(message.sentAt).toLocaleString() }, formatTime(message.sentAt)),
                receipt ? h('span', { class: 'ticks', title: label }, receipt.status === 'sent' ? '✓' : '✓✓') : null,
            ),
        ),
        message.reactions && message.reactions.length
            ? h('div', { class: 'reactions' }, message.reactions.map((reaction) => h('span', { class: 'reaction' }, `${reaction.key} ${reaction.count}`)))
            : null,
        showReceipt ? h('div', { class: 'msg-receipt', id: 'last-receipt', dataset: { status: receipt.status } }, label) : null,
    );
}

function renderPane() {
    const entry = conversations.get(openId);
    if (!entry) return;
    const me = session.uid;

    // Head
    const headAvatar = byId('head-avatar');
    const fresh = avatarFor(entry);
    headAvatar.replaceWith(fresh);
    fresh.id = 'head-avatar';
    byId('head-title').textContent = titleOf(entry);
    const sub = byId('head-sub');
    sub.classList.remove('online');
    if (isDirect(entry)) {
        const other = otherUids(entry)[0];
        const state = other ? presence.get(other) : null;
        if (state && state.online) {
            sub.textContent = 'online';
            sub.classList.add('online');
        } else if (state && state.lastSeenAt) sub.textContent = `last seen ${formatAgo(state.lastSeenAt)}`;
        else sub.textContent = state ? 'offline' : '';
        sub.dataset.presence = state ? (state.online ? 'online' : 'offline') : 'unknown';
    } else if (entry.conversation) {
        sub.textContent = `${entry.participants.size || entry.conversation.participantCount} participants`;
        sub.dataset.presence = '';
    }

    // Typing
    const typing = Array.from(entry.typing.keys());
    replace(
        byId('typing'),
        typing.length
            ? [h('span', { class: 'typing-dots', 'aria-hidden': 'true' }, h('span'), h('span'), h('span')), `${typing.join(' and ')} ${typing.length > 1 ? 'are' : 'is'} typing…`]
            : null,
    );
    byId('typing').dataset.uids = typing.join(',');

    if (!entry.loaded) return;

    // Pinned: the most recently pinned message, and how many there are.
    const pinned = Array.from(entry.pins.values()).sort((a, b) => b.pin.pinnedAt - a.pin.pinnedAt || b.seq - a.seq);
    const pinBar = byId('pinned');
    pinBar.hidden = !pinned.length;
    pinBar.dataset.count = String(pinned.length);
    replace(
        pinBar,
        pinned.length
            ? [
                  h('span', { class: 'pinned-label' }, 'Pinned'),
                  h('span', { class: 'pinned-text' }, messageText(pinned[0], { files: true })),
                  pinned.length > 1 ? h('span', { class: 'pinned-more' }, `+${pinned.length - 1} pinned`) : null,
              ]
            : null,
    );

    // Messages
    const scroller = byId('messages');
    const nearBottom = scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 80;
    const messages = Array.from(entry.messages.values()).sort((a, b) => a.seq - b.seq);
    const stored = new Set(messages.filter((message) => message.sender === me && message.clientMessageId).map((message) => message.clientMessageId));
    const pending = client ? client.outbox.items.filter((item) => item.conversationId === entry.id && !stored.has(item.clientMessageId)) : [];
    const lastMine = [...messages].reverse().find((message) => message.sender === me && !message.deletedAt);
    if (renderedConversationId !== entry.id) {
        messageNodes.nodes.clear();
        renderedConversationId = entry.id;
    }
    const nodes = [];
    let previousDay = null;
    let previousSender = null;
    for (const message of messages) {
        const day = dayLabel(message.sentAt);
        if (day !== previousDay) {
            nodes.push(messageNodes.get(`day:${day}`, day, () => h('div', { class: 'day' }, day)));
            previousDay = day;
            previousSender = null;
        }
        const mine = message.sender === me;
        const receipt = mine ? receiptStatus(entry, message.seq) : null;
        const label = receipt ? receiptLabel(entry, receipt) : null;
        const follow = previousSender === message.sender;
        const showSender = !mine && !isDirect(entry) && !follow;
        const showReceipt = mine && message === lastMine && !pending.length;
        const signature = JSON.stringify([message, receipt, label, follow, showSender, showReceipt, names.get(message.sender) || null]);
        nodes.push(messageNodes.get(message.id, signature, () => renderMessage(entry, message, { mine, receipt, label, follow, showSender, showReceipt })));
        previousSender = message.sender;
    }
    for (const item of pending) {
        const failed = item.state === 'failed';
        const signature = JSON.stringify([item.text, item.state, item.error || null]);
        nodes.push(
            messageNodes.get(`pending:${item.clientMessageId}`, signature, () =>
                h(
                    'div',
                    { class: ['msg', 'mine', failed ? 'failed' : 'pending'], dataset: { clientMessageId: item.clientMessageId, status: failed ? 'failed' : 'sending' } },
                    h('div', { class: 'bubble' }, h('div', { class: 'msg-text' }, item.text), h('div', { class: 'msg-meta' }, h('span', {}, failed ? 'Not sent' : 'Sending…'))),
                    failed
                        ? h(
                              'div',
                              { class: 'msg-fail' },
                              `${item.error ? item.error.code : 'ERROR'}: ${item.error ? item.error.message : ''}`,
                              h('button', { type: 'button', onclick: () => client.retry(item.clientMessageId) }, 'Retry'),
                              h('button', { type: 'button', onclick: () => client.discard(item.clientMessageId) }, 'Discard'),
                          )
                        : null,
                ),
            ),
        );
    }
    if (!nodes.length) nodes.push(messageNodes.get('empty', '', () => h('div', { class: 'pane-note' }, 'No messages yet. Say hello!')));
    messageNodes.sweep();
    reconcile(byId('message-list'), nodes);
    show(byId('older-row'), Boolean(entry.olderCursor));
    if (nearBottom || entry.stickToBottom) {
        scroller.scrollTop = scroller.scrollHeight;
        entry.stickToBottom = false;
    }
    markReadIfVisible();
}

// MARK: Wiring

byId('tab-key').addEventListener('click', () => selectTab('key'));
byId('tab-token').addEventListener('click', () => selectTab('token'));
byId('login-key-form').addEventListener('submit', loginWithKey);
byId('login-token-form').addEventListener('submit', loginWithToken);
byId('logout').addEventListener('click', logout);
byId('new-chat').addEventListener('submit', startDirect);
byId('conversation-list').addEventListener('click', (event) => {
    const button = event.target.closest('.conv[data-id]');
    if (button) openConversation(button.dataset.id);
});
byId('composer').addEventListener('submit', send);
byId('composer-input').addEventListener('input', onComposerInput);
byId('composer-input').addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        byId('composer').requestSubmit();
    }
});
byId('composer-input').addEventListener('blur', () => setTimeout(() => {
    if (document.activeElement !== byId('composer-input')) stopTyping();
}, 0));
byId('load-older').addEventListener('click', loadOlder);
window.addEventListener('hashchange', () => {
    if (session) routeFromHash();
});
window.addEventListener('pageshow', (event) => {
    // Restored from the back/forward cache: its socket was closed on the way out and its view is old; start afresh.
    if (event.persisted && session) location.reload();
});
document.addEventListener('visibilitychange', () => {
    if (document.visibilityState === 'visible') markReadIfVisible();
});
setInterval(() => {
    // "last seen 3 min ago" moves on.
    if (session && openId) scheduleRender();
}, 30000);

// For diagnostics in the browser's console and for the browser test: the live client (positions, outbox, delivered
// event ids) and the connection status.
window.parleyChat = {
    get client() {
        return client;
    },
    get openConversationId() {
        return openId;
    },
};

session = loadSession();
if (session) startChat();
else showLogin();
