// Small DOM helpers. Everything that comes from the server or a user is set with textContent or an attribute,
// never parsed as HTML: there is no innerHTML anywhere in the console.

/**
 * Creates an element.
 *   h('a', { class: 'link', href: '#/users', onclick: fn }, 'Users', h('span', {}, '3'))
 * `class`, `text`, `dataset`, `on<event>` are special; `null`, `undefined` and `false` values are skipped; other
 * values become attributes. Children are nodes, strings (text nodes), arrays, or null (skipped).
 */
export function h(tag, props, ...children) {
    const el = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
        if (value === null || value === undefined || value === false) continue;
        if (key === 'class') el.className = Array.isArray(value) ? value.filter(Boolean).join(' ') : value;
        else if (key === 'text') el.textContent = String(value);
        else if (key === 'dataset') Object.assign(el.dataset, value);
        else if (key.startsWith('on') && typeof value === 'function') el.addEventListener(key.slice(2), value);
        else if (key === 'value') el.value = value;
        else el.setAttribute(key, value === true ? '' : String(value));
    }
    append(el, children);
    return el;
}

/** Appends children (nodes, strings, arrays, nulls) to `parent`. */
export function append(parent, children) {
    for (const child of children) {
        if (child === null || child === undefined || child === false) continue;
        if (Array.isArray(child)) append(parent, child);
        else if (child instanceof Node) parent.appendChild(child);
        else parent.appendChild(document.createTextNode(String(child)));
    }
    return parent;
}

/** Replaces the children of `parent`. */
export function replace(parent, ...children) {
    parent.replaceChildren();
    return append(parent, children);
}

/** `document.getElementById`, throwing when the element is missing (a broken page shows in the test at once). */
export function byId(id) {
    const el = document.getElementById(id);
    if (!el) throw new Error(`#${id} is missing`);
    return el;
}

/** Shows or hides an element through the `hidden` attribute. */
export function show(el, visible = true) {
    el.hidden = !visible;
}

/**
 * Makes `parent`'s children exactly `nodes`, in order, moving only what is out of place: nodes that stay keep their
 * identity (and the reader's text selection, focus and references to them).
 */
export function reconcile(parent, nodes) {
    let index = 0;
    for (const node of nodes) {
        const current = parent.childNodes[index];
        if (current !== node) parent.insertBefore(node, current || null);
        index += 1;
    }
    while (parent.childNodes.length > nodes.length) parent.lastChild.remove();
}

/**
 * A cache of rendered nodes by key: `get(key, signature, build)` returns the node built last time for `key` while its
 * signature is the same, else builds it again. `sweep()` after a render drops the nodes not asked for.
 */
export class NodeCache {
    constructor() {
        this.nodes = new Map();
        this.used = new Set();
    }

    get(key, signature, build) {
        this.used.add(key);
        const known = this.nodes.get(key);
        if (known && known.signature === signature) return known.node;
        const node = build();
        this.nodes.set(key, { signature, node });
        return node;
    }

    sweep() {
        for (const key of this.nodes.keys()) if (!this.used.has(key)) this.nodes.delete(key);
        this.used.clear();
    }
}
