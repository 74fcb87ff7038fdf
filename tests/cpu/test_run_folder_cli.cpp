// The run folder end to end, through the command (docs/config.md, "The run folder"): --overwrite is all or
// nothing (a new run that fails, however late, leaves the old run exactly as it was; one that cannot move every
// old file changes nothing), the lock is never written through a link and a run stops when its lock is taken
// away, SIGUSR1/SIGXCPU stop a run as SIGTERM does and SIGXFSZ fails a write with a message, and settings that
// would do nothing or destroy something are refused.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace fs = std::filesystem;

namespace mlalpha {
namespace {

struct Result {
  int code = -1;
  std::string out;
};

class RunFolderCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mlalpha_runfolder_" + std::to_string(std::random_device{}()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::permissions(dir_, fs::perms::owner_all, fs::perm_options::add, ec);
    for (auto& e : fs::recursive_directory_iterator(dir_, ec))
      if (e.is_directory(ec)) fs::permissions(e.path(), fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(dir_, ec);
  }
  // `prefix` runs in the same shell first ("ulimit -f 16; ").
  Result run(const std::string& args, const std::string& prefix = "") {
    const std::string log = p("cmd.log");
    const std::string cmd = "bash -c '" + prefix + "exec " + std::string(MLALPHA_BIN) + " " + args + "' > " + log + " 2>&1";
    const int status = std::system(cmd.c_str());
    std::ifstream in(log);
    std::stringstream ss;
    ss << in.rdbuf();
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, ss.str()};
  }
  std::string p(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

// kBase plus what a test varies; kTiny a whole tiny run.
const std::string kBase =
    "train --device cpu --threads 1 --instruments 4 --features 3 --layers 1 --d-state 4 -B 4 -L 16 --warmup 2 ";
const std::string kTiny = kBase + "--timesteps 160 --d-model 8 --head-dim 4 --steps 8 --eval-every 4 ";

std::string bytes_of(const fs::path& f) {
  std::ifstream in(f, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Every file below `root` (hidden folders included) with its bytes.
std::map<std::string, std::string> contents(const fs::path& root) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(root))
    if (e.is_regular_file()) out[e.path().lexically_relative(root).string()] = bytes_of(e.path());
  return out;
}

// The old run is exactly as it was: the same files, byte for byte, and nothing else (no aside folder, no file of
// the failed new run).
void expect_untouched(const std::map<std::string, std::string>& before, const fs::path& root, const std::string& what) {
  const auto after = contents(root);
  std::string a, b;
  for (const auto& [k, v] : before) a += k + " ";
  for (const auto& [k, v] : after) b += k + " ";
  EXPECT_EQ(a, b) << what;
  for (const auto& [k, v] : before)
    if (after.count(k)) EXPECT_TRUE(after.at(k) == v) << what << ": " << k << " changed";
}

TEST_F(RunFolderCli, OverwriteThatFailsLateRestoresTheOldRun) {
  ASSERT_EQ(run(kTiny + "--models 2 -o " + p("run")).code, 0);
  const auto before = contents(p("run"));
  ASSERT_GT(before.size(), 10u);
  // A file size limit the new run's first checkpoint (a wider model) passes: SIGXFSZ is ignored, the write
  // fails with EFBIG and a message naming the file, and the old run comes back.
  const Result r = run(kBase + "--timesteps 160 --d-model 64 --head-dim 16 --steps 8 --eval-every 4 --overwrite -o " + p("run"), "ulimit -f 40; ");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("File too large"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(".safetensors"), std::string::npos) << r.out;
  expect_untouched(before, p("run"), "after a new run that failed on the file size limit");
  // The old run still resumes as a finished run would be refused, i.e. it is whole.
  const Result again = run("train --device cpu --resume " + p("run"));
  EXPECT_NE(again.out.find("every model has finished"), std::string::npos) << again.out;
}

// Under `ulimit -v` the memory estimate counts the address space left, not the machine's free memory: a model
// that cannot fit is refused before the old run is touched (not a std::bad_alloc halfway).
TEST_F(RunFolderCli, AnAddressSpaceLimitIsCountedBeforeTheOldRunIsTouched) {
  ASSERT_EQ(run(kTiny + "-o " + p("run")).code, 0);
  const auto before = contents(p("run"));
  const Result r = run("train --device cpu --threads 1 --instruments 64 --timesteps 4000 --features 3 --d-model 512 "
                       "--layers 4 -B 64 -L 512 --steps 4 --overwrite -o " + p("run"),
                       "ulimit -v 1500000; ");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("the CPU training step needs"), std::string::npos) << r.out;
  expect_untouched(before, p("run"), "after a run refused for memory");
}

TEST_F(RunFolderCli, OverwriteThatCannotMoveEveryFileChangesNothing) {
  ASSERT_EQ(run(kTiny + "-o " + p("run")).code, 0);
  fs::create_directories(p("run/folds.csv/x"));  // a folder named like an output of the new run
  const auto before = contents(p("run"));
  const Result r = run(kBase + "--timesteps 240 --d-model 8 --head-dim 4 --steps 8 --eval-every 4 --set split.walk_forward_folds=2 "
                           "--overwrite -o " + p("run"));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("folds.csv' is a folder"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("nothing was changed"), std::string::npos) << r.out;
  expect_untouched(before, p("run"), "after a refused --overwrite");
  EXPECT_TRUE(fs::is_directory(p("run/folds.csv/x")));
}

TEST_F(RunFolderCli, OverwriteWithAReadOnlyMemberFolderChangesNothing) {
  if (geteuid() == 0) GTEST_SKIP() << "root writes into read-only folders";
  ASSERT_EQ(run(kTiny + "--models 2 -o " + p("run")).code, 0);
  const auto before = contents(p("run"));
  fs::permissions(p("run/member-01"), fs::perms::owner_write | fs::perms::group_write | fs::perms::others_write,
                  fs::perm_options::remove);
  const Result r = run(kTiny + "--overwrite -o " + p("run"));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("is not writable"), std::string::npos) << r.out;
  expect_untouched(before, p("run"), "after a refused --overwrite");
}

TEST_F(RunFolderCli, OverwriteThatSucceedsLeavesOnlyTheNewRun) {
  ASSERT_EQ(run(kTiny + "--models 3 -o " + p("run")).code, 0);
  const Result r = run(kTiny + "--overwrite -o " + p("run"));
  ASSERT_EQ(r.code, 0) << r.out;
  for (const auto& e : fs::directory_iterator(p("run")))
    EXPECT_NE(e.path().filename().string().rfind('.', 0), 0u) << e.path() << " is left behind";
  EXPECT_FALSE(fs::exists(p("run/member-00")));  // the old population's folders went with its files
  EXPECT_TRUE(fs::exists(p("run/last.safetensors")));
}

TEST_F(RunFolderCli, ASymlinkedLockIsRefused) {
  fs::create_directories(p("run"));
  fs::create_symlink(p("victim"), p("run/run.lock"));
  const Result r = run(kTiny + "-o " + p("run"));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("is a symbolic link"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(p("victim")));  // nothing was written through the link
}

// The lock file of a live run removed (and the folder then free for another run): the run stops at its next save
// without writing it.
TEST_F(RunFolderCli, ARunWhoseLockIsRemovedStopsBeforeItsNextSave) {
  // timeout: a run that missed the removal would train for hours.
  const std::string cmd = "bash -c 'timeout 120 " + std::string(MLALPHA_BIN) + " " + kBase +
                          "--timesteps 160 --d-model 8 --head-dim 4 --steps 100000000 --eval-every 0 --save-every 200 -o " + p("run") + " > " + p("log") +
                          " 2>&1 & pid=$!; for i in $(seq 100); do [ -e " + p("run/state.json") +
                          " ] && break; sleep 0.1; done; rm " + p("run/run.lock") + "; wait $pid; echo $? > " +
                          p("code") + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  EXPECT_EQ(bytes_of(p("code")), "1\n") << bytes_of(p("log"));
  EXPECT_NE(bytes_of(p("log")).find("was removed or replaced"), std::string::npos) << bytes_of(p("log"));
}

TEST_F(RunFolderCli, SigusrAndSigxcpuStopARunWithItsLastCheckpoint) {
  for (const char* sig : {"USR1", "XCPU"}) {
    const std::string out = p(std::string("run-") + sig);
    // The watchdog kills a run that ignored the signal (it would train for hours).
    const std::string cmd = "bash -c '" + std::string(MLALPHA_BIN) + " " + kBase +
                            "--timesteps 160 --d-model 8 --head-dim 4 --steps 100000000 --eval-every 0 -o " + out +
                            " > " + p("log") + " 2>&1 & pid=$!; (sleep 120 & s=$!; trap \"kill $s; exit\" TERM; wait $s; kill -9 $pid) " +
                            ">/dev/null 2>&1 & dog=$!; sleep 2; " +
                            "kill -" + sig + " $pid; wait $pid; echo $? > " + p("code") + "; kill $dog'";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    const int code = std::stoi(bytes_of(p("code")));
    EXPECT_EQ(code, 128 + (std::string(sig) == "USR1" ? SIGUSR1 : SIGXCPU)) << bytes_of(p("log"));
    EXPECT_NE(bytes_of(p("log")).find(std::string("stopped by SIG") + sig), std::string::npos) << bytes_of(p("log"));
    EXPECT_TRUE(fs::exists(out + "/last.safetensors")) << sig;
    EXPECT_TRUE(fs::exists(out + "/state.json")) << sig;
  }
}

// A --set value for a key that a flag also sets was dropped unread: `--steps 2 --set train.steps='"ten"'` trained
// with exit 0. It is validated as the file's values are; the run writes nothing.
TEST_F(RunFolderCli, ASetValueAFlagReplacesIsStillValidated) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--steps 2 --set 'train.steps=\"ten\"'", "train.steps: expected an integer"},
      {"--steps 2 --set train.steps=-3", "train.steps: value -3 is out of range"},
      {"--lr 1e-3 --set 'train.lr=[1,2]'", "train.lr: expected a number"},
      {"--threads 1 --set run.threads=nan", "run.threads: expected an integer"},
      {"--instruments 4 --set 'data.instruments={a=1}'", "data.instruments: expected an integer"}};
  for (const auto& [args, message] : cases) {
    const Result r = run("train --device cpu --timesteps 120 --features 3 " + args + " -o " + p("run"));
    EXPECT_EQ(r.code, 1) << args << "\n" << r.out;
    EXPECT_NE(r.out.find(message), std::string::npos) << args << "\n" << r.out;
    EXPECT_FALSE(fs::exists(p("run"))) << args;
  }
  // The same value given once, by the flag and by --set, is no error.
  const Result r = run(kTiny + "--set train.steps=8 -o " + p("run"));
  EXPECT_EQ(r.code, 0) << r.out;
}

// SIGXFSZ was ignored by train only: synth and the stream died of it without a message, leaving a *.tmp-* file.
TEST_F(RunFolderCli, EveryCommandFailsAWriteOverTheFileSizeLimitWithAMessage) {
  Result r = run("synth --instruments 64 --timesteps 2000 --features 8 --format npy -o " + p("panel"), "ulimit -f 8; ");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find(p("panel/features.npy") + ": write failed: File too large"), std::string::npos) << r.out;
  ASSERT_EQ(run("synth --instruments 4 --timesteps 200 --features 3 --format csv -o " + p("data")).code, 0);
  {  // run() quotes its command in '...': the CSV settings go in a file
    std::ofstream cfg(p("csv.toml"));
    cfg << "[data]\nsource = \"csv\"\ncsv = \"data/panel.csv\"\nfeature_columns = [\"f0\", \"f1\", \"f2\"]\n"
           "target_columns = [\"y0\"]\n";
  }
  const Result trained = run("train -c " + p("csv.toml") + " --device cpu --threads 1 --layers 1 --d-state 4 -B 4 -L 16 "
                             "--d-model 8 --head-dim 4 --steps 4 --eval-every 2 -o " + p("run"));
  ASSERT_EQ(trained.code, 0) << trained.out;
  r = run("stream --device cpu --checkpoint " + p("run/best.safetensors") + " --new-instruments -i " + p("data/panel.csv") +
              " -o " + p("out.csv"), "ulimit -f 2; ");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find(p("out.csv") + ": write failed: File too large"), std::string::npos) << r.out;
  for (const auto& e : fs::recursive_directory_iterator(dir_))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path() << " was left behind";
}

// OpenBLAS retries a work buffer that the address space cannot hold forever: under a ulimit -v just above what
// the program needs to load, a tiny train (and eval, predict, the stream) hung. It is refused with the limit named.
TEST_F(RunFolderCli, AnAddressSpaceTooSmallForTheBlasBufferIsRefusedNotHung) {
  // The limit: the least address space (to 16 MiB, by bisection) in which the program loads and prints its help
  // within 3 s (below it, it fails or hangs), plus 96 MiB: less than one 128 MiB buffer. Measured, since it
  // depends on the build: about 890 MiB with the CUDA libraries, about 190 MiB in a CPU-only build.
  const auto loads = [](long kib) {
    const std::string probe = "bash -c \"ulimit -v " + std::to_string(kib) + "; timeout -k 1 3 " + std::string(MLALPHA_BIN) +
                              " --help\" > /dev/null 2>&1";
    return std::system(probe.c_str()) == 0;
  };
  long lo = 16 << 10, load_kib = 4096 << 10;  // KiB: lo does not load, load_kib does
  if (!loads(load_kib)) GTEST_SKIP() << "the program does not load under ulimit -v 4 GiB";
  while (load_kib - lo > (16 << 10)) {
    const long mid = (lo + load_kib) / 2;
    (loads(mid) ? load_kib : lo) = mid;
  }
  const long limit = load_kib + (96 << 10);
  const std::string cmd = "bash -c \"ulimit -v " + std::to_string(limit) + "; timeout -k 5 60 " + std::string(MLALPHA_BIN) +
                          " " + kTiny + "-o " + p("run") + "\" > " + p("log") + " 2>&1";
  const int status = std::system(cmd.c_str());
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127) GTEST_SKIP() << "the program does not load under ulimit -v " << limit;
  EXPECT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 1) << bytes_of(p("log"));
  EXPECT_NE(bytes_of(p("log")).find("the CPU's matrix products need 128 MiB"), std::string::npos) << bytes_of(p("log"));
}

// A kill while --overwrite moves the old run aside leaves run.json in the aside folder; --resume finishes that
// first (the old run moved back) and continues the old run, as the next start of any run in the folder would.
TEST_F(RunFolderCli, AResumeAfterAKilledOverwriteFindsTheOldRun) {
  ASSERT_EQ(run(kTiny + "-o " + p("run")).code, 0);
  fs::copy(p("run"), p("probe"), fs::copy_options::recursive);
  // The fault points of the same --overwrite on a copy: the last one that moves a file aside.
  ASSERT_EQ(run(kTiny + "--seed 7 --overwrite -o " + p("probe"), "export MLALPHA_FAULT_LOG=" + p("faults") + "; ").code, 0);
  std::ifstream log(p("faults"));
  long k = 0;
  for (std::string line; std::getline(log, line);)
    if (line.find("\trename ") != std::string::npos && line.find("/.moving-") != std::string::npos)
      k = std::stol(line.substr(0, line.find('\t')));
  ASSERT_GT(k, 1) << "no fault point moves a file aside";
  const auto before = contents(p("run"));
  const Result killed = run(kTiny + "--seed 7 --overwrite -o " + p("run"), "export MLALPHA_FAULT_AT=" + std::to_string(k) + "; ");
  ASSERT_NE(killed.code, 0) << killed.out;
  ASSERT_FALSE(fs::exists(p("run/run.json"))) << "the kill came after run.json had gone aside";
  const Result resumed = run("train --device cpu --threads 1 --resume " + p("run") + " --steps 12");
  EXPECT_EQ(resumed.code, 0) << resumed.out;
  EXPECT_TRUE(fs::exists(p("run/run.json")));
  for (const auto& e : fs::directory_iterator(p("run")))
    EXPECT_NE(e.path().filename().string().rfind(".moving-", 0), 0u) << e.path();
  EXPECT_NE(bytes_of(p("run/metrics.jsonl")).find("\"step\":12"), std::string::npos) << "the old run continued to step 12";
  EXPECT_EQ(bytes_of(p("run/metrics.jsonl")).rfind(before.at("metrics.jsonl").substr(0, 40), 0), 0u);
}

TEST_F(RunFolderCli, SettingsThatWouldDoNothingOrDestroyAreRefused) {
  ASSERT_EQ(run(kTiny + "-o " + p("run")).code, 0);
  Result r = run("train --device cpu --resume " + p("run") + " --overwrite");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("a resume continues the run, --overwrite replaces it"), std::string::npos) << r.out;
  r = run(kTiny + "--precision \"\" -o " + p("run2"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--precision: an empty value"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(p("run2")));

  ASSERT_EQ(run("synth -o " + p("data") + " --instruments 3 --timesteps 40 --format both").code, 0);
  const std::string npy = bytes_of(p("data/features.npy"));
  r = run("synth -o " + p("data") + " --instruments 5 --timesteps 40 --format npy");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("features.npy already exists"), std::string::npos) << r.out;
  EXPECT_EQ(bytes_of(p("data/features.npy")), npy);
  ASSERT_EQ(run("synth -o " + p("data") + " --instruments 5 --timesteps 40 --format npy --overwrite").code, 0);
  EXPECT_NE(bytes_of(p("data/features.npy")), npy);

  // The flag replaces the file's value, but the file's value is checked all the same.
  std::ofstream(p("bad.toml")) << "[train]\nsteps = \"many\"\n";
  r = run(kBase + "--steps 4 -c " + p("bad.toml") + " -o " + p("run3"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("bad.toml:2: train.steps: expected an integer"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace mlalpha
