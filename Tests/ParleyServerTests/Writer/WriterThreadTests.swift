import Foundation
import NIOConcurrencyHelpers
import Testing

@testable import ParleyServer

/// The writer's own thread as a task executor: what runs in it, and that it ends.
@Suite(.timeLimit(.minutes(1))) struct WriterThreadTests {
    /// The name of the thread running the caller (synchronous: `Thread.current` is not for async code). Names here
    /// stay within Linux's 15 characters: a longer one is not set, and the thread keeps its creator's.
    static func threadName() -> String? { Thread.current.name }

    /// The body, its child tasks, and both again after being resumed from another thread, run on the named thread.
    @Test func theBodyAndItsChildTasksRunOnTheThreadAfterEverySuspension() async {
        let seen = NIOLockedValueBox<[String?]>([])
        let otherThread = ResumeFromAnotherThread()
        await WriterThread.run(named: "writer-test") {
            seen.withLockedValue { $0.append(Self.threadName()) }
            await withDiscardingTaskGroup { group in
                for _ in 0..<3 {
                    group.addTask {
                        seen.withLockedValue { $0.append(Self.threadName()) }
                        // Resumed by a thread of the test, not by the writer's.
                        await otherThread.resumeLater()
                        seen.withLockedValue { $0.append(Self.threadName()) }
                    }
                }
            }
            await otherThread.resumeLater()
            seen.withLockedValue { $0.append(Self.threadName()) }
        }
        let names = seen.withLockedValue { $0 }
        #expect(names.count == 8)
        #expect(names.allSatisfy { $0 == "writer-test" }, "\(names)")
        #expect(Self.threadName() != "writer-test")
    }

    /// Each call has a thread of its own and returns once its body did: runs one after another work alike.
    @Test func runsOneAfterAnotherEachHaveTheirThread() async {
        for round in 0..<3 {
            let name = NIOLockedValueBox<String?>(nil)
            await WriterThread.run(named: "writer-test-\(round)") {
                await ResumeFromAnotherThread().resumeLater()
                name.withLockedValue { $0 = Self.threadName() }
            }
            #expect(name.withLockedValue { $0 } == "writer-test-\(round)")
        }
    }
}

/// Resumes a waiting task from a thread of its own, as a database driver or a socket would.
private struct ResumeFromAnotherThread: Sendable {
    func resumeLater() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let thread = Thread { continuation.resume() }
            thread.start()
        }
    }
}
