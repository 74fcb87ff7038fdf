#pragma once
// A number as the user would write it, for messages and records: the shortest text that reads back to the same
// value (0.1 and 1e-09, not std::to_string's 0.100000 and 0.000000). Host-only (<charconv>).
#include <charconv>
#include <string>

namespace mlalpha {

template <typename Number>
std::string shortest_text(Number v) {
  char buf[40];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

}  // namespace mlalpha
