#pragma once
// Lines read from a stream with a length cap (docs/data.md, "Line length"). std::getline grows its string until
// it meets a newline: a line of /dev/zero, or a feed that never sends one, takes memory without end. Every
// line reader of the tool reads through read_line, which stops at kMaxLineBytes with an error naming the
// input, the line and the cap.
#include <cstddef>
#include <cstdint>
#include <istream>
#include <string>

#include "core/error.h"

namespace mlalpha {

// 16 MiB: a million instruments' names on one line, or a row of a few hundred thousand features, fit; a
// runaway input stops after 16 MiB instead of filling the memory.
inline constexpr size_t kMaxLineBytes = size_t(16) << 20;

// "16 MiB (kMaxLineBytes)": the cap as the messages name it.
inline std::string max_line_text() { return std::to_string(kMaxLineBytes >> 20) + " MiB"; }

// How a line read by read_line ended.
enum class LineEnd { newline, end_of_input };

// The next line of `in` into `line` (without its '\n'; a '\r' before it is kept); false at the end of the input
// with nothing read. `ended` says whether the line ended with a newline or at the end of the input. A line over
// kMaxLineBytes is an Error "<name>:<lineno>: a line longer than 16 MiB (the line length cap) ...", and a read
// error (other than the end) is an Error naming the input.
inline bool read_line(std::istream& in, std::string& line, LineEnd& ended, const std::string& name, int64_t lineno) {
  line.clear();
  ended = LineEnd::end_of_input;
  if (!in.good()) return false;
  char buf[1 << 14];
  for (;;) {
    // istream::getline stores up to sizeof buf - 1 characters and takes the newline when it comes first.
    in.getline(buf, sizeof buf);
    const size_t n = size_t(in.gcount());
    if (in.bad()) throw Error(name + ":" + std::to_string(lineno) + ": cannot read the input");
    const bool newline = !in.fail() && !in.eof();
    line.append(buf, newline ? n - 1 : n);
    if (line.size() > kMaxLineBytes)
      throw Error(name + ":" + std::to_string(lineno) + ": a line longer than " + max_line_text() +
                  " (the line length cap): not a row of text; is this the right file?");
    if (newline) {
      ended = LineEnd::newline;
      return true;
    }
    if (in.eof()) return !line.empty();
    in.clear();  // the buffer was full: the line goes on
  }
}

}  // namespace mlalpha
