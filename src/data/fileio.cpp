#include "data/fileio.h"

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

}  // namespace mlalpha
