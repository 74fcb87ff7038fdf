#include "cpu/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <string>
#include <system_error>

#include "core/error.h"

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace mlalpha::cpu {

namespace {
// Polls `ready` for about 50 µs before the caller blocks: between the parts of one model step the next
// run() usually comes sooner than that, and a futex wake-up costs 5–20 µs. Timed, not counted: `pause`
// takes ~10 cycles on some CPUs and ~140 on others.
template <typename Ready>
bool spin_until(Ready&& ready) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
  for (int i = 0;; ++i) {
    if (ready()) return true;
#if defined(__x86_64__)
    _mm_pause();
#endif
    if ((i & 63) == 63 && std::chrono::steady_clock::now() > deadline) return ready();
  }
}
}  // namespace

int available_cpus() {
  int n = int(std::thread::hardware_concurrency());
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) n = CPU_COUNT(&set);
  // A cgroup v2 CPU quota ("quota period" in cpu.max, "max" when unlimited) caps it too: a container
  // given 16 CPUs' worth of time on a larger host.
  if (std::FILE* f = std::fopen("/sys/fs/cgroup/cpu.max", "r")) {
    long long quota = 0, period = 0;
    if (std::fscanf(f, "%lld %lld", &quota, &period) == 2 && quota > 0 && period > 0)
      n = std::min<long long>(n > 0 ? n : quota, (quota + period - 1) / period);
    std::fclose(f);
  }
  return n > 0 ? n : 1;
}

ThreadPool::ThreadPool(int threads) {
  threads_ = threads > 0 ? threads : available_cpus();
  cursors_ = std::make_unique<Cursor[]>(size_t(threads_));
  try {
    for (int w = 1; w < threads_; ++w) workers_.emplace_back([this, w] { work(w); });
  } catch (const std::system_error& e) {
    stop_workers();
    throw Error("the CPU thread pool could not start thread " + std::to_string(workers_.size() + 1) + " of " +
                std::to_string(threads_) + " (" + e.what() + "): ask for fewer threads");
  }
}

ThreadPool::~ThreadPool() { stop_workers(); }

void ThreadPool::stop_workers() {
  stop_.store(true);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
  workers_.clear();
}

void ThreadPool::claim_tasks(int worker) {
  for (int i = 0; i < threads_; ++i) {  // its own tasks first, then the next worker's, ...
    const int owner = (worker + i) % threads_;
    std::atomic<uint64_t>& cursor = cursors_[owner].v;
    // Nothing left there: skip without writing its line. (After the wake-up of this run, a worker reads this
    // run's counts or later ones, so the test never skips a task of the run it came for.)
    const uint64_t seen = cursor.load(std::memory_order_relaxed);
    if (uint64_t(uint32_t(seen)) * threads_ + owner >= (seen >> 32)) continue;
    for (;;) {
      // Acquire: a count below n was stored by this run's caller (release) after call_, fn_ and done_ = 0.
      const uint64_t c = cursor.fetch_add(1, std::memory_order_acq_rel);
      const uint64_t n = c >> 32, task = uint64_t(uint32_t(c)) * threads_ + owner;
      if (task >= n) break;
      // The run cannot end before this task is counted done, so call_ and fn_ stay this run's meanwhile.
      if (!failed_.load(std::memory_order_relaxed)) {
        try {
          call_(fn_, int(task), worker);
        } catch (...) {
          bool expected = false;
          if (failed_.compare_exchange_strong(expected, true)) error_ = std::current_exception();
        }
      }
      if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == int(n)) done_.notify_all();
    }
  }
}

void ThreadPool::work(int worker) {
  uint32_t seen = 0;
  for (;;) {
    uint32_t g = seen;
    spin_until([&] { return (g = generation_.load(std::memory_order_acquire)) != seen; });
    while (g == seen) {
      generation_.wait(seen, std::memory_order_acquire);
      g = generation_.load(std::memory_order_acquire);
    }
    seen = g;
    if (stop_.load()) return;
    claim_tasks(worker);
  }
}

void ThreadPool::run_erased(int n, Call call, void* fn) {
  if (n <= 0) return;
  error_ = nullptr;
  failed_.store(false);
  if (threads_ > 1 && n > 1) {
    call_ = call;
    fn_ = fn;
    done_.store(0, std::memory_order_relaxed);
    for (int w = 0; w < threads_; ++w)  // the run's tasks are open
      cursors_[w].v.store(uint64_t(uint32_t(n)) << 32, std::memory_order_release);
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
    claim_tasks(0);
    int d = 0;
    spin_until([&] { return (d = done_.load(std::memory_order_acquire)) == n; });
    while (d != n) {
      done_.wait(d, std::memory_order_acquire);
      d = done_.load(std::memory_order_acquire);
    }
  } else {
    // One worker, or one task: the caller does it all, as worker 0.
    for (int t = 0; t < n && !failed_.load(); ++t) {
      try {
        call(fn, t, 0);
      } catch (...) {
        failed_.store(true);
        error_ = std::current_exception();
      }
    }
  }
  call_ = nullptr;
  fn_ = nullptr;
  if (failed_.load()) std::rethrow_exception(error_);
}

}  // namespace mlalpha::cpu
