// `ml-alpha stream` end to end: on a CSV panel, the streamed predictions of each mode equal `ml-alpha predict`'s in
// that mode on the whole history; a stream stopped and restarted from its state file writes the rows of an
// uninterrupted one; bad rows (wrong field count, times going backwards or repeated, an instrument twice, an
// unknown instrument, ±Inf, text in a number's cell) and a state file of another checkpoint are refused with a
// message naming the line, and the state saved before them continues as if they had never been sent.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>

#include "test_files.h"

namespace fs = std::filesystem;

namespace mlalpha {
namespace {

struct Result {
  int code;
  std::string out;  // stdout and stderr
};

class CliStream : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mlalpha_cli_stream_" + std::to_string(std::random_device{}()));
    fs::create_directories(dir_);
    data_ = "--set 'data.source=\"csv\"' --set 'data.csv=\"" + p("data/panel.csv") +
            "\"' --set 'data.feature_columns=[\"f0\",\"f1\",\"f2\"]' --set 'data.target_columns=[\"y0\"]'";
    ASSERT_EQ(run("synth -o " + p("data") + " --format csv --instruments 4 --timesteps 120 --features 3").code, 0);
    // The panel's lines: a header, then 4 rows a time step, times 0 .. 119.
    std::ifstream in(p("data/panel.csv"));
    for (std::string line; std::getline(in, line);) lines_.push_back(line);
    const Result r = run("train --device cpu " + data_ + " --d-model 16 --head-dim 8 --layers 1 -B 4 -L 12 --steps 8 "
                         "--warmup 1 --eval-every 4 -o " + p("run"));
    ASSERT_EQ(r.code, 0) << r.out;
  }
  void TearDown() override { fs::remove_all(dir_); }

  Result run(const std::string& args) {
    const std::string log = (dir_ / "cmd.log").string();
    const int status = std::system((std::string(MLALPHA_BIN) + " " + args + " > " + log + " 2>&1").c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, test::read_bytes(log)};
  }
  std::string p(const std::string& name) const { return (dir_ / name).string(); }
  // The header and the rows of time steps [t0, t1), with `extra` lines appended.
  std::string csv(int t0, int t1, const std::string& extra = "") const {
    std::string s = lines_[0] + "\n";
    for (int t = t0; t < t1; ++t)
      for (int i = 0; i < 4; ++i) s += lines_[size_t(1 + 4 * t + i)] + "\n";
    return s + extra;
  }
  std::string write(const std::string& name, const std::string& text) const {
    test::write_bytes(dir_ / name, text);
    return p(name);
  }
  // predict's (time, instrument) -> prediction text, in `mode`.
  std::map<std::string, std::string> predicted(const std::string& mode) {
    const Result r = run("predict --device cpu --checkpoint " + p("run/best.safetensors") + " --split all --mode " + mode +
                         " -o " + p("pred_" + mode));
    EXPECT_EQ(r.code, 0) << r.out;
    std::map<std::string, std::string> out;
    const auto rows = test::read_csv_rows(p("pred_" + mode + ".csv"));
    for (size_t k = 1; k < rows.size(); ++k) out[rows[k][0] + "," + rows[k][1]] = rows[k][4];
    return out;
  }
  // The stream's output rows (time,instrument,context,pred) as (time, instrument) -> pred text; checks the header.
  std::map<std::string, std::string> streamed(const std::string& file) {
    std::map<std::string, std::string> out;
    const auto rows = test::read_csv_rows(file);
    EXPECT_FALSE(rows.empty());
    if (rows.empty()) return out;
    EXPECT_EQ(rows[0], (std::vector<std::string>{"time", "instrument", "context", "pred_y0"}));
    for (size_t k = 1; k < rows.size(); ++k) out[rows[k][0] + "," + rows[k][1]] = rows[k][3];
    return out;
  }

  fs::path dir_;
  std::vector<std::string> lines_;
  std::string data_;  // the data settings of the panel
};

TEST_F(CliStream, EqualsPredictInEachModeAndResumesFromItsState) {
  const std::string ck = " --device cpu --checkpoint " + p("run/best.safetensors");
  const std::string history = write("history.csv", csv(0, 30)), first = write("first.csv", csv(30, 60)),
                    second = write("second.csv", csv(60, 120)), all = write("all.csv", csv(30, 120));
  for (const std::string mode : {"carry", "window"}) {
    const std::map<std::string, std::string> want = predicted(mode);
    // Straight through, and stopped after time 59 and restarted from the state file.
    Result r = run("stream" + ck + " --mode " + mode + " --history " + history + " -i " + all + " -o " + p("straight.csv"));
    ASSERT_EQ(r.code, 0) << r.out;
    r = run("stream" + ck + " --mode " + mode + " --history " + history + " -i " + first + " --state " + p(mode + ".state") +
            " -o " + p("a.csv"));
    ASSERT_EQ(r.code, 0) << r.out;
    r = run("stream" + ck + " --mode " + mode + " -i " + second + " --state " + p(mode + ".state") + " -o " + p("b.csv"));
    ASSERT_EQ(r.code, 0) << r.out;
    const auto straight = streamed(p("straight.csv"));
    auto resumed = streamed(p("a.csv"));
    for (const auto& kv : streamed(p("b.csv"))) resumed.insert(kv);
    EXPECT_EQ(straight.size(), size_t(90 * 4));
    EXPECT_EQ(resumed, straight) << mode << ": a restarted stream differs from the uninterrupted one";
    // --threads (run.threads): another count, the same bytes; out of range refused before any output.
    r = run("stream" + ck + " --mode " + mode + " --threads 1 --history " + history + " -i " + all + " -o " +
            p("one_thread.csv"));
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_EQ(test::read_bytes(p("one_thread.csv")), test::read_bytes(p("straight.csv"))) << mode;
    r = run("stream" + ck + " --mode " + mode + " --threads 65 --history " + history + " -i " + all + " -o " +
            p("too_many.csv"));
    EXPECT_NE(r.code, 0);
    EXPECT_NE(r.out.find("run.threads"), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(p("too_many.csv"))) << mode;
    for (const auto& [key, v] : straight) {
      ASSERT_TRUE(want.count(key)) << key;
      const double a = std::strtod(v.c_str(), nullptr), b = std::strtod(want.at(key).c_str(), nullptr);
      if (std::string(mode) == "window") EXPECT_EQ(v, want.at(key)) << mode << " " << key;
      else EXPECT_NEAR(a, b, 1e-5 * (1 + std::abs(b))) << mode << " " << key;
    }
  }
}

TEST_F(CliStream, BadRowsAreRefusedAndTheSavedStateContinues) {
  const std::string ck = " --device cpu --checkpoint " + p("run/best.safetensors") + " --state " + p("s.state") +
                         " --instruments inst0,inst1,inst2,inst3";
  const std::string good = write("good.csv", csv(0, 20));
  ASSERT_EQ(run("stream" + ck + " -i " + good + " -o " + p("g.csv")).code, 0);
  const std::string saved = test::read_bytes(p("s.state"));
  struct Bad {
    std::string rows, message;
  };
  const std::vector<Bad> bad = {
      {"20,inst0,1,2\n", "4 fields, the header has 6"},
      {csv(20, 21).substr(lines_[0].size() + 1) + "19,inst0,1,2,3,0\n", "is before the time step being read"},
      {"19,inst0,1,2,3,0\n", "is not after the last time step"},
      {csv(20, 21).substr(lines_[0].size() + 1) + "\n20,inst1,1,2,3,0\n", "is not after the last time step"},
      {"20,inst0,1,2,3,0\n20,inst0,1,2,3,0\n", "instrument 'inst0' appears twice at time '20'"},
      {"20,nobody,1,2,3,0\n", "instrument 'nobody' is not one of the stream's 4 instruments"},
      {"20,inst0,1,inf,3,0\n", "'inf' is infinite"},
      {"20,inst0,1,n.a.,3,0\n", "'n.a.' is not a number"},
  };
  for (const Bad& b : bad) {
    test::write_bytes(p("s.state"), saved);
    const Result r = run("stream" + ck + " -i " + write("bad.csv", lines_[0] + "\n" + b.rows) + " -o " + p("x.csv"));
    EXPECT_EQ(r.code, 1) << b.rows;
    EXPECT_NE(r.out.find(b.message), std::string::npos) << b.rows << "\n" << r.out;
    EXPECT_NE(r.out.find("bad.csv:"), std::string::npos) << "the message names the input and its line:\n" << r.out;
  }
  // The last bad input wrote nothing past its refusal: the state continues as if it had never been sent.
  const std::string rest = write("rest.csv", csv(20, 40));
  ASSERT_EQ(run("stream" + ck + " -i " + rest + " -o " + p("after.csv")).code, 0);
  test::write_bytes(p("s.state"), saved);
  ASSERT_EQ(run("stream" + ck + " -i " + rest + " -o " + p("clean.csv")).code, 0);
  EXPECT_EQ(test::read_bytes(p("after.csv")), test::read_bytes(p("clean.csv")));
  // A state written by another checkpoint is refused.
  const Result other = run("train --device cpu " + data_ + " --d-model 16 --head-dim 8 --layers 1 -B 4 -L 12 --steps 8 "
                           "--warmup 1 --seed 5 --eval-every 4 -o " + p("other"));
  ASSERT_EQ(other.code, 0) << other.out;
  const Result r = run("stream --device cpu --checkpoint " + p("other/best.safetensors") + " --state " + p("s.state") +
                       " -i " + rest + " -o " + p("x.csv"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("written for another checkpoint"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace mlalpha
