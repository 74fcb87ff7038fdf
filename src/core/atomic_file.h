#pragma once
// AtomicFile: write a file so that readers see either the old content or the complete new content,
// never a half-written file. Bytes go to a temporary file in the same directory (same file system, so
// the final rename is atomic); commit() flushes it to disk (fsync), renames it over the target and
// fsyncs the directory so the rename itself survives a power cut. Destroying an uncommitted AtomicFile
// (an exception on the way) removes the temporary file: nothing partial is left behind.
#include <cstddef>
#include <string>
#include <memory>
#include <utility>
#include <vector>

#include "core/error.h"

namespace mlalpha {

// A failed step of an atomic write: the temporary file is gone and the previous file, if any, is unchanged.
// what() is the whole message; the fields let a caller that words its errors its own way
// (write_file_atomic) say the same thing.
struct AtomicFileError : Error {
  enum class Step { create, write, fsync, close, rename };
  AtomicFileError(const std::string& message, Step step, std::string reason, std::string dir, std::string temp_path)
      : Error(message), step(step), reason(std::move(reason)), dir(std::move(dir)), temp_path(std::move(temp_path)) {}
  Step step;
  std::string reason;     // the system's text for the error number
  std::string dir;        // the target's directory ("." for a bare file name)
  std::string temp_path;  // the temporary file (for Step::create, the last name tried)
};

class AtomicFile {
 public:
  explicit AtomicFile(std::string path);  // creates "<path>.tmp-<random>"; throws naming the directory
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t bytes);  // throws naming the file and the system error
  void flush();                                // fsync + close, after which only commit() may follow
  void commit();                               // flush (if not yet), rename over the target, fsync the directory

  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_; }

 private:
  friend class AtomicFileSet;
  [[noreturn]] void fail(AtomicFileError::Step step, const std::string& what);

  std::string path_, temp_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace mlalpha

namespace mlalpha {

// Files that become current together (a checkpoint's weights, its optimizer state and its record; a population's
// members' checkpoints): one atomic step for all of them. Each is written as an AtomicFile in the journal's
// directory or below it (same file system); commit() flushes them all, then
// renames a journal "<journal>" listing "temporary name<TAB>target name" per file (written atomically: the
// moment the new set becomes current), then renames each temporary file over its target and removes the
// journal. A kill before the journal's rename leaves the previous set untouched (the temporary files are
// garbage); a kill after it leaves a journal that recover_file_sets() completes. Destroying an uncommitted set
// removes its temporary files.
class AtomicFileSet {
 public:
  explicit AtomicFileSet(std::string journal);  // e.g. "<model folder>/last.journal"
  AtomicFileSet(const AtomicFileSet&) = delete;
  AtomicFileSet& operator=(const AtomicFileSet&) = delete;
  // A new member file; it must be in the journal's directory or below it. Adding one flushes and closes the
  // previous one: write each file whole before adding the next.
  AtomicFile& add(const std::string& path);
  void commit();
  bool empty() const { return files_.empty(); }

 private:
  std::string relative(const std::string& path) const;
  std::string journal_;
  std::vector<std::unique_ptr<AtomicFile>> files_;
};

// At the start of a run, under its lock, in each of its folders: completes every "*.journal" a killed commit
// left (renaming the temporary files it names that are still there), removes the journal, then removes every
// "*.tmp-*" file no journal names (writes a killed process never committed). Returns the files it renamed or
// removed, for a message. Throws naming the file when a rename or removal fails.
std::vector<std::string> recover_file_sets(const std::string& dir);

}  // namespace mlalpha
