#pragma once
// Time labels as values on one axis (docs/data.md, "Time axis"). A label is read as
//   a number            finite, as parse_csv_number reads it: the value itself;
//   an ISO 8601 date    2020-01-31, 2020-01-31T09:30, 2020-01-31 09:30:00.25, with an optional offset
//                       (Z, +02:00, +0200, -05): seconds since 1970-01-01T00:00:00Z (UTC);
//   a formatted date    when a layout (data.time_format, strftime-style: "%b %d %Y") is given, every label
//                       must match it entirely, and nothing else is accepted.
// Host-only: the formatted dates go through Howard Hinnant's date library (date/date.h).
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace mlalpha {

enum class TimeKind { number, date };

// One label read with the rules above (format "": number or ISO 8601). False when it reads as neither.
bool parse_time_label(std::string_view s, const std::string& format, double& value, TimeKind& kind);
// An ISO 8601 date or datetime as above; false for anything else (trailing text included).
bool parse_iso8601(std::string_view s, double& seconds);
// The label in a strftime-style layout, whole; false when it does not match or names an invalid date.
bool parse_formatted_time(std::string_view s, const std::string& format, double& seconds);

// The common layouts (%b %d %Y, %d %b %Y, %B %d %Y, %m/%d/%Y, %d/%m/%Y, %Y%m%d, %d.%m.%Y, %Y/%m/%d, ...) that
// read `s`, narrowed to those that also read every one of `others` when some do. For the hint of an error.
std::vector<std::string> guess_time_formats(std::string_view s, const std::vector<std::string>& others = {});
// "; set data.time_format = \"%b %d %Y\"" (or the ambiguity between the candidates, or the general advice):
// the end of the message for a label that is not a number or an ISO 8601 date.
std::string time_format_hint(std::string_view s, const std::vector<std::string>& others = {});

// The labels of an axis, each read as above; all must be of one kind (all numbers or all dates).
struct ParsedTimes {
  std::vector<double> values;  // one per label
  bool are_dates = false;
};
// `where(i)` starts the message about label i ("data.csv:17"); the first bad label (in the order given)
// is reported, or, when the labels mix numbers and dates, the first of the fewer kind.
ParsedTimes parse_time_labels(const std::vector<std::string>& labels, const std::string& format,
                              const std::function<std::string(size_t)>& where);

}  // namespace mlalpha
