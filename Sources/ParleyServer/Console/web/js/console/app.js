// The operator console: sign-in with the REST API key, then hash-routed pages (#/overview, #/users, ...).
//
// The key lives in sessionStorage only (this tab, until it closes or the operator signs out) and is sent only to this
// server, in the X-Parley-Api-Key header. Pages are modules that render into #page through a small context.

import { api, ApiError } from '../api.js';
import { byId, h, replace, show } from '../dom.js';
import { confirmDialog, errorBox } from './ui.js';
import { renderOverview } from './overview.js';
import { renderUsers } from './users.js';
import { renderConversations, renderConversation } from './conversations.js';
import { renderReports } from './reports.js';
import { renderSearch } from './search.js';
import { renderKeys } from './keys.js';

const SESSION_KEY = 'parley.console.session';

const routes = {
    overview: { title: 'Overview', render: renderOverview },
    users: { title: 'Users', render: renderUsers },
    conversations: { title: 'Conversations', render: renderConversations },
    conversation: { title: 'Conversation', render: renderConversation, nav: 'conversations' },
    search: { title: 'Search', render: renderSearch },
    reports: { title: 'Reports', render: renderReports },
    keys: { title: 'Keys', render: renderKeys },
};

let session = loadSession();
let current = null; // { cleanups: [], alive: bool }

function loadSession() {
    try {
        const saved = JSON.parse(sessionStorage.getItem(SESSION_KEY) || 'null');
        return saved && saved.appId && saved.apiKey ? saved : null;
    } catch {
        return null;
    }
}

function saveSession(value) {
    session = value;
    if (value) sessionStorage.setItem(SESSION_KEY, JSON.stringify(value));
    else sessionStorage.removeItem(SESSION_KEY);
}

// MARK: Sign-in

function showSignIn(error) {
    stopPage();
    show(byId('shell'), false);
    show(byId('signin'), true);
    replace(byId('signin-error'), error ? errorBox(error) : null);
    const appIdInput = byId('signin-app-id');
    if (!appIdInput.value && session) appIdInput.value = session.appId;
    (appIdInput.value ? byId('signin-api-key') : appIdInput).focus();
}

async function signIn(event) {
    event.preventDefault();
    const appId = byId('signin-app-id').value.trim();
    const apiKey = byId('signin-api-key').value.trim();
    const button = byId('signin-submit');
    if (!appId || !apiKey) {
        replace(byId('signin-error'), errorBox(new ApiError(0, 'MISSING_FIELDS', 'Enter the App ID and the REST API key.')));
        return;
    }
    button.disabled = true;
    button.textContent = 'Signing in…';
    try {
        const app = await api('GET', '/v1/app', { apiKey });
        if (app.appId !== appId) {
            throw new ApiError(0, 'APP_ID_MISMATCH', `This REST API key belongs to the app ${app.appId}, not ${appId}.`);
        }
        saveSession({ appId, apiKey, appName: app.name });
        byId('signin-api-key').value = '';
        replace(byId('signin-error'));
        showShell();
    } catch (error) {
        replace(byId('signin-error'), errorBox(error));
    } finally {
        button.disabled = false;
        button.textContent = 'Sign in';
    }
}

function signOut() {
    saveSession(null);
    byId('signin-api-key').value = '';
    if (location.hash) history.replaceState(null, '', location.pathname);
    showSignIn();
}

// MARK: Shell and routing

function showShell() {
    show(byId('signin'), false);
    show(byId('shell'), true);
    byId('app-name').textContent = session.appName || 'App';
    byId('app-id').textContent = session.appId;
    if (!parseRoute()) location.hash = '#/overview';
    else route();
}

function parseRoute() {
    const match = /^#\/([a-z]+)(?:\/(.*))?$/.exec(location.hash);
    if (!match) return null;
    const [, name, rest] = match;
    if (name === 'conversations' && rest) return { name: 'conversation', arg: decodeURIComponent(rest) };
    return routes[name] ? { name, arg: rest ? decodeURIComponent(rest) : null } : null;
}

function stopPage() {
    if (!current) return;
    current.alive = false;
    for (const cleanup of current.cleanups) {
        try {
            cleanup();
        } catch {
            // A page's cleanup must not stop the next page.
        }
    }
    current = null;
}

function route() {
    if (!session) return showSignIn();
    const parsed = parseRoute();
    if (!parsed) {
        location.hash = '#/overview';
        return;
    }
    stopPage();
    const definition = routes[parsed.name];
    for (const link of document.querySelectorAll('.nav-link[data-route]')) {
        link.classList.toggle('active', link.dataset.route === (definition.nav || parsed.name));
    }
    document.title = `${definition.title} · Parley console`;
    replace(byId('banner'));
    const page = byId('page');
    page.dataset.page = parsed.name;
    replace(page);
    const state = { cleanups: [], alive: true };
    current = state;
    const context = {
        session,
        /** Calls the API with the operator's key; a refused key shows the sign-in banner. */
        async call(method, path, options = {}) {
            try {
                return await api(method, path, { ...options, apiKey: session.apiKey });
            } catch (error) {
                if (error instanceof ApiError && error.code === 'ERR_API_KEY_INVALID' && state.alive) keyRefused(error);
                throw error;
            }
        },
        get alive() {
            return state.alive;
        },
        onLeave(cleanup) {
            state.cleanups.push(cleanup);
        },
        /** After a rotation: the console goes on with the new key. */
        useKey(apiKey) {
            saveSession({ ...session, apiKey });
            context.session = session;
        },
        setAppName(name) {
            if (name && name !== session.appName) saveSession({ ...session, appName: name });
            byId('app-name').textContent = name;
        },
        confirm: confirmDialog,
    };
    Promise.resolve(definition.render(context, page, parsed.arg)).catch((error) => {
        if (state.alive) page.append(errorBox(error));
    });
}

function keyRefused(error) {
    replace(
        byId('banner'),
        errorBox(
            error,
            h('div', { class: 'alert-extra' }, 'The key may have been rotated. ', h('a', { href: '#', onclick: (event) => {
                event.preventDefault();
                signOut();
            } }, 'Sign in again')),
        ),
    );
}

// MARK: Start

byId('signin-form').addEventListener('submit', signIn);
byId('signout').addEventListener('click', signOut);
window.addEventListener('hashchange', () => {
    if (session) route();
});
if (session) showShell();
else showSignIn();
