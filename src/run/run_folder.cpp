// The run folder: created folders, the lock, the refusal of a folder that holds a run, --overwrite (run_folder.h).
#include "run/run_folder.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <random>
#include <csignal>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

#include "checkpoint/run_records.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/fault.h"
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
  std::string start;  // the process's start time (/proc/<pid>/stat): a pid reused later is another process
};

// Field 22 of /proc/<pid>/stat, the start time in clock ticks since boot; empty when unknown.
std::string start_time(long pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(f)), {});
  const size_t paren = text.rfind(')');  // the command name may hold spaces and parentheses
  if (paren == std::string::npos) return "";
  std::istringstream rest(text.substr(paren + 1));
  std::string field;
  for (int i = 3; i <= 22 && rest >> field; ++i)
    if (i == 22) return field;
  return "";
}

// "pid 123 on host h" of a lock file's text ("pid=123\nhost=h\nstart=456\n").
Holder read_holder(int fd) {
  Holder h;
  char buf[512] = {};
  const ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  std::istringstream in(std::string(buf, n > 0 ? size_t(n) : 0));
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("pid=", 0) == 0) h.pid = std::strtol(line.c_str() + 4, nullptr, 10);
    if (line.rfind("host=", 0) == 0) h.host = line.substr(5);
    if (line.rfind("start=", 0) == 0) h.start = line.substr(6);
  }
  return h;
}

std::string holder_text(const Holder& h) {
  return h.pid > 0 ? "process " + std::to_string(h.pid) + " on host " + (h.host.empty() ? "?" : h.host)
                   : std::string("another process");
}

// The holder is a live process of this host: its pid exists and, when the lock recorded it, started when the
// holder did (not a later process that got the same pid).
bool alive_here(const Holder& h) {
  if (h.pid <= 0 || (kill(pid_t(h.pid), 0) != 0 && errno != EPERM)) return false;
  return h.start.empty() || h.start == start_time(h.pid);
}

}  // namespace

RunLock::RunLock(const fs::path& dir) : path_(dir / kLockFile) {
  const std::string where = "run folder '" + dir.string() + "'";
  const std::string me = host_name();
  for (int attempt = 0;; ++attempt) {
    const int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    require(fd >= 0 || errno != ELOOP, where + ": its lock file " + path_.string() +
                                           " is a symbolic link; ml-alpha does not write through it (remove the link)");
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
    const std::string text =
        "pid=" + std::to_string(long(getpid())) + "\nhost=" + me + "\nstart=" + start_time(long(getpid())) + "\n";
    if (ftruncate(fd, 0) != 0 || pwrite(fd, text.data(), text.size(), 0) != ssize_t(text.size())) {
      const std::string err = std::strerror(errno);
      ::close(fd);
      throw Error(where + ": cannot write its lock file " + path_.string() + ": " + err);
    }
    fd_ = fd;
    return;
  }
}

void RunLock::check() const {
  struct stat mine {}, now {};
  const bool same = fstat(fd_, &mine) == 0 && ::lstat(path_.c_str(), &now) == 0 && S_ISREG(now.st_mode) &&
                    mine.st_ino == now.st_ino && mine.st_dev == now.st_dev;
  const Holder h = read_holder(fd_);
  require(same && h.pid == long(getpid()) && h.start == start_time(long(getpid())),
          "run folder '" + path_.parent_path().string() + "': its lock file " + path_.string() +
              (same ? " was rewritten and names " + holder_text(h) : std::string(" was removed or replaced")) +
              " while this run (process " + std::to_string(long(getpid())) +
              ") held it; stopping without writing, so another run's files are not mixed with this one's");
}

RunLock::~RunLock() {
  if (fd_ < 0) return;
  // Before the unlock: a run waiting for this file then locks a new one. Only our own file: one put in its place
  // by another process is that process's.
  struct stat mine {}, now {};
  if (fstat(fd_, &mine) == 0 && ::lstat(path_.c_str(), &now) == 0 && mine.st_ino == now.st_ino &&
      mine.st_dev == now.st_dev)
    ::unlink(path_.c_str());
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

std::vector<std::string> recover_run_folder(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return {};
  std::vector<std::string> done = recover_file_sets(dir.string());
  for (const fs::path& d : run_subfolders(dir)) {
    const std::vector<std::string> more = recover_file_sets(d.string());
    done.insert(done.end(), more.begin(), more.end());
  }
  return done;
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

// ---- --overwrite

namespace {

constexpr const char* kManifest = ".manifest";

void rename_durably(const fs::path& from, const fs::path& to, const std::string& why) {
  fault_point(("rename " + to.string()).c_str());
  if (::rename(from.c_str(), to.c_str()) != 0)
    throw Error("--overwrite: cannot " + why + ": renaming '" + from.string() + "' to '" + to.string() +
                "' failed: " + std::strerror(errno));
}

void remove_durably(const fs::path& p, const std::string& why) {
  fault_point(("remove " + p.string()).c_str());
  std::error_code ec;
  fs::remove_all(p, ec);
  require(!ec, "--overwrite: cannot " + why + ": removing '" + p.string() + "' failed: " + ec.message());
}

std::vector<std::string> read_manifest(const fs::path& aside) {
  std::vector<std::string> out;
  std::istringstream in(read_file_bytes((aside / kManifest).string()));
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(line);
  return out;
}

// The in-place files of the new run go, then each old file not yet back is renamed back. Idempotent: the
// manifest never changes, so a kill in the middle is finished by running it again.
void restore(const fs::path& out, const fs::path& aside) {
  std::error_code ec;
  if (!fs::exists(aside / kManifest, ec)) {  // a kill before the manifest: nothing was moved yet
    remove_durably(aside, "remove the unused aside folder");
    return;
  }
  const std::vector<std::string> old = read_manifest(aside);
  for (const fs::path& f : run_files(out)) {
    const std::string rel = f.lexically_relative(out).string();
    if (std::find(old.begin(), old.end(), rel) == old.end()) remove_durably(f, "remove the failed new run's file");
  }
  for (const std::string& rel : old)
    if (fs::exists(aside / rel, ec) || fs::is_symlink(aside / rel, ec)) {
      fs::create_directories((out / rel).parent_path(), ec);
      rename_durably(aside / rel, out / rel, "move the old run's file back");
    }
  remove_durably(aside, "remove the emptied aside folder");
}

void delete_aside(const fs::path& out, const fs::path& aside) {
  remove_durably(aside, "delete the old run's files");
  for (const fs::path& d : run_subfolders(out)) {
    std::error_code ec;
    if (fs::is_directory(d, ec) && fs::is_empty(d, ec)) fs::remove(d, ec);
  }
}

// The phase is in the aside folder's name, so a kill between phases is finished the same way.
fs::path renamed_to(const fs::path& aside, const char* phase) {
  const std::string name = aside.filename().string();
  return aside.parent_path() / (std::string(phase) + name.substr(name.find('-') + 1));
}

bool has_new_checkpoint(const fs::path& out) {
  std::error_code ec;
  if (fs::exists(out / kModelStateFile, ec)) return true;
  for (const fs::path& d : run_subfolders(out))
    if (fs::exists(d / kModelStateFile, ec)) return true;
  return false;
}

}  // namespace

OldRunAside::OldRunAside(const fs::path& out) : out_(out) {
  const std::vector<fs::path> files = run_files(out);
  if (files.empty()) return;
  // Every check before the first move: nothing moves unless everything can.
  for (const fs::path& f : files) {
    std::error_code ec;
    const fs::file_status st = fs::symlink_status(f, ec);
    require(fs::is_regular_file(st),
            "--overwrite: '" + f.string() + "' is " + (fs::is_directory(st) ? "a folder" : "not a regular file") +
                ", not a file of a run: ml-alpha writes a file there, so move it away first (nothing was changed)");
    const fs::path parent = f.parent_path();
    require(::access(parent.c_str(), W_OK | X_OK) == 0,
            "--overwrite: cannot move the old run's file '" + f.string() + "' aside: its folder '" + parent.string() +
                "' is not writable (" + std::strerror(errno) + "); nothing was changed");
  }
  std::random_device rd;
  char id[24];
  std::snprintf(id, sizeof id, "%08x%08x", unsigned(rd()), unsigned(rd()));
  const fs::path aside = out / (std::string(".moving-") + id);
  std::error_code ec;
  fs::create_directory(aside, ec);
  require(!ec, "--overwrite: cannot create the folder '" + aside.string() + "' for the old run's files: " +
                   ec.message() + " (nothing was changed)");
  std::string manifest;
  for (const fs::path& f : files) manifest += f.lexically_relative(out).string() + "\n";
  try {
    write_file_atomic((aside / kManifest).string(), manifest);
  } catch (...) {
    fs::remove_all(aside, ec);
    throw;
  }
  try {
    for (const fs::path& f : files) {
      const fs::path to = aside / f.lexically_relative(out);
      fs::create_directories(to.parent_path(), ec);
      rename_durably(f, to, "move the old run's file aside");
    }
  } catch (...) {
    try {
      restore(out, aside);
    } catch (...) {
      // The folder stays as .moving-: the next start moves the files back (settle_old_runs).
    }
    throw;
  }
  // Every old file is aside: from here a kill leaves a decision for the next start (settle_old_runs).
  aside_ = renamed_to(aside, ".old-");
  rename_durably(aside, aside_, "finish moving the old run aside");
}

OldRunAside::~OldRunAside() {
  if (aside_.empty()) return;
  try {
    const fs::path restoring = renamed_to(aside_, ".restore-");
    rename_durably(aside_, restoring, "start restoring the old run");
    restore(out_, restoring);
  } catch (...) {
    // The aside folder stays; the next start in this folder finishes the restore (settle_old_runs).
  }
}

void OldRunAside::keep_new() {
  if (aside_.empty()) return;
  const fs::path deleting = renamed_to(aside_, ".delete-");
  rename_durably(aside_, deleting, "delete the old run");
  aside_.clear();
  delete_aside(out_, deleting);
}

void settle_old_runs(const fs::path& out) {
  std::error_code ec;
  if (!fs::is_directory(out, ec)) return;
  std::vector<fs::path> asides;
  for (const auto& e : fs::directory_iterator(out, ec))
    if (e.is_directory() && (starts_with(e.path(), ".old-") || starts_with(e.path(), ".restore-") ||
                             starts_with(e.path(), ".delete-") || starts_with(e.path(), ".moving-")))
      asides.push_back(e.path());
  for (const fs::path& a : asides) {
    if (starts_with(a, ".delete-")) {
      delete_aside(out, a);
    } else if (starts_with(a, ".restore-") || starts_with(a, ".moving-")) {
      restore(out, a);  // .moving-: a kill while the old run was moved aside; the new run had not started
    } else if (has_new_checkpoint(out)) {
      const fs::path deleting = renamed_to(a, ".delete-");
      rename_durably(a, deleting, "delete the old run");
      delete_aside(out, deleting);
    } else {
      const fs::path restoring = renamed_to(a, ".restore-");
      rename_durably(a, restoring, "start restoring the old run");
      restore(out, restoring);
    }
  }
}

}  // namespace mlalpha
