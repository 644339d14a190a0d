// Keys: rotate the app's Auth Key and REST API key (POST /v1/app/keys). The new keys are shown once; the old ones
// stop working at once. The console goes on with the new REST API key.

import { h, replace } from '../dom.js';
import { card, errorBox, pageHead } from './ui.js';

export async function renderKeys(context, page) {
    const result = h('div', { id: 'keys-result' });
    const rotate = h('button', { class: 'btn btn-danger', type: 'button', id: 'rotate-keys' }, 'Rotate keys…');
    rotate.addEventListener('click', async () => {
        const ok = await context.confirm({
            title: 'Rotate the keys?',
            body: [
                'A new Auth Key and a new REST API key are made. The current ones stop working at once: every server, script and tool that uses them fails until you give it the new ones.',
                'Auth tokens already issued to users stay valid. This cannot be undone.',
            ],
            confirmLabel: 'Rotate now',
            danger: true,
        });
        if (!ok) return;
        rotate.disabled = true;
        try {
            const keys = await context.call('POST', '/v1/app/keys');
            context.useKey(keys.restAPIKey);
            replace(result, shownOnce(keys));
        } catch (error) {
            replace(result, errorBox(error));
        } finally {
            rotate.disabled = false;
        }
    });

    page.append(
        pageHead('Keys', 'The credentials of this app.'),
        result,
        card({
            title: 'The app’s credentials',
            body: h(
                'div',
                { class: 'card-body' },
                h(
                    'ul',
                    { class: 'key-list' },
                    h('li', {}, h('strong', {}, 'App ID'), ' ', h('code', { id: 'keys-app-id' }, context.session.appId), ': public; every client names the app with it. It never changes.'),
                    h('li', {}, h('strong', {}, 'Auth Key'), ': development only. Anyone who has it can log in as any user (POST /v1/login).'),
                    h('li', {}, h('strong', {}, 'REST API key'), ': secret, for your own server and this console (users, tokens, reports, moderation, webhooks). Never put it in an app or a web page.'),
                ),
            ),
        }),
        card({
            title: 'Rotate keys',
            subtitle: 'Do it when a key may have leaked, or on a schedule.',
            body: h(
                'div',
                { class: 'card-body' },
                h('p', { class: 'muted' }, 'The server keeps only hashes of the keys, so the new ones are shown once, right after the rotation. The old Auth Key and REST API key are refused from that moment; this console switches to the new REST API key by itself.'),
            ),
            foot: [h('span', { class: 'muted' }, 'Same as ', h('code', {}, 'parley-server apps rotate-keys'), ' on the server machine.'), rotate],
        }),
    );
}

function shownOnce(keys) {
    const field = (label, id, value) =>
        h(
            'div',
            { class: 'field' },
            h('label', { for: id }, label),
            h(
                'div',
                { class: 'key-row' },
                h('input', { type: 'text', id, value, readonly: true, spellcheck: 'false' }),
                h('button', { class: 'btn', type: 'button', onclick: (event) => copy(event.currentTarget, document.getElementById(id)) }, 'Copy'),
            ),
        );
    return card({
        title: 'New keys',
        id: 'new-keys',
        body: h(
            'div',
            { class: 'card-body' },
            h('div', { class: 'callout' }, h('strong', {}, 'Copy them now: they are not shown again.'), 'The previous Auth Key and REST API key no longer work. Auth tokens already issued stay valid.'),
            field('App ID (unchanged)', 'new-app-id', keys.appId),
            field('Auth Key', 'new-auth-key', keys.authKey),
            field('REST API key', 'new-rest-api-key', keys.restAPIKey),
        ),
    });
}

async function copy(button, input) {
    input.select();
    try {
        await navigator.clipboard.writeText(input.value);
        button.textContent = 'Copied';
    } catch {
        button.textContent = 'Selected: press Ctrl+C';
    }
    setTimeout(() => {
        button.textContent = 'Copy';
    }, 2000);
}
