/// The line being typed in `chat` on a terminal: a pure state machine, bytes from the keyboard in, what to draw and
/// what happened out. No I/O: ``Console`` writes what it returns and reads the keys.
///
/// Keys: printable text (UTF-8) inserts at the cursor; Backspace (DEL or Ctrl-H) deletes before it, Delete
/// (`ESC [3~`) and Ctrl-D under it; Left/Right (`ESC [D`, `ESC [C`) and Ctrl-B/Ctrl-F move; Home/End (`ESC [H`,
/// `ESC [F`, `ESC OH`, `ESC OF`, `ESC [1~`, `ESC [4~`) and Ctrl-A/Ctrl-E go to the start or the end; Ctrl-U clears
/// up to the cursor, Ctrl-K after it; Enter submits; Ctrl-C quits, and so does Ctrl-D on an empty line. Other
/// control keys and escape sequences are ignored.
struct LineEditor: Equatable {
    /// What a key did, besides changing the line.
    enum Outcome: Equatable {
        /// Enter: the line typed (the editor is empty again).
        case submit(String)
        /// Ctrl-C, or Ctrl-D on an empty line.
        case quit
    }

    let prompt: String
    private(set) var text: [Character] = []
    /// Where the cursor is, in characters from the start.
    private(set) var cursor = 0
    /// Bytes of an escape sequence or a UTF-8 character not complete yet.
    private var pending: [UInt8] = []

    init(prompt: String) {
        self.prompt = prompt
    }

    var line: String { String(text) }

    /// The prompt and the line, drawn from the start of the screen line, the cursor put back in its place.
    var rendering: String {
        let after = columns(text[cursor...])
        return "\r\u{1B}[2K" + prompt + String(text) + (after > 0 ? "\u{1B}[\(after)D" : "")
    }

    /// Takes `bytes` typed; returns what to write to the screen and what happened (a submitted line, quitting).
    mutating func feed(_ bytes: [UInt8]) -> (screen: String, outcomes: [Outcome]) {
        var screen = ""
        var outcomes: [Outcome] = []
        for byte in bytes {
            let before = (text, cursor)
            switch key(byte) {
            case nil: continue
            case .insert(let character):
                text.insert(character, at: cursor)
                cursor += 1
            case .backspace where cursor > 0:
                cursor -= 1
                text.remove(at: cursor)
            case .delete where cursor < text.count: text.remove(at: cursor)
            case .left where cursor > 0: cursor -= 1
            case .right where cursor < text.count: cursor += 1
            case .home: cursor = 0
            case .end: cursor = text.count
            case .clearBefore:
                text.removeFirst(cursor)
                cursor = 0
            case .clearAfter: text.removeLast(text.count - cursor)
            case .enter:
                outcomes.append(.submit(String(text)))
                screen += "\r\n"
                text = []
                cursor = 0
                screen += rendering
                continue
            case .endOfInput where text.isEmpty, .interrupt:
                outcomes.append(.quit)
                return (screen + "\r\n", outcomes)
            case .endOfInput: if cursor < text.count { text.remove(at: cursor) }
            case .backspace, .delete, .left, .right: break
            }
            if before != (text, cursor) { screen += rendering }
        }
        return (screen, outcomes)
    }

    private enum Key {
        case insert(Character)
        case backspace, delete, left, right, home, end, clearBefore, clearAfter, enter, endOfInput, interrupt
    }

    /// The key `byte` completes, if any; escape sequences and UTF-8 characters gather in `pending`.
    private mutating func key(_ byte: UInt8) -> Key? {
        if let first = pending.first {
            pending.append(byte)
            if first == 0x1B { return escapeSequence() }
            // A UTF-8 character: its first byte says how long it is.
            let length = first >= 0xF0 ? 4 : first >= 0xE0 ? 3 : 2
            guard pending.count == length else { return nil }
            defer { pending = [] }
            return String(decoding: pending, as: UTF8.self).first.map(Key.insert)
        }
        switch byte {
        case 0x0D, 0x0A: return .enter
        case 0x7F, 0x08: return .backspace
        case 0x01: return .home
        case 0x05: return .end
        case 0x02: return .left
        case 0x06: return .right
        case 0x15: return .clearBefore
        case 0x0B: return .clearAfter
        case 0x03: return .interrupt
        case 0x04: return .endOfInput
        case 0x1B, 0xC0...0xF7:
            pending = [byte]
            return nil
        case 0x20..<0x7F: return .insert(Character(Unicode.Scalar(byte)))
        default: return nil
        }
    }

    /// `ESC [ ... final` or `ESC O final`: the key it names once complete, nil (and still pending) before.
    private mutating func escapeSequence() -> Key? {
        guard pending.count >= 2 else { return nil }
        let introducer = pending[1]
        guard introducer == UInt8(ascii: "[") || introducer == UInt8(ascii: "O") else {
            pending = []
            return nil
        }
        guard pending.count >= 3, let last = pending.last, (0x40...0x7E).contains(last) else {
            if pending.count > 8 { pending = [] }
            return nil
        }
        let body = String(decoding: pending.dropFirst(2), as: UTF8.self)
        pending = []
        switch body {
        case "D": return .left
        case "C": return .right
        case "H", "1~", "7~": return .home
        case "F", "4~", "8~": return .end
        case "3~": return .delete
        default: return nil
        }
    }
}

/// Columns `characters` take on a terminal: two for wide characters (CJK, most emoji), one for the others.
func columns(_ characters: some Sequence<Character>) -> Int {
    characters.reduce(0) { total, character in
        guard let scalar = character.unicodeScalars.first else { return total }
        let wide =
            (0x1100...0x115F).contains(scalar.value) || (0x2E80...0xA4CF).contains(scalar.value)
            || (0xAC00...0xD7A3).contains(scalar.value) || (0xF900...0xFAFF).contains(scalar.value)
            || (0xFE30...0xFE4F).contains(scalar.value) || (0xFF00...0xFF60).contains(scalar.value)
            || (0xFFE0...0xFFE6).contains(scalar.value) || (0x1F300...0x1FAFF).contains(scalar.value)
            || (0x20000...0x3FFFD).contains(scalar.value)
        return total + (wide ? 2 : 1)
    }
}
