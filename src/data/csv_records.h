#pragma once
// The pieces of the CSV reader (csv.h) that the panel reader and the row-by-row reader of the stream
// (csv_stream.h) share: records split by RFC 4180, a cell read as a value, a column found in the header. The
// rules and the messages are csv.h's.
#include <algorithm>
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "data/line_reader.h"

namespace mlalpha {

inline std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Splits the text into records, one call per record. A field is a view into the text, or into scratch_
// when it was quoted and held "" (the one case where the cell's value differs from its bytes).
class CsvRecords {
 public:
  // `first_line`: the line number of the text's first line in its file (messages name lines of the file).
  CsvRecords(std::string_view text, char delim, const std::string& name, int64_t first_line = 1)
      : s_(text), delim_(delim), name_(name), line_(first_line), rec_line_(first_line) {}

  // Fills `fields` with the next record that is not a blank line; false at the end of the text.
  bool next(std::vector<std::string_view>& fields) {
    spans_.clear();
    scratch_.clear();
    while (i_ < s_.size() && (s_[i_] == '\n' || s_[i_] == '\r')) line_end();
    if (i_ >= s_.size()) return false;
    rec_line_ = line_;
    rec_begin_ = i_;
    for (;;) {
      if (i_ < s_.size() && s_[i_] == '"') {
        quoted_field();
      } else {
        const size_t begin = i_;
        while (i_ < s_.size() && s_[i_] != delim_ && s_[i_] != '\n' && s_[i_] != '\r') ++i_;
        spans_.push_back({false, begin, i_ - begin});
      }
      rec_end_ = i_;
      if (i_ >= s_.size()) break;
      if (s_[i_] == delim_) {
        ++i_;
        continue;
      }
      line_end();
      break;
    }
    if (rec_end_ - rec_begin_ > kMaxLineBytes)  // the readers' line cap holds for text in memory too
      throw Error(name_ + ":" + std::to_string(rec_line_) + ": a record longer than " + max_line_text() +
                  " (the line length cap): not a row of text; is this the right file?");
    fields.clear();
    for (const Span& sp : spans_)
      fields.push_back(sp.in_scratch ? std::string_view(scratch_).substr(sp.begin, sp.len) : s_.substr(sp.begin, sp.len));
    return true;
  }
  int64_t line() const { return rec_line_; }  // the line the last record started on (1-based)
  std::string_view raw() const { return s_.substr(rec_begin_, rec_end_ - rec_begin_); }  // its bytes, no line end

 private:
  struct Span {
    bool in_scratch;
    size_t begin, len;
  };

  // LF, CRLF or a lone CR each end one line.
  void line_end() {
    if (s_[i_] == '\r' && i_ + 1 < s_.size() && s_[i_ + 1] == '\n') ++i_;
    ++i_;
    ++line_;
  }

  void quoted_field() {
    const int64_t start_line = line_;
    size_t begin = ++i_, seg = begin, sbegin = 0;
    bool escaped = false;
    for (;;) {
      if (i_ >= s_.size())
        throw Error(name_ + ":" + std::to_string(start_line) + ": quoted field in column " +
                    std::to_string(spans_.size() + 1) + " is never closed (missing '\"')");
      const char c = s_[i_];
      if (c == '"') {
        if (i_ + 1 < s_.size() && s_[i_ + 1] == '"') {  // "" is one literal quote
          if (!escaped) {
            sbegin = scratch_.size();
            escaped = true;
          }
          scratch_.append(s_.substr(seg, i_ + 1 - seg));
          i_ += 2;
          seg = i_;
          continue;
        }
        break;
      }
      if (c == '\n' || (c == '\r' && !(i_ + 1 < s_.size() && s_[i_ + 1] == '\n'))) ++line_;
      ++i_;
    }
    if (escaped) {
      scratch_.append(s_.substr(seg, i_ - seg));
      spans_.push_back({true, sbegin, scratch_.size() - sbegin});
    } else {
      spans_.push_back({false, begin, i_ - begin});
    }
    ++i_;  // the closing quote
    if (i_ < s_.size() && s_[i_] != delim_ && s_[i_] != '\n' && s_[i_] != '\r')
      throw Error(name_ + ":" + std::to_string(line_) + ": unexpected character '" + std::string(1, s_[i_]) +
                  "' after the closing quote of column " + std::to_string(spans_.size()) +
                  " (a quoted field must end at a delimiter or the end of the line)");
  }

  std::string_view s_;
  char delim_;
  const std::string& name_;
  size_t i_ = 0;
  int64_t line_, rec_line_;
  size_t rec_begin_ = 0, rec_end_ = 0;
  std::vector<Span> spans_;
  std::string scratch_;
};

// pandas' default missing-value spellings (those that survive trimming), besides empty and nan in any case.
inline bool is_missing(std::string_view s) {
  static constexpr std::string_view kMissing[] = {"NA", "N/A", "n/a", "null", "NULL", "None", "<NA>", "#N/A", "-NaN",
                                                  "-nan"};
  if (s.empty()) return true;
  return std::find(std::begin(kMissing), std::end(kMissing), s) != std::end(kMissing);
}

// A cell as a value: a number (finite, within the float32 range) or a missing spelling (NaN); anything else, ±Inf
// and values beyond float32 are errors starting with `where` ("data.csv:17: column 'ret_5'").
float csv_value(std::string_view cell, const std::string& where);

// The header of a CSV file, for finding the columns the settings name.
struct CsvHeader {
  std::vector<std::string> names;  // trimmed
  std::string line;                // the header line as read (for the delimiter hint)
  int64_t lineno = 1;
  char delimiter = ',';
  std::string file;                // names the file in messages
};
// The index of column `col` in the header; `key` is the setting that names it ("data.time_column",
// "data.feature_columns"). A missing column is an error with the header, the likely delimiter or the nearest name;
// a name the header holds twice is ambiguous.
int find_csv_column(const CsvHeader& h, const std::string& col, const char* key);
// "data.csv:17: 5 fields, the header has 6" (with the likely delimiter when another one would split the line
// into the header's count).
std::string csv_field_count_error(const CsvHeader& h, int64_t line, std::string_view raw, size_t fields);

}  // namespace mlalpha
