// Long-format CSV read one time step at a time (csv_stream.h).
#include "data/csv_stream.h"

#include <cmath>
#include <fstream>
#include <unordered_map>

#include "core/error.h"
#include "core/shortest.h"
#include "data/line_reader.h"

namespace mlalpha {

CsvStreamReader::CsvStreamReader(std::istream& in, CsvStreamSpec spec, std::string name)
    : in_(in), spec_(std::move(spec)), name_(std::move(name)) {
  require(!spec_.feature_columns.empty(), "stream: no feature columns (data.feature_columns)");
  require(!spec_.time_column.empty(), "data.time_column is empty: name the column that holds the times");
  std::vector<std::string> fields;
  do {
    if (!record(fields)) throw Error(name_ + ": no header row (the input is empty)");
  } while (fields.empty());
  if (!fields.empty() && fields[0].substr(0, 3) == "\xEF\xBB\xBF") fields[0].erase(0, 3);  // UTF-8 byte-order mark
  for (const std::string& f : fields) header_.names.emplace_back(trim(f));
  header_.line = raw_;
  header_.lineno = rec_line_;
  header_.delimiter = spec_.delimiter;
  header_.file = name_;
  time_col_ = find_csv_column(header_, spec_.time_column, "data.time_column");
  if (!spec_.instrument_column.empty()) inst_col_ = find_csv_column(header_, spec_.instrument_column, "data.instrument_column");
  for (const std::string& c : spec_.feature_columns) feature_cols_.push_back(find_csv_column(header_, c, "data.feature_columns"));
}

bool CsvStreamReader::line(std::string& text) {
  LineEnd ended;
  if (!read_line(in_, text, ended, name_, line_ + 1)) return false;
  if (ended == LineEnd::end_of_input && hold_partial_) {
    held_line_ = line_ + 1;
    return false;
  }
  ++line_;
  if (!text.empty() && text.back() == '\r') text.pop_back();
  return true;
}

bool CsvStreamReader::record(std::vector<std::string>& fields) {
  fields.clear();
  std::string text;
  if (!line(text)) return false;
  rec_line_ = line_;
  raw_ = text;
  // A quoted field holding a line break continues on the next line: an odd count of quotes so far. The record
  // is capped as a line is.
  while (std::count(raw_.begin(), raw_.end(), '"') % 2 == 1 && line(text)) {
    raw_ += "\n" + text;
    if (raw_.size() > kMaxLineBytes)
      throw Error(name_ + ":" + std::to_string(rec_line_) + ": a record longer than " + max_line_text() +
                  " (the line length cap; a quoted field is never closed?)");
  }
  if (held_line_ > 0 && std::count(raw_.begin(), raw_.end(), '"') % 2 == 1) {  // a quoted field cut short
    held_line_ = rec_line_;
    return false;
  }
  if (trim(raw_).empty()) return true;  // a blank line
  CsvRecords records(raw_, spec_.delimiter, name_, rec_line_);
  std::vector<std::string_view> cells;
  records.next(cells);
  for (const std::string_view c : cells) fields.emplace_back(c);
  return true;
}

bool CsvStreamReader::next(CsvStreamStep& step) {
  step.rows.clear();
  step.ended_by_input_end = false;
  std::unordered_map<std::string, int64_t> seen;  // instrument → its line in this step
  int64_t step_line = 0;
  auto add = [&](CsvStreamRow&& row) {
    const auto [it, fresh] = seen.emplace(row.instrument, row.line);
    if (!fresh)
      throw Error(name_ + ":" + std::to_string(row.line) + ": instrument '" + row.instrument + "' appears twice at time '" +
                  step.time + "' (first on line " + std::to_string(it->second) + ")");
    step.rows.push_back(std::move(row));
  };
  if (pending_) {
    step.time = pending_time_, step.time_value = pending_value_, step_line = pending_row_.line;
    add(std::move(pending_row_));
    pending_ = false;
  }
  std::vector<std::string> fields;
  for (;;) {
    const bool more = record(fields);
    if (!more || fields.empty()) {  // the end of the input, or a blank line: the step is complete
      if (!step.rows.empty()) {
        step.ended_by_input_end = !more;
        break;
      }
      if (!more) return false;
      continue;
    }
    const int64_t line = rec_line_;
    if (fields.size() != header_.names.size()) throw Error(csv_field_count_error(header_, line, raw_, fields.size()));
    auto where = [&](int col) { return name_ + ":" + std::to_string(line) + ": column '" + header_.names[size_t(col)] + "'"; };
    const std::string time(trim(fields[size_t(time_col_)]));
    if (time.empty()) throw Error(where(time_col_) + ": the time is empty");
    double value = 0;
    TimeKind kind;
    if (!parse_time_label(time, spec_.time_format, value, kind))
      throw Error(name_ + ":" + std::to_string(line) + ": time '" + time + "' " +
                  (spec_.time_format.empty() ? "is not a number or an ISO 8601 date" + time_format_hint(time)
                                             : "does not match data.time_format = \"" + spec_.time_format + "\""));
    if (!kind_set_) kind_ = kind, kind_set_ = true;
    if (kind != kind_)
      throw Error(name_ + ":" + std::to_string(line) + ": time '" + time + "' is " +
                  (kind == TimeKind::date ? "a date" : "a number") + ", but the earlier times are " +
                  (kind_ == TimeKind::date ? "dates" : "numbers") + "; times must be all numbers or all dates");
    CsvStreamRow row;
    row.line = line;
    row.instrument = inst_col_ >= 0 ? std::string(trim(fields[size_t(inst_col_)])) : "0";
    if (row.instrument.empty()) throw Error(where(inst_col_) + ": the instrument is empty");
    row.x.reserve(feature_cols_.size());
    for (int c : feature_cols_) row.x.push_back(csv_value(trim(fields[size_t(c)]), where(c)));
    if (skip_ && step.rows.empty() && value <= skip_value_) {  // already in the state: a restart resends it
      ++skipped_;
      continue;
    }
    skip_ = false;
    if (step.rows.empty()) {
      if (have_last_ && !(value > last_))
        throw Error(name_ + ":" + std::to_string(line) + ": time '" + time + "' is not after the last time step (" +
                    shortest_text(last_) + (kind_ == TimeKind::date ? " seconds since 1970" : "") +
                    "): times must increase, and a time step once complete is not reopened");
      step.time = time, step.time_value = value, step_line = line;
      add(std::move(row));
    } else if (value == step.time_value) {
      add(std::move(row));
    } else if (value > step.time_value) {  // the first row of the next step: this one is complete
      pending_ = true, pending_row_ = std::move(row), pending_time_ = time, pending_value_ = value;
      break;
    } else {
      throw Error(name_ + ":" + std::to_string(line) + ": time '" + time + "' is before the time step being read ('" +
                  step.time + "', line " + std::to_string(step_line) + "): rows must come in time order");
    }
  }
  last_ = step.time_value, have_last_ = true;
  return true;
}

namespace {

// The first cell of an output record (the stream writes it with csv_cell: quoted when it holds a comma, a quote
// or a line break).
std::string first_cell(const std::string& record) {
  if (record.empty() || record[0] != '"') return record.substr(0, record.find(','));
  std::string cell;
  for (size_t i = 1; i < record.size(); ++i) {
    if (record[i] != '"') {
      cell += record[i];
    } else if (i + 1 < record.size() && record[i + 1] == '"') {
      cell += '"', ++i;
    } else {
      break;
    }
  }
  return cell;
}

}  // namespace

StreamOutputTail scan_stream_output(const std::string& path, const std::string& header, const std::string& time_format,
                                    double committed) {
  std::ifstream in(path, std::ios::binary);
  require(bool(in), "--output " + path + ": cannot be read (a resumed stream appends to it)");
  StreamOutputTail tail;
  std::string line;
  LineEnd ended;
  int64_t lineno = 0;
  uint64_t at = 0;  // the offset of the next line
  auto next_line = [&]() {
    if (!read_line(in, line, ended, "--output " + path, lineno + 1)) return false;
    ++lineno;
    at += line.size() + (ended == LineEnd::newline ? 1 : 0);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return true;
  };
  if (!next_line()) return tail;  // empty: the header is written again
  if (ended == LineEnd::end_of_input && header.compare(0, line.size(), line) == 0) {
    tail.size = at;  // a header cut short: rewritten
    return tail;
  }
  require(line == header, "--output " + path + ": its first line is '" + line.substr(0, 200) + "', this stream writes '" +
                              header + "': it is not this stream's output (give another --output)");
  tail.keep = at;
  double after = NAN;  // the time of the rows after `committed`
  while (true) {
    const uint64_t begin = at;
    const int64_t first = lineno + 1;
    if (!next_line()) break;
    std::string record = line;
    while (std::count(record.begin(), record.end(), '"') % 2 == 1 && ended == LineEnd::newline && next_line())
      record += "\n" + line;
    if (ended == LineEnd::end_of_input) {  // a row cut short: dropped, and written again
      ++tail.rows_dropped;
      break;
    }
    const std::string time = first_cell(record);
    double value = 0;
    TimeKind kind;
    require(parse_time_label(time, time_format, value, kind),
            "--output " + path + ":" + std::to_string(first) + ": the time '" + time.substr(0, 100) +
                "' does not parse: it is not this stream's output (give another --output)");
    if (std::isnan(committed) || value <= committed) {  // a state without times cannot tell: every row kept
      require(std::isnan(after), "--output " + path + ":" + std::to_string(first) + ": time '" + time +
                                     "' comes after rows of a later time: it is not this stream's output");
      tail.keep = at;
      continue;
    }
    if (std::isnan(after)) {
      after = value, tail.time_dropped = time, tail.keep = begin;
    } else {
      require(value == after, "--output " + path + ":" + std::to_string(first) + ": rows of more than one time step ('" +
                                  tail.time_dropped + "', '" + time + "') after the state's last time " +
                                  (std::isnan(committed) ? std::string("(none)") : shortest_text(committed)) +
                                  "; a stream stopped before saving its state leaves at most one: this output was not "
                                  "written with this state (give another --output)");
    }
    ++tail.rows_dropped;
  }
  tail.size = at;
  return tail;
}

}  // namespace mlalpha
