#include "core/fault.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace mlalpha {
namespace {

struct FaultSettings {
  long kill_at = 0;            // MLALPHA_FAULT_AT; 0: never
  const char* log = nullptr;   // MLALPHA_FAULT_LOG
};

// Read once: a run must not change its fault points halfway. Function-local statics are the one process-wide
// state here; the hook is process-wide by nature (see fault.h).
const FaultSettings& settings() {
  static const FaultSettings s = [] {
    FaultSettings f;
    if (const char* at = std::getenv("MLALPHA_FAULT_AT"); at && *at) f.kill_at = std::strtol(at, nullptr, 10);
    if (const char* log = std::getenv("MLALPHA_FAULT_LOG"); log && *log) f.log = log;
    return f;
  }();
  return s;
}

std::atomic<long>& counter() {
  static std::atomic<long> n{0};
  return n;
}

}  // namespace

void fault_point(const char* what) {
  const FaultSettings& s = settings();
  const long k = counter().fetch_add(1, std::memory_order_relaxed) + 1;
  if (s.log) {
    // One write(2) of a whole line with O_APPEND: lines of concurrent points never interleave.
    char line[512];
    const int n = std::snprintf(line, sizeof line, "%ld\t%s\n", k, what ? what : "?");
    const int fd = ::open(s.log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
      if (n > 0) (void)!::write(fd, line, size_t(n) < sizeof line ? size_t(n) : sizeof line - 1);
      ::close(fd);
    }
  }
  if (s.kill_at > 0 && k == s.kill_at) {
    ::raise(SIGKILL);
    ::_exit(137);  // unreachable: SIGKILL cannot be caught
  }
}

long fault_points_passed() { return counter().load(std::memory_order_relaxed); }

}  // namespace mlalpha
