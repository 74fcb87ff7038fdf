#include "core/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <random>
#include <system_error>

#include "core/fault.h"

namespace mlalpha {
namespace {

std::string errno_text(int err) { return std::system_category().message(err); }

std::string parent_dir(const std::string& path) {
  const std::filesystem::path p = std::filesystem::path(path).parent_path();
  return p.empty() ? std::string(".") : p.string();
}

}  // namespace

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  require(!path_.empty(), "AtomicFile: empty output path");
  // O_EXCL with a random suffix instead of mkstemp: the file gets the usual 0666 & ~umask permissions
  // (mkstemp's 0600 would make every checkpoint private to its writer).
  std::random_device rd;
  for (int attempt = 0; attempt < 16; ++attempt) {
    char suffix[32];
    std::snprintf(suffix, sizeof suffix, ".tmp-%08x%08x", unsigned(rd()), unsigned(rd()));
    temp_ = path_ + suffix;
    fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ >= 0) return;
    if (errno != EEXIST) break;
  }
  const int err = errno;
  const std::string tried = temp_, dir = parent_dir(path_);
  temp_.clear();
  throw AtomicFileError("cannot write '" + path_ + "': creating the temporary file '" + tried + "' in directory '" +
                            dir + "' failed: " + errno_text(err),
                        AtomicFileError::Step::create, errno_text(err), dir, tried);
}

AtomicFile::~AtomicFile() {
  if (committed_) return;
  if (fd_ >= 0) ::close(fd_);
  if (!temp_.empty()) ::unlink(temp_.c_str());
}

void AtomicFile::fail(AtomicFileError::Step step, const std::string& what) {
  const int err = errno;
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!temp_.empty()) ::unlink(temp_.c_str());
  const std::string temp = temp_;
  temp_.clear();
  throw AtomicFileError("cannot write '" + path_ + "': " + what + ": " + errno_text(err) +
                            " (the previous file, if any, is unchanged)",
                        step, errno_text(err), parent_dir(path_), temp);
}

void AtomicFile::write(const void* data, size_t bytes) {
  require(fd_ >= 0 && !committed_, "AtomicFile::write on '" + path_ + "' after it was flushed or failed");
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd_, p, bytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(AtomicFileError::Step::write, "writing the temporary file failed");
    }
    p += n;
    bytes -= size_t(n);
  }
}

void AtomicFile::flush() {
  if (fd_ < 0) return;
  if (::fsync(fd_) != 0) fail(AtomicFileError::Step::fsync, "fsync of the temporary file failed");
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail(AtomicFileError::Step::close, "closing the temporary file failed");
}

void AtomicFile::commit() {
  require(!committed_ && !temp_.empty(), "AtomicFile::commit on '" + path_ + "' twice or after a failure");
  flush();
  fault_point(("rename " + path_).c_str());
  if (::rename(temp_.c_str(), path_.c_str()) != 0)
    fail(AtomicFileError::Step::rename, "renaming the temporary file over it failed");
  committed_ = true;
  // Make the rename durable. A failure here is not an error of the write: the file is complete and in
  // place; only its survival of a power cut in the next moments is less certain.
  const int dfd = ::open(parent_dir(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace mlalpha
