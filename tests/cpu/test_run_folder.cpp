// A run folder nothing can corrupt (DESIGN section 7, "Run folders"; docs/config.md, "The run folder"): a resume
// writes only into its own run's folder; --overwrite removes the old run (stale member and fold folders too)
// only after every check, memory included, has passed; the folder is locked for the whole run, a stale lock
// is taken over; a pair of prediction files is replaced together or not at all; data files that are not regular
// files are refused before they are opened; a solo resume takes its run settings from its record; a swept
// setting given on a resume is refused.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "mlalpha/ensemble.h"
#include "mlalpha/eval.h"
#include "mlalpha/run.h"
#include "run/run_folder.h"
#include "test_files.h"
#include "test_util.h"

namespace fs = std::filesystem;

namespace mlalpha {
namespace {

class RunFolder : public ::testing::Test {
 protected:
  // A small CPU run into dir/name (name "" : run.out_dir left at its default).
  RunConfig config(const std::string& name, std::vector<std::string> extra = {}) {
    std::vector<std::string> ov = {"run.device=\"cpu\"", "data.instruments=4", "data.timesteps=300",
                                   "data.n_features=3", "model.d_model=8",      "model.head_dim=4",
                                   "model.d_state=4",   "model.layers=1",       "model.chunk=8",
                                   "train.batch=4",     "train.seq_len=16",     "train.steps=30",
                                   "train.warmup=2",    "train.log_every=5",    "run.eval_every=5"};
    ov.insert(ov.end(), extra.begin(), extra.end());
    std::vector<ConfigSetting> settings;
    if (!name.empty()) settings.push_back({ConfigSetting::Kind::text, "run.out_dir", (tmp_.path / name).string(), ""});
    return parse_run_config("", "test", ov, "", settings);
  }
  fs::path dir(const std::string& name) const { return tmp_.path / name; }
  // Every file of a folder with its bytes.
  static std::vector<std::pair<std::string, std::string>> snapshot(const fs::path& d) {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& e : fs::recursive_directory_iterator(d))
      if (e.is_regular_file()) out.emplace_back(fs::relative(e.path(), d).string(), test::read_bytes(e.path()));
    std::sort(out.begin(), out.end());
    return out;
  }
  test::TempDir tmp_;
};

// `train --resume b/last.safetensors -o a` must not touch run a; with no -o it continues in b.
TEST_F(RunFolder, AResumeWritesOnlyIntoItsOwnRunsFolder) {
  run_training(config("a", {"run.stop_after=10"}));
  run_training(config("b", {"run.stop_after=10"}));
  const auto a_before = snapshot(dir("a")), b_before = snapshot(dir("b"));
  RunOptions o;
  o.resume = (dir("b") / "last.safetensors").string();
  const std::string into_a = test::error_of([&] { run_training(config("a"), o); });
  EXPECT_TRUE(test::contains(into_a, "continues in the run's own folder")) << into_a;
  const std::string into_new = test::error_of([&] { run_training(config("new"), o); });
  EXPECT_TRUE(test::contains(into_new, "continues in the run's own folder")) << into_new;
  EXPECT_FALSE(fs::exists(dir("new")));
  EXPECT_EQ(snapshot(dir("a")), a_before);
  EXPECT_EQ(snapshot(dir("b")), b_before);
  // run.out_dir not set: the run's own folder, whatever the default says.
  const RunResult r = run_training(config(""), o);
  EXPECT_EQ(fs::path(r.run_dir), dir("b"));
  EXPECT_EQ(load_checkpoint((dir("b") / "last.safetensors").string()).state.step, 30);
  EXPECT_EQ(snapshot(dir("a")), a_before);
}

// A run the machine cannot hold is refused before the old run's files go, solo and population.
TEST_F(RunFolder, OverwriteRemovesTheOldRunOnlyAfterEveryCheck) {
  for (const std::string models : {"1", "2"}) {
    SCOPED_TRACE("train.models = " + models);
    const std::string name = "r" + models;
    run_training(config(name, {"train.models=" + models}));
    const auto before = snapshot(dir(name));
    RunOptions o;
    o.overwrite = true;
    // Activations of 40M windows × 16 steps: terabytes, far beyond any host.
    const std::string e = test::error_of([&] {
      run_training(config(name, {"train.models=" + models, "train.batch=40000000", "train.seq_len=16"}), o);
    });
    EXPECT_TRUE(test::contains(e, "the CPU training step")) << e;
    EXPECT_EQ(snapshot(dir(name)), before);
  }
}

// A population of four replaced by one of two leaves no member-02, member-03 behind (predict, eval and info then
// read the folder as the new run); a file of the user's keeps its folder.
TEST_F(RunFolder, OverwriteRemovesStaleMemberAndFoldFolders) {
  run_training(config("pop", {"train.models=4"}));
  RunOptions o;
  o.overwrite = true;
  run_training(config("pop", {"train.models=2"}), o);
  EXPECT_TRUE(fs::exists(dir("pop/member-01")));
  EXPECT_FALSE(fs::exists(dir("pop/member-02")));
  EXPECT_FALSE(fs::exists(dir("pop/member-03")));
  EXPECT_EQ(Ensemble::load(dir("pop").string()).size(), 2u);

  const std::vector<std::string> wf = {"split.walk_forward_folds=3", "split.walk_forward_train_size=60", "train.steps=10"};
  run_training(config("wf", wf));
  { std::ofstream(dir("wf/fold-2/notes.txt")) << "mine"; }
  run_training(config("wf", {"split.walk_forward_folds=2", "split.walk_forward_train_size=60", "train.steps=10"}), o);
  EXPECT_TRUE(fs::exists(dir("wf/fold-1/last.safetensors")));
  EXPECT_FALSE(fs::exists(dir("wf/fold-2/last.safetensors")));
  EXPECT_EQ(test::read_bytes(dir("wf/fold-2/notes.txt")), "mine");
}

// A second run or resume of a folder in use is refused, naming the holder; the lock goes with the run; a lock
// left by a process that is gone is taken over.
TEST_F(RunFolder, TheFolderIsLockedForTheWholeRun) {
  run_training(config("r", {"run.stop_after=10"}));
  const auto before = snapshot(dir("r"));
  {
    const RunLock held(dir("r"));  // another run (its own open file: the lock conflicts within one process too)
    RunOptions o;
    o.resume = dir("r").string();
    const std::string e = test::error_of([&] { run_training(config("r"), o); });
    EXPECT_TRUE(test::contains(e, "is in use by process " + std::to_string(getpid()) + " on host")) << e;
    RunOptions ow;
    ow.overwrite = true;
    EXPECT_TRUE(test::contains(test::error_of([&] { run_training(config("r"), ow); }), "is in use by"));
  }
  EXPECT_EQ(snapshot(dir("r")), before);
  EXPECT_FALSE(fs::exists(dir("r/run.lock")));
  // A lock file whose process is gone: the kernel holds no lock on it, the run takes it over.
  const pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  { std::ofstream(dir("r/run.lock")) << "pid=" << child << "\nhost=" << host << "\n"; }
  RunOptions o;
  o.resume = dir("r").string();
  const RunResult r = run_training(config("r"), o);
  EXPECT_EQ(r.folds.at(0).steps, 30);
  EXPECT_FALSE(fs::exists(dir("r/run.lock")));
}

// The pair of prediction files is replaced together: a write that fails (a full disk, here a file size limit)
// leaves the old pair and no temporary file; a target that is not a file is refused before anything is written.
TEST_F(RunFolder, APredictionPairIsReplacedTogetherOrNotAtAll) {
  const Panel p = load_panel(config("x").data);
  std::vector<float> pred(p.y.size(), 0.25f);
  const std::string prefix = (tmp_.path / "pred").string();
  write_predictions(prefix, p, pred, {0, p.T});
  const std::string npy = test::read_bytes(prefix + ".npy"), csv = test::read_bytes(prefix + ".csv");
  ASSERT_GT(csv.size(), npy.size() + 4096);
  std::fill(pred.begin(), pred.end(), 0.5f);
  rlimit old{};
  getrlimit(RLIMIT_FSIZE, &old);
  const auto previous = std::signal(SIGXFSZ, SIG_IGN);  // a write past the limit fails with EFBIG instead
  rlimit small = old;
  small.rlim_cur = npy.size() + 1024;  // the .npy fits, the .csv does not
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  const std::string e = test::error_of([&] { write_predictions(prefix, p, pred, {0, p.T}); });
  setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, previous);
  EXPECT_FALSE(e.empty());
  EXPECT_EQ(test::read_bytes(prefix + ".npy"), npy);
  EXPECT_EQ(test::read_bytes(prefix + ".csv"), csv);
  EXPECT_EQ(tmp_.listing(), (std::vector<std::string>{"pred.csv", "pred.npy"}));
  fs::create_directory(tmp_.path / "other.csv");
  const std::string d = test::error_of([&] { write_predictions((tmp_.path / "other").string(), p, pred, {0, p.T}); });
  EXPECT_TRUE(test::contains(d, "is not a regular file")) << d;
  EXPECT_FALSE(fs::exists(tmp_.path / "other.npy"));
}

// /dev/urandom would be read forever and a FIFO would block the open: both are refused first.
TEST_F(RunFolder, DataFilesThatAreNotRegularFilesAreRefused) {
  DataConfig d;
  d.source = "csv";
  d.csv = "/dev/urandom";
  d.feature_columns = {"a"};
  d.target_columns = {"y"};
  EXPECT_TRUE(test::contains(test::error_of([&] { load_panel(d); }), "/dev/urandom: is not a regular file"));
  const fs::path fifo = tmp_.path / "fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  d.csv = fifo.string();
  EXPECT_TRUE(test::contains(test::error_of([&] { load_panel(d); }), "is not a regular file"));
  DataConfig n;
  n.source = "npy";
  n.features = fifo.string();
  n.targets = fifo.string();
  EXPECT_TRUE(test::contains(test::error_of([&] { load_panel(n); }), "is not a regular file"));
}

// The run settings are recorded: a solo resume continues with its validation cadence, patience and metric
// without repeating them, and ends where the uninterrupted run ended; one given explicitly applies.
TEST_F(RunFolder, ASoloResumeRestoresItsRunSettings) {
  const std::vector<std::string> run = {"run.eval_every=3", "run.patience=2", "run.metric=\"mse\"", "train.lr=0.05"};
  const RunResult straight = run_training(config("straight", run));
  std::vector<std::string> part = run;
  part.push_back("run.stop_after=7");
  run_training(config("part", part));
  RunOptions o;
  o.resume = dir("part").string();
  const RunResult rest = run_training(parse_run_config("", "test", {}), o);  // nothing repeated
  ASSERT_EQ(rest.folds.size(), 1u);
  EXPECT_EQ(rest.config.run.eval_every, 3);
  EXPECT_EQ(rest.config.run.patience, 2);
  EXPECT_EQ(rest.folds[0].steps, straight.folds[0].steps);
  EXPECT_EQ(rest.folds[0].early_stopped, straight.folds[0].early_stopped);
  EXPECT_EQ(rest.folds[0].best_step, straight.folds[0].best_step);
  EXPECT_EQ(load_checkpoint((dir("part") / "last.safetensors").string()).state.params,
            load_checkpoint((dir("straight") / "last.safetensors").string()).state.params);
}

// --lr on resuming an lr-swept population would change nothing: refused, naming the sweep.
TEST_F(RunFolder, ASweptSettingGivenOnResumeIsRefused) {
  run_training(config("pop", {"sweep.lr=[1e-3, 3e-3]", "run.stop_after=10"}));
  RunOptions o;
  o.resume = dir("pop").string();
  const std::string e = test::error_of([&] { run_training(parse_run_config("", "test", {"train.lr=0.01"}), o); });
  EXPECT_TRUE(test::contains(e, "train.lr = 0.01 but the population sweeps it (sweep.lr = [0.001, 0.003])")) << e;
  // A setting it does not sweep may change, as for one model.
  const RunResult r = run_training(parse_run_config("", "test", {"train.weight_decay=0.02"}), o);
  EXPECT_EQ(r.members.size(), 2u);
  EXPECT_EQ(r.config.train.weight_decay, 0.02f);
}

}  // namespace
}  // namespace mlalpha
