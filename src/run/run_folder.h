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
// holder's pid and host inside it for the message another run gets. Where the file system has no flock, a
// lock file naming a live process of this host, or any process of another host, refuses, and one naming a dead
// process of this host is stale and is taken over. Throws Error naming the holder when the folder is locked.
class RunLock {
 public:
  explicit RunLock(const std::filesystem::path& dir);
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
};
constexpr const char* kLockFile = "run.lock";

// The files of a run in `dir`, its fold-k and member-XX folders (fold-k/member-XX too) and its ensemble folder.
std::vector<std::filesystem::path> run_files(const std::filesystem::path& dir);
// Refuses an out_dir that already holds a run unless options say to overwrite or resume.
void check_run_folder(const std::filesystem::path& out, const RunOptions& options);
// --overwrite: removes the old run's files, then its fold-k, member-XX and ensemble folders left empty (a
// population of fewer members or a run of fewer folds leaves none of the old ones behind). Files ml-alpha did
// not write stay, and with them their folders.
void remove_old_run(const std::filesystem::path& out);

}  // namespace mlalpha
