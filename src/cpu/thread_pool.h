#pragma once
// A fixed set of worker threads for the fast CPU path. run(n, fn) calls fn(task, worker) for every task in
// [0, n): task i always runs on worker i mod threads (static round-robin, no work stealing), and the caller
// is worker 0. Callers make every task write its own outputs, and reduce per-task partials afterwards in
// task order, so results do not depend on timing (and, where tasks are sized independently of the thread
// count, not on the thread count either). Workers poll for ~50 µs, then sleep on an atomic wait (futex).
#include <atomic>
#include <cstdint>
#include <exception>
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
  void run_share(int worker);
  void stop_workers();

  int threads_;
  std::vector<std::thread> workers_;
  Call call_ = nullptr;
  void* fn_ = nullptr;
  int n_ = 0;
  std::atomic<uint32_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  std::exception_ptr error_;
  std::atomic<bool> failed_{false};
};

}  // namespace mlalpha::cpu
