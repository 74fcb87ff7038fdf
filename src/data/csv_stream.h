#pragma once
// Long-format CSV read as it arrives, one time step at a time (`ml-alpha stream`): the rows of one time go
// together and the step is complete when a row of a later time arrives, a blank line is read, or the input ends.
// The column, cell, quoting and delimiter rules and their messages are the panel reader's (csv.h); the times are
// parsed as there (time_axis.h: numbers, ISO 8601 with offsets to UTC, or data.time_format), all of one kind, and
// two spellings of one instant are one step. Refused, naming the line: a row of an earlier time than the step
// being read (times going backwards; a time step already complete is not reopened), an instrument twice in one
// step, a wrong field count, a cell that is not a number or a missing value, ±Inf. Target columns are not read.
// A line is at most kMaxLineBytes (data/line_reader.h). For a stream that commits its steps to a state file:
// hold_partial_input() leaves a final line without a newline unread (it may be half sent), each step says
// whether only the end of the input completed it (more of its rows may follow in the next run), and
// skip_through() passes over the rows a state already holds at the start of the input (a restart resends them).
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
  bool ended_by_input_end = false; // no later row or blank line followed it: the input ended in it
};

class CsvStreamReader {
 public:
  // Reads the header now (an empty input or a missing column is an error). `name` names the input in messages.
  CsvStreamReader(std::istream& in, CsvStreamSpec spec, std::string name);

  // The next complete time step; false at the end of the input.
  bool next(CsvStreamStep& step);
  // The parsed time of the last step returned (or set): the next must be later.
  void set_last_time(double value) { last_ = value, have_last_ = true; }
  // Rows at the start of the input with a time at or before `value` (the state's last time) are read, checked
  // and passed over, as are blank lines among them; the first later row ends the skipping, and from there on the
  // times must be after `value`. Counted by skipped_rows().
  void skip_through(double value) { skip_ = true, skip_value_ = value, set_last_time(value); }
  int64_t skipped_rows() const { return skipped_; }
  // A final line without a newline is left unread (held_line() is its line number, 0 when none).
  void hold_partial_input() { hold_partial_ = true; }
  int64_t held_line() const { return held_line_; }
  const std::string& name() const { return name_; }

 private:
  // The next record's fields (a quoted field may span lines); false at the end. A blank line returns true
  // with no fields.
  bool record(std::vector<std::string>& fields);
  // The next line into `line`; false at the end, or at a held final line without a newline.
  bool line(std::string& line);

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
  bool skip_ = false, hold_partial_ = false;
  double skip_value_ = 0;
  int64_t skipped_ = 0, held_line_ = 0;
};

// A stream's output file read back before a resumed stream appends to it (docs/data.md, "Streaming"). The stream
// writes a step's rows, then saves its state: a stream stopped between the two leaves the rows of one step after
// the state's last time, and a write cut short leaves a final line without a newline. `committed` is the state's
// last time: the rows up to it are kept, those after it are to be dropped (the resumed stream writes them again);
// NaN (a state without times) keeps every whole row. Refused, naming the file and line: a first line other than `header` (not this stream's output), a
// row whose time does not parse, rows of more than one step after `committed` (not written with this state).
struct StreamOutputTail {
  uint64_t keep = 0;          // bytes to keep: the header and the rows up to `committed` (0: rewrite it all)
  uint64_t size = 0;          // the file's size now
  int64_t rows_dropped = 0;   // rows after `committed`, a partial final line included
  std::string time_dropped;   // their time as written ("": none)
};
StreamOutputTail scan_stream_output(const std::string& path, const std::string& header, const std::string& time_format,
                                    double committed);

}  // namespace mlalpha
