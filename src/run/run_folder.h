#pragma once
// The run folder (DESIGN section 7, "Run folders"; docs/config.md, "The run folder"): a run writes only into its
// own folder, holds a lock on it for its whole life, and removes an older run's files (--overwrite) only after
// every check has passed.
#include <filesystem>
#include <string>
#include <vector>

#include "mlalpha/run.h"

namespace mlalpha {

// Creates folders and, when destroyed, removes those it created that are still empty: an error before
// anything was written leaves nothing behind.
class CreatedDirs {
 public:
  void create(const std::filesystem::path& dir);
  ~CreatedDirs();

 private:
  std::vector<std::filesystem::path> created_;
};

// The lock of a run folder, <dir>/run.lock, held from construction to destruction: an flock on the file (the
// kernel releases it when the process dies, so a lock left by a killed run is stale and is taken over) and the
// holder's pid, host and start time inside it for the message another run gets. Where the file system has no
// flock, a lock file naming a live process of this host (that pid, started then), or any process of another host,
// refuses, and one naming a dead process of this host is stale and is taken over. Throws Error naming the holder
// when the folder is locked, and when the lock file is a symbolic link (opened with O_NOFOLLOW: a link would have
// us write through it).
class RunLock {
 public:
  explicit RunLock(const std::filesystem::path& dir);
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;
  const std::filesystem::path& path() const { return path_; }
  // Before each save: throws unless the lock file at the path is still the file this run locked (not removed,
  // replaced or a link) and names this process. Another process that took the folder over (after the lock file
  // was removed) would otherwise have its files mixed with ours.
  void check() const;

 private:
  std::filesystem::path path_;
  int fd_ = -1;
};
constexpr const char* kLockFile = "run.lock";

// The files of a run in `dir`, its fold-k and member-XX folders (fold-k/member-XX too) and its ensemble folder.
std::vector<std::filesystem::path> run_files(const std::filesystem::path& dir);
// Completes the checkpoint commits a killed run left in `dir` and its run's folders (their journals) and removes
// the temporary files of writes it never committed (core/atomic_file.h, recover_file_sets). Under the lock.
// Returns the files it renamed or removed.
std::vector<std::string> recover_run_folder(const std::filesystem::path& dir);
// Refuses an out_dir that already holds a run unless options say to overwrite or resume.
void check_run_folder(const std::filesystem::path& out, const RunOptions& options);

// --overwrite, all or nothing. The constructor checks that every file of the old run can be moved (a regular
// file in a folder this process may write), then moves each into the hidden folder <out>/.old-<random>/ (same
// file system: a rename each), listed in its ".manifest". keep_new() — the new run has finished or saved its
// checkpoints — deletes them and the fold-k, member-XX and ensemble folders left empty (files ml-alpha did not
// write stay, and with them their folders); destroying it without keep_new() (an error, an exception) removes
// the new run's files and moves the old ones back. A kill in between leaves the aside folder, which
// settle_old_runs() finishes at the next start (its name says the phase: .moving- while files are moved aside,
// .old- once all are, .restore- and .delete- while it is settled). Throws Error naming the file that cannot be moved.
class OldRunAside {
 public:
  explicit OldRunAside(const std::filesystem::path& out);
  ~OldRunAside();
  OldRunAside(const OldRunAside&) = delete;
  OldRunAside& operator=(const OldRunAside&) = delete;
  void keep_new();

 private:
  std::filesystem::path out_, aside_;  // aside_ empty: nothing was moved (or it is settled)
};
// At a start, under the lock, after recover_run_folder: an aside folder a kill left is deleted when the new run
// in `out` has a complete checkpoint (a model's state.json), and moved back otherwise; a restore or a deletion a
// kill interrupted is finished; one a kill left while moving the old run aside is moved back.
void settle_old_runs(const std::filesystem::path& out);

}  // namespace mlalpha
