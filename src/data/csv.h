#pragma once
// CSV in long format: one row per (time, instrument), a header row naming the columns. The config picks
// the time column, the instrument column and the feature and target columns; everything else is ignored.
// The panel is built on the union of the times and instruments seen (docs/data.md):
//   times        parsed (data/time_axis.h): all numbers, all ISO 8601 dates/datetimes (offsets converted
//                to UTC), or, with data.time_format, all in that strftime-style layout; sorted by value, equal
//                values ("1" and "1.0"; "2020-01-31" and "2020-01-31T00:00Z") being one time step labelled
//                with the first spelling seen. A label that reads as none of them, or a mix of kinds, is an
//                error naming file:line and the value, with the data.time_format that would read it
//   instruments  sorted numerically when all are numbers (ties by string), else bytewise; never merged, so
//                the panel does not depend on the order of the rows
//   missing (instrument, time) rows → NaN features and NaN targets
//   cells: empty, NaN (any case), NA, N/A, n/a, null, NULL, None, <NA>, #N/A → NaN; numbers as C/Python
//          write them (leading '+' allowed); spaces around a cell are ignored; ±Inf, values outside the
//          float32 range and anything else are errors naming file:line and the column
// Syntax: RFC 4180 quoting ("a,b" and "" inside quotes), LF or CRLF line ends, optional final newline,
// a UTF-8 byte-order mark is skipped, blank lines are skipped. The delimiter is one character (',' by
// default); a header that another common delimiter (, tab ; |) would split into the wanted columns is an
// error that names the likely delimiter.
#include <string>
#include <string_view>
#include <vector>

#include "data/panel.h"

namespace mlalpha {

struct CsvSpec {
  std::string path;
  std::string time_column = "time";
  std::string instrument_column = "instrument";  // empty: the file is one series (N = 1)
  std::vector<std::string> feature_columns;      // F >= 1 names, in the order the model sees them
  std::vector<std::string> target_columns;       // K >= 1 names
  char delimiter = ',';                          // ',' for CSV, '\t' for TSV, ';' ...: see check_csv_delimiter
  std::string time_format;                       // data.time_format: "" = numbers or ISO 8601; else strftime-style
};

// Throws unless `c` can separate cells: not a quote, CR, LF, NUL, letter, digit, '.', '+' or '-'.
// `what` starts the message ("data.delimiter").
void check_csv_delimiter(char c, const std::string& what);
// A delimiter from a config string: one character, or "tab" / "\t" (backslash, t) for a tab; checked as
// above. `what` names the setting in messages ("data.delimiter").
char csv_delimiter_from_string(std::string_view s, const std::string& what);
// "','", "tab ('\t')", "';'": a delimiter in messages.
std::string describe_csv_delimiter(char c);

// A number as C, Python or pandas writes it (leading '+' allowed, no surrounding spaces); false if the
// whole text is not one. Values beyond the double range come back as ±inf; "nan"/"inf" parse as such.
bool parse_csv_number(std::string_view s, double& v);

// Parse CSV text already in memory; `name` starts every error message (spec.path is not read). Errors name
// the setting to change (data.time_column, data.feature_columns, data.time_format, ...). Fills the panel's
// times (as spelled in the file), time_values and times_are_dates.
Panel parse_csv_panel(std::string_view text, const CsvSpec& spec, const std::string& name);
// Read spec.path and parse it.
Panel load_csv_panel(const CsvSpec& spec);

}  // namespace mlalpha
