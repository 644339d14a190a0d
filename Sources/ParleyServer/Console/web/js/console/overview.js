// Overview: the app, its live counts (GET /v1/app every few seconds) and its allowed web origins (PATCH /v1/app).

import { h, replace } from '../dom.js';
import { formatDateTime } from '../format.js';
import { card, errorBox, pageHead } from './ui.js';

const REFRESH_MS = 3000;

const STATS = [
    { key: 'users', label: 'Users', note: 'stored, whole deployment' },
    { key: 'conversations', label: 'Conversations', note: 'not deleted' },
    { key: 'liveConnections', label: 'Live connections', note: 'WebSockets on this node' },
    { key: 'connectedUsers', label: 'Connected users', note: 'with a socket on this node' },
    { key: 'onlineUsers', label: 'Online users', note: 'presence, incl. 5 s grace' },
];

export async function renderOverview(context, page) {
    const values = {};
    const statCards = STATS.map((stat) => {
        values[stat.key] = h('div', { class: 'stat-value', id: `stat-${stat.key}` }, '–');
        return h('div', { class: 'stat' }, h('div', { class: 'stat-label' }, stat.label), values[stat.key], h('div', { class: 'stat-note' }, stat.note));
    });
    const liveText = h('span', { id: 'overview-updated' }, 'Loading…');
    const live = h('span', { class: 'live' }, h('span', { class: 'live-dot' }), liveText);
    const errorArea = h('div', { id: 'overview-error' });

    const appName = h('dd', { id: 'overview-app-name' }, '–');
    const appId = h('dd', { class: 'mono', id: 'overview-app-id' }, context.session.appId);
    const created = h('dd', {}, '–');
    const appCard = card({
        title: 'App',
        subtitle: 'Public identity of this app.',
        body: h('div', { class: 'card-body' }, h('dl', { class: 'kv' }, h('dt', {}, 'Name'), appName, h('dt', {}, 'App ID'), appId, h('dt', {}, 'Created'), created, h('dt', {}, 'Chat page'), h('dd', {}, h('a', { href: 'chat.html', target: '_blank', rel: 'noopener' }, 'Open the chat page')))),
    });

    const origins = new OriginsEditor(context);
    replace(
        page,
        pageHead('Overview', 'Live figures of the app, refreshed every 3 seconds.', live),
        errorArea,
        h('div', { class: 'stats' }, statCards),
        h('div', { class: 'grid-2' }, appCard, origins.card),
    );

    let timer = null;
    let failing = false;
    const refresh = async () => {
        try {
            const app = await context.call('GET', '/v1/app');
            if (!context.alive) return;
            for (const stat of STATS) values[stat.key].textContent = String(app.stats[stat.key]);
            appName.textContent = app.name;
            appId.textContent = app.appId;
            created.textContent = formatDateTime(app.createdAt);
            context.setAppName(app.name);
            origins.update(app.allowedOrigins);
            liveText.textContent = `Live · updated ${new Date().toLocaleTimeString()}`;
            live.classList.remove('stale');
            page.dataset.refreshedAt = String(Date.now());
            if (failing) replace(errorArea);
            failing = false;
        } catch (error) {
            if (!context.alive) return;
            failing = true;
            live.classList.add('stale');
            liveText.textContent = 'Not updating';
            replace(errorArea, errorBox(error));
        } finally {
            if (context.alive) timer = setTimeout(refresh, REFRESH_MS);
        }
    };
    context.onLeave(() => clearTimeout(timer));
    await refresh();
}

/** The allowed origins: edited locally, saved with one PATCH (which replaces the whole list). */
class OriginsEditor {
    constructor(context) {
        this.context = context;
        this.saved = null;
        this.draft = [];
        this.dirty = false;
        this.list = h('ul', { class: 'origin-list', id: 'origins-list' });
        this.input = h('input', { type: 'text', id: 'origin-input', placeholder: 'https://chat.example.com', spellcheck: 'false' });
        this.message = h('div', { id: 'origins-message' });
        this.save = h('button', { class: 'btn btn-primary', type: 'button', id: 'origins-save', disabled: true, onclick: () => this.submit() }, 'Save changes');
        this.reset = h('button', { class: 'btn btn-ghost', type: 'button', id: 'origins-reset', disabled: true, onclick: () => this.discard() }, 'Discard');
        const form = h(
            'form',
            { class: 'inline-form', onsubmit: (event) => {
                event.preventDefault();
                this.add();
            } },
            this.input,
            h('button', { class: 'btn', type: 'submit', id: 'origin-add' }, 'Add'),
        );
        this.card = card({
            title: 'Allowed web origins',
            subtitle: 'Pages on these origins may call the REST API (CORS). The console itself is same-origin and needs none.',
            id: 'origins-card',
            body: h('div', { class: 'card-body' }, this.message, this.list, form),
            foot: [h('span', { class: 'muted' }, 'Up to 20; http(s)://host[:port], or * for every origin.'), h('div', { class: 'page-head-actions' }, this.reset, this.save)],
        });
    }

    update(origins) {
        this.saved = origins.slice();
        if (!this.dirty) {
            this.draft = origins.slice();
            this.renderList();
        }
    }

    renderList() {
        replace(
            this.list,
            this.draft.length
                ? this.draft.map((origin, index) =>
                      h(
                          'li',
                          { dataset: { origin } },
                          h('span', { class: 'mono' }, origin),
                          h('button', { class: 'btn btn-ghost btn-sm', type: 'button', 'aria-label': `Remove ${origin}`, onclick: () => {
                              this.draft.splice(index, 1);
                              this.changed();
                          } }, 'Remove'),
                      ),
                  )
                : h('li', { class: 'empty' }, 'No origin allowed: only same-origin pages and native clients.'),
        );
    }

    changed() {
        this.dirty = JSON.stringify(this.draft) !== JSON.stringify(this.saved);
        this.save.disabled = !this.dirty;
        this.reset.disabled = !this.dirty;
        this.renderList();
    }

    add() {
        const value = this.input.value.trim();
        if (!value) return;
        if (!this.draft.includes(value)) this.draft.push(value);
        this.input.value = '';
        replace(this.message);
        this.changed();
    }

    discard() {
        this.draft = (this.saved || []).slice();
        replace(this.message);
        this.changed();
    }

    async submit() {
        this.save.disabled = true;
        try {
            const app = await this.context.call('PATCH', '/v1/app', { body: { allowedOrigins: this.draft } });
            this.dirty = false;
            this.saved = app.allowedOrigins.slice();
            this.draft = app.allowedOrigins.slice();
            this.changed();
            replace(this.message, h('div', { class: 'alert alert-success', role: 'status' }, 'Saved. Other nodes apply it within 5 seconds.'));
        } catch (error) {
            this.save.disabled = false;
            replace(this.message, errorBox(error));
        }
    }
}
