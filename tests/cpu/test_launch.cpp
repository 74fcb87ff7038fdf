// dist/launch.h with /bin/sh standing in for the engine's binary: every rank gets its own RANK, the shared
// world size and one id-file path (in a folder removed afterwards), rank 0's output passes through and the
// others' go to their logs; one failing rank (non-zero exit, a signal, a binary that cannot run) stops the
// others, also those ignoring SIGTERM, and is the one named. One test re-executes this binary itself, as
// --gpus will.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>

#include "core/error.h"
#include "dist/bootstrap.h"
#include "dist/launch.h"

namespace mlalpha::dist {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class Launch : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mlalpha_launch_" + std::to_string(std::random_device{}()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  LaunchOptions sh(int n, const std::string& script) const {
    LaunchOptions o;
    o.processes = n;
    o.exe = "/bin/sh";
    o.argv = {"sh", "-c", script};
    o.log_dir = dir_.string();
    return o;
  }
  // The Error's text, and how long launch_local took to throw it.
  std::pair<std::string, double> failure_of(const LaunchOptions& o) const {
    const auto t0 = Clock::now();
    std::string what;
    try {
      launch_local(o);
    } catch (const Error& e) {
      what = e.what();
    }
    return {what, std::chrono::duration<double>(Clock::now() - t0).count()};
  }
  fs::path dir_;
};

TEST_F(Launch, EveryRankGetsItsVariablesAndOnlyRankZeroSpeaksThrough) {
  // The launcher's own values of the names it sets must not leak through; NVLink multicast is switched off.
  ::setenv("RANK", "7", 1);
  ::setenv("MLALPHA_LAUNCHED", "0", 1);
  ::unsetenv("NCCL_NVLS_ENABLE");
  const std::string script =
      "printf '%s|%s|%s|%s|%s|%s|%s\\n' \"$RANK\" \"$WORLD_SIZE\" \"$LOCAL_RANK\" \"$LOCAL_WORLD_SIZE\" "
      "\"$MLALPHA_DIST_ID_FILE\" \"$MLALPHA_LAUNCHED\" \"$NCCL_NVLS_ENABLE\" > '" + dir_.string() + "/env.'$RANK; "
      "if [ \"$RANK\" = 0 ]; then echo id > \"$MLALPHA_DIST_ID_FILE\"; fi; "
      "echo \"out of rank $RANK\"; echo \"err of rank $RANK\" >&2";
  testing::internal::CaptureStdout();
  launch_local(sh(3, script));
  const std::string rank0_out = testing::internal::GetCapturedStdout();
  ::unsetenv("RANK");
  ::unsetenv("MLALPHA_LAUNCHED");

  std::string id_file;
  for (int k = 0; k < 3; ++k) {
    std::string line = read_file(dir_ / ("env." + std::to_string(k)));
    ASSERT_FALSE(line.empty()) << "rank " << k << " did not run";
    line.pop_back();  // '\n'
    std::vector<std::string> f;
    std::stringstream s(line);
    for (std::string x; std::getline(s, x, '|');) f.push_back(x);
    ASSERT_EQ(f.size(), 7u) << line;
    EXPECT_EQ(f[0], std::to_string(k));
    EXPECT_EQ(f[1], "3");
    EXPECT_EQ(f[2], std::to_string(k));
    EXPECT_EQ(f[3], "3");
    if (k == 0) id_file = f[4];
    EXPECT_EQ(f[4], id_file) << "every rank must see the same id file";
    EXPECT_EQ(f[5], "1");
    EXPECT_EQ(f[6], "0");
  }
  EXPECT_FALSE(id_file.empty());
  EXPECT_FALSE(fs::exists(id_file));
  EXPECT_FALSE(fs::exists(fs::path(id_file).parent_path())) << "the id file's folder must be removed";

  EXPECT_NE(rank0_out.find("out of rank 0"), std::string::npos) << rank0_out;
  EXPECT_EQ(rank0_out.find("out of rank 1"), std::string::npos) << rank0_out;
  EXPECT_FALSE(fs::exists(dir_ / "rank0.log"));
  for (int k = 1; k < 3; ++k) {
    const std::string log = read_file(dir_ / ("rank" + std::to_string(k) + ".log"));
    EXPECT_NE(log.find("out of rank " + std::to_string(k)), std::string::npos) << log;
    EXPECT_NE(log.find("err of rank " + std::to_string(k)), std::string::npos) << log;
  }
}

TEST_F(Launch, AFailingRankStopsTheOthersAndIsNamedWithItsLog) {
  const auto [what, seconds] = failure_of(sh(3,
      "if [ \"$RANK\" = 1 ]; then sleep 0.2; echo 'rank one gives up' >&2; exit 3; fi; exec sleep 30"));
  EXPECT_NE(what.find("rank 1 of 3 exited with status 3"), std::string::npos) << what;
  EXPECT_NE(what.find("the other ranks were stopped"), std::string::npos) << what;
  EXPECT_NE(what.find((dir_ / "rank1.log").string()), std::string::npos) << what;
  EXPECT_NE(what.find("rank one gives up"), std::string::npos) << what;
  EXPECT_LT(seconds, 10.0) << "the sleeping ranks were not stopped";
}

TEST_F(Launch, AKilledRankIsNamedAndRanksIgnoringSigtermAreKilled) {
  LaunchOptions o = sh(3, "if [ \"$RANK\" = 2 ]; then sleep 0.2; kill -KILL $$; fi; trap '' TERM; exec sleep 30");
  o.grace = std::chrono::milliseconds(300);
  const auto [what, seconds] = failure_of(o);
  EXPECT_NE(what.find("rank 2 of 3 was killed by signal 9"), std::string::npos) << what;
  EXPECT_LT(seconds, 10.0) << "ranks ignoring SIGTERM were not killed after the grace period";
}

TEST_F(Launch, RankZeroFailingIsNamedWithoutALog) {
  const auto [what, seconds] = failure_of(sh(2, "if [ \"$RANK\" = 0 ]; then exit 5; fi; exec sleep 30"));
  EXPECT_NE(what.find("rank 0 of 2 exited with status 5"), std::string::npos) << what;
  EXPECT_EQ(what.find("rank0.log"), std::string::npos) << what;
  EXPECT_LT(seconds, 10.0);
}

TEST_F(Launch, ABinaryThatCannotRunIsNamed) {
  LaunchOptions o = sh(2, "");
  o.exe = (dir_ / "no-such-binary").string();
  const auto [what, seconds] = failure_of(o);
  EXPECT_NE(what.find("rank 0 could not execute '" + o.exe + "'"), std::string::npos) << what;
  EXPECT_NE(what.find("No such file"), std::string::npos) << what;
}

TEST_F(Launch, BadOptionsAreRefused) {
  EXPECT_NE(failure_of(sh(0, "true")).first.find("must be >= 1, got 0"), std::string::npos);
  LaunchOptions o = sh(2, "true");
  o.log_dir = (dir_ / "missing").string();
  EXPECT_NE(failure_of(o).first.find("the log folder '" + o.log_dir + "'"), std::string::npos);
  o = sh(2, "true");
  o.argv.clear();
  EXPECT_NE(failure_of(o).first.find("argv is empty"), std::string::npos);
  // One process needs no log folder, and all succeeding is no error.
  o = sh(1, "exit 0");
  o.log_dir.clear();
  EXPECT_NO_THROW(launch_local(o));
}

// Run by the next test as a launched child of this very binary; skipped when run directly.
TEST(LaunchChild, WritesWhatRankFromEnvReads) {
  if (!is_launched_rank(process_env())) GTEST_SKIP() << "runs only as a child of launch_local";
  const char* dir = std::getenv("MLALPHA_TEST_LAUNCH_DIR");
  ASSERT_NE(dir, nullptr);
  const RankInfo r = rank_from_env(process_env());
  std::ofstream(fs::path(dir) / ("child." + std::to_string(r.rank)))
      << r.rank << " " << r.world << " " << r.local_rank << " " << r.source;
}

TEST_F(Launch, ReexecutesItsOwnBinaryAndRankFromEnvReadsTheRanks) {
  ::setenv("MLALPHA_TEST_LAUNCH_DIR", dir_.string().c_str(), 1);
  LaunchOptions o;  // exe: /proc/self/exe
  o.processes = 2;
  o.argv = {"test_launch", "--gtest_filter=LaunchChild.*"};
  o.log_dir = dir_.string();
  launch_local(o);
  ::unsetenv("MLALPHA_TEST_LAUNCH_DIR");
  EXPECT_EQ(read_file(dir_ / "child.0"), "0 2 0 torchrun");
  EXPECT_EQ(read_file(dir_ / "child.1"), "1 2 1 torchrun");
}

TEST(LaunchEnv, ALaunchedRankIsRecognised) {
  const auto env = [](std::map<std::string, std::string> vars) {
    return EnvLookup([vars](const char* k) -> const char* {
      const auto it = vars.find(k);
      return it == vars.end() ? nullptr : it->second.c_str();
    });
  };
  EXPECT_TRUE(is_launched_rank(env({{"MLALPHA_LAUNCHED", "1"}})));
  EXPECT_FALSE(is_launched_rank(env({})));
  EXPECT_FALSE(is_launched_rank(env({{"MLALPHA_LAUNCHED", "0"}})));
  // Only launch_local's children: a rank started by torchrun is a rank too, but that is rank_from_env's to say.
  EXPECT_FALSE(is_launched_rank(env({{"RANK", "1"}, {"WORLD_SIZE", "2"}})));
}

}  // namespace
}  // namespace mlalpha::dist
