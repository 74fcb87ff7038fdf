// `ml-alpha stream` end to end: on a CSV panel, the streamed predictions of each mode equal `ml-alpha predict`'s in
// that mode on the whole history; a stream stopped and restarted from its state file writes the rows of an
// uninterrupted one; bad rows (wrong field count, times going backwards or repeated, an instrument twice, an
// unknown instrument, ±Inf, text in a number's cell) and a state file of another checkpoint are refused with a
// message naming the line, and the state saved before them continues as if they had never been sent; the stream
// never writes over a file it reads, appends to its output when it resumes, locks its state, keeps every
// instrument of its state, caps its lines and refuses settings that would do nothing.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

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

  Result run(const std::string& args, const std::string& prefix = "") {
    const std::string log = (dir_ / "cmd.log").string();
    const int status = std::system((prefix + std::string(MLALPHA_BIN) + " " + args + " > " + log + " 2>&1").c_str());
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
  // A live user's pieces: the step that only the end of `first` completes (time 59) is not committed, so the next
  // piece sends it again; the last piece ends its last step with a blank line.
  const std::string history = write("history.csv", csv(0, 30)), first = write("first.csv", csv(30, 60)),
                    second = write("second.csv", csv(59, 120, "\n")), all = write("all.csv", csv(30, 120));
  for (const std::string mode : {"carry", "window"}) {
    const std::map<std::string, std::string> want = predicted(mode);
    // Straight through, and stopped after time 58 and restarted from the state file, appending to one output.
    Result r = run("stream" + ck + " --mode " + mode + " --history " + history + " -i " + all + " -o " + p("straight.csv"));
    ASSERT_EQ(r.code, 0) << r.out;
    r = run("stream" + ck + " --mode " + mode + " --history " + history + " -i " + first + " --state " + p(mode + ".state") +
            " -o " + p("resumed.csv"));
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("the time step '59' (4 row(s) from line 118) was completed only by the end of the input"),
              std::string::npos) << r.out;
    r = run("stream" + ck + " --mode " + mode + " -i " + second + " --state " + p(mode + ".state") + " -o " + p("resumed.csv"));
    ASSERT_EQ(r.code, 0) << r.out;
    const auto straight = streamed(p("straight.csv"));
    EXPECT_EQ(straight.size(), size_t(90 * 4));
    EXPECT_EQ(test::read_bytes(p("resumed.csv")), test::read_bytes(p("straight.csv")))
        << mode << ": a restarted stream's output differs from the uninterrupted one's";
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
  const std::string good = write("good.csv", csv(0, 20, "\n"));
  ASSERT_EQ(run("stream" + ck + " -i " + good + " -o " + p("g.csv")).code, 0);
  const std::string saved = test::read_bytes(p("s.state"));
  struct Bad {
    std::string rows, message;
  };
  const std::vector<Bad> bad = {
      {"20,inst0,1,2\n", "4 fields, the header has 6"},
      {csv(20, 21).substr(lines_[0].size() + 1) + "19,inst0,1,2,3,0\n", "is before the time step being read"},
      {csv(20, 21).substr(lines_[0].size() + 1) + "\n19,inst1,1,2,3,0\n", "is not after the last time step"},
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
  const std::string rest = write("rest.csv", csv(20, 40, "\n"));
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

TEST_F(CliStream, NeverWritesOverAFileItReads) {
  const std::string ck = " --device cpu --checkpoint " + p("run/best.safetensors") + " --instruments inst0,inst1,inst2,inst3";
  const std::string in = write("in.csv", csv(0, 10)), names = write("names.txt", "inst0\ninst1\ninst2\ninst3\n");
  const std::string history = write("hist.csv", csv(0, 5)), rest = write("rest.csv", csv(5, 10));
  fs::create_symlink(in, p("link.csv"));
  fs::create_hard_link(in, p("hard.csv"));
  fs::create_symlink(p("run/best.safetensors.optim.safetensors"), p("sidecar.csv"));
  const std::string before = test::read_bytes(in), sidecar = test::read_bytes(p("run/best.safetensors.optim.safetensors"));
  struct Case {
    std::string args, message;
  };
  const std::vector<Case> cases = {
      {"-i " + in + " -o " + p("link.csv"), "--output " + p("link.csv") + " is the same file as --input " + in},
      {"-i " + in + " -o " + p("hard.csv"), "--output " + p("hard.csv") + " is the same file as --input " + in},
      {"--history " + history + " -i " + rest + " -o " + history, "is the same file as --history"},
      {"--instruments-file " + names + " -i " + in + " -o " + names, "is the same file as --instruments-file"},
      {"-i " + in + " -o " + p("sidecar.csv"), "is the same file as the checkpoint's " + p("run/best.safetensors.optim.safetensors")},
      {"-i " + in + " -o " + p("run/best.safetensors"), "is the same file as --checkpoint"},
      {"-i " + in + " --state " + p("link.csv") + " -o " + p("out.csv"), "--state " + p("link.csv") + " is the same file as --input"},
      {"-i " + in + " --state " + p("s.state") + " -o " + p("s.state"), "is the stream's state file"},
      {"-o " + p("hard.csv") + " < " + in, "is the same file as standard input"},
  };
  for (const Case& c : cases) {
    const Result r = run("stream" + ck + " " + c.args);
    EXPECT_EQ(r.code, 1) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.message), std::string::npos) << c.args << "\n" << r.out;
  }
  EXPECT_EQ(test::read_bytes(in), before) << "an input was written over";
  EXPECT_EQ(test::read_bytes(p("run/best.safetensors.optim.safetensors")), sidecar);
  EXPECT_FALSE(fs::exists(p("out.csv")));
}

TEST_F(CliStream, AResumedStreamAppendsAndDropsOnlyTheRowsAfterItsState) {
  const std::string ck = " --device cpu --checkpoint " + p("run/best.safetensors") + " --instruments inst0,inst1,inst2,inst3";
  const std::string all = write("all.csv", csv(0, 30, "\n")), first = write("first.csv", csv(0, 10, "\n")),
                    second = write("second.csv", csv(10, 30, "\n"));
  ASSERT_EQ(run("stream" + ck + " -i " + all + " -o " + p("straight.csv")).code, 0);
  const std::string straight = test::read_bytes(p("straight.csv"));
  ASSERT_EQ(run("stream" + ck + " -i " + first + " --state " + p("s.state") + " -o " + p("out.csv")).code, 0);
  const std::string saved = test::read_bytes(p("s.state")), part = test::read_bytes(p("out.csv"));
  // Resumed: the rows already written are kept, the header is not repeated.
  Result r = run("stream" + ck + " -i " + second + " --state " + p("s.state") + " -o " + p("out.csv"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(test::read_bytes(p("out.csv")), straight);
  // A stream stopped after writing a step's rows (and half a row) but before saving its state: the rows are
  // dropped and written again, once.
  test::write_bytes(p("s.state"), saved);
  size_t end = part.size();  // the end of the rows of time 10
  for (int i = 0; i < 4; ++i) end = straight.find('\n', end) + 1;
  test::write_bytes(p("out.csv"), straight.substr(0, end) + straight.substr(end, 7));
  r = run("stream" + ck + " -i " + second + " --state " + p("s.state") + " -o " + p("out.csv"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("dropped 5 row(s) of time '10' written after the state's last save"), std::string::npos) << r.out;
  EXPECT_EQ(test::read_bytes(p("out.csv")), straight);
  // An output that is not this stream's, or holds more than a step past the state, is refused, unchanged.
  test::write_bytes(p("s.state"), saved);
  test::write_bytes(p("other.csv"), "time,instrument,context,pred_other\n");
  r = run("stream" + ck + " -i " + second + " --state " + p("s.state") + " -o " + p("other.csv"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("it is not this stream's output"), std::string::npos) << r.out;
  EXPECT_EQ(test::read_bytes(p("other.csv")), "time,instrument,context,pred_other\n");
  test::write_bytes(p("s.state"), saved);
  test::write_bytes(p("out.csv"), straight);
  r = run("stream" + ck + " -i " + second + " --state " + p("s.state") + " -o " + p("out.csv"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("rows of more than one time step ('10', '11')"), std::string::npos) << r.out;
  EXPECT_EQ(test::read_bytes(p("out.csv")), straight);
}

TEST_F(CliStream, AStepCompletedOnlyByTheEndOfInputIsNotCommitted) {
  const std::string ck = " --device cpu --checkpoint " + p("run/best.safetensors") + " --instruments inst0,inst1,inst2,inst3";
  ASSERT_EQ(run("stream" + ck + " -i " + write("all.csv", csv(0, 20, "\n")) + " -o " + p("straight.csv")).code, 0);
  // The first piece ends in the middle of time 9 (two of its four rows, the second without a newline); the
  // second sends time 9 whole.
  std::string first = csv(0, 9) + lines_[37] + "\n" + lines_[38];
  Result r = run("stream" + ck + " -i " + write("first.csv", first) + " --state " + p("s.state") + " -o " + p("out.csv"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("line 39 of " + p("first.csv") + " has no newline"), std::string::npos) << r.out;
  r = run("info --state " + p("s.state"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("time steps: 9, the last at time 8"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("checkpoint: " + p("run/best.safetensors")), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("mode carry, kernels cpu-fast"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| inst3 | 9 |"), std::string::npos) << r.out;
  EXPECT_NE(run("info --checkpoint " + p("s.state")).out.find("restart: send rows after time 8"), std::string::npos);
  // The restart resends from the start of the file: what the state holds is passed over.
  r = run("stream" + ck + " -i " + write("second.csv", csv(0, 20, "\n")) + " --state " + p("s.state") + " -o " + p("out.csv"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("passed over 36 input row(s)"), std::string::npos) << r.out;
  EXPECT_EQ(test::read_bytes(p("out.csv")), test::read_bytes(p("straight.csv")));
}

TEST_F(CliStream, OneStreamAStateEveryInstrumentKeptAndItsKernels) {
  const std::string ck = " --device cpu --checkpoint " + p("run/best.safetensors") + " --state " + p("s.state");
  ASSERT_EQ(run("stream" + ck + " --instruments inst0,inst1,inst2,inst3 -i " + write("a.csv", csv(0, 5, "\n")) + " -o " +
                p("a_out.csv")).code, 0);
  const std::string saved = test::read_bytes(p("s.state"));
  const std::string more = write("b.csv", csv(5, 10, "\n"));
  {  // Another process holds the state: refused, naming it.
    const int fd = ::open(p("s.state.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
    ASSERT_EQ(::pwrite(fd, "4242\n", 5, 0), 5);
    const Result r = run("stream" + ck + " -i " + more + " -o " + p("b_out.csv"));
    ::close(fd);
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.out.find("s.state.lock is locked by process 4242"), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(p("b_out.csv")));
  }
  // Fewer instruments than the state holds: refused, naming those left out.
  Result r = run("stream" + ck + " --instruments inst0,inst2 -i " + more + " -o " + p("b_out.csv"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("leaves out: inst1, inst3"), std::string::npos) << r.out;
  EXPECT_EQ(test::read_bytes(p("s.state")), saved);
  // The reference kernels do not continue the fast kernels' carried state.
  r = run("stream" + ck + " --set 'run.cpu_kernels=\"reference\"' -i " + more + " -o " + p("b_out.csv"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("a carry state of the cpu-fast kernels, this stream runs the cpu-reference kernels"),
            std::string::npos) << r.out;
  EXPECT_EQ(test::read_bytes(p("s.state")), saved);
  // A --history that reaches past the state's last time is not a warm-up the state holds: refused.
  r = run("stream" + ck + " --history " + write("h.csv", csv(0, 6)) + " -i " + more + " -o " + p("b_out.csv"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("reaches time '5', after the last time of --state"), std::string::npos) << r.out;
  EXPECT_EQ(test::read_bytes(p("s.state")), saved);
  // Listing more instruments keeps the state's and adds the new one.
  r = run("stream" + ck + " --instruments inst0,inst1,inst2,inst3,extra -i " + more + " -o " + p("b_out.csv"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(run("info --state " + p("s.state")).out.find("| extra | 0 |"), std::string::npos);
  // A device as the output (/dev/null) is written on, not read back or truncated, when resuming too.
  r = run("stream" + ck + " -i " + write("c.csv", csv(10, 12, "\n")) + " -o /dev/null");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(run("info --state " + p("s.state")).out.find("the last at time 11"), std::string::npos);
}

TEST_F(CliStream, LinesAreCappedAndSettingsThatDoNothingAreRefused) {
  const std::string ck = " --device cpu --checkpoint " + p("run/best.safetensors") + " --instruments inst0,inst1,inst2,inst3";
  const std::string in = write("in.csv", csv(0, 5));
  // A line without end stops at the cap (each within `timeout`: today's reader grows without bound).
  const std::vector<std::pair<std::string, std::string>> endless = {
      {"--instruments-file /dev/zero -i " + in, "--instruments-file /dev/zero:1: a line longer than 16 MiB"},
      {"-i /dev/zero", "/dev/zero:1: a line longer than 16 MiB"},
      {"< /dev/zero", "<stdin>:1: a line longer than 16 MiB"},
      {"--history /dev/zero -i " + in, "/dev/zero:1: a line longer than 16 MiB"},
  };
  for (const auto& [args, message] : endless) {
    const Result r = run("stream" + ck + " -o " + p("x.csv") + " " + args, "timeout 60 ");
    EXPECT_EQ(r.code, 1) << args << "\n" << r.out.substr(0, 500);
    EXPECT_NE(r.out.find(message), std::string::npos) << args << "\n" << r.out.substr(0, 500);
  }
  const std::string st = "stream" + ck + " -o " + p("x.csv");
  const std::vector<std::pair<std::string, std::string>> refused = {
      {st + " --set data.feature_norm=rank -i " + in,
       "data.feature_norm = 'rank' but " + p("run/best.safetensors") + " was trained with 'global'"},
      {st + " --instruments-file /dev/null -i " + in, "--instruments-file /dev/null: names no instrument"},
      {st + " --set train.steps=5 -i " + in, "--set train.steps=5: train.steps does nothing for the stream"},
      {st + " --set split.train_end=10 -i " + in, "split.train_end does nothing for the stream"},
      {"predict --device cpu --checkpoint " + p("run/best.safetensors") + " --set model.d_model=16 -o " + p("x"),
       "model.d_model does nothing for eval and predict"},
      {st + " --members top:1 -i " + in, "--members chooses among the members of a population's run folder"},
      {st + " --fold 0 -i " + in, "--fold chooses among the members of a population's run folder"},
      {st + " --fold -2 -i " + in, "--fold: folds count from 0 (the first fold), got -2"},
      {st + " --precision bf16 -i " + in, "--precision bf16 is for the GPU; on the CPU the stream"},
      {st + " --precision '' -i " + in, "--precision: an empty value"},
      {st + " --state '' -i " + in, "--state: an empty value"},
      {st + " --instruments '' -i " + in, "--instruments: an empty value"},
      {st + " --state " + p("data") + " -i " + in, "--state " + p("data") + " is a directory, expected a state file"},
      {"predict --device cpu --checkpoint " + p("run/best.safetensors") + " --members '' -o " + p("x"), "--members: an empty value"},
      {"predict --device cpu --checkpoint " + p("run/best.safetensors") + " --precision '' -o " + p("x"),
       "--precision: an empty value"},
      {"predict --device cpu --checkpoint " + p("run/best.safetensors") + " --precision bf16 -o " + p("x"),
       "--precision bf16 is for the GPU; on the CPU eval and predict"},
      {"predict --device cpu --checkpoint " + p("run/best.safetensors") + " --fold -1 -o " + p("x"), "--fold: folds count from 0"},
  };
  for (const auto& [args, message] : refused) {
    const Result r = run(args);
    EXPECT_EQ(r.code, 1) << args << "\n" << r.out;
    EXPECT_NE(r.out.find(message), std::string::npos) << args << "\n" << r.out;
  }
  EXPECT_FALSE(fs::exists(p("x.csv")));
  EXPECT_FALSE(fs::exists(p("x.npy")));
}

// Found by fuzz/hostile_audit.sh: an --instruments-file that never ends but has short lines (/dev/urandom) ran
// until `timeout`; a full standard output said it failed but not why; info ignored a --fold that has no folder.
TEST_F(CliStream, EndlessNamesAFullOutputAndAnIgnoredFoldAreRefused) {
  const std::string ck = " --device cpu --checkpoint " + p("run/best.safetensors");
  const std::string in = write("in.csv", csv(0, 5));
  Result r = run("stream" + ck + " --instruments-file /dev/urandom -i " + in + " -o " + p("x.csv"), "timeout 60 ");
  EXPECT_EQ(r.code, 1) << r.out.substr(0, 500);
  EXPECT_NE(r.out.find("--instruments-file /dev/urandom: more than 1048576 instruments"), std::string::npos)
      << r.out.substr(0, 500);
  EXPECT_FALSE(fs::exists(p("x.csv")));
  // run() sends standard output to its log: this one goes to /dev/full, the messages to the log.
  const int status = std::system((std::string(MLALPHA_BIN) + " stream" + ck + " --instruments inst0,inst1,inst2,inst3 -i " +
                                  in + " > /dev/full 2> " + p("full.log")).c_str());
  EXPECT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 1);
  EXPECT_NE(test::read_bytes(p("full.log")).find("writing the predictions to standard output failed: No space left on device"),
            std::string::npos) << test::read_bytes(p("full.log"));
  r = run("info --checkpoint " + p("run/best.safetensors") + " --fold 3");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("--fold 3 is for a population run folder"), std::string::npos) << r.out;
  r = run("info --fold 1");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("--fold 1 lists a population run folder's members"), std::string::npos) << r.out;
}

TEST_F(CliStream, PredictNeverWritesOverItsData) {
  // --out panel names panel.csv, the data predict reads: refused, the data unchanged (the rename would replace it).
  const std::string before = test::read_bytes(p("data/panel.csv"));
  Result r = run("predict --device cpu --checkpoint " + p("run/best.safetensors") + " --split all -o " + p("data/panel"));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find(p("data/panel.csv") + " is the same file as data.csv"), std::string::npos) << r.out;
  fs::create_hard_link(p("data/panel.csv"), p("alias.csv"));
  r = run("predict --device cpu --checkpoint " + p("run/best.safetensors") + " --split all -o " + p("alias"));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("the command would write over a file it reads"), std::string::npos) << r.out;
  EXPECT_EQ(test::read_bytes(p("data/panel.csv")), before);
  EXPECT_FALSE(fs::exists(p("data/panel.npy")));
}

// eval --long-short-svg renames the plot over its path: the checkpoint, its optimizer sidecar and the data were
// written over (an SVG where the weights were) before it was refused.
TEST_F(CliStream, EvalNeverWritesItsPlotOverAFileItReads) {
  const std::string ck = p("run/best.safetensors");
  const std::map<std::string, std::string> files = {{ck, test::read_bytes(ck)},
                                                    {ck + ".optim.safetensors", test::read_bytes(ck + ".optim.safetensors")},
                                                    {p("data/panel.csv"), test::read_bytes(p("data/panel.csv"))}};
  for (const auto& [path, bytes] : files) {
    const Result r = run("eval --device cpu --checkpoint " + ck + " --long-short-svg " + path);
    EXPECT_EQ(r.code, 1) << path << "\n" << r.out;
    EXPECT_NE(r.out.find("--long-short-svg " + path + ": " + path + " is the same file as"), std::string::npos) << r.out;
    EXPECT_EQ(test::read_bytes(path), bytes) << path << " was written over";
  }
  // Another path is written.
  const Result r = run("eval --device cpu --checkpoint " + ck + " --long-short-svg " + p("ls.svg"));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(test::read_bytes(p("ls.svg")).rfind("<svg", 0), 0u);
}

}  // namespace
}  // namespace mlalpha
