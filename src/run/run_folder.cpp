// The run folder: created folders, the lock, the refusal of a folder that holds a run, --overwrite (run_folder.h).
#include "run/run_folder.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <sstream>

#include "checkpoint/run_records.h"
#include "core/error.h"
#include "data/fileio.h"

namespace mlalpha {

namespace fs = std::filesystem;

// ---- created folders

void CreatedDirs::create(const fs::path& dir) {
  std::vector<fs::path> missing;
  for (fs::path p = dir; !p.empty() && !fs::exists(p); p = p.parent_path()) {
    missing.push_back(p);
    if (p == p.parent_path()) break;
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  require(!ec, dir.string() + ": cannot create the run folder: " + ec.message() + " (check run.out_dir)");
  created_.insert(created_.end(), missing.begin(), missing.end());  // deepest first
}

CreatedDirs::~CreatedDirs() {
  for (const fs::path& p : created_) {
    std::error_code ec;
    if (fs::is_directory(p, ec) && fs::is_empty(p, ec)) fs::remove(p, ec);
  }
}

// ---- the lock

namespace {

std::string host_name() {
  char buf[256] = {};
  return gethostname(buf, sizeof buf - 1) == 0 ? std::string(buf) : std::string("?");
}

struct Holder {
  long pid = 0;
  std::string host;
};

// "pid 123 on host h" of a lock file's text ("pid=123\nhost=h\n").
Holder read_holder(int fd) {
  Holder h;
  char buf[512] = {};
  const ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  std::istringstream in(std::string(buf, n > 0 ? size_t(n) : 0));
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("pid=", 0) == 0) h.pid = std::strtol(line.c_str() + 4, nullptr, 10);
    if (line.rfind("host=", 0) == 0) h.host = line.substr(5);
  }
  return h;
}

std::string holder_text(const Holder& h) {
  return h.pid > 0 ? "process " + std::to_string(h.pid) + " on host " + (h.host.empty() ? "?" : h.host)
                   : std::string("another process");
}

bool alive_here(const Holder& h) { return h.pid > 0 && (kill(pid_t(h.pid), 0) == 0 || errno == EPERM); }

}  // namespace

RunLock::RunLock(const fs::path& dir) : path_(dir / kLockFile) {
  const std::string where = "run folder '" + dir.string() + "'";
  const std::string me = host_name();
  for (int attempt = 0;; ++attempt) {
    const int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    require(fd >= 0, where + ": cannot create its lock file " + path_.string() + ": " + std::strerror(errno));
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      const Holder h = read_holder(fd);
      const bool no_flock = err == ENOLCK || err == EOPNOTSUPP || err == EINVAL;
      // Without flock: the holder named in the file decides (a dead process of this host: stale).
      if (!no_flock || h.pid <= 0 || h.host != me || alive_here(h)) {
        ::close(fd);
        throw Error(where + " is in use by " + holder_text(h) + " (" + path_.string() +
                    "): one run at a time writes a run folder; wait for it, or choose another run.out_dir" +
                    (no_flock ? " (this file system has no flock: if that process is gone, remove the lock file)"
                              : ""));
      }
    }
    // The lock is on the file we opened; it must still be the file at the path (a run that was ending may have
    // removed it between our open and our lock: then lock the new one).
    struct stat a {}, b {};
    if (fstat(fd, &a) != 0 || ::stat(path_.c_str(), &b) != 0 || a.st_ino != b.st_ino || a.st_dev != b.st_dev) {
      ::close(fd);
      require(attempt < 100, where + ": its lock file keeps changing (" + path_.string() + ")");
      continue;
    }
    const std::string text = "pid=" + std::to_string(long(getpid())) + "\nhost=" + me + "\n";
    if (ftruncate(fd, 0) != 0 || pwrite(fd, text.data(), text.size(), 0) != ssize_t(text.size())) {
      const std::string err = std::strerror(errno);
      ::close(fd);
      throw Error(where + ": cannot write its lock file " + path_.string() + ": " + err);
    }
    fd_ = fd;
    return;
  }
}

RunLock::~RunLock() {
  if (fd_ < 0) return;
  ::unlink(path_.c_str());  // before the unlock: a run waiting for this file then locks a new one
  ::close(fd_);
}

// ---- the files of a run

namespace {

const char* const kRunFiles[] = {"metrics.jsonl",    "curves.svg",     "best.json",       "best.safetensors",
                                 "last.safetensors", "folds.csv",      "folds.json",      "long_short.svg",
                                 "oos_pred.csv",     "oos_pred.npy",   "leaderboard.csv", "leaderboard.json",
                                 kRunFile,           kModelStateFile,  kLegacyPopulationFile, kLegacyMemberFile,
                                 kLegacyLastFile};
const char* const kEnsembleFiles[] = {"pred.csv", "pred.npy", "long_short.svg"};

bool starts_with(const fs::path& p, const char* prefix) { return p.filename().string().rfind(prefix, 0) == 0; }

// The run's folders below `dir`: fold-k, their and dir's member-XX, and the ensemble folders; deepest first.
std::vector<fs::path> run_subfolders(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  auto with_members = [&](const fs::path& d) {
    for (const auto& e : fs::directory_iterator(d, ec))
      if (e.is_directory() && starts_with(e.path(), "member-")) out.push_back(e.path());
    out.push_back(d / "ensemble");
  };
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_directory() && starts_with(e.path(), "fold-")) {
      with_members(e.path());
      out.push_back(e.path());
    }
  with_members(dir);
  return out;
}

}  // namespace

std::vector<fs::path> run_files(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  auto scan = [&](const fs::path& d) {
    for (const char* f : kRunFiles) {
      if (fs::exists(d / f, ec)) out.push_back(d / f);
      if (fs::exists(d / (std::string(f) + ".optim.safetensors"), ec)) out.push_back(d / (std::string(f) + ".optim.safetensors"));
    }
    for (const char* f : kEnsembleFiles)
      if (fs::exists(d / "ensemble" / f, ec)) out.push_back(d / "ensemble" / f);
  };
  scan(dir);
  for (const fs::path& d : run_subfolders(dir))
    if (d.filename() != "ensemble") scan(d);
  return out;
}

void check_run_folder(const fs::path& out, const RunOptions& options) {
  if (options.overwrite || !options.resume.empty()) return;
  const std::vector<fs::path> existing = run_files(out);
  if (existing.empty()) return;
  std::string list;
  for (size_t i = 0; i < existing.size() && i < 3; ++i) list += (i ? ", " : "") + existing[i].filename().string();
  throw Error("run.out_dir '" + out.string() + "' already holds a run (" + list + (existing.size() > 3 ? ", ..." : "") +
              "): replace it with --overwrite (Python: overwrite=True), continue it with --resume " + out.string() +
              ", or choose another run.out_dir");
}

void remove_old_run(const fs::path& out) {
  for (const fs::path& f : run_files(out)) {
    std::error_code ec;
    fs::remove(f, ec);
    require(!ec, f.string() + ": cannot remove the old run's file (--overwrite): " + ec.message());
  }
  for (const fs::path& d : run_subfolders(out)) {
    std::error_code ec;
    if (fs::is_directory(d, ec) && fs::is_empty(d, ec)) fs::remove(d, ec);
  }
}

}  // namespace mlalpha
