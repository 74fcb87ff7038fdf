// The time axis of a CSV panel: numbers, ISO 8601 (offsets to UTC) and data.time_format layouts parsed and
// ordered by value; the errors and their data.time_format hints; date splits on parsed times; the periods
// per year of the axis; and the data settings' messages (names of the keys, nearest columns).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/csv.h"
#include "data/split.h"
#include "data/time_axis.h"
#include "mlalpha/config.h"
#include "mlalpha/panel.h"
#include "checkpoint/run_record.h"
#include "test_files.h"
#include "test_util.h"

namespace mlalpha {
namespace {

using test::contains;
using test::error_of;
using test::TempDir;
using test::write_bytes;

constexpr double kDay = 86400.0;
// 2020-01-31T09:30:00Z: 18292 days after 1970-01-01, plus 9.5 hours.
constexpr double k20200131T0930 = 18292 * kDay + 9.5 * 3600;

CsvSpec spec(const std::string& format = "") {
  CsvSpec s;
  s.time_column = "date";
  s.instrument_column = "ticker";
  s.feature_columns = {"f"};
  s.target_columns = {"y"};
  s.time_format = format;
  return s;
}

Panel parse(const std::string& body, const std::string& format = "", const std::string& name = "d.csv") {
  return parse_csv_panel("date,ticker,f,y\n" + body, spec(format), name);
}

std::string parse_error(const std::string& body, const std::string& format = "") {
  return error_of([&] { parse(body, format); });
}

TEST(TimeAxis, Iso8601DatesAndDatetimesAreUtcSeconds) {
  double v = 0;
  ASSERT_TRUE(parse_iso8601("1970-01-01", v));
  EXPECT_EQ(v, 0.0);
  ASSERT_TRUE(parse_iso8601("2020-01-31", v));
  EXPECT_EQ(v, 18292 * kDay);
  for (const char* s : {"2020-01-31T09:30", "2020-01-31T09:30:00", "2020-01-31 09:30:00", "2020-01-31T09:30:00Z",
                        "2020-01-31T11:30:00+02:00", "2020-01-31T11:30+0200", "2020-01-31 04:30:00-05",
                        "2020-01-31T04:30:00 -05:00", "2020-01-31t09:30z"}) {
    ASSERT_TRUE(parse_iso8601(s, v)) << s;
    EXPECT_EQ(v, k20200131T0930) << s;
  }
  ASSERT_TRUE(parse_iso8601("2020-01-31T09:30:00.25Z", v));
  EXPECT_DOUBLE_EQ(v, k20200131T0930 + 0.25);
  ASSERT_TRUE(parse_iso8601("2020-01-31 09:30:00,5", v));
  EXPECT_DOUBLE_EQ(v, k20200131T0930 + 0.5);
  // Crossing midnight backwards: 00:30+01:00 is 23:30 of the day before.
  ASSERT_TRUE(parse_iso8601("2020-02-01T00:30+01:00", v));
  EXPECT_EQ(v, 18292 * kDay + 23.5 * 3600);
  for (const char* s : {"2020-02-30", "2020-13-01", "2020-1-31", "20-01-31", "2020-01-31T25:00", "2020-01-31T09:60",
                        "2020-01-31T09:30:00.", "2020-01-31T09", "2020-01-31x", "2020-01-31T09:30+2", "2020-01-31Z",
                        "2020-01-31T09:30+02:00x", " 2020-01-31", "Jan 1 2000"})
    EXPECT_FALSE(parse_iso8601(s, v)) << s;
  ASSERT_TRUE(parse_iso8601("2000-02-29", v));  // a leap day
  EXPECT_FALSE(parse_iso8601("1900-02-29", v));
}

TEST(TimeAxis, FormattedTimesMustMatchTheWholeLabel) {
  double v = 0;
  ASSERT_TRUE(parse_formatted_time("Jan 1 2000", "%b %d %Y", v));
  EXPECT_EQ(v, 10957 * kDay);  // 2000-01-01
  ASSERT_TRUE(parse_formatted_time("01/31/2020", "%m/%d/%Y", v));
  EXPECT_EQ(v, 18292 * kDay);
  ASSERT_TRUE(parse_formatted_time("20200131", "%Y%m%d", v));
  EXPECT_EQ(v, 18292 * kDay);
  ASSERT_TRUE(parse_formatted_time("31.01.2020 11:30 +0200", "%d.%m.%Y %H:%M %z", v));
  EXPECT_EQ(v, k20200131T0930);
  EXPECT_FALSE(parse_formatted_time("Jan 1 2000x", "%b %d %Y", v));  // trailing junk
  EXPECT_FALSE(parse_formatted_time("Feb 30 2000", "%b %d %Y", v));  // no such day
  EXPECT_FALSE(parse_formatted_time("2000-01-01", "%b %d %Y", v));
}

TEST(TimeAxis, TwoDigitYearsThatWrapAreRefused) {
  const auto where = [](size_t i) { return "data.csv:" + std::to_string(i + 2); };
  // 1995 .. 2005 reads right under the POSIX rule (69–99 → 19xx, 00–68 → 20xx).
  const ParsedTimes ok = parse_time_labels({"01/06/95", "01/06/99", "01/06/05"}, "%d/%m/%y", where);
  EXPECT_LT(ok.values[0], ok.values[2]);
  // A series from 1960 wraps: '60' is read as 2060, after this year.
  try {
    parse_time_labels({"01/01/99", "01/01/60", "01/01/61"}, "%d/%m/%y", where);
    ADD_FAILURE() << "a wrapped two-digit year was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("data.csv:3: time '01/01/60' read with data.time_format = \"%d/%m/%y\" is "
                                         "2060-01-01, after this year: %y reads a two-digit year 69-99 as 1969-1999"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("use %Y"), std::string::npos) << e.what();
  }
}

TEST(TimeAxis, CommonLayoutsAreGuessed) {
  EXPECT_EQ(guess_time_formats("Jan 1 2000"), std::vector<std::string>{"%b %d %Y"});
  EXPECT_EQ(guess_time_formats("January 1 2000"), std::vector<std::string>{"%B %d %Y"});
  EXPECT_EQ(guess_time_formats("Jan 1, 2000"), std::vector<std::string>{"%b %d, %Y"});
  EXPECT_EQ(guess_time_formats("1 Jan 2000"), std::vector<std::string>{"%d %b %Y"});
  EXPECT_EQ(guess_time_formats("31.01.2020"), std::vector<std::string>{"%d.%m.%Y"});
  EXPECT_EQ(guess_time_formats("2020/01/31"), std::vector<std::string>{"%Y/%m/%d"});
  EXPECT_EQ(guess_time_formats("01/31/2020"), std::vector<std::string>{"%m/%d/%Y"});
  // Both ways round, until another label tells: 13/01/2000 is day-first only.
  EXPECT_EQ(guess_time_formats("01/02/2000"), (std::vector<std::string>{"%m/%d/%Y", "%d/%m/%Y"}));
  EXPECT_EQ(guess_time_formats("01/02/2000", {"01/02/2000", "13/02/2000"}), std::vector<std::string>{"%d/%m/%Y"});
  EXPECT_EQ(guess_time_formats("2024-1-2"), std::vector<std::string>{"%Y-%m-%d"});
  EXPECT_TRUE(guess_time_formats("soon").empty());
}

TEST(TimeAxis, MonthlyTextDatesSortChronologicallyWithTimeFormat) {
  // As text, "Apr" < "Jan" < "Sep" and "Jan 1 2001" < "Sep 1 2000": only parsing orders them.
  const std::string body = "Sep 1 2000,A,2,0\nJan 1 2001,A,3,0\nApr 1 2000,A,1,0\nSep 1 2000,B,5,0\n";
  const Panel p = parse(body, "%b %d %Y");
  EXPECT_EQ(p.times, (std::vector<std::string>{"Apr 1 2000", "Sep 1 2000", "Jan 1 2001"}));
  EXPECT_TRUE(p.times_are_dates);
  EXPECT_EQ(p.time_values, (std::vector<double>{11048 * kDay, 11201 * kDay, 11323 * kDay}));
  EXPECT_EQ(p.time_format, "%b %d %Y");
  ASSERT_EQ(p.N, 2);
  EXPECT_EQ(p.x[0], 1.0f);
  EXPECT_EQ(p.x[1], 2.0f);
  EXPECT_EQ(p.x[2], 3.0f);
  EXPECT_EQ(p.x[4], 5.0f);
  // Without the setting: an error that names the line, the value and the setting that reads it.
  EXPECT_EQ(parse_error(body),
            "d.csv:2: time 'Sep 1 2000' is not a number or an ISO 8601 date; set data.time_format = \"%b %d %Y\"");
  // With a wrong layout: the label that does not match, with the layout it reads as.
  EXPECT_EQ(parse_error(body, "%d %b %Y"),
            "d.csv:2: time 'Sep 1 2000' does not match data.time_format = \"%d %b %Y\" (it reads as \"%b %d %Y\")");
  // With a layout set every time must match it: ISO dates are no exception.
  EXPECT_EQ(parse_error("Sep 1 2000,A,1,1\n2000-10-01,A,1,1\n", "%b %d %Y"),
            "d.csv:3: time '2000-10-01' does not match data.time_format = \"%b %d %Y\" (it is an ISO 8601 date: "
            "leave data.time_format unset to read ISO 8601 times)");
  // Numbers are read by the layout too.
  const Panel ymd = parse("20200131,A,1,1\n20191231,A,1,1\n", "%Y%m%d");
  EXPECT_EQ(ymd.times, (std::vector<std::string>{"20191231", "20200131"}));
  EXPECT_TRUE(ymd.times_are_dates);
}

TEST(TimeAxis, AmbiguousAndUnknownLayoutsSaySo) {
  EXPECT_EQ(parse_error("01/02/2000,A,1,1\n03/04/2000,A,1,1\n"),
            "d.csv:2: time '01/02/2000' is not a number or an ISO 8601 date; it reads as \"%m/%d/%Y\" or "
            "\"%d/%m/%Y\" (ambiguous: the times do not tell which): set data.time_format to the layout the file uses");
  // A later label that only one layout reads settles it.
  EXPECT_EQ(parse_error("01/02/2000,A,1,1\n13/04/2000,A,1,1\n"),
            "d.csv:2: time '01/02/2000' is not a number or an ISO 8601 date; set data.time_format = \"%d/%m/%Y\"");
  EXPECT_TRUE(contains(parse_error("soon,A,1,1\n"),
                       "d.csv:2: time 'soon' is not a number or an ISO 8601 date; write times as numbers or ISO 8601"));
}

TEST(TimeAxis, IsoOffsetsAreConvertedToUtcAndOrdered) {
  // 11:30+02:00 is 09:30Z, after 09:00Z and before 05:00-05 (10:00Z), though its text sorts last.
  const Panel p = parse("2020-01-31T11:30:00+02:00,A,2,0\n2020-01-31T09:00:00Z,A,1,0\n2020-01-31 05:00-05,A,3,0\n");
  EXPECT_EQ(p.times, (std::vector<std::string>{"2020-01-31T09:00:00Z", "2020-01-31T11:30:00+02:00", "2020-01-31 05:00-05"}));
  EXPECT_EQ(p.time_values, (std::vector<double>{k20200131T0930 - 1800, k20200131T0930, k20200131T0930 + 1800}));
  EXPECT_EQ(p.x, (std::vector<float>{1, 2, 3}));
  EXPECT_TRUE(p.times_are_dates);
}

TEST(TimeAxis, EqualInstantsAreOneTimeStepLabelledWithTheFirstSpelling) {
  const Panel p = parse("2020-02-03,A,1,0\n2020-02-03T00:00:00Z,B,2,0\n2020-02-02,A,3,0\n2020-02-03T01:00+01:00,C,4,0\n");
  EXPECT_EQ(p.times, (std::vector<std::string>{"2020-02-02", "2020-02-03"}));
  ASSERT_EQ(p.N, 3);
  EXPECT_EQ(p.x[0], 3.0f);  // A at 2020-02-02
  EXPECT_EQ(p.x[1], 1.0f);  // A at 2020-02-03
  EXPECT_EQ(p.x[3], 2.0f);  // B at the same instant
  EXPECT_EQ(p.x[5], 4.0f);  // C: 01:00+01:00 is midnight UTC
  // The same instrument at two spellings of one instant is a duplicate row.
  EXPECT_EQ(parse_error("2020-02-03,A,1,0\n2020-02-03T00:00Z,A,2,0\n"),
            "d.csv:3: duplicate row for time '2020-02-03T00:00Z', instrument 'A' (first seen on line 2)");
}

TEST(TimeAxis, NumbersAreOrderedNumericallyAsBefore) {
  const Panel p = parse("10,A,1,0\n9,A,2,0\n100,A,3,0\n1e1,B,4,0\n");
  EXPECT_EQ(p.times, (std::vector<std::string>{"9", "10", "100"}));
  EXPECT_EQ(p.time_values, (std::vector<double>{9, 10, 100}));
  EXPECT_FALSE(p.times_are_dates);
  EXPECT_TRUE(std::isnan(periods_per_year(p)));
  // 20240102 is a number unless a layout says otherwise.
  EXPECT_FALSE(parse("20240102,A,1,0\n20240103,A,1,0\n").times_are_dates);
}

TEST(TimeAxis, MixedLayoutsNameTheFirstStrayLine) {
  // Mostly ISO: the one other layout is the stray.
  EXPECT_EQ(parse_error("2020-01-02,A,1,1\n2020-01-03,A,1,1\nJan 6 2020,A,1,1\n"),
            "d.csv:4: time 'Jan 6 2020' is not a number or an ISO 8601 date, but 2 other times are ISO 8601 dates "
            "(e.g. '2020-01-02' at d.csv:2); write every time in one layout");
  // Mostly another layout: the ISO date is the stray, and the hint says how to read the rest.
  EXPECT_EQ(parse_error("Jan 2 2020,A,1,1\n2020-01-03,A,1,1\nJan 6 2020,A,1,1\nJan 7 2020,A,1,1\n"),
            "d.csv:3: time '2020-01-03' is an ISO 8601 date, but 3 other times are not (e.g. 'Jan 2 2020' at "
            "d.csv:2); write every time in one layout; set data.time_format = \"%b %d %Y\"");
  // Numbers among dates.
  EXPECT_EQ(parse_error("2020-01-02,A,1,1\n2020-01-03,A,1,1\n7,A,1,1\n"),
            "d.csv:4: time '7' is a number, but 2 other times are ISO 8601 dates (e.g. '2020-01-02' at d.csv:2); "
            "times must be all numbers or all dates");
}

// ------------------------------------------------------------------------------------------ splits

TEST(TimeAxis, DateSplitsCompareParsedTimes) {
  // Monthly Apr 2000 .. Mar 2001 as "Mon 1 YYYY": the text order would put "Apr 1 2000" and "Apr 1 2001"
  // first.
  static const char* kMonths[] = {"Apr 1 2000", "May 1 2000", "Jun 1 2000", "Jul 1 2000", "Aug 1 2000", "Sep 1 2000",
                                  "Oct 1 2000", "Nov 1 2000", "Dec 1 2000", "Jan 1 2001", "Feb 1 2001", "Mar 1 2001"};
  std::string body;
  for (const char* m : kMonths) body += std::string(m) + ",A,1,1\n";
  const Panel p = parse(body, "%b %d %Y");
  ASSERT_EQ(p.T, 12);
  EXPECT_EQ(p.times.front(), "Apr 1 2000");
  EXPECT_EQ(p.times.back(), "Mar 1 2001");
  SplitConfig sc;
  sc.spec = {SplitPoint::at_time("Jun 1 2000"), SplitPoint::at_time("Jan 1 2001"), 0};
  std::vector<Split> s = make_splits(sc, p);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].train_end, 2);  // Apr, May
  EXPECT_EQ(s[0].valid_end, 9);  // Jun .. Dec
  // Between two steps: the first step at or after it. ISO 8601 is read on a formatted axis too.
  sc.spec = {SplitPoint::at_time("Jun 15 2000"), SplitPoint::at_time("2000-12-31T23:59Z"), 0};
  s = make_splits(sc, p);
  EXPECT_EQ(s[0].train_end, 3);
  EXPECT_EQ(s[0].valid_end, 9);
  // An unreadable value names the setting and the layout.
  sc.spec.train_end = SplitPoint::at_time("June 2000");
  EXPECT_EQ(error_of([&] { make_splits(sc, p); }),
            "split.train_end = time 'June 2000' is not a date in the layout data.time_format = \"%b %d %Y\" (the "
            "time labels run from 'Apr 1 2000' to 'Mar 1 2001') nor an ISO 8601 date (2020-01-31)");
  // A value before the data leaves train empty: the message shows the data's first and last time.
  sc.spec.train_end = SplitPoint::at_time("Jan 1 1999");
  EXPECT_EQ(error_of([&] { make_splits(sc, p); }),
            "split.train_end = time 'Jan 1 1999' (index 0) leaves the training range empty (the panel's times run "
            "from 'Apr 1 2000' to 'Mar 1 2001')");
}

TEST(TimeAxis, IsoSplitsCompareInstantsNotText) {
  const Panel p = parse("2020-01-31T11:30:00+02:00,A,2,0\n2020-01-31T09:00:00Z,A,1,0\n2020-01-31 05:00-05,A,3,0\n"
                        "2020-01-31T12:00Z,A,4,0\n");
  SplitConfig sc;
  // 09:15Z: after the 09:00Z step, before 11:30+02:00 (09:30Z) although its text sorts after "...05:00-05".
  // 11:00+01:00 is 10:00Z: the step spelled "2020-01-31 05:00-05".
  sc.spec = {SplitPoint::at_time("2020-01-31T09:15Z"), SplitPoint::at_time("2020-01-31T11:00:00+01:00"), 0};
  const std::vector<Split> s = make_splits(sc, p);
  EXPECT_EQ(s[0].train_end, 1);
  EXPECT_EQ(s[0].valid_end, 2);
  // A date on a numeric axis, and a non-date on a date axis, are errors naming the setting.
  sc.spec.train_end = SplitPoint::at_time("Jan 31 2020");
  EXPECT_EQ(error_of([&] { make_splits(sc, p); }),
            "split.train_end = time 'Jan 31 2020' is not an ISO 8601 date or datetime (e.g. \"2020-01-31\"), as the "
            "time labels are (from '2020-01-31T09:00:00Z' to '2020-01-31T12:00Z')");
  const Panel n = parse("1,A,1,1\n2,A,1,1\n3,A,1,1\n");
  sc.spec = {SplitPoint::at_time("2020-01-01"), SplitPoint::at_time("3"), 0};
  EXPECT_TRUE(contains(error_of([&] { make_splits(sc, n); }), "split.train_end = time '2020-01-01' is not a number"));
  // Labels without parsed values (a panel built from arrays) are parsed by the same rules.
  const std::vector<std::string> labels = {"2020-01-31T09:00:00Z", "2020-01-31T11:30:00+02:00", "2020-01-31 05:00-05",
                                           "2020-01-31T12:00Z"};
  const Split t = make_split({SplitPoint::at_time("2020-01-31T09:15Z"), SplitPoint::at_time("2020-01-31T10:00Z"), 0},
                             4, labels);
  EXPECT_EQ(t.train_end, 1);
  EXPECT_EQ(t.valid_end, 2);
}

// ------------------------------------------------------------------------------------ periods per year

Panel dated(const std::vector<double>& days) {
  Panel p;
  p.times_are_dates = true;
  for (const double d : days) p.time_values.push_back(d * kDay);
  return p;
}

TEST(TimeAxis, PeriodsPerYearCountsStepsOverTheSpan) {
  std::vector<double> daily, business, weekly, monthly, short_business;
  for (int d = 0; d < 730; ++d) daily.push_back(d);
  // 1970-01-05 was a Monday: days 4 + 7w .. 8 + 7w are weekdays.
  for (int d = 4; d < 4 + 3 * 365; ++d)
    if ((d - 4) % 7 < 5) business.push_back(d);
  for (int w = 0; w < 104; ++w) weekly.push_back(7.0 * w);
  // First days of 36 months from Jan 2000 (months of 28 to 31 days).
  for (int m = 0; m < 36; ++m) {
    double v = 0;
    const std::string label = std::to_string(2000 + m / 12) + "-" + (m % 12 < 9 ? "0" : "") + std::to_string(m % 12 + 1) + "-01";
    ASSERT_TRUE(parse_iso8601(label, v));
    monthly.push_back(v / kDay);
  }
  for (int d = 4; d < 4 + 14; ++d)
    if ((d - 4) % 7 < 5) short_business.push_back(d);
  EXPECT_NEAR(periods_per_year(dated(daily)), 365.25, 1e-9);
  EXPECT_NEAR(periods_per_year(dated(business)), 365.25 * 5 / 7, 1.0);  // ~261, not 365.25 (the median gap)
  EXPECT_NEAR(periods_per_year(dated(weekly)), 365.25 / 7, 1e-9);
  EXPECT_NEAR(periods_per_year(dated(monthly)), 12.0, 0.05);
  // Two weeks span less than a quarter of a year: the median spacing (1 day) decides.
  EXPECT_NEAR(periods_per_year(dated(short_business)), 365.25, 1e-9);
  EXPECT_TRUE(std::isnan(periods_per_year(dated({5}))));
  Panel numbers = dated(daily);
  numbers.times_are_dates = false;
  EXPECT_TRUE(std::isnan(periods_per_year(numbers)));
}

// ------------------------------------------------------------------------------------ data settings

TEST(TimeAxis, LoadPanelPassesTheTimeFormatAndChecksLeaks) {
  TempDir dir;
  write_bytes(dir / "m.csv", "date,ticker,f,y\nSep 1 2000,A,1,2\nApr 1 2000,A,3,4\n");
  DataConfig d;
  d.source = "csv";
  d.csv = dir / "m.csv";
  d.time_column = "date";
  d.instrument_column = "ticker";
  d.feature_columns = {"f"};
  d.target_columns = {"y"};
  EXPECT_TRUE(contains(error_of([&] { load_panel(d); }), "set data.time_format = \"%b %d %Y\""));
  d.time_format = "%b %d %Y";
  const Panel p = load_panel(d);
  EXPECT_EQ(p.times, (std::vector<std::string>{"Apr 1 2000", "Sep 1 2000"}));
  EXPECT_EQ(p.time_format, "%b %d %Y");
  // A slice keeps the parsed axis.
  const Panel s = slice_panel(p, 1, 2);
  EXPECT_EQ(s.time_values, std::vector<double>{p.time_values[1]});
  EXPECT_TRUE(s.times_are_dates);
  EXPECT_EQ(s.time_format, "%b %d %Y");
  // A target that is also a feature is a label leak unless allowed.
  d.feature_columns = {"f", "y"};
  EXPECT_EQ(error_of([&] { load_panel(d); }),
            "data.target_columns: 'y' is also in data.feature_columns, so the model would see the label it predicts; "
            "remove it from data.feature_columns (or set data.allow_target_features = true)");
  d.allow_target_features = true;
  const Panel leak = load_panel(d);
  EXPECT_EQ(leak.F, 2);
  EXPECT_EQ(leak.x, (std::vector<float>{3, 4, 1, 2}));
  // The setting is for CSV times only.
  DataConfig npy;
  npy.source = "npy";
  npy.features = dir / "x.npy";
  npy.targets = dir / "y.npy";
  npy.time_format = "%Y";
  EXPECT_TRUE(contains(error_of([&] { load_panel(npy); }), "data.time_format = '%Y' is for CSV times"));
}

TEST(TimeAxis, TimeFormatIsAConfigKeyThatRoundTrips) {
  const auto& keys = run_config_keys();
  EXPECT_NE(std::find(keys.begin(), keys.end(), "data.time_format"), keys.end());
  const RunConfig c = parse_run_config("[data]\ntime_format = \"%d.%m.%Y\"\n", "t.toml");
  EXPECT_EQ(c.data.time_format, "%d.%m.%Y");
  EXPECT_TRUE(c.was_given("data.time_format"));
  EXPECT_EQ(parse_run_config(to_toml(c, {"data"}), "back").data.time_format, "%d.%m.%Y");
  EXPECT_EQ(parse_run_config("", "t", {"data.time_format=%b %d %Y"}).data.time_format, "%b %d %Y");
  EXPECT_EQ(suggest_run_config_key("data.time_fmt"), "data.time_format");
  // A checkpoint records the data settings, so eval / predict read new files with the same layout.
  const RunRecord r = decode_run_record(encode_run_record(c, true, 0, 42), "m.ckpt");
  EXPECT_EQ(r.settings.data.time_format, "%d.%m.%Y");
}

}  // namespace
}  // namespace mlalpha
