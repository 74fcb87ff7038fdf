// The row-by-row CSV reader of `ml-alpha stream` (data/csv_stream.h): time steps end at a later time, a blank
// line or the end; quoting, CRLF and a byte-order mark as the panel reader; two spellings of one instant are one
// step; the errors name the input and the line; a line is capped at 16 MiB (in the panel reader too); for a stream
// that commits to a state, a final line without a newline is held back, a step ended only by the input's end says
// so, and the rows a state holds already are passed over at the start of the input.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "data/csv.h"
#include "data/csv_stream.h"
#include "data/line_reader.h"
#include "test_files.h"
#include "test_util.h"

namespace mlalpha::test {
namespace {

CsvStreamSpec spec() {
  CsvStreamSpec s;
  s.time_column = "date", s.instrument_column = "ticker", s.feature_columns = {"a", "b"};
  return s;
}

TEST(CsvStream, StepsEndAtALaterTimeABlankLineOrTheEnd) {
  std::istringstream in("\xEF\xBB\xBF" "date,ticker,a,b,unused\r\n"
                        "2020-01-02,X,1,2,z\r\n"
                        "2020-01-02T00:00:00Z,\"Y, Inc.\",,NaN,z\r\n"
                        "\n"
                        "2020-01-03,X,\"3\",4,\"two\nlines\"\n"
                        "2020-01-06,Y,5,NA,z");
  CsvStreamReader r(in, spec(), "feed");
  CsvStreamStep s;
  ASSERT_TRUE(r.next(s));
  EXPECT_EQ(s.time, "2020-01-02");
  ASSERT_EQ(s.rows.size(), 2u);
  EXPECT_EQ(s.rows[1].instrument, "Y, Inc.");
  EXPECT_TRUE(std::isnan(s.rows[1].x[0]) && std::isnan(s.rows[1].x[1]));
  EXPECT_EQ(s.rows[1].line, 3);
  ASSERT_TRUE(r.next(s));
  EXPECT_EQ(s.time_value, 1578009600.0);  // 2020-01-03T00:00Z
  ASSERT_EQ(s.rows.size(), 1u);
  EXPECT_EQ(s.rows[0].x, (std::vector<float>{3, 4}));
  ASSERT_TRUE(r.next(s));
  EXPECT_EQ(s.rows[0].line, 7) << "the quoted line break counts";
  EXPECT_FALSE(r.next(s));
}

TEST(CsvStream, ErrorsNameTheLine) {
  auto error = [](const std::string& text, const std::string& format = "") {
    CsvStreamSpec sp = spec();
    sp.time_format = format;
    std::istringstream in(text);
    return error_of([&] {
      CsvStreamReader r(in, sp, "feed");
      CsvStreamStep s;
      while (r.next(s)) {
      }
    });
  };
  const std::string head = "date,ticker,a,b\n";
  EXPECT_TRUE(contains(error(""), "feed: no header row"));
  EXPECT_TRUE(contains(error("time,ticker,a,b\n"), "data.time_column = 'date' is not a column of feed"));
  EXPECT_TRUE(contains(error(head + "1,X,1\n"), "feed:2: 3 fields, the header has 4"));
  EXPECT_TRUE(contains(error(head + "2,X,1,2\n1,X,1,2\n"), "feed:3: time '1' is before the time step being read ('2', line 2)"));
  EXPECT_TRUE(contains(error(head + "1,X,1,2\n\n1,Y,1,2\n"), "feed:4: time '1' is not after the last time step"));
  EXPECT_TRUE(contains(error(head + "1,X,1,2\n1,X,3,4\n"), "feed:3: instrument 'X' appears twice at time '1'"));
  EXPECT_TRUE(contains(error(head + "1,X,1,2\n2020-01-01,X,1,2\n"), "feed:3: time '2020-01-01' is a date"));
  EXPECT_TRUE(contains(error(head + "Jan 1 2000,X,1,2\n"), "set data.time_format"));
  EXPECT_TRUE(contains(error(head + "Jan 1 2000,X,1,2\n", "%d/%m/%Y"), "does not match data.time_format"));
  EXPECT_TRUE(contains(error(head + "1,X,-inf,2\n"), "feed:2: column 'a': '-inf' is infinite"));
  EXPECT_TRUE(contains(error(head + "1,X,1e39,2\n"), "outside the float32 range"));
  EXPECT_TRUE(contains(error(head + "1,,1,2\n"), "feed:2: column 'ticker': the instrument is empty"));
  EXPECT_TRUE(contains(error(head + "1,\"X,1,2\n"), "never closed"));
}

TEST(CsvStream, ALineIsCappedAt16MiBAndTheErrorNamesTheLine) {
  EXPECT_EQ(kMaxLineBytes, size_t(16) << 20);
  const std::string head = "date,ticker,a,b\n1,X,1,2\n";
  // No newline at all (a line of /dev/zero), and a long line that does end: both stop at the cap.
  for (const std::string& tail : {std::string(kMaxLineBytes + 1, '\0'), std::string(kMaxLineBytes + 1, '7') + "\n"}) {
    std::istringstream in(head + tail);
    const std::string e = error_of([&] {
      CsvStreamReader r(in, spec(), "feed");
      CsvStreamStep s;
      while (r.next(s)) {
      }
    });
    EXPECT_TRUE(contains(e, "feed:3: a line longer than 16 MiB (the line length cap)")) << e.substr(0, 300);
  }
  // A line of exactly the cap is read.
  std::istringstream ok(head + "2,\"" + std::string(kMaxLineBytes - 8, 'Y') + "\",3,4\n");
  CsvStreamReader r(ok, spec(), "feed");
  CsvStreamStep s;
  ASSERT_TRUE(r.next(s));
  ASSERT_TRUE(r.next(s));
  EXPECT_EQ(s.rows[0].instrument.size(), kMaxLineBytes - 8);
  // The panel reader, on text in memory.
  CsvSpec panel;
  panel.feature_columns = {"a"}, panel.target_columns = {"b"};
  const std::string text = "time,instrument,a,b\n1,X,1,2\n1,Y," + std::string(kMaxLineBytes, '1') + ",2\n";
  const std::string e = error_of([&] { parse_csv_panel(text, panel, "big.csv"); });
  EXPECT_TRUE(contains(e, "big.csv:3: a record longer than 16 MiB (the line length cap)")) << e.substr(0, 300);
}

TEST(CsvStream, ForAStateAFinalPartialLineIsHeldAndTheEndOfInputIsMarked) {
  const std::string head = "date,ticker,a,b\n";
  {  // The last step is ended by the end of the input; a blank line ends one for good.
    std::istringstream in(head + "1,X,1,2\n2,X,3,4\n\n3,X,5,6\n");
    CsvStreamReader r(in, spec(), "feed");
    CsvStreamStep s;
    ASSERT_TRUE(r.next(s));
    EXPECT_FALSE(s.ended_by_input_end);  // by the row of time 2
    ASSERT_TRUE(r.next(s));
    EXPECT_FALSE(s.ended_by_input_end);  // by the blank line
    ASSERT_TRUE(r.next(s));
    EXPECT_EQ(s.time, "3");
    EXPECT_TRUE(s.ended_by_input_end);
    EXPECT_FALSE(r.next(s));
  }
  {  // A final line without a newline (a row cut short: "2,X,3" of "2,X,3,4") is not read when held.
    std::istringstream in(head + "1,X,1,2\n1,Y,1,2\n2,X,3");
    CsvStreamReader r(in, spec(), "feed");
    r.hold_partial_input();
    CsvStreamStep s;
    ASSERT_TRUE(r.next(s));
    EXPECT_EQ(s.rows.size(), 2u);
    EXPECT_TRUE(s.ended_by_input_end);
    EXPECT_FALSE(r.next(s));
    EXPECT_EQ(r.held_line(), 4);
  }
  {  // A record whose quoted field a partial final line cuts short is held whole.
    std::istringstream in(head + "1,X,1,2\n2,\"Y\nInc");
    CsvStreamReader r(in, spec(), "feed");
    r.hold_partial_input();
    CsvStreamStep s;
    ASSERT_TRUE(r.next(s));
    EXPECT_TRUE(s.ended_by_input_end);
    EXPECT_FALSE(r.next(s));
    EXPECT_EQ(r.held_line(), 3);
  }
  {  // The rows a state holds (times up to 2) are passed over at the start; later ones are read.
    std::istringstream in(head + "1,X,1,2\n2,X,3,4\n2,Y,3,4\n\n3,X,5,6\n4,X,7,8\n");
    CsvStreamReader r(in, spec(), "feed");
    r.skip_through(2);
    CsvStreamStep s;
    ASSERT_TRUE(r.next(s));
    EXPECT_EQ(s.time, "3");
    EXPECT_EQ(s.rows[0].line, 6);
    EXPECT_EQ(r.skipped_rows(), 3);
  }
  {  // Once past them, a time at or before the state's is refused as before.
    std::istringstream in(head + "3,X,1,2\n2,X,3,4\n");
    CsvStreamReader r(in, spec(), "feed");
    r.skip_through(2);
    const std::string e = error_of([&] {
      CsvStreamStep s;
      while (r.next(s)) {
      }
    });
    EXPECT_TRUE(contains(e, "feed:3: time '2' is before the time step being read")) << e;
  }
}

TEST(CsvStream, AnOutputReadBackKeepsTheRowsUpToTheStatesTime) {
  TempDir dir;
  const std::string head = "time,instrument,context,pred_y";
  auto scan = [&](const std::string& text, double committed) {
    write_bytes(dir / "out.csv", text);
    return scan_stream_output(dir / "out.csv", head, "", committed);
  };
  const std::string rows = head + "\n1,X,1,0.5\n1,\"Y,\n\"\"Inc\"\"\",1,0.25\n2,X,2,0.125\n";
  StreamOutputTail t = scan(rows, 2);  // all committed
  EXPECT_EQ(t.keep, rows.size());
  EXPECT_EQ(t.rows_dropped, 0);
  t = scan(rows + "3,X,3,1\n3,Y,2,", 2);  // one step after the state's time, the last row cut short
  EXPECT_EQ(t.keep, rows.size());
  EXPECT_EQ(t.size, rows.size() + 14);
  EXPECT_EQ(t.rows_dropped, 2);
  EXPECT_EQ(t.time_dropped, "3");
  t = scan(rows, 1);  // the step of time 2 was written after the last save
  EXPECT_EQ(t.keep, rows.size() - 12);
  EXPECT_EQ(t.rows_dropped, 1);
  t = scan(rows + "3,X,3,1\n3,Y,2,", NAN);  // a state without times: every whole row kept
  EXPECT_EQ(t.keep, rows.size() + 8);
  EXPECT_EQ(t.rows_dropped, 1);
  t = scan(head.substr(0, 9), 1);  // a header cut short is written again
  EXPECT_EQ(t.keep, 0u);
  EXPECT_TRUE(contains(error_of([&] { scan(rows, 0.5); }), "out.csv:5: rows of more than one time step ('1', '2')"));
  EXPECT_TRUE(contains(error_of([&] { scan("time,instrument,context,pred_z\n", 1); }),
                       "its first line is 'time,instrument,context,pred_z'"));
  EXPECT_TRUE(contains(error_of([&] { scan(head + "\nnoon,X,1,2\n", 1); }), "out.csv:2: the time 'noon' does not parse"));
}

}  // namespace
}  // namespace mlalpha::test
