#include "data/time_axis.h"

#include <date/date.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/error.h"
#include "data/csv.h"

namespace mlalpha {
namespace {

// Exactly n digits at s[i..], advancing i.
bool digits(std::string_view s, size_t& i, int n, int& out) {
  if (i + size_t(n) > s.size()) return false;
  int v = 0;
  for (int k = 0; k < n; ++k) {
    const char c = s[i + size_t(k)];
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  i += size_t(n);
  out = v;
  return true;
}

// Z, ±HH, ±HHMM or ±HH:MM at s[i..] to the end: the offset east of UTC in seconds.
bool utc_offset(std::string_view s, size_t i, int64_t& offset) {
  if (i < s.size() && s[i] == ' ') ++i;  // "2020-01-31 09:30:00 +02:00" as some tools write it
  if (i + 1 == s.size() && (s[i] == 'Z' || s[i] == 'z')) {
    offset = 0;
    return true;
  }
  if (i >= s.size() || (s[i] != '+' && s[i] != '-')) return false;
  const int sign = s[i] == '-' ? -1 : 1;
  ++i;
  int hh = 0, mm = 0;
  if (!digits(s, i, 2, hh)) return false;
  if (i < s.size()) {
    if (s[i] == ':') ++i;
    if (!digits(s, i, 2, mm)) return false;
  }
  if (i != s.size() || hh > 23 || mm > 59) return false;
  offset = sign * int64_t(hh * 3600 + mm * 60);
  return true;
}

// The layouts tried for a hint, in the order they are suggested. %b and %B read the same (a month's full or
// abbreviated name); both are listed so the hint spells the file's form.
constexpr const char* kCommonFormats[] = {"%b %d %Y", "%B %d %Y", "%b %d, %Y", "%B %d, %Y", "%d %b %Y", "%d %B %Y",
                                          "%d-%b-%Y", "%m/%d/%Y", "%d/%m/%Y", "%Y%m%d",   "%d.%m.%Y", "%Y/%m/%d",
                                          "%Y-%m-%d",  // ISO 8601 without the leading zeros: 2024-1-2
                                          "%m/%d/%Y %H:%M", "%d/%m/%Y %H:%M", "%m/%d/%Y %H:%M:%S",
                                          "%d/%m/%Y %H:%M:%S", "%d.%m.%Y %H:%M", "%Y/%m/%d %H:%M:%S"};

// The longest run of letters: a month name longer than 3 letters is spelled out (%B).
size_t longest_word(std::string_view s) {
  size_t best = 0, run = 0;
  for (const char c : s) {
    run = ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) ? run + 1 : 0;
    best = std::max(best, run);
  }
  return best;
}

std::string quoted(const std::string& f) { return "\"" + f + "\""; }

// Runs of non-space characters. A space in a date::parse layout matches zero or more spaces, so "%b %d %Y"
// would read "June 2000" as June 20 of the year 00; a label must have as many runs as its layout.
size_t words(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i] != ' ' && s[i] != '\t' && (i == 0 || s[i - 1] == ' ' || s[i - 1] == '\t')) ++n;
  return n;
}

// %y reads a two-digit year by the POSIX rule (69–99 → 1969–1999, 00–68 → 2000–2068), so a series that starts
// before 1969 wraps: 1960 is read as 2060 and sorted to the end without a word. A date after the current year
// read through %y is that wrap (or a label no one can date): refused, naming the label and the rule.
void check_two_digit_years(const std::vector<std::string>& labels, const std::string& format,
                           const std::vector<double>& values, const std::function<std::string(size_t)>& where) {
  if (format.find("%y") == std::string::npos) return;
  using namespace std::chrono;
  const int this_year = int(date::year_month_day{floor<date::days>(system_clock::now())}.year());
  for (size_t i = 0; i < values.size(); ++i) {
    const auto day = floor<date::days>(date::sys_seconds{seconds{int64_t(std::floor(values[i]))}});
    const date::year_month_day ymd{day};
    if (int(ymd.year()) <= this_year) continue;
    char read[16];
    std::snprintf(read, sizeof read, "%04d-%02u-%02u", int(ymd.year()), unsigned(ymd.month()), unsigned(ymd.day()));
    throw Error(where(i) + ": time '" + labels[i].substr(0, 80) + "' read with data.time_format = " + quoted(format) +
                " is " + read + ", after this year: %y reads a two-digit year 69-99 as 1969-1999 and 00-68 as "
                "2000-2068, so a series that starts before 1969 wraps around; write the years with four digits and "
                "use %Y");
  }
}

}  // namespace

bool parse_iso8601(std::string_view s, double& seconds) {
  size_t i = 0;
  int y = 0, mo = 0, d = 0;
  if (!digits(s, i, 4, y) || i >= s.size() || s[i++] != '-' || !digits(s, i, 2, mo) || i >= s.size() ||
      s[i++] != '-' || !digits(s, i, 2, d))
    return false;
  const date::year_month_day ymd{date::year{y}, date::month{unsigned(mo)}, date::day{unsigned(d)}};
  if (!ymd.ok()) return false;
  int64_t secs = int64_t(date::sys_days(ymd).time_since_epoch().count()) * 86400;
  double frac = 0;
  if (i < s.size()) {
    if (s[i] != 'T' && s[i] != 't' && s[i] != ' ') return false;
    ++i;
    int hh = 0, mm = 0, ss = 0;
    if (!digits(s, i, 2, hh) || i >= s.size() || s[i++] != ':' || !digits(s, i, 2, mm)) return false;
    if (i < s.size() && s[i] == ':') {
      ++i;
      if (!digits(s, i, 2, ss)) return false;
      if (i < s.size() && (s[i] == '.' || s[i] == ',')) {
        const size_t b = ++i;
        double scale = 0.1;
        for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i, scale *= 0.1) frac += (s[i] - '0') * scale;
        if (i == b) return false;
      }
    }
    if (hh > 23 || mm > 59 || ss > 59) return false;
    secs += hh * 3600 + mm * 60 + ss;
    if (i < s.size()) {
      int64_t offset = 0;
      if (!utc_offset(s, i, offset)) return false;
      secs -= offset;  // local time = UTC + offset
    }
  }
  seconds = double(secs) + frac;
  return true;
}

bool parse_formatted_time(std::string_view s, const std::string& format, double& seconds) {
  if (words(s) != words(format)) return false;
  std::istringstream in{std::string(s)};
  date::sys_time<std::chrono::microseconds> tp{};
  in >> date::parse(format, tp);
  // Whole cell: "Jan 1 2000x" reads as Jan 1 2000 and leaves 'x' behind.
  if (in.fail() || in.peek() != std::char_traits<char>::eof()) return false;
  seconds = double(tp.time_since_epoch().count()) * 1e-6;
  return true;
}

bool parse_time_label(std::string_view s, const std::string& format, double& value, TimeKind& kind) {
  if (!format.empty()) {
    kind = TimeKind::date;
    return parse_formatted_time(s, format, value);
  }
  if (parse_csv_number(s, value) && std::isfinite(value)) {
    kind = TimeKind::number;
    return true;
  }
  kind = TimeKind::date;
  return parse_iso8601(s, value);
}

std::vector<std::string> guess_time_formats(std::string_view s, const std::vector<std::string>& others) {
  std::vector<std::string> found;
  double v;
  for (const char* f : kCommonFormats)
    if (parse_formatted_time(s, f, v)) found.emplace_back(f);
  // %b and %B read the same: keep the one that spells the label's month.
  const bool full_names = longest_word(s) > 3;
  auto twin = [](std::string f, const char* from, const char* to) {
    const size_t at = f.find(from);
    return at == std::string::npos ? std::string() : f.replace(at, 2, to);
  };
  std::vector<std::string> kept;
  for (const std::string& f : found) {
    const std::string other = full_names ? twin(f, "%b", "%B") : twin(f, "%B", "%b");
    if (!other.empty() && std::find(found.begin(), found.end(), other) != found.end()) continue;
    kept.push_back(f);
  }
  // The other labels tell day-first from month-first (13/01/2000 reads only as %d/%m/%Y).
  std::vector<std::string> all;
  const size_t n = std::min<size_t>(others.size(), 5000);
  for (const std::string& f : kept) {
    bool every = true;
    for (size_t i = 0; i < n && every; ++i) every = parse_formatted_time(others[i], f, v);
    if (every) all.push_back(f);
  }
  return all.empty() ? kept : all;
}

std::string time_format_hint(std::string_view s, const std::vector<std::string>& others) {
  const std::vector<std::string> f = guess_time_formats(s, others);
  if (f.size() == 1) return "; set data.time_format = " + quoted(f[0]);
  if (f.size() > 1) {
    std::string list;
    for (size_t i = 0; i < f.size(); ++i) list += (i == 0 ? "" : i + 1 == f.size() ? " or " : ", ") + quoted(f[i]);
    return "; it reads as " + list + " (ambiguous: the times do not tell which): set data.time_format to the layout "
           "the file uses";
  }
  return "; write times as numbers or ISO 8601 (2020-01-31, 2020-01-31T09:30:00Z), or set data.time_format to "
         "their layout (strftime-style, e.g. \"%b %d %Y\" for 'Jan 31 2020')";
}

ParsedTimes parse_time_labels(const std::vector<std::string>& labels, const std::string& format,
                              const std::function<std::string(size_t)>& where) {
  const size_t n = labels.size();
  ParsedTimes out;
  out.values.resize(n);
  auto shown = [&](size_t i) { return "'" + labels[i].substr(0, 80) + "'"; };
  if (!format.empty()) {
    for (size_t i = 0; i < n; ++i) {
      if (parse_formatted_time(labels[i], format, out.values[i])) continue;
      double v;
      std::string why;
      if (parse_iso8601(labels[i], v))
        why = " (it is an ISO 8601 date: leave data.time_format unset to read ISO 8601 times)";
      else if (const auto f = guess_time_formats(labels[i]); !f.empty())
        why = " (it reads as " + quoted(f[0]) + ")";
      throw Error(where(i) + ": time " + shown(i) + " does not match data.time_format = " + quoted(format) + why);
    }
    out.are_dates = true;
    check_two_digit_years(labels, format, out.values, where);
    return out;
  }
  // 0: number, 1: ISO 8601 date, 2: neither.
  std::vector<int> kind(n);
  size_t count[3] = {0, 0, 0};
  for (size_t i = 0; i < n; ++i) {
    TimeKind k;
    kind[i] = parse_time_label(labels[i], "", out.values[i], k) ? (k == TimeKind::number ? 0 : 1) : 2;
    ++count[kind[i]];
  }
  auto first = [&](auto pred) {
    size_t i = 0;
    while (!pred(kind[i])) ++i;
    return i;
  };
  auto other_times = [](size_t k) { return std::to_string(k) + (k == 1 ? " other time is " : " other times are "); };
  static const char* kKind[] = {"a number", "an ISO 8601 date", "neither a number nor an ISO 8601 date"};
  if (count[2] > 0) {
    const size_t parsed = count[0] + count[1];
    if (parsed == 0) {
      const size_t i = first([](int k) { return k == 2; });
      throw Error(where(i) + ": time " + shown(i) + " is not a number or an ISO 8601 date" +
                  time_format_hint(labels[i], labels));
    }
    if (parsed > count[2]) {  // the few that parse not are the likely mistake
      const size_t i = first([](int k) { return k == 2; }), e = first([](int k) { return k != 2; });
      const char* what = count[1] == 0 ? "numbers" : count[0] == 0 ? "ISO 8601 dates" : "numbers or ISO 8601 dates";
      throw Error(where(i) + ": time " + shown(i) + " is not a number or an ISO 8601 date, but " + other_times(parsed) +
                  what + " (e.g. " + shown(e) + " at " + where(e) + "); write every time in one layout");
    }
    const size_t i = first([](int k) { return k != 2; }), e = first([](int k) { return k == 2; });
    std::vector<std::string> rest;
    for (size_t j = 0; j < n; ++j)
      if (kind[j] == 2) rest.push_back(labels[j]);
    throw Error(where(i) + ": time " + shown(i) + " is " + kKind[kind[i]] + ", but " + other_times(count[2]) +
                "not (e.g. " + shown(e) + " at " + where(e) + "); write every time in one layout" +
                time_format_hint(labels[e], rest));
  }
  if (count[0] > 0 && count[1] > 0) {
    const int stray = count[0] * 2 >= n ? 1 : 0;  // the fewer kind is the likely mistake
    const size_t i = first([&](int k) { return k == stray; }), e = first([&](int k) { return k != stray; });
    throw Error(where(i) + ": time " + shown(i) + " is " + kKind[stray] + ", but " + other_times(count[1 - stray]) +
                (stray == 1 ? "numbers" : "ISO 8601 dates") + " (e.g. " + shown(e) + " at " + where(e) +
                "); times must be all numbers or all dates");
  }
  out.are_dates = count[1] > 0;
  return out;
}

}  // namespace mlalpha
