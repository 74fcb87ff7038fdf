#pragma once
// Private folders under the system's temporary directory (mkdtemp: created empty, mode 0700, a fresh name).
#include <filesystem>
#include <string>

namespace mlalpha {

// A new folder named `prefix` + six random characters, kept; throws Error naming the template, what it is
// `for` and the system's reason when it cannot be created.
std::filesystem::path make_temp_dir(const std::string& prefix, const std::string& what);

// make_temp_dir's folder, removed with its contents when the owner goes (best effort: a leftover folder in
// the temporary directory harms nothing); not copyable.
class TempDir {
 public:
  TempDir(const std::string& prefix, const std::string& what) : path_(make_temp_dir(prefix, what)) {}
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace mlalpha
