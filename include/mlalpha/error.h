#pragma once
// Errors: every failure becomes an mlalpha::Error whose message says where and what (file, line, the
// setting or the offending value and what was expected). No silent wrong results.
#include <stdexcept>
#include <string>

namespace mlalpha {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// require(cond, "train.batch must be >= 1, got 0"): config and shape validation.
inline void require(bool cond, const std::string& what) {
  if (!cond) throw Error(what);
}

}  // namespace mlalpha
