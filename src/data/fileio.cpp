#include "data/fileio.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/atomic_file.h"
#include "core/error.h"

namespace mlalpha {
namespace {

std::string errno_text() { return std::strerror(errno); }

// Refuses what is not a regular file before opening it: a directory, and a device, FIFO or socket, which could
// block the open (a FIFO without a writer) or never end (/dev/urandom).
void require_regular(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) throw Error(path + ": no such file");
  if (fs::is_directory(st)) throw Error(path + ": is a directory, expected a file");
  if (!fs::is_regular_file(st))
    throw Error(path + ": is not a regular file (a device, FIFO or socket), expected a file of data");
}

}  // namespace

size_t regular_file_size(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  require_regular(path);
  const uintmax_t size = fs::file_size(path, ec);
  if (ec) throw Error(path + ": cannot read its size: " + ec.message());
  if (size == 0) throw Error(path + ": file is empty");
  return size_t(size);
}

std::string read_file_bytes(const std::string& path) {
  require_regular(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open for reading: " + errno_text());
  // Read to the end rather than trusting the size from stat (the file may grow while it is read).
  std::string bytes;
  char buf[1 << 16];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) bytes.append(buf, size_t(in.gcount()));
  if (in.bad()) throw Error(path + ": cannot read: " + errno_text());
  if (bytes.empty()) throw Error(path + ": file is empty");
  return bytes;
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
  write_file_atomic(path, std::initializer_list<std::string_view>{bytes});
}

void write_file_atomic(const std::string& path, std::initializer_list<std::string_view> parts) {
  try {
    AtomicFile f(path);
    for (const std::string_view part : parts) f.write(part.data(), part.size());
    f.commit();
  } catch (const AtomicFileError& e) {
    // This function's own wording: "<path>: <what failed>: <system error>".
    using Step = AtomicFileError::Step;
    std::string what;
    switch (e.step) {
      case Step::create: what = "cannot create a temporary file in '" + e.dir + "'"; break;
      case Step::write: what = "write failed"; break;
      case Step::fsync: what = "fsync failed"; break;
      case Step::close: what = "close failed"; break;
      case Step::rename: what = "rename from '" + e.temp_path + "' failed"; break;
    }
    throw Error(path + ": " + what + ": " + e.reason);
  }
}

std::optional<FileId> file_id(const std::string& path) {
  struct stat st {};
  if (path.empty() || ::stat(path.c_str(), &st) != 0) return std::nullopt;
  return FileId{uint64_t(st.st_dev), uint64_t(st.st_ino)};
}

std::optional<FileId> file_id(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return std::nullopt;
  return FileId{uint64_t(st.st_dev), uint64_t(st.st_ino)};
}

void ReadFiles::add(const std::string& what, const std::string& path) {
  if (const std::optional<FileId> id = file_id(path)) files_.emplace_back(what + " " + path, *id);
}

void ReadFiles::add(const std::string& what, int fd) {
  if (const std::optional<FileId> id = file_id(fd)) files_.emplace_back(what, *id);
}

std::optional<std::string> ReadFiles::which(const std::string& target) const {
  const std::optional<FileId> id = file_id(target);
  if (!id) return std::nullopt;
  for (const auto& [name, rid] : files_)
    if (rid == *id) return name;
  return std::nullopt;
}

AppendFile::AppendFile(const std::string& path, Start start) : path_(path) {
  const int flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (start == Start::empty ? O_TRUNC : 0);
  fd_ = ::open(path.c_str(), flags, 0644);
  if (fd_ < 0) throw Error(path_ + ": cannot be written: " + errno_text());
}

AppendFile::~AppendFile() {
  if (fd_ >= 0) ::close(fd_);
}

void AppendFile::write(std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd_, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error(path_ + ": write failed: " + (n < 0 ? errno_text() : std::string("no bytes written")));
    bytes.remove_prefix(size_t(n));
  }
}

void AppendFile::sync() {
  // EINVAL: a device or a pipe (/dev/null, a FIFO), which holds nothing to make durable.
  if (::fsync(fd_) != 0 && errno != EINVAL) throw Error(path_ + ": fsync failed: " + errno_text());
}

FileLock::FileLock(const std::string& path, const std::string& what) {
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    const int e = errno;
    throw Error(what + ": cannot open the lock file " + path + ": " + std::strerror(e) +
                (e == ELOOP ? " (it is a symbolic link; a lock file must be a plain file)" : ""));
  }
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    char buf[32] = {};
    const ssize_t n = ::pread(fd_, buf, sizeof buf - 1, 0);
    std::string pid(buf, n > 0 ? size_t(n) : 0);
    while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
    ::close(fd_);
    fd_ = -1;
    if (e == EWOULDBLOCK)
      throw Error(what + ": " + path + " is locked by " + (pid.empty() ? "another process" : "process " + pid) +
                  ", which is using it now: two processes on one file would overwrite each other's work (stop the "
                  "other one, or give another file)");
    throw Error(what + ": cannot lock " + path + ": " + std::strerror(e));
  }
  // The holder's id, for the message of a refused second locker (the lock holds without it).
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) == 0) (void)!::pwrite(fd_, pid.data(), pid.size(), 0);
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace mlalpha
