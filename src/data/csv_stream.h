#pragma once
// Long-format CSV read as it arrives, one time step at a time (`ml-alpha stream`): the rows of one time go
// together and the step is complete when a row of a later time arrives, a blank line is read, or the input ends.
// The column, cell, quoting and delimiter rules and their messages are the panel reader's (csv.h); the times are
// parsed as there (time_axis.h: numbers, ISO 8601 with offsets to UTC, or data.time_format), all of one kind, and
// two spellings of one instant are one step. Refused, naming the line: a row of an earlier time than the step
// being read (times going backwards; a time step already complete is not reopened), an instrument twice in one
// step, a wrong field count, a cell that is not a number or a missing value, ±Inf. Target columns are not read.
#include <cstdint>
#include <istream>
#include <string>
#include <vector>

#include "data/csv_records.h"
#include "data/time_axis.h"

namespace mlalpha {

struct CsvStreamSpec {
  std::string time_column = "time";
  std::string instrument_column = "instrument";
  std::vector<std::string> feature_columns;  // F >= 1, in the model's order
  char delimiter = ',';
  std::string time_format;  // data.time_format
};

struct CsvStreamRow {
  std::string instrument;
  std::vector<float> x;  // (F), NaN for missing cells
  int64_t line = 0;
};

struct CsvStreamStep {
  std::string time;          // as spelled in its first row
  double time_value = 0;     // parsed (seconds since the epoch for dates)
  std::vector<CsvStreamRow> rows;  // in input order
};

class CsvStreamReader {
 public:
  // Reads the header now (an empty input or a missing column is an error). `name` names the input in messages.
  CsvStreamReader(std::istream& in, CsvStreamSpec spec, std::string name);

  // The next complete time step; false at the end of the input.
  bool next(CsvStreamStep& step);
  // The parsed time of the last step returned (or set): the next must be later.
  void set_last_time(double value) { last_ = value, have_last_ = true; }
  const std::string& name() const { return name_; }

 private:
  // The next record's fields (a quoted field may span lines); false at the end. A blank line returns true
  // with no fields.
  bool record(std::vector<std::string>& fields);

  std::istream& in_;
  CsvStreamSpec spec_;
  std::string name_;
  CsvHeader header_;
  int time_col_ = -1, inst_col_ = -1;
  std::vector<int> feature_cols_;
  int64_t line_ = 0, rec_line_ = 0;  // lines read; the line the last record started on
  std::string raw_;                  // the last record's text
  bool have_last_ = false, kind_set_ = false;
  double last_ = 0;
  TimeKind kind_ = TimeKind::number;
  // A row read ahead: the first of the next time step.
  bool pending_ = false;
  CsvStreamRow pending_row_;
  std::string pending_time_;
  double pending_value_ = 0;
};

}  // namespace mlalpha
