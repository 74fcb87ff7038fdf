#pragma once
// A training run (docs/config.md, docs/data.md): for each fold of the split, normalise with the
// training range's statistics, train on the GPU (or the CPU) with validation every run.eval_every steps,
// keep the best checkpoint by run.metric, stop early after run.patience evaluations without improvement,
// test the best weights, and leave in run.out_dir (fold-k/ for walk-forward folds) metrics.jsonl,
// curves.svg, best/last checkpoints, best.json, and for walk-forward folds folds.csv.
//
// A population (train.models > 1, [sweep], run.parallel_folds) runs the same loop: its members train
// together, each in its member-XX folder, and the run adds leaderboard.csv and the mean-ensemble.
//
// The library never prints: everything a user would see arrives as a RunEvent at the callback, which
// can also stop the run. Every setting and the data are checked before any output is opened; the run folder
// is locked for the whole run (run.lock: a second run or resume of it is refused); a folder that already
// holds a run is refused unless RunOptions says to overwrite (its old files go only after every check,
// memory included, has passed) or resume; an error leaves no folder of its own making behind.
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "mlalpha/config.h"
#include "mlalpha/error.h"
#include "mlalpha/metrics.h"
#include "mlalpha/panel.h"
#include "mlalpha/records.h"

namespace mlalpha {

struct RunEvent {
  enum class Kind {
    start,       // the run begins, its settings resolved and its data read: config, N, T, F, K, read_seconds
    fold_start,  // a fold begins: fold, folds, split, device, params, start_step
    log,         // training records up to `step`: points (every step since the last log event)
    eval,        // a validation: evaluation
    message,     // a line for the user: message (resume, early stop, interruption, changed settings)
    fold_end,    // a fold ended: its FoldResult is in RunResult (and `message` says what was written)
  };
  Kind kind = Kind::message;
  int fold = 0, folds = 1;  // 0-based fold index and the fold count
  int64_t step = 0;
  Split split;
  std::string device;  // "gpu" or "cpu"
  size_t params = 0;
  int64_t start_step = 0;  // fold_start: > 0 when resuming
  // start: the settings the run uses (a resume's as recorded in its folder; valid during the callback), the
  // panel's shape and how long reading it took (-1: a panel built in memory).
  const RunConfig* config = nullptr;
  int N = 0, T = 0, F = 0, K = 0;
  double read_seconds = -1;
  std::vector<TrainPoint> points;
  Evaluation evaluation;
  std::string message;
  // Populations (train.models > 1 or [sweep]): the member a log, eval or message event is about (its index
  // in RunResult::members' order of one population, and its folder name "member-03"); -1 and "" for events
  // about the whole run or population (fold_start / fold_end come once per population).
  int member = -1;
  std::string member_name;
};

// Return false to stop the run after the current step (the last checkpoint is saved as on Ctrl-C).
using RunCallback = std::function<bool(const RunEvent&)>;

struct RunOptions {
  // A run to continue, in its own folder (docs/config.md, "Resume"): its run folder, or the last.safetensors of
  // one of its models (a solo run of an older ml-alpha: any of its checkpoints). Its recorded settings govern;
  // run.out_dir, when set, must name its folder.
  std::string resume;
  bool overwrite = false;   // replace the run already in run.out_dir
  RunCallback callback;     // may be empty
  // Checked after every step: set from a signal handler (SIGINT, SIGTERM, SIGHUP, SIGPIPE) or another thread
  // to stop the run like a callback returning false. May be null.
  const std::atomic<bool>* stop = nullptr;
  // The panel is what config.data loads (run_training(config) sets it): checkpoints then record the data
  // settings, so eval / predict / resume can load the data again. A panel built in memory (numpy, pandas)
  // is recorded by its fingerprint only.
  bool panel_from_config = false;
  // Data-parallel training over NCCL (docs/decisions.md "Several GPUs"): this process is rank `rank` of
  // `world`, on GPU `local_rank` of its host (ml-alpha train takes them from torchrun's, Open MPI's,
  // Slurm's or PMI's variables, or from its own --gpus launcher; rank 0's unique id travels as
  // MLALPHA_DIST_ID_FILE or MASTER_ADDR/MASTER_PORT say). world > 1: every rank trains the same run on
  // its own windows with the gradients averaged over the ranks, so all ranks hold the same weights;
  // rank 0 writes run.out_dir, the others a private temporary folder that is removed at the end (a resume
  // copies the run folder there first). GPU only; a population's members are averaged member by member.
  // data_parallel: take that path even for a world of one (what `--gpus 1` does; it trains to the plain run's
  // bits).
  int rank = 0, world = 1, local_rank = 0;
  bool data_parallel = false;
};

struct FoldResult {
  int fold = 0;
  Split split;
  std::string dir;                 // where the fold's files are
  int64_t steps = 0;               // the last step trained
  int64_t best_step = 0;
  double best_value = 0;           // run.metric of the best evaluation
  bool early_stopped = false;  // run.patience evaluations without improvement ended it
  bool stopped = false;        // the callback or the stop flag ended it (Ctrl-C, SIGTERM)
  bool paused = false;         // run.stop_after ended this invocation (continue with a resume)
  bool has_test = false;
  MetricsResult test;              // the best weights on the test range
  std::vector<TrainPoint> history;         // every step this invocation trained
  std::vector<Evaluation> evaluations;     // every validation of this invocation
};

// One trained model of a population (one per member and fold for walk-forward runs).
struct MemberResult {
  std::string name;  // "member-03": its folder under the run's (or fold's) folder
  int fold = 0;
  std::vector<std::pair<std::string, std::string>> settings;  // what the population varies: {"lr", "0.001"}, ...
  std::string dir;
  int64_t steps = 0;  // the last step trained (less than train.steps after an early stop)
  int64_t best_step = 0;
  double best_value = 0;  // run.metric of its best validation
  bool early_stopped = false;
  bool has_test = false;
  MetricsResult test;  // its best weights on the test range
  // Walk-forward only: its test blocks pooled over every fold (the same on each fold's entry of a member).
  bool has_oos = false;
  std::string oos_file;  // out_dir/member-03/oos_pred.csv
  MetricsResult oos;
};

// A population's ranking (leaderboard.csv's table, as data): the columns (rank, member, the varied settings,
// best_step, valid_<metric>, test_<metric>... or, walk-forward, folds and oos_<metric>..., dir) and one row of
// cells per member, best first, then the mean-ensemble's row (its rank cell empty). Numbers are written in
// their shortest exact form, a missing or non-finite value as an empty cell (docs/populations.md).
struct Leaderboard {
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;
};

struct RunResult {
  RunConfig config;  // as run (a resume's comes from its run folder's record)
  std::vector<FoldResult> folds;  // a solo run's folds trained by this invocation (empty for a population: see members)
  // Walk-forward only: the mean and sample std over the folds of each test metric (every fold the run
  // folder holds, a resume's earlier folds included), and the pooled out-of-sample predictions (oos_pred.csv).
  Metrics fold_test_mean, fold_test_std;
  bool has_oos = false;
  std::string oos_file;   // out_dir/oos_pred.csv
  MetricsResult oos;      // metrics of the pooled predictions
  bool stopped = false;  // ended by the callback or the stop flag before the planned end
  std::string run_dir;   // the run folder: what --resume continues the run from
  // Populations: every trained model, fold by fold in member order; out_dir/leaderboard.csv; the
  // mean-ensemble of the members' best-weight predictions on the test range (the validation range
  // without one; walk-forward: each fold's ensemble pooled over the test blocks), out_dir/ensemble/pred.csv.
  std::vector<MemberResult> members;
  std::string leaderboard_file;
  Leaderboard leaderboard;
  bool has_ensemble = false;
  MetricsResult ensemble;
};

// The configuration a run would use: the given one, or for a resume the checkpoint's model, training,
// data and split settings with the changes the caller made explicitly (config.given) applied where they
// are allowed (train.steps, train.lr, ... ; docs/config.md) and refused where they are not (the data,
// the model, the batch, the seed). `changes` receives a line per applied change.
RunConfig resolve_run_config(const RunConfig& config, const std::string& resume, std::vector<std::string>* changes);

// This process's place in a data-parallel run, as the environment a launcher set says (torchrun's, Open MPI's,
// Slurm's or PMI's variables, or ml-alpha's own --gpus launcher's): what RunOptions' rank, world and local_rank
// take. Throws Error naming the variable when one of a launcher's set is missing or inconsistent.
struct RankEnvironment {
  int rank = 0, world = 1, local_rank = 0;
  std::string source = "none";  // "torchrun", "openmpi", "slurm", "pmi" or "none" (a single process)
  bool launched = false;        // started by launch_local_ranks: a rank, which must not launch again
};
RankEnvironment rank_environment();

// `ml-alpha train --gpus N` on one host (docs/multi-gpu.md): starts `processes` ranks of this very program, one
// per GPU, each with `argv` (argv[0] included) and the variables torchrun would set, and waits for all of them;
// rank 0 writes to this process's stdout and stderr, rank k >= 1 to <log_dir>/rank<k>.log. When one fails the
// others are stopped and the Error names it, its exit status and its log.
void launch_local_ranks(int processes, const std::vector<std::string>& argv, const std::string& log_dir);
// A new empty folder under the system's temporary folder, its name starting with `prefix`; `what` names it in an
// Error (it is not removed: the ranks' logs stay for the user).
std::string make_temp_folder(const std::string& prefix, const std::string& what);

// Loads the data the config names and trains; see the top of this file.
RunResult run_training(const RunConfig& config, const RunOptions& options = {});
// The same on a panel the caller built (e.g. from numpy or pandas).
RunResult run_training(const RunConfig& config, const Panel& panel, const RunOptions& options = {});

}  // namespace mlalpha
