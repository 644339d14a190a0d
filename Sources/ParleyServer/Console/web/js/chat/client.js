// The chat page's real-time client: one WebSocket at /v1/ws, following docs/PROTOCOL.md and the Swift SDK's rules
// (Sources/Parley/Connection/ConnectionStateMachine.swift, Sources/Parley/Events/EventPipeline.swift):
//
// - The browser cannot set Authorization on a WebSocket: the token goes in the `connect` frame, with `resume` (the
//   positions saved in localStorage) once the client has been caught up before.
// - Heartbeat: a `ping` frame after 25 s without any frame; no frame within 10 s of it is a lost connection (unless
//   the timer fired so late that the tab was asleep: then it probes again). Reconnects with full-jitter backoff
//   (0.5 s doubling to 30 s; a connection that lasted a minute starts over), at once when the network returns or
//   the tab becomes visible. Close 4001 (bad token) stops: the user logs in again.
// - Events go through one queue, in order: a durable event whose seq is not above the saved position is dropped (a
//   repeat of the replay), a gap is filled with GET /v1/conversations/{id}/events?after=n before the event, and the
//   position is saved after each one, so a reload resumes where the page stopped: nothing lost, nothing twice.
// - Sending goes through an outbox saved in localStorage, each message with its clientMessageId: after a lost
//   connection or a reload it is sent again with the same id, and the server stores it once.

import { api, ApiError, seg } from '../api.js';

export const TIMING = {
    heartbeatMs: 25000,
    pongTimeoutMs: 10000,
    connectTimeoutMs: 15000,
    initialBackoffMs: 500,
    maximumBackoffMs: 30000,
    stableConnectionMs: 60000,
    lateTimerToleranceMs: 5000,
    tickMs: 1000,
};

function readJSON(storage, key) {
    try {
        return JSON.parse(storage.getItem(key) || 'null');
    } catch {
        return null;
    }
}

/** The positions in the user's streams (per conversation the last seq delivered, and userSeq), saved. */
export class Cursors {
    constructor(storage, key, uid) {
        this.storage = storage;
        this.key = key;
        this.uid = uid;
        const saved = readJSON(storage, key);
        const valid = saved && saved.uid === uid && saved.conversations && typeof saved.conversations === 'object';
        this.userSeq = valid ? saved.userSeq || 0 : 0;
        this.conversations = valid ? { ...saved.conversations } : {};
        this.established = valid ? Boolean(saved.established) : false;
    }

    /** What `connect` asks the server to replay; none before the first caughtUp. */
    get resume() {
        return this.established ? { userSeq: this.userSeq, conversations: { ...this.conversations } } : undefined;
    }

    /** 'deliver', 'duplicate', or { after, through } for a gap. */
    decide(conversationId, seq) {
        const position = this.conversations[conversationId];
        if (position === undefined) return 'deliver';
        if (seq <= position) return 'duplicate';
        if (seq === position + 1) return 'deliver';
        return { after: position, through: seq - 1 };
    }

    delivered(event) {
        const { conversationId, seq, name, payload } = event;
        const aboutMe = payload && payload.uid === this.uid;
        if (aboutMe && (name === 'conversation.participantRemoved' || name === 'conversation.participantBanned' || name === 'conversation.participantUnbanned')) {
            delete this.conversations[conversationId];
        } else {
            this.conversations[conversationId] = Math.max(this.conversations[conversationId] || 0, seq);
        }
        this.save();
    }

    caughtUp(frame) {
        const positions = {};
        for (const [conversationId, seq] of Object.entries(frame.conversations || {})) {
            positions[conversationId] = Math.max(seq, this.conversations[conversationId] || 0);
        }
        this.conversations = positions;
        this.userSeq = Math.max(this.userSeq, frame.userSeq || 0);
        this.established = true;
        this.save();
    }

    resync(conversationId, lastSeq) {
        this.conversations[conversationId] = lastSeq;
        this.save();
    }

    reset() {
        this.userSeq = 0;
        this.conversations = {};
        this.established = false;
        this.save();
    }

    save() {
        this.storage.setItem(
            this.key,
            JSON.stringify({ uid: this.uid, userSeq: this.userSeq, conversations: this.conversations, established: this.established }),
        );
    }
}

/** Messages not yet acknowledged, saved, in the order they were written. */
export class Outbox {
    constructor(storage, key, uid) {
        this.storage = storage;
        this.key = key;
        this.uid = uid;
        const saved = readJSON(storage, key);
        this.items = saved && saved.uid === uid && Array.isArray(saved.items) ? saved.items : [];
        for (const item of this.items) if (item.state === 'sending') item.state = 'queued';
    }

    add(item) {
        this.items.push(item);
        this.save();
    }

    find(clientMessageId) {
        return this.items.find((item) => item.clientMessageId === clientMessageId);
    }

    remove(clientMessageId) {
        const before = this.items.length;
        this.items = this.items.filter((item) => item.clientMessageId !== clientMessageId);
        if (this.items.length !== before) this.save();
    }

    save() {
        this.storage.setItem(this.key, JSON.stringify({ uid: this.uid, items: this.items }));
    }
}

export function newClientMessageId() {
    if (crypto.randomUUID) return crypto.randomUUID();
    const bytes = crypto.getRandomValues(new Uint8Array(16));
    return Array.from(bytes, (byte) => byte.toString(16).padStart(2, '0')).join('');
}

/**
 * The connection. Listeners (`on(type, fn)`): `status` ({ status, detail }), `hello`, `event` (each event once, in
 * order), `caughtUp`, `resync` ({ conversationId, reason, lastSeq }), `ack` (the frame), `outbox` (changed),
 * `frameError` (an error frame without a ref).
 */
export class ChatClient {
    constructor({ token, uid, storage = localStorage, storagePrefix = 'parley.chat' }) {
        this.token = token;
        this.uid = uid;
        this.cursors = new Cursors(storage, `${storagePrefix}.cursors`, uid);
        this.outbox = new Outbox(storage, `${storagePrefix}.outbox`, uid);
        this.listeners = new Map();
        this.status = 'disconnected';
        this.statusDetail = '';
        this.ws = null;
        this.connectionId = null;
        this.generation = 0;
        this.phase = 'idle'; // idle | connecting | connected | backingOff | failed
        this.attempt = 0;
        this.connectedSince = 0;
        this.connectDeadline = 0;
        this.lastFrameAt = 0;
        this.pendingPing = null;
        this.pingCounter = 0;
        this.retryAt = 0;
        this.caughtUp = false;
        this.sentResume = false;
        this.handshakeRetried = false;
        this.queue = Promise.resolve();
        /** The ids of the durable events delivered since the page loaded (the last 1,000), for diagnostics and tests. */
        this.deliveredIds = [];
        this.lastTick = Date.now();
        this.timer = null;
        this.stopped = true;
        this.onOnline = () => this.retryNow();
        // The network went away: a socket that looked fine may be dead; ask the server now rather than at the next
        // heartbeat (no answer within the pong timeout is a lost connection).
        this.onOffline = () => {
            if (this.phase === 'connected' && !this.pendingPing) this.ping(Date.now());
        };
        this.onVisible = () => {
            if (document.visibilityState === 'visible') this.retryNow();
        };
        // Leaving the page may keep it frozen in the back/forward cache with its socket open: the server would count
        // a connection nobody reads and show the user online. Close it; a page restored from the cache reloads.
        this.onPageHide = (event) => {
            if (event.persisted) this.closeSocket(1000, 'page hidden');
        };
    }

    on(type, listener) {
        if (!this.listeners.has(type)) this.listeners.set(type, []);
        this.listeners.get(type).push(listener);
    }

    emit(type, value) {
        for (const listener of this.listeners.get(type) || []) {
            try {
                listener(value);
            } catch (error) {
                console.error(`parley: a ${type} listener failed`, error);
            }
        }
    }

    setStatus(status, detail = '') {
        if (status === this.status && detail === this.statusDetail) return;
        this.status = status;
        this.statusDetail = detail;
        this.emit('status', { status, detail });
    }

    // MARK: Lifecycle

    start() {
        if (!this.stopped) return;
        this.stopped = false;
        window.addEventListener('online', this.onOnline);
        window.addEventListener('offline', this.onOffline);
        window.addEventListener('pagehide', this.onPageHide);
        document.addEventListener('visibilitychange', this.onVisible);
        this.timer = setInterval(() => this.tick(), TIMING.tickMs);
        this.open();
    }

    stop() {
        this.stopped = true;
        clearInterval(this.timer);
        window.removeEventListener('online', this.onOnline);
        window.removeEventListener('offline', this.onOffline);
        window.removeEventListener('pagehide', this.onPageHide);
        document.removeEventListener('visibilitychange', this.onVisible);
        this.closeSocket(1000, 'logout');
        this.phase = 'idle';
        this.setStatus('disconnected');
    }

    /** Reconnects at once when waiting for a retry (network back, tab visible again). */
    retryNow() {
        if (this.stopped) return;
        if (this.phase === 'backingOff') {
            this.attempt = 0;
            this.open();
        }
    }

    open() {
        this.closeSocket(1000, 'reconnecting');
        const generation = ++this.generation;
        const url = `${location.protocol === 'https:' ? 'wss:' : 'ws:'}//${location.host}/v1/ws`;
        let ws;
        try {
            ws = new WebSocket(url);
        } catch (error) {
            this.lost(`cannot open a WebSocket (${error.message})`);
            return;
        }
        this.ws = ws;
        this.phase = 'connecting';
        this.caughtUp = false;
        this.connectDeadline = Date.now() + TIMING.connectTimeoutMs;
        this.setStatus('connecting', this.attempt ? `attempt ${this.attempt + 1}` : '');
        ws.addEventListener('open', () => {
            if (generation !== this.generation) return;
            const resume = this.cursors.resume;
            this.sentResume = Boolean(resume);
            const frame = { type: 'connect', protocolVersion: 1, token: this.token };
            if (resume) frame.resume = resume;
            ws.send(JSON.stringify(frame));
        });
        ws.addEventListener('message', (message) => {
            if (generation !== this.generation) return;
            this.lastFrameAt = Date.now();
            this.pendingPing = null;
            let frame;
            try {
                frame = JSON.parse(message.data);
            } catch {
                return;
            }
            this.receive(frame, generation);
        });
        ws.addEventListener('close', (event) => {
            if (generation !== this.generation) return;
            this.closed(event.code, event.reason);
        });
    }

    closeSocket(code, reason) {
        const ws = this.ws;
        this.ws = null;
        this.generation++;
        if (ws && (ws.readyState === WebSocket.OPEN || ws.readyState === WebSocket.CONNECTING)) {
            try {
                ws.close(code, reason);
            } catch {
                // Already closing.
            }
        }
        this.requeueSending();
    }

    /** The connection is gone without the server saying why: try again after a backoff. */
    lost(detail) {
        this.closeSocket(4000, 'lost');
        this.scheduleReconnect(detail);
    }

    closed(code, reason) {
        this.ws = null;
        this.generation++;
        this.requeueSending();
        if (this.stopped) return;
        if (code === 4001) {
            this.phase = 'failed';
            this.setStatus('failed', reason || 'ERR_AUTH_TOKEN_INVALID');
            this.emit('authFailed', { code, reason });
            return;
        }
        if (code === 4400) {
            // Invalid resume positions (e.g. the server's data went back) would fail every time: start over once.
            if (this.sentResume && !this.handshakeRetried) {
                this.handshakeRetried = true;
                this.cursors.reset();
                this.scheduleReconnect('starting over without resume positions', 0);
                return;
            }
            this.phase = 'failed';
            this.setStatus('failed', reason || 'ERR_HANDSHAKE_FAILED');
            return;
        }
        this.scheduleReconnect(reason ? `closed ${code} ${reason}` : `closed ${code}`);
    }

    scheduleReconnect(detail, fixedDelay) {
        if (this.stopped) return;
        const now = Date.now();
        if (this.connectedSince && now - this.connectedSince >= TIMING.stableConnectionMs) this.attempt = 0;
        this.connectedSince = 0;
        this.attempt += 1;
        const ceiling = Math.min(TIMING.maximumBackoffMs, TIMING.initialBackoffMs * 2 ** (this.attempt - 1));
        const delay = fixedDelay !== undefined ? fixedDelay : Math.random() * ceiling;
        this.phase = 'backingOff';
        this.retryAt = now + delay;
        this.setStatus('reconnecting', detail);
    }

    tick() {
        if (this.stopped) return;
        const now = Date.now();
        const late = now - this.lastTick > TIMING.tickMs + TIMING.lateTimerToleranceMs;
        this.lastTick = now;
        switch (this.phase) {
            case 'connecting':
                if (now >= this.connectDeadline) {
                    if (late) this.connectDeadline = now + TIMING.connectTimeoutMs;
                    else this.lost('no answer from the server');
                }
                break;
            case 'connected':
                if (this.pendingPing) {
                    if (now >= this.pendingPing.deadline) {
                        // A deadline noticed much too late means the tab slept: probe again instead of giving up.
                        if (late) this.ping(now);
                        else this.lost('no answer to ping');
                    }
                } else if (now - this.lastFrameAt >= TIMING.heartbeatMs) {
                    this.ping(now);
                }
                break;
            case 'backingOff':
                if (now >= this.retryAt) this.open();
                break;
            case 'idle':
            case 'failed':
                break;
        }
    }

    ping(now) {
        this.pingCounter += 1;
        this.pendingPing = { id: `p${this.pingCounter}`, deadline: now + TIMING.pongTimeoutMs };
        this.sendFrame({ type: 'ping', id: this.pendingPing.id });
    }

    sendFrame(frame) {
        if (!this.ws || this.ws.readyState !== WebSocket.OPEN || this.phase !== 'connected') return false;
        this.ws.send(JSON.stringify(frame));
        return true;
    }

    get isLive() {
        return this.phase === 'connected' && this.caughtUp;
    }

    // MARK: Frames

    receive(frame, generation) {
        switch (frame.type) {
            case 'hello':
                this.connectionId = frame.connectionId;
                this.phase = 'connected';
                this.connectedSince = Date.now();
                this.handshakeRetried = false;
                this.setStatus('syncing');
                this.emit('hello', frame);
                break;
            case 'event':
            case 'caughtUp':
            case 'resync':
                this.enqueue(frame, generation);
                break;
            case 'ack':
                this.acknowledged(frame);
                break;
            case 'error':
                this.refused(frame);
                break;
            case 'pong':
                break;
            default:
                break; // Unknown frames are ignored, like unknown events.
        }
    }

    enqueue(frame, generation) {
        this.queue = this.queue
            .then(() => this.process(frame, generation))
            .catch((error) => console.error('parley: an event could not be handled', error));
    }

    async process(frame, generation) {
        if (this.stopped) return;
        if (frame.type === 'caughtUp') {
            this.cursors.caughtUp(frame);
            if (generation === this.generation) {
                this.caughtUp = true;
                this.setStatus('connected');
                this.flushOutbox();
            }
            this.emit('caughtUp', frame);
            return;
        }
        if (frame.type === 'resync') {
            this.cursors.resync(frame.conversationId, frame.lastSeq);
            this.emit('resync', frame);
            return;
        }
        const event = frame.event;
        if (!event) return;
        if (!event.conversationId || event.seq === undefined || event.seq === null) {
            this.emit('event', event); // ephemeral: typing, receipts, presence, profile, unread
            return;
        }
        const decision = this.cursors.decide(event.conversationId, event.seq);
        if (decision === 'duplicate') return;
        if (decision !== 'deliver') {
            let missing;
            try {
                missing = await this.fetchEvents(event.conversationId, decision.after, decision.through);
            } catch (error) {
                console.warn('parley: could not fetch missed events; reconnecting to resume', error);
                if (generation === this.generation) this.lost('resuming after a gap');
                return;
            }
            for (const earlier of missing) {
                if (this.cursors.decide(earlier.conversationId, earlier.seq) === 'deliver') this.deliver(earlier);
            }
            if (this.cursors.decide(event.conversationId, event.seq) !== 'deliver') {
                // The server no longer has them: say so rather than pretend.
                this.cursors.resync(event.conversationId, decision.through);
                this.emit('resync', { conversationId: event.conversationId, reason: 'ERR_HISTORY_TRIMMED', lastSeq: decision.through });
            }
        }
        this.deliver(event);
    }

    deliver(event) {
        this.cursors.delivered(event);
        this.deliveredIds.push(event.id);
        if (this.deliveredIds.length > 1000) this.deliveredIds.splice(0, this.deliveredIds.length - 1000);
        this.emit('event', event);
    }

    async fetchEvents(conversationId, after, through) {
        const events = [];
        let position = String(after);
        for (;;) {
            const page = await api('GET', `/v1/conversations/${seg(conversationId)}/events`, {
                token: this.token,
                query: { after: position, limit: 200 },
            });
            for (const event of page.events) if (event.seq <= through) events.push(event);
            const last = page.events.length ? page.events[page.events.length - 1].seq : through;
            if (!page.nextCursor || last >= through) break;
            position = page.nextCursor;
        }
        return events;
    }

    // MARK: Sending

    /** Queues a text message; it goes out now if the socket is live, else after the next caughtUp. */
    sendText(conversationId, text) {
        const item = { clientMessageId: newClientMessageId(), conversationId, text, createdAt: Date.now(), state: 'queued' };
        this.outbox.add(item);
        this.emit('outbox');
        if (this.isLive) this.transmit(item);
        return item;
    }

    retry(clientMessageId) {
        const item = this.outbox.find(clientMessageId);
        if (!item) return;
        item.state = 'queued';
        delete item.error;
        this.outbox.save();
        this.emit('outbox');
        if (this.isLive) this.transmit(item);
    }

    discard(clientMessageId) {
        this.outbox.remove(clientMessageId);
        this.emit('outbox');
    }

    transmit(item) {
        const sent = this.sendFrame({
            type: 'send',
            ref: `send:${item.clientMessageId}`,
            conversationId: item.conversationId,
            clientMessageId: item.clientMessageId,
            parts: [{ type: 'text', text: item.text }],
        });
        if (sent) {
            item.state = 'sending';
            this.outbox.save();
        }
    }

    flushOutbox() {
        for (const item of this.outbox.items) if (item.state === 'queued') this.transmit(item);
        this.emit('outbox');
    }

    requeueSending() {
        let changed = false;
        for (const item of this.outbox.items) {
            if (item.state === 'sending') {
                item.state = 'queued';
                changed = true;
            }
        }
        if (changed) {
            this.outbox.save();
            this.emit('outbox');
        }
    }

    acknowledged(frame) {
        if (typeof frame.ref === 'string' && frame.ref.startsWith('send:')) {
            this.outbox.remove(frame.ref.slice(5));
            this.emit('outbox');
        }
        this.emit('ack', frame);
    }

    refused(frame) {
        if (typeof frame.ref === 'string' && frame.ref.startsWith('send:')) {
            const item = this.outbox.find(frame.ref.slice(5));
            if (item) {
                if (frame.code === 'ERR_RATE_LIMITED') {
                    item.state = 'queued';
                    setTimeout(() => {
                        if (this.isLive && this.outbox.find(item.clientMessageId) && item.state === 'queued') this.transmit(item);
                    }, Math.max(250, frame.retryAfterMs || 1000));
                } else {
                    item.state = 'failed';
                    item.error = { code: frame.code, message: frame.message };
                }
                this.outbox.save();
                this.emit('outbox');
            }
            return;
        }
        this.emit('frameError', frame);
    }

    // MARK: Typing and receipts

    typing(conversationId, isTyping) {
        return this.sendFrame({ type: 'typing', conversationId, isTyping });
    }

    /** Marks delivered and/or read; over the socket when it is live, else over REST. */
    async receipt(conversationId, positions) {
        const frame = { type: 'receipt', conversationId, ...positions };
        if (this.sendFrame(frame)) return;
        try {
            await api('POST', `/v1/conversations/${seg(conversationId)}/receipts`, { token: this.token, body: positions });
        } catch (error) {
            if (!(error instanceof ApiError)) throw error;
        }
    }
}
