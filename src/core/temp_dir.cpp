#include "core/temp_dir.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace mlalpha {

std::filesystem::path make_temp_dir(const std::string& prefix, const std::string& what) {
  std::string templ = (std::filesystem::temp_directory_path() / (prefix + "XXXXXX")).string();
  require(::mkdtemp(templ.data()) != nullptr,
          what + ": cannot create a temporary folder like '" + templ + "': " + std::strerror(errno));
  return templ;
}

}  // namespace mlalpha
