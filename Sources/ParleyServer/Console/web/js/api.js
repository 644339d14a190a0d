// The REST API (docs/PROTOCOL.md, Sources/ParleyAPI/openapi.yaml), called from the page's own origin.

/** An error answer of the API, `{"error": {"code", "message"}}`, or a network failure (`ERR_NETWORK`). */
export class ApiError extends Error {
    constructor(status, code, message, retryAfterMs) {
        super(message);
        this.name = 'ApiError';
        this.status = status;
        this.code = code;
        this.retryAfterMs = retryAfterMs;
    }
}

/**
 * Calls the API and returns the decoded JSON (null for 204).
 * Options: `apiKey` (X-Parley-Api-Key, the operator), `token` (a user's auth token), `body` (JSON), `query` (an
 * object; null and undefined values are left out), `signal`.
 */
export async function api(method, path, options = {}) {
    const url = new URL(path, location.origin);
    for (const [key, value] of Object.entries(options.query || {})) {
        if (value !== null && value !== undefined && value !== '') url.searchParams.set(key, String(value));
    }
    const headers = { Accept: 'application/json' };
    if (options.apiKey) headers['X-Parley-Api-Key'] = options.apiKey;
    if (options.token) headers.Authorization = `Bearer ${options.token}`;
    let body;
    if (options.body !== undefined) {
        headers['Content-Type'] = 'application/json';
        body = JSON.stringify(options.body);
    }
    let response;
    try {
        response = await fetch(url, { method, headers, body, cache: 'no-store', signal: options.signal });
    } catch (error) {
        if (error && error.name === 'AbortError') throw error;
        throw new ApiError(0, 'ERR_NETWORK', 'The server cannot be reached.');
    }
    const text = await response.text();
    let data = null;
    if (text) {
        try {
            data = JSON.parse(text);
        } catch {
            data = null;
        }
    }
    if (!response.ok) {
        const error = data && data.error;
        throw new ApiError(
            response.status,
            (error && error.code) || `HTTP_${response.status}`,
            (error && error.message) || response.statusText || 'The request failed.',
            error && error.retryAfterMs,
        );
    }
    return data;
}

/** A path segment, percent-encoded. */
export function seg(value) {
    return encodeURIComponent(value);
}
