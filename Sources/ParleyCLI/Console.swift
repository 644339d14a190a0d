import Foundation
import NIOConcurrencyHelpers

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Standard output of `parley`, and in `chat` on a terminal the line being typed.
///
/// While a line editor is active (``readLines(prompt:)`` on a terminal), every line printed clears the line being
/// typed (`\r ESC[2K`), is printed, and the prompt and the partial input are drawn again below it, so that incoming
/// messages never land in the middle of what the user types. Colour (``styled``) only when standard output is a
/// terminal and `NO_COLOR` is unset or empty.
final class Console: Sendable {
    static let shared = Console()

    private struct State {
        var editor: LineEditor?
        var styled = false
    }

    private let state = NIOLockedValueBox(State())

    /// Whether standard output is a terminal that may get colour (`NO_COLOR` unset or empty: https://no-color.org).
    static var colourAllowed: Bool {
        isatty(STDOUT_FILENO) == 1 && (ProcessInfo.processInfo.environment["NO_COLOR"] ?? "").isEmpty
    }

    /// Colours the lines of events (dim), failures (red) and mentions (bold) from now on, where allowed.
    func enableStyle() {
        let allowed = Self.colourAllowed
        state.withLockedValue { $0.styled = allowed }
    }

    /// Writes `line` and a newline, above the line being typed if there is one.
    func write(line: String) {
        state.withLockedValue { state in
            let text = state.styled ? Self.style(line) : line
            if let editor = state.editor {
                Self.output("\r\u{1B}[2K" + text + "\n" + editor.rendering)
            } else {
                Self.output(text + "\n")
            }
        }
    }

    /// `line` with the colour of its kind: `* ...` and `  ✓ ...` dim, `! ...` red, `  ! ...` (a mention) bold.
    static func style(_ line: String) -> String {
        if line.hasPrefix("* ") || line.hasPrefix("  ✓") || line.hasPrefix("  (") { return "\u{1B}[2m\(line)\u{1B}[0m" }
        if line.hasPrefix("! ") { return "\u{1B}[31m\(line)\u{1B}[0m" }
        if line.hasPrefix("  ! ") { return "\u{1B}[1m\(line)\u{1B}[0m" }
        return line
    }

    private static func output(_ text: String) {
        FileHandle.standardOutput.write(Data(text.utf8))
    }

    /// Lines typed on standard input, read on a thread of their own so that the async world never blocks on them.
    ///
    /// When standard input and output are a terminal (or with `PARLEY_LINE_EDITOR=1`) the terminal is put in raw mode and a ``LineEditor`` shows
    /// `prompt` and edits the line; the stream ends on Ctrl-C, or Ctrl-D on an empty line. Otherwise (a pipe, a file)
    /// lines are read plainly, without escape codes, until the end of the input. Call ``endLines()`` when done: it
    /// puts the terminal back (so do exits and signals).
    func readLines(prompt: String) -> AsyncStream<String> {
        let forced = ProcessInfo.processInfo.environment["PARLEY_LINE_EDITOR"] == "1"
        guard (isatty(STDIN_FILENO) == 1 && isatty(STDOUT_FILENO) == 1) || forced else {
            return AsyncStream { continuation in
                Thread {
                    while let line = readLine(strippingNewline: true) { continuation.yield(line) }
                    continuation.finish()
                }.start()
            }
        }
        if isatty(STDIN_FILENO) == 1 { TerminalMode.enterRaw() }
        state.withLockedValue { state in
            let editor = LineEditor(prompt: prompt)
            state.editor = editor
            Self.output(editor.rendering)
        }
        return AsyncStream { continuation in
            Thread { [self] in
                var buffer = [UInt8](repeating: 0, count: 256)
                reading: while true {
                    let count = read(STDIN_FILENO, &buffer, buffer.count)
                    if count < 0 && errno == EINTR { continue }
                    guard count > 0 else { break }
                    let outcomes = state.withLockedValue { state -> [LineEditor.Outcome] in
                        guard state.editor != nil else { return [.quit] }
                        let (screen, outcomes) = state.editor!.feed(Array(buffer[0..<count]))
                        Self.output(screen)
                        return outcomes
                    }
                    for outcome in outcomes {
                        switch outcome {
                        case .submit(let line): continuation.yield(line)
                        case .quit: break reading
                        }
                    }
                }
                continuation.finish()
            }.start()
        }
    }

    /// Ends the line editor (if any) and puts the terminal back as it was.
    func endLines() {
        state.withLockedValue { state in
            if state.editor != nil {
                state.editor = nil
                Self.output("\r\u{1B}[2K")
            }
        }
        TerminalMode.restore()
    }
}

/// The terminal's mode: raw while `chat` edits a line, put back on every way out (the end of `chat`, `exit`, and the
/// signals that end a process: SIGTERM, SIGHUP, SIGINT, SIGQUIT).
enum TerminalMode {
    /// The settings before raw mode; read by the signal handler, so a plain global.
    nonisolated(unsafe) private static var saved = termios()
    nonisolated(unsafe) private static var isRaw = false

    /// Raw input: keys one by one, no echo, Ctrl-C and Ctrl-Z as bytes. Output keeps its newline handling.
    static func enterRaw() {
        guard !isRaw, tcgetattr(STDIN_FILENO, &saved) == 0 else { return }
        var raw = saved
        raw.c_lflag &= ~tcflag_t(ICANON | ECHO | ISIG | IEXTEN)
        raw.c_iflag &= ~tcflag_t(IXON | ICRNL)
        withUnsafeMutableBytes(of: &raw.c_cc) { cc in
            cc[Int(VMIN)] = 1
            cc[Int(VTIME)] = 0
        }
        guard tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw) == 0 else { return }
        isRaw = true
        atexit { TerminalMode.restore() }
        for signalNumber in [SIGTERM, SIGHUP, SIGINT, SIGQUIT] {
            _ = signal(signalNumber) { received in
                // tcsetattr and signal are async-signal-safe: put the terminal back, then die of the signal.
                TerminalMode.restore()
                _ = signal(received, SIG_DFL)
                _ = raise(received)
            }
        }
    }

    static func restore() {
        guard isRaw else { return }
        isRaw = false
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved)
    }
}
