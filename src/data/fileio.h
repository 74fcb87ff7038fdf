#pragma once
// Whole-file reads with clear errors, and atomic writes (core/atomic_file.h: temporary file in the same
// directory, fsync, rename): a reader never sees a half-written file and a failed write leaves the old file
// untouched.
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mlalpha {

// The bytes of a regular, non-empty file. Errors: "<path>: no such file", "<path>: is a directory, expected
// a file", "<path>: is not a regular file (a device, FIFO or socket) ..." (checked before opening: a FIFO
// would block, /dev/urandom never end), "<path>: file is empty", "<path>: cannot read: <reason>".
std::string read_file_bytes(const std::string& path);

// The size of a regular, non-empty file, with the same errors as read_file_bytes.
size_t regular_file_size(const std::string& path);

// Writes `bytes` to `path` atomically (an AtomicFile written and committed). On failure the temporary file is
// removed and `path` is unchanged; the error names the path, the step that failed and the system's reason.
void write_file_atomic(const std::string& path, std::string_view bytes);
// The same for bytes in several pieces, written in order (a header and a large array, without joining them).
void write_file_atomic(const std::string& path, std::initializer_list<std::string_view> parts);

// A file's identity: its device and inode, through symbolic links (two paths, or a path and a hard link of it,
// name the same file exactly when their FileIds are equal).
struct FileId {
  uint64_t dev = 0, ino = 0;
  bool operator==(const FileId&) const = default;
};
// The identity of the file at `path`; nullopt when there is none (or it cannot be examined).
std::optional<FileId> file_id(const std::string& path);

// The identity of an open descriptor's file (standard input or output); nullopt when it cannot be examined.
std::optional<FileId> file_id(int fd);

// The files a command reads, by identity, so that an output naming one of them (through any link) is refused
// before anything is written.
class ReadFiles {
 public:
  void add(const std::string& what, const std::string& path);  // kept as "<what> <path>"; nothing if no such file
  void add(const std::string& what, int fd);                   // an open descriptor (standard input), as "<what>"
  // "<what> <path>" of the read file that `target` is; nullopt when it is none of them (or does not exist).
  std::optional<std::string> which(const std::string& target) const;

 private:
  std::vector<std::pair<std::string, FileId>> files_;
};

// A file written at its end, a piece at a time, each piece whole (write(2) until done) and made durable on
// sync() (fsync; a device or pipe has nothing to sync): the output of a stream, whose rows must be on disk before the state that counts them. Errors
// name the path and the system's reason. Move-only; the descriptor closes with the object.
class AppendFile {
 public:
  enum class Start { empty, at_end };  // truncate the file (creating it), or keep its bytes and append
  AppendFile(const std::string& path, Start start);
  AppendFile(AppendFile&& o) noexcept : path_(std::move(o.path_)), fd_(o.fd_) { o.fd_ = -1; }
  AppendFile& operator=(AppendFile&&) = delete;
  AppendFile(const AppendFile&) = delete;
  ~AppendFile();
  void write(std::string_view bytes);
  void sync();

 private:
  std::string path_;
  int fd_ = -1;
};

// An exclusive advisory lock (flock) on the file `path`, held for the object's life and released by the system
// when the process ends, however it ends. The file is created when missing, opened without following a
// symbolic link (a link there is refused, not written through), and holds the holder's process id, which the
// refusal of a second locker names: "<what>: <path> is locked by process 1234 ...". Move-only.
class FileLock {
 public:
  FileLock(const std::string& path, const std::string& what);
  FileLock(FileLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  FileLock& operator=(FileLock&&) = delete;
  FileLock(const FileLock&) = delete;
  ~FileLock();

 private:
  int fd_ = -1;
};

}  // namespace mlalpha
