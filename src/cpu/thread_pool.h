#pragma once
// A fixed set of worker threads for the fast CPU path. run(n, fn) calls fn(task, worker) once for every task
// in [0, n), the caller being worker 0. Worker w first takes its own tasks w, w + threads, w + 2·threads, ...
// (the same rows on the same core from one call to the next, while their data is in its cache), then
// claims what is left of the others'; run() returns when every task is done, not when every worker has
// come by. So a worker the system has not scheduled (another process on its core) delays a run only by a
// task it holds, and the others do its share. Which worker runs a task therefore depends on timing:
// `worker` (in [0, threads), never held by two tasks at once) is for per-worker scratch only. Callers make
// every task write its own outputs, and reduce per-task partials afterwards in task order, so results do
// not depend on timing (and, where tasks are sized independently of the thread count, not on the thread
// count either). Workers poll for ~50 µs, then sleep on an atomic wait (futex).
#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <thread>
#include <type_traits>
#include <vector>

namespace mlalpha::cpu {

// The CPUs this process may run on: its affinity mask (a container's or taskset's cpuset, where
// std::thread::hardware_concurrency counts the whole machine's), capped by a cgroup v2 CPU quota; >= 1.
int available_cpus();

class ThreadPool {
 public:
  // threads <= 0: available_cpus(). Throws mlalpha::Error when the system refuses a thread.
  explicit ThreadPool(int threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return threads_; }
  // fn(task, worker) for task in [0, n); returns when all are done. One caller at a time, and not
  // reentrant: fn must not call run().
  // The first exception a task throws is rethrown here (after every worker has finished). fn is called
  // through a plain function pointer: no std::function, so a run allocates nothing.
  template <typename Fn>
  void run(int n, Fn&& fn) {
    using F = std::remove_reference_t<Fn>;
    run_erased(n, [](void* f, int task, int worker) { (*static_cast<F*>(f))(task, worker); },
               const_cast<void*>(static_cast<const void*>(&fn)));
  }

 private:
  using Call = void (*)(void* fn, int task, int worker);
  void run_erased(int n, Call call, void* fn);
  void work(int worker);
  void claim_tasks(int worker);
  void stop_workers();

  int threads_;
  std::vector<std::thread> workers_;
  Call call_ = nullptr;  // the current run's task function, read only by a worker holding one of its tasks
  void* fn_ = nullptr;
  // Per worker w, the current run's task count (high 32 bits) and how many of w's tasks w + k·threads have
  // been claimed (low 32 bits, k): a claim is one fetch_add, and the count it returns tells whether the task
  // belongs to the run going on (a cursor is reset only once all its tasks are done). One cache line each.
  struct alignas(64) Cursor {
    std::atomic<uint64_t> v{0};
  };
  std::unique_ptr<Cursor[]> cursors_;
  std::atomic<int> done_{0};  // tasks of the current run finished
  std::atomic<uint32_t> generation_{0};  // bumped per run: wakes the sleeping workers
  std::atomic<bool> stop_{false};
  std::exception_ptr error_;
  std::atomic<bool> failed_{false};
};

}  // namespace mlalpha::cpu
