// Search: GET /v1/search/messages with the key (every conversation of the app), newest first or best match first,
// filtered by sender, conversation and files, a page at a time; each result links to its conversation.

import { h, replace } from '../dom.js';
import { formatDateTime, messageText } from '../format.js';
import { avatar, card, CursorPager, pageHead } from './ui.js';

export const PAGE_SIZE = 25;

/** The snippet's text with each match in a <mark>, built from text nodes (never parsed as HTML). */
function marked(snippet) {
    const text = snippet.text;
    const parts = [];
    let at = 0;
    for (const match of [...snippet.matches].sort((a, b) => a.start - b.start)) {
        // Ranges count UTF-16 code units: JavaScript's string indexes.
        if (match.start < at || match.start + match.length > text.length) continue;
        parts.push(text.slice(at, match.start), h('mark', {}, text.slice(match.start, match.start + match.length)));
        at = match.start + match.length;
    }
    parts.push(text.slice(at));
    return parts;
}

export async function renderSearch(context, page) {
    let query = null;
    const input = (attributes) => h('input', { type: 'text', spellcheck: 'false', ...attributes });
    const words = input({ id: 'search-q', placeholder: 'Words to find (the last one as a prefix)', maxlength: '256', 'aria-label': 'Words' });
    const sender = input({ id: 'search-sender', placeholder: 'Sender uid', 'aria-label': 'Sender uid' });
    const conversation = input({ id: 'search-conversation', placeholder: 'Conversation id', 'aria-label': 'Conversation id' });
    const files = h('input', { type: 'checkbox', id: 'search-files' });
    const order = h('select', { id: 'search-order', 'aria-label': 'Order' }, h('option', { value: 'newest' }, 'Newest first'), h('option', { value: 'relevance' }, 'Best match first'));
    const body = h('div', { id: 'search-body' }, h('div', { class: 'empty-state' }, 'Search every conversation of the app.'));
    const pager = new CursorPager({
        context,
        body,
        info: 'results',
        load: async (cursor) => {
            const answer = await context.call('GET', '/v1/search/messages', { query: { ...query, limit: PAGE_SIZE, cursor } });
            return { items: answer.results, nextCursor: answer.nextCursor };
        },
        render: (results) =>
            results.length
                ? h(
                      'div',
                      { id: 'search-results' },
                      results.map(({ message, snippet }) =>
                          h(
                              'article',
                              { class: 'search-result', dataset: { id: message.id, conversation: message.conversationId } },
                              h(
                                  'div',
                                  { class: 'report-head' },
                                  h('div', { class: 'who' }, avatar(message.sender, true), h('span', { class: 'mono' }, message.sender)),
                                  h('a', { class: 'mono', href: `#/conversations/${encodeURIComponent(message.conversationId)}` }, message.conversationId),
                                  h('span', { class: 'muted' }, `#${message.seq}`),
                                  h('span', { class: 'spacer' }),
                                  h('span', { class: 'muted' }, formatDateTime(message.sentAt)),
                              ),
                              h('p', { class: 'search-snippet' }, snippet ? marked(snippet) : messageText(message)),
                          ),
                      ),
                  )
                : h('div', { class: 'empty-state', id: 'search-results' }, 'No message found.'),
    });
    const form = h(
        'form',
        { class: 'search-form', id: 'search-form', onsubmit: (event) => {
            event.preventDefault();
            query = {
                q: words.value.trim() || null,
                sender: sender.value.trim() || null,
                conversationId: conversation.value.trim() || null,
                hasFile: files.checked ? 'true' : null,
                order: order.value,
            };
            pager.cursors = [null];
            pager.nextCursor = null;
            pager.go(0);
        } },
        h('div', { class: 'inline-form' }, words, h('button', { class: 'btn btn-primary', type: 'submit', id: 'search-go' }, 'Search')),
        h('div', { class: 'inline-form search-filters' }, sender, conversation, order, h('label', { class: 'check' }, files, ' With files only')),
    );
    replace(
        page,
        pageHead('Search', 'Messages of every conversation of the app by their words: case and accents do not matter; deleted messages are never found.'),
        card({ body: h('div', { class: 'card-body' }, form) }),
        card({ body, foot: [h('span', { class: 'muted' }, `${PAGE_SIZE} per page`), pager.controls] }),
    );
}
