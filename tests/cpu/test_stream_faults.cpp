// The stream's fault sweep (docs/testing.md, "The fault sweep"): `ml-alpha stream --state`, warmed up on a
// `--history`, fed in three pieces, as a live user feeds it (the first ends in a step only the end of its input completes, the second in a row cut short
// without a newline, the last ends its last step with a blank line). Each piece's fault points are counted
// (MLALPHA_FAULT_LOG); then for every piece and every k the piece's command is killed at its k-th point
// (MLALPHA_FAULT_AT = k, SIGKILL before the effect), run again unchanged, and the later pieces run: the output and
// the state file must equal the uninterrupted stream's bit for bit, and the input pieces must be untouched. A kill
// between a step's rows and its state save leaves rows the restart drops: that restart is killed at its
// truncation (or, before the first save, its new output) too, then run again. No temporary file of a killed state
// save is left behind.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "test_files.h"

namespace fs = std::filesystem;

namespace mlalpha {
namespace {

// The command's exit status; a process killed by signal s reads 128 + s (as the shell reports it when it does not
// exec the command itself).
int sh(const std::string& command) {
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
}

// The kinds of the fault points a log lists ("append", "save", "rename", ...), in order.
std::vector<std::string> fault_kinds(const std::string& log) {
  std::vector<std::string> kinds;
  std::istringstream in(test::read_bytes(log));
  for (std::string line; std::getline(in, line);) {
    const size_t tab = line.find('\t');
    kinds.push_back(line.substr(tab + 1, line.find(' ', tab) - tab - 1));
  }
  return kinds;
}

TEST(StreamFaults, KilledAtEveryFaultPointARestartEqualsTheUninterruptedStream) {
  test::TempDir dir;
  const std::string bin = MLALPHA_BIN, log = dir / "cmd.log";
  ASSERT_EQ(sh(bin + " synth -o " + (dir / "data") + " --format csv --instruments 3 --timesteps 40 --features 2 > " + log), 0);
  const std::string data = " --set 'data.source=\"csv\"' --set 'data.csv=\"" + (dir / "data/panel.csv") +
                           "\"' --set 'data.feature_columns=[\"f0\",\"f1\"]' --set 'data.target_columns=[\"y0\"]'";
  ASSERT_EQ(sh(bin + " train --device cpu --threads 1" + data + " --d-model 8 --head-dim 4 --layers 1 -B 2 -L 4 "
               "--steps 2 --warmup 1 --eval-every 0 -o " + (dir / "run") + " > " + log + " 2>&1"), 0)
      << test::read_bytes(log);
  std::vector<std::string> lines;  // the panel: a header, then 3 rows a time step
  {
    std::ifstream in(dir / "data/panel.csv");
    for (std::string line; std::getline(in, line);) lines.push_back(line);
  }
  auto rows = [&](int t0, int t1) {
    std::string s;
    for (int t = t0; t < t1; ++t)
      for (int i = 0; i < 3; ++i) s += lines[size_t(1 + 3 * t + i)] + "\n";
    return s;
  };
  // A warm-up history of steps 0-2 (the first piece's command names it; its restarts pass it over), then the
  // pieces: steps 3-4 (5 is only ended by the input's end), 5-6 (7 likewise, and half a row of 8), 7-9 (ended
  // by a blank line).
  const std::string history = dir / "history.csv";
  test::write_bytes(history, lines[0] + "\n" + rows(0, 3));
  const std::vector<std::string> pieces = {
      lines[0] + "\n" + rows(3, 6),
      lines[0] + "\n" + rows(5, 8) + lines[25].substr(0, 7),
      lines[0] + "\n" + rows(7, 10) + "\n",
  };
  std::vector<std::string> piece_files;
  for (size_t j = 0; j < pieces.size(); ++j) {
    piece_files.push_back(dir / ("piece" + std::to_string(j) + ".csv"));
    test::write_bytes(piece_files.back(), pieces[j]);
  }
  // The j-th piece's command in folder `at` (state and output there).
  auto command = [&](size_t j, const std::string& at) {
    return bin + " stream --device cpu --threads 1 --checkpoint " + (dir / "run/best.safetensors") +
           " --instruments inst0,inst1,inst2 --state " + at + "/s.state -i " + piece_files[j] + " -o " + at + "/out.csv" +
           (j == 0 ? " --history " + history : "");
  };
  auto snapshot = [](const std::string& at) {
    std::map<std::string, std::string> files;
    for (const char* name : {"s.state", "out.csv"})
      if (fs::exists(fs::path(at) / name)) files[name] = test::read_bytes(fs::path(at) / name);
    return files;
  };

  // The uninterrupted stream, the files before each piece, and each piece's fault points.
  const std::string clean = dir / "clean";
  fs::create_directories(clean);
  std::vector<std::map<std::string, std::string>> before;
  std::vector<std::vector<std::string>> kinds;  // each piece's fault points, in order: "append", "save", ...
  for (size_t j = 0; j < pieces.size(); ++j) {
    before.push_back(snapshot(clean));
    const std::string faults = dir / ("faults" + std::to_string(j) + ".log");
    ASSERT_EQ(sh("MLALPHA_FAULT_LOG=" + faults + " " + command(j, clean) + " > " + log + " 2>&1"), 0) << test::read_bytes(log);
    kinds.push_back(fault_kinds(faults));
    std::map<std::string, int> count;
    for (const std::string& kind : kinds.back()) ++count[kind];
    // Each committed step: its rows appended, the state saved (and renamed into place); the first piece also
    // creates the output and writes its header.
    const int steps = j == 2 ? 3 : 2;
    EXPECT_EQ(count["save"], steps) << "piece " << j;
    EXPECT_EQ(count["rename"], steps) << "piece " << j;
    EXPECT_EQ(count["append"], steps + (j == 0 ? 1 : 0)) << "piece " << j;
    EXPECT_EQ(count["create"], j == 0 ? 1 : 0) << "piece " << j;
    EXPECT_EQ(int(kinds.back().size()), 3 * steps + (j == 0 ? 2 : 0)) << "piece " << j;
  }
  const std::map<std::string, std::string> want = snapshot(clean);
  ASSERT_EQ(want.size(), 2u);
  EXPECT_EQ(std::count(want.at("out.csv").begin(), want.at("out.csv").end(), '\n'), 1 + 7 * 3);

  // Killed at each point of each piece, restarted with the same command, then the later pieces. A kill before a
  // state save leaves a step's rows past the state: the restart drops them first, and is killed there once too.
  int kills = 0, truncations = 0;
  for (size_t j = 0; j < pieces.size(); ++j)
    for (int k = 1; k <= int(kinds[j].size()); ++k) {
      const std::string at = dir / ("k" + std::to_string(j) + "_" + std::to_string(k));
      fs::create_directories(at);
      for (const auto& [name, bytes] : before[j]) test::write_bytes(fs::path(at) / name, bytes);
      const std::string where = "piece " + std::to_string(j) + ", fault point " + std::to_string(k);
      ASSERT_EQ(sh("MLALPHA_FAULT_AT=" + std::to_string(k) + " " + command(j, at) + " > " + log + " 2>&1"), 128 + 9)
          << where << ": not killed\n" << test::read_bytes(log);
      ++kills;
      if (kinds[j][size_t(k - 1)] == "save") {
        const std::string faults = at + "/faults.log";
        ASSERT_EQ(sh("MLALPHA_FAULT_AT=1 MLALPHA_FAULT_LOG=" + faults + " " + command(j, at) + " > " + log + " 2>&1"), 128 + 9)
            << where << ": the restart was not killed\n" << test::read_bytes(log);
        // Before the first save there is no state: the restart is a new stream, and starts the output afresh.
        const bool new_stream = j == 0 && std::count(kinds[0].begin(), kinds[0].begin() + k, "save") == 1;
        EXPECT_EQ(fault_kinds(faults), std::vector<std::string>{new_stream ? "create" : "truncate"}) << where;
        truncations += new_stream ? 0 : 1;
      }
      for (size_t r = j; r < pieces.size(); ++r)
        ASSERT_EQ(sh(command(r, at) + " > " + log + " 2>&1"), 0) << where << ", piece " << r << "\n" << test::read_bytes(log);
      const std::map<std::string, std::string> got = snapshot(at);
      std::vector<std::string> files;  // no temporary file of a killed state save left behind
      for (const auto& e : fs::directory_iterator(at))
        if (e.path().filename() != "faults.log") files.push_back(e.path().filename().string());
      std::sort(files.begin(), files.end());
      EXPECT_EQ(files, (std::vector<std::string>{"out.csv", "s.state", "s.state.lock"})) << where;
      EXPECT_EQ(got.at("out.csv"), want.at("out.csv")) << where << ": the output differs from the uninterrupted one";
      EXPECT_EQ(got.at("s.state"), want.at("s.state")) << where << ": the state differs from the uninterrupted one";
      fs::remove_all(at);
    }
  EXPECT_EQ(kills, 8 + 6 + 9);
  EXPECT_EQ(truncations, 1 + 2 + 3);
  for (size_t j = 0; j < pieces.size(); ++j) EXPECT_EQ(test::read_bytes(piece_files[j]), pieces[j]) << "piece " << j;
  EXPECT_EQ(test::read_bytes(history), lines[0] + "\n" + rows(0, 3));
}

}  // namespace
}  // namespace mlalpha
