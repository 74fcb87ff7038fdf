#include "data/fileio.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "core/error.h"

namespace mlalpha {
namespace {

std::string errno_text() { return std::strerror(errno); }

// Closes a POSIX descriptor on every exit path.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

size_t regular_file_size(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) throw Error(path + ": no such file");
  if (fs::is_directory(st)) throw Error(path + ": is a directory, expected a file");
  if (!fs::is_regular_file(st)) throw Error(path + ": is not a regular file");
  const uintmax_t size = fs::file_size(path, ec);
  if (ec) throw Error(path + ": cannot read its size: " + ec.message());
  if (size == 0) throw Error(path + ": file is empty");
  return size_t(size);
}

std::string read_file_bytes(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) throw Error(path + ": no such file");
  if (fs::is_directory(st)) throw Error(path + ": is a directory, expected a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open for reading: " + errno_text());
  // Read through the stream rather than trusting the size from stat (a FIFO or /proc file reports 0).
  std::string bytes;
  char buf[1 << 16];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) bytes.append(buf, size_t(in.gcount()));
  if (in.bad()) throw Error(path + ": cannot read: " + errno_text());
  if (bytes.empty()) throw Error(path + ": file is empty");
  return bytes;
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  // mkstemp picks a unique name in the target's directory, so the rename below never crosses filesystems.
  std::string leaf = ".";  // appended, not "." + ...: GCC 12 warns falsely (-Wrestrict) on that form
  leaf += target.filename().string();
  leaf += ".tmp-XXXXXX";
  std::string tmpl = (dir / leaf).string();
  std::vector<char> name(tmpl.begin(), tmpl.end());
  name.push_back('\0');
  Fd f;
  f.fd = ::mkstemp(name.data());
  if (f.fd < 0) throw Error(path + ": cannot create a temporary file in '" + dir.string() + "': " + errno_text());
  const std::string tmp(name.data());
  auto fail = [&](const std::string& what) {
    const std::string reason = errno_text();
    ::unlink(tmp.c_str());
    throw Error(path + ": " + what + ": " + reason);
  };
  ::fchmod(f.fd, 0644);  // mkstemp creates 0600; data files are meant to be shared like any other output
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(f.fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("write failed");
    done += size_t(n);
  }
  if (::fsync(f.fd) != 0) fail("fsync failed");
  if (::close(f.fd) != 0) {
    f.fd = -1;
    fail("close failed");
  }
  f.fd = -1;
  if (::rename(tmp.c_str(), path.c_str()) != 0) fail("rename from '" + tmp + "' failed");
  // Make the rename itself durable.
  Fd d;
  d.fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (d.fd >= 0) ::fsync(d.fd);
}

}  // namespace mlalpha
