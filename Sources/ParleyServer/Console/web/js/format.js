// Formatting shared by the console and the chat page. Results are plain strings, to be set as text.

export function formatTime(ms) {
    if (ms === null || ms === undefined) return '';
    return new Date(ms).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
}

export function formatDateTime(ms) {
    if (ms === null || ms === undefined) return '—';
    const date = new Date(ms);
    return `${date.toLocaleDateString([], { year: 'numeric', month: 'short', day: 'numeric' })} ${date.toLocaleTimeString([], {
        hour: '2-digit',
        minute: '2-digit',
        second: '2-digit',
    })}`;
}

/** "Nov 26, 13:12" (with the year when it is not this one). */
export function formatShort(ms) {
    if (ms === null || ms === undefined) return '—';
    const date = new Date(ms);
    const options = { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' };
    if (date.getFullYear() !== new Date().getFullYear()) options.year = 'numeric';
    return date.toLocaleString([], options);
}

export function formatDate(ms) {
    if (ms === null || ms === undefined) return '—';
    return new Date(ms).toLocaleDateString([], { year: 'numeric', month: 'short', day: 'numeric' });
}

/** "3 min ago" style. */
export function formatAgo(ms, now = Date.now()) {
    if (!ms) return '';
    const seconds = Math.max(0, Math.round((now - ms) / 1000));
    if (seconds < 45) return 'just now';
    const minutes = Math.round(seconds / 60);
    if (minutes < 60) return `${minutes} min ago`;
    const hours = Math.round(minutes / 60);
    if (hours < 24) return `${hours} h ago`;
    return formatDateTime(ms);
}

/** The text of a message: its text parts, joined; data and (unless `files` is false) file parts as short labels. */
export function messageText(message, { files = true } = {}) {
    if (!message) return '';
    if (message.deletedAt) return 'This message was deleted.';
    const texts = [];
    for (const part of message.parts || []) {
        if (part.type === 'text' && typeof part.text === 'string') texts.push(part.text);
        else if (part.type === 'data') texts.push(`[data${part.name ? `: ${part.name}` : ''}]`);
        else if (part.type === 'file' && part.file && files) texts.push(`[file: ${fileLabel(part.file)}]`);
    }
    return texts.join('\n');
}

/** A file part's name, size and, for images, pixels: "cat.png · 1.2 MB · 640×480". */
export function fileLabel(file) {
    const pixels = file.width && file.height ? ` · ${file.width}×${file.height}` : '';
    return `${file.name} · ${formatBytes(file.size)}${pixels}`;
}

/** A size in bytes for people: "812 B", "1.2 KB", "34 MB" (powers of 1,000, as file managers show them). */
export function formatBytes(bytes) {
    const units = ['B', 'KB', 'MB', 'GB', 'TB'];
    let value = Number(bytes) || 0;
    let unit = 0;
    while (value >= 1000 && unit < units.length - 1) {
        value /= 1000;
        unit += 1;
    }
    return unit === 0 ? `${value} B` : `${value < 10 ? value.toFixed(1) : Math.round(value)} ${units[unit]}`;
}

/** Up to two initials of a name or uid, for avatars. */
export function initials(name) {
    const words = String(name || '?').split(/[\s._@-]+/).filter(Boolean);
    const letters = words.length > 1 ? words[0][0] + words[1][0] : (words[0] || '?').slice(0, 2);
    return letters.toUpperCase();
}

/** A stable hue for a uid, so each person keeps a colour. */
export function hueOf(text) {
    let hash = 0;
    for (const char of String(text)) hash = (hash * 31 + char.codePointAt(0)) >>> 0;
    return hash % 360;
}
