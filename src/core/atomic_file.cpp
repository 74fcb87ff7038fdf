#include "core/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
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

namespace mlalpha {
namespace {

std::string read_whole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  require(bool(in), "cannot read the journal '" + path + "': " + errno_text(errno));
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void fsync_dir(const std::string& dir) {
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

// rename(2) with a fault point; throws naming both files.
void rename_or_throw(const std::string& from, const std::string& to, const std::string& why) {
  fault_point(("rename " + to).c_str());
  if (::rename(from.c_str(), to.c_str()) != 0)
    throw Error("cannot " + why + ": renaming '" + from + "' to '" + to + "' failed: " + errno_text(errno));
}

void unlink_or_throw(const std::string& path, const std::string& why) {
  fault_point(("remove " + path).c_str());
  if (::unlink(path.c_str()) != 0 && errno != ENOENT)
    throw Error("cannot " + why + ": removing '" + path + "' failed: " + errno_text(errno));
}

}  // namespace

AtomicFileSet::AtomicFileSet(std::string journal) : journal_(std::move(journal)) {}

// `path` relative to the journal's directory (the journal names its files so).
std::string AtomicFileSet::relative(const std::string& path) const {
  const std::string rel = std::filesystem::path(path).lexically_relative(parent_dir(journal_)).string();
  require(!rel.empty() && rel.rfind("..", 0) != 0 && rel.find('\n') == std::string::npos &&
              rel.find('\t') == std::string::npos,
          "AtomicFileSet: '" + path + "' is not below the directory of its journal '" + journal_ + "'");
  return rel;
}

AtomicFile& AtomicFileSet::add(const std::string& path) {
  relative(path);
  // The files are written one after another: the previous one is complete, so it is flushed and closed now (a
  // population's set holds thousands of files, more than a process may keep open).
  if (!files_.empty()) files_.back()->flush();
  files_.push_back(std::make_unique<AtomicFile>(path));
  return *files_.back();
}

void AtomicFileSet::commit() {
  std::string text;
  for (const auto& f : files_) {
    f->flush();
    text += relative(f->temp_path()) + "\t" + relative(f->path()) + "\n";
  }
  AtomicFile journal(journal_);
  journal.write(text.data(), text.size());
  journal.commit();  // from here on the new set is current: a kill is completed by recover_file_sets
  for (const auto& f : files_) f->committed_ = true;  // the temporary files belong to the journal now
  for (const auto& f : files_)
    rename_or_throw(f->temp_path(), f->path(), "make '" + f->path() + "' current (the journal '" + journal_ +
                                                   "' completes it at the next start)");
  for (const auto& f : files_) fsync_dir(parent_dir(f->path()));
  unlink_or_throw(journal_, "finish the commit of '" + journal_ + "'");
}

std::vector<std::string> recover_file_sets(const std::string& dir) {
  namespace fs = std::filesystem;
  std::vector<std::string> done;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return done;
  std::vector<fs::path> journals, temps;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.find(".tmp-") != std::string::npos) temps.push_back(e.path());
    else if (name.size() > 8 && name.compare(name.size() - 8, 8, ".journal") == 0) journals.push_back(e.path());
  }
  require(!ec, "cannot list the run folder '" + dir + "': " + ec.message());
  for (const fs::path& j : journals) {
    const std::string text = read_whole(j.string());
    std::vector<std::string> synced{dir};
    for (size_t at = 0; at < text.size();) {
      const size_t nl = text.find('\n', at), tab = text.find('\t', at);
      require(nl != std::string::npos && tab < nl, "the journal '" + j.string() + "' is not a list of "
                                                   "'temporary<TAB>target' lines (edited?); remove it to keep "
                                                   "the files as they are");
      const fs::path from = j.parent_path() / text.substr(at, tab - at),
                     to = j.parent_path() / text.substr(tab + 1, nl - tab - 1);
      at = nl + 1;
      if (!fs::exists(from, ec)) continue;  // renamed before the kill
      rename_or_throw(from.string(), to.string(), "complete the commit of '" + j.string() + "'");
      synced.push_back(to.parent_path().string());
      done.push_back(to.string());
    }
    for (const std::string& d : synced) fsync_dir(d);
    unlink_or_throw(j.string(), "finish the commit of '" + j.string() + "'");
    done.push_back(j.string());
  }
  for (const fs::path& t : temps) {
    if (!fs::exists(t, ec)) continue;  // a journal's, renamed above
    unlink_or_throw(t.string(), "remove a temporary file a killed write left");
    done.push_back(t.string());
  }
  return done;
}

}  // namespace mlalpha
