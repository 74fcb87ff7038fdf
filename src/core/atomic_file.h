#pragma once
// AtomicFile: write a file so that readers see either the old content or the complete new content,
// never a half-written file. Bytes go to a temporary file in the same directory (same file system, so
// the final rename is atomic); commit() flushes it to disk (fsync), renames it over the target and
// fsyncs the directory so the rename itself survives a power cut. Destroying an uncommitted AtomicFile
// (an exception on the way) removes the temporary file: nothing partial is left behind.
#include <cstddef>
#include <string>
#include <utility>

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
  [[noreturn]] void fail(AtomicFileError::Step step, const std::string& what);

  std::string path_, temp_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace mlalpha
