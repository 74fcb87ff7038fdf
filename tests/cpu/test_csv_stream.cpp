// The row-by-row CSV reader of `ml-alpha stream` (data/csv_stream.h): time steps end at a later time, a blank
// line or the end; quoting, CRLF and a byte-order mark as the panel reader; two spellings of one instant are one
// step; the errors name the input and the line.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "data/csv_stream.h"
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

}  // namespace
}  // namespace mlalpha::test
