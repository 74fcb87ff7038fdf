#include "dist/launch.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <thread>
#include <utility>

#include "core/error.h"
#include "core/temp_dir.h"
#include "dist/fd.h"

namespace mlalpha::dist {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Child {
  int rank = 0;
  pid_t pid = -1;
  bool reaped = false;
  int status = 0;   // waitpid's, once reaped
  std::string log;  // empty for rank 0 (its output is the launcher's)
};

// The started children; any still running when this goes out of scope (launching failed half-way) are
// killed and reaped, so none outlives a failed launch.
class Children {
 public:
  ~Children() {
    for (Child& c : list)
      if (!c.reaped) ::kill(c.pid, SIGKILL);
    for (Child& c : list)
      if (!c.reaped) ::waitpid(c.pid, &c.status, 0);
  }
  void signal_running(int sig) {
    for (Child& c : list)
      if (!c.reaped) ::kill(c.pid, sig);
  }
  std::vector<Child> list;
};

// The names launch_local sets; the launcher's own values of them are not passed on.
constexpr std::string_view kSetNames[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                                          "MLALPHA_DIST_ID_FILE", kLaunchedVar};

std::vector<std::string> child_env(int rank, int world, const std::string& id_file) {
  std::vector<std::string> env;
  bool nvls_set = false;
  for (char** e = environ; e && *e; ++e) {
    const std::string_view kv(*e);
    const std::string_view name = kv.substr(0, kv.find('='));
    bool replaced = false;
    for (const std::string_view s : kSetNames) replaced = replaced || name == s;
    if (!replaced) env.emplace_back(kv);
    nvls_set = nvls_set || name == "NCCL_NVLS_ENABLE";
  }
  const std::string r = std::to_string(rank), w = std::to_string(world);
  env.push_back("RANK=" + r);
  env.push_back("WORLD_SIZE=" + w);
  env.push_back("LOCAL_RANK=" + r);
  env.push_back("LOCAL_WORLD_SIZE=" + w);
  env.push_back("MLALPHA_DIST_ID_FILE=" + id_file);
  env.push_back(std::string(kLaunchedVar) + "=1");
  // NVLink multicast stays off unless chosen otherwise (why: disable_nvls_unless_set in nccl_gpu.cpp).
  if (!nvls_set) env.push_back("NCCL_NVLS_ENABLE=0");
  return env;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> p;
  for (std::string& s : strings) p.push_back(s.data());
  p.push_back(nullptr);
  return p;
}

// Forks one child and executes `exe` in it. Between fork and execve only async-signal-safe calls are made
// (the launcher may have threads); an exec failure comes back through a close-on-exec pipe as errno.
pid_t start_child(const std::string& exe, std::vector<char*>& argv, std::vector<char*>& envp, int log_fd, int rank) {
  int pipefd[2];
  require(::pipe2(pipefd, O_CLOEXEC) == 0, std::string("launch: pipe2 failed: ") + std::strerror(errno));
  Fd rd(pipefd[0]), wr(pipefd[1]);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  require(pid >= 0, "launch: fork for rank " + std::to_string(rank) + " failed: " + std::strerror(errno));
  if (pid == 0) {
    // Die with the launcher: a child left running would hold its GPU and hang its peers.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(127);  // the launcher died before prctl took effect
    if (log_fd >= 0 && (::dup2(log_fd, STDOUT_FILENO) < 0 || ::dup2(log_fd, STDERR_FILENO) < 0)) {
      const int e = errno;
      (void)!::write(wr.get(), &e, sizeof e);
      ::_exit(127);
    }
    ::execve(exe.c_str(), argv.data(), envp.data());
    const int e = errno;
    (void)!::write(wr.get(), &e, sizeof e);
    ::_exit(127);
  }
  wr.close();  // else the read below would never see end-of-file
  int child_errno = 0;
  ssize_t n;
  do n = ::read(rd.get(), &child_errno, sizeof child_errno);
  while (n < 0 && errno == EINTR);
  if (n == ssize_t(sizeof child_errno)) {
    ::waitpid(pid, nullptr, 0);
    throw Error("launch: rank " + std::to_string(rank) + " could not execute '" + exe + "': " +
                std::strerror(child_errno));
  }
  return pid;
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = ::strsignal(sig);
    return "was killed by signal " + std::to_string(sig) + (name ? std::string(" (") + name + ")" : "");
  }
  return "ended with wait status " + std::to_string(status);
}

bool failed(int status) { return !(WIFEXITED(status) && WEXITSTATUS(status) == 0); }

// The last `lines` lines of a log (from its last 4 KiB), for the error message.
std::string log_tail(const std::string& path, size_t lines) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  const std::streamoff from = size > 4096 ? size - 4096 : 0;
  in.seekg(from);
  std::string text(size_t(size - from), '\0');
  in.read(text.data(), std::streamsize(text.size()));
  while (!text.empty() && text.back() == '\n') text.pop_back();
  size_t start = text.size();
  for (size_t k = 0; k < lines && start != std::string::npos && start > 0; ++k) start = text.rfind('\n', start - 1);
  return start == std::string::npos ? text : text.substr(start + (start < text.size() && text[start] == '\n'));
}

}  // namespace

bool is_launched_rank(const EnvLookup& env) {
  const char* v = env(kLaunchedVar);
  return v != nullptr && std::string_view(v) == "1";
}

void launch_local(const LaunchOptions& o) {
  require(o.processes >= 1, "launch: the number of processes (--gpus) must be >= 1, got " + std::to_string(o.processes));
  require(!o.argv.empty(), "launch: the children's argv is empty (it needs at least argv[0])");
  require(o.grace.count() >= 0, "launch: the grace period must be >= 0 ms, got " + std::to_string(o.grace.count()));
  require(o.processes == 1 || fs::is_directory(o.log_dir),
          "launch: the log folder '" + o.log_dir + "' for ranks 1 and up does not exist (or is not a folder)");

  const TempDir tmp("mlalpha-launch-", "launch: the folder of the NCCL id file");
  const std::string id_file = (tmp.path() / "nccl-id").string();
  std::vector<std::string> args = o.argv;
  std::vector<char*> argv = pointers(args);

  Children children;
  for (int rank = 0; rank < o.processes; ++rank) {
    Child c;
    c.rank = rank;
    Fd log(-1);
    if (rank > 0) {
      c.log = (fs::path(o.log_dir) / ("rank" + std::to_string(rank) + ".log")).string();
      log = Fd(::open(c.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
      require(log.get() >= 0, "launch: cannot open rank " + std::to_string(rank) + "'s log '" + c.log +
                                  "': " + std::strerror(errno));
    }
    std::vector<std::string> env = child_env(rank, o.processes, id_file);
    std::vector<char*> envp = pointers(env);
    c.pid = start_child(o.exe, argv, envp, log.get(), rank);
    children.list.push_back(std::move(c));
  }

  // Poll rather than wait(-1): the caller may have children of its own, which are not ours to reap.
  const Child* first_failure = nullptr;
  Clock::time_point kill_at{};
  bool killed = false;
  for (size_t running = children.list.size(); running > 0;) {
    for (Child& c : children.list) {
      if (c.reaped) continue;
      const pid_t r = ::waitpid(c.pid, &c.status, WNOHANG);
      if (r == 0 || (r < 0 && errno == EINTR)) continue;
      if (r < 0) c.status = -1;  // reaped elsewhere (SIGCHLD ignored?): its fate is unknown
      c.reaped = true;
      --running;
      if (first_failure == nullptr && (r < 0 || failed(c.status))) {
        first_failure = &c;
        children.signal_running(SIGTERM);
        kill_at = Clock::now() + o.grace;
      }
    }
    if (first_failure != nullptr && !killed && running > 0 && Clock::now() >= kill_at) {
      children.signal_running(SIGKILL);
      killed = true;
    }
    if (running > 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (first_failure == nullptr) return;

  const Child& f = *first_failure;
  const std::string how =
      f.status == -1 ? std::string("ended, but its exit status could not be read") : describe_status(f.status);
  std::string msg = "launch: rank " + std::to_string(f.rank) + " of " + std::to_string(o.processes) + " " + how +
                    "; the other ranks were stopped";
  if (!f.log.empty()) {
    msg += ". Its output is in '" + f.log + "'";
    const std::string tail = log_tail(f.log, 10);
    if (!tail.empty()) msg += "; it ends:\n" + tail;
  }
  throw Error(msg);
}

}  // namespace mlalpha::dist
