import Foundation

/// A thread of its own as a task executor: the tasks started in ``run(named:_:)`` (and their child tasks) run their
/// jobs on it, one at a time, in the order they became ready.
///
/// The command writer's loops run here on a single node whose store applies batches on the calling thread
/// (``CommandWriter``): a batch is stored, published and answered without crossing a thread, and the cooperative pool's
/// threads never wait for the database.
final class WriterThread: TaskExecutor, @unchecked Sendable {
    // @unchecked: `jobs`, `sleeping` and `finished` are only read and written with `condition` held.
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    /// The thread waits on `condition` for a job.
    private var sleeping = false
    /// ``run(named:_:)``'s body returned: the thread ends once it has run every job given before.
    private var finished = false

    private init() {}

    /// Runs `body` with this executor preferred, on a new thread named `name`; returns once `body` returned. Only
    /// `body`'s task and its child tasks run here (unstructured tasks do not inherit the preference), so no job comes
    /// after `body` returned, and the thread ends.
    static func run(named name: String, _ body: () async -> Void) async {
        let executor = WriterThread()
        let started = DispatchSemaphore(value: 0)
        let thread = Thread {
            // Named from inside: on Linux a name given before `start()` does not reach the system's thread
            // (profilers and `top -H` show it). Nor does one given before `start()` has returned: Foundation's
            // setter names the thread that `start()` records, and does nothing until it has (a thread that ran
            // first kept its creator's name, one run in seven).
            started.wait()
            Thread.current.name = name
            executor.runJobs()
        }
        thread.start()
        started.signal()
        await withTaskExecutorPreference(executor) { await body() }
        executor.finish()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        let wake = sleeping
        sleeping = false
        if wake { condition.signal() }
        condition.unlock()
    }

    private func finish() {
        condition.lock()
        finished = true
        if sleeping { condition.signal() }
        sleeping = false
        condition.unlock()
    }

    /// Runs jobs as they come, the ones ready together in one go, until ``finish()`` and no job is left.
    private func runJobs() {
        var ready: [UnownedJob] = []
        while true {
            condition.lock()
            while jobs.isEmpty && !finished {
                sleeping = true
                condition.wait()
            }
            if jobs.isEmpty {
                condition.unlock()
                return
            }
            swap(&ready, &jobs)
            condition.unlock()
            for job in ready { job.runSynchronously(on: asUnownedTaskExecutor()) }
            ready.removeAll(keepingCapacity: true)
        }
    }
}
