// Building blocks of the console's pages.

import { ApiError } from '../api.js';
import { byId, h, replace } from '../dom.js';
import { hueOf, initials } from '../format.js';

/** An error box: the API's code and message, as text. */
export function errorBox(error, extra) {
    const code = error instanceof ApiError ? error.code : 'ERROR';
    const message = error && error.message ? error.message : String(error);
    return h('div', { class: 'alert', role: 'alert', 'data-error-code': code }, h('span', { class: 'alert-code' }, code), message, extra || null);
}

/**
 * Asks before something that cannot be undone. `body` is a list of paragraphs (strings); with `input`, the dialog
 * has a text field and resolves to its value (null when cancelled); otherwise to true or false.
 */
export function confirmDialog({ title, body = [], confirmLabel = 'Confirm', danger = false, input = null }) {
    const dialog = byId('dialog');
    byId('dialog-title').textContent = title;
    const field = input ? h('input', { type: 'text', id: 'dialog-input', placeholder: input.placeholder || '', value: input.value || '' }) : null;
    replace(byId('dialog-body'), body.map((text) => h('p', {}, text)), field);
    const confirm = byId('dialog-confirm');
    confirm.textContent = confirmLabel;
    confirm.className = `btn ${danger ? 'btn-danger' : 'btn-primary'}`;
    dialog.returnValue = '';
    return new Promise((resolve) => {
        dialog.addEventListener(
            'close',
            () => {
                const ok = dialog.returnValue === 'confirm';
                resolve(input ? (ok ? field.value.trim() : null) : ok);
            },
            { once: true },
        );
        dialog.showModal();
        (field || confirm).focus();
    });
}


export function pageHead(title, subtitle, ...actions) {
    return h(
        'div',
        { class: 'page-head' },
        h('div', {}, h('h1', {}, title), subtitle ? h('p', {}, subtitle) : null),
        actions.length ? h('div', { class: 'page-head-actions' }, actions) : null,
    );
}

export function card({ title, subtitle, actions, body, foot, id }) {
    return h(
        'section',
        { class: 'card', id },
        title
            ? h(
                  'div',
                  { class: 'card-head' },
                  h('div', {}, h('h2', {}, title), subtitle ? h('p', {}, subtitle) : null),
                  actions ? h('div', { class: 'page-head-actions' }, actions) : null,
              )
            : null,
        body,
        foot ? h('div', { class: 'card-foot' }, foot) : null,
    );
}

export function avatar(uid, small = false) {
    const el = h('span', { class: small ? 'avatar avatar-sm' : 'avatar', 'aria-hidden': 'true' }, initials(uid));
    el.style.backgroundColor = `hsl(${hueOf(uid)} 55% 52%)`;
    return el;
}

/**
 * A table. `columns`: [{ label, class }]; `rows`: [{ cells: [node|string], onclick, dataset }].
 */
export function table(columns, rows, { id, empty = 'Nothing here yet.' } = {}) {
    if (!rows.length) return h('div', { class: 'empty-state', id }, empty);
    return h(
        'div',
        { class: 'table-wrap' },
        h(
            'table',
            { class: 'table', id },
            h('thead', {}, h('tr', {}, columns.map((column) => h('th', { class: column.class }, column.label)))),
            h(
                'tbody',
                {},
                rows.map((row) =>
                    h(
                        'tr',
                        { class: row.onclick ? 'clickable' : null, onclick: row.onclick, dataset: row.dataset },
                        row.cells.map((cell, index) => h('td', { class: columns[index].class }, cell)),
                    ),
                ),
            ),
        ),
    );
}

/**
 * Pages through a cursor-paged list. `load(cursor)` returns `{ items, nextCursor }`; `render(items)` returns the
 * node to show. Keeps the cursors of the pages seen, so "Previous" goes back without the server's help.
 */
export class CursorPager {
    constructor({ context, load, render, body, info, pageSize }) {
        this.context = context;
        this.load = load;
        this.render = render;
        this.body = body;
        this.pageSize = pageSize;
        this.cursors = [null];
        this.index = 0;
        this.nextCursor = null;
        this.previous = h('button', { class: 'btn btn-sm', type: 'button', id: 'pager-previous', onclick: () => this.go(this.index - 1) }, 'Previous');
        this.next = h('button', { class: 'btn btn-sm', type: 'button', id: 'pager-next', onclick: () => this.go(this.index + 1) }, 'Next');
        this.info = h('span', { class: 'pager-info', id: 'pager-info' }, '');
        this.infoText = info;
        this.controls = h('div', { class: 'pager' }, this.info, this.previous, this.next);
    }

    async go(index) {
        if (index < 0) return;
        if (index > this.index) {
            if (!this.nextCursor) return;
            this.cursors[index] = this.nextCursor;
        }
        this.previous.disabled = true;
        this.next.disabled = true;
        try {
            const { items, nextCursor } = await this.load(this.cursors[index]);
            if (!this.context.alive) return;
            this.index = index;
            this.cursors.length = index + 1;
            this.nextCursor = nextCursor || null;
            replace(this.body, this.render(items));
            this.info.textContent = `Page ${index + 1} · ${items.length} ${this.infoText || 'items'}`;
        } catch (error) {
            if (!this.context.alive) return;
            replace(this.body, h('div', { class: 'card-body' }, errorBox(error)));
        } finally {
            this.previous.disabled = this.index === 0;
            this.next.disabled = !this.nextCursor;
        }
    }

    reload() {
        return this.go(this.index);
    }
}

export function loading(text = 'Loading…') {
    return h('div', { class: 'loading' }, text);
}
