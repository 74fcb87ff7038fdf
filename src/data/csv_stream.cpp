// Long-format CSV read one time step at a time (csv_stream.h).
#include "data/csv_stream.h"

#include <unordered_map>

#include "core/error.h"
#include "core/shortest.h"

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

bool CsvStreamReader::record(std::vector<std::string>& fields) {
  fields.clear();
  std::string line;
  if (!std::getline(in_, line)) return false;
  rec_line_ = ++line_;
  if (!line.empty() && line.back() == '\r') line.pop_back();
  raw_ = line;
  // A quoted field holding a line break continues on the next line: an odd count of quotes so far.
  while (std::count(raw_.begin(), raw_.end(), '"') % 2 == 1 && std::getline(in_, line)) {
    ++line_;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    raw_ += "\n" + line;
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
    if (!record(fields) || fields.empty()) {  // the end of the input, or a blank line: the step is complete
      if (!step.rows.empty()) break;
      if (in_.eof() || in_.fail()) return false;
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

}  // namespace mlalpha
