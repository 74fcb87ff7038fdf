#pragma once
// The settings structs every layer reads (DESIGN sections 1 and 2; docs/config.md lists every key): the
// model, the training step, the data and its split. Each struct's validate() rejects impossible values with
// a message naming the key a user writes in the TOML file (`model.d_state`, `train.batch`), the value and
// what was expected. The run configuration around them (RunConfig, the TOML reader) is mlalpha/config.h.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "mlalpha/error.h"
#include "mlalpha/precision.h"

namespace mlalpha {

struct ModelConfig {
  int F = 8;        // input features (from the data)
  int K = 1;        // targets (from the data)
  int D = 32;       // model.d_model
  int NL = 2;       // model.layers
  int expand = 2;   // model.expand: d_inner = expand * D
  int P = 16;       // model.head_dim
  int G = 1;        // model.groups for B, C (and the gated norm)
  int N = 16;       // model.d_state
  int W = 4;        // model.conv_width
  int Q = 64;       // model.chunk: SSD chunk length
  float dt_min = 1e-3f, dt_max = 1e-1f, dt_init_floor = 1e-4f;  // dt_bias initialisation
  float dt_limit_lo = 0.0f;                                     // clamp of delta (0, inf = none)
  float dt_limit_hi = std::numeric_limits<float>::infinity();

  int d_inner() const { return expand * D; }
  int H() const { return d_inner() / P; }
  int conv_dim() const { return d_inner() + 2 * G * N; }
  int in_proj_dim() const { return 2 * d_inner() + 2 * G * N + H(); }
  void validate() const;
};

// ic: minus the mean cross-sectional Pearson correlation of prediction and target (docs/config.md);
// it needs train.batch = "time".
enum class LossKind { MSE, Huber, IC };
// train.batch: an integer (windows of random instruments at random times) or "time" (cross-sections:
// train.dates end dates per step, each with the windows of min(N, train.instruments) instruments ending there).
enum class BatchMode { Windows, Time };
enum class Schedule { Cosine, Constant };
// train.state: what state a training window starts from (docs/config.md, "Stateful training"). Zero: every
// window from a zero state (the windows are independent draws). Carry: each lane of the batch walks consecutive
// windows of one instrument's present rows, window k + 1 starting from the conv window and SSM state window k
// ended with (truncated backpropagation through time; src/data/carry_sampler.h).
enum class StateMode { Zero, Carry };

// train.warmup when the file does not set it: a tenth of the steps, at most 20.
constexpr int64_t default_warmup(int64_t steps) { return steps / 10 < 20 ? steps / 10 : 20; }

// The largest model.chunk accepted: the CPU's chunk scratch grows with chunk², and a chunk longer than the
// training window computes nothing more (each window is one chunk).
constexpr int kMaxChunk = 1024;

// The largest train.steps accepted: far beyond any run, and small enough that step counters and the
// schedule's arithmetic can never overflow.
constexpr int64_t kMaxSteps = int64_t(1) << 40;

// The most members one population may have (train.models × the [sweep] combinations × the folds trained
// together): a bound on the per-member tables of one step, checked before anything is sized by it.
constexpr int kMaxPopulation = 4096;

struct TrainConfig {
  int B = 16;             // train.batch (an integer): windows per batch, batch_mode Windows
  BatchMode batch_mode = BatchMode::Windows;  // train.batch = "time": BatchMode::Time
  int dates = 4;          // train.dates: cross-sections (end dates) per batch, batch_mode Time
  int instruments = 0;    // train.instruments: instruments per cross-section, 0 = all N; batch_mode Time
  int L = 64;             // train.seq_len: window length
  int64_t steps = 300;
  float lr = 1e-3f;
  float min_lr_ratio = 0.1f;  // cosine floor as a fraction of lr
  // Linear warm-up steps (< steps). Unset in the file: min(20, steps / 10) (kDefaultWarmup), so a short run
  // is valid without it and runs of 200 steps or more keep the 20 they always had.
  int64_t warmup = 20;
  Schedule schedule = Schedule::Cosine;
  float weight_decay = 0.01f;
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
  float clip = 1.0f;          // global-norm clip; <= 0 disables
  LossKind loss = LossKind::MSE;
  float huber_delta = 1.0f;
  int burn_in = 0;            // positions t < burn_in carry no loss
  uint64_t seed = 1;
  int64_t log_every = 25;
  // train.models: a population of this many models trained together, member r with seed + r (docs/config.md,
  // "Populations"); each member's own TrainConfig has models = 1. In [1, kMaxPopulation].
  int models = 1;
  // train.precision: the GPU's arithmetic (mlalpha/precision.h); the CPU path computes in fp32 whatever it says.
  Precision precision = Precision::FP32;
  // train.init: a checkpoint whose weights the model starts from instead of a random initialisation
  // (fine-tuning; the optimiser and the schedule start afresh). "": none. Its architecture must be the run's.
  std::string init;
  // train.state: "zero" (the default) or "carry" (StateMode).
  StateMode state = StateMode::Zero;
  void validate() const;
  // Windows per cross-section for a panel of N instruments: min(N, instruments) (N when 0) in time mode,
  // 0 in windows mode (no cross-section).
  int cross_section(int N) const;
  // The batch B of a step on a panel of N instruments: train.batch, or train.dates × cross_section(N).
  int windows_per_step(int N) const;
};

std::string to_string(LossKind k);
std::string to_string(Schedule s);
std::string to_string(BatchMode m);  // "windows" | "time"
std::string to_string(StateMode m);  // "zero" | "carry"
// "zero" | "carry"; anything else throws naming `what` (the setting) and the two values.
StateMode parse_state_mode(const std::string& s, const std::string& what = "train.state");
LossKind parse_loss(const std::string& s);
Schedule parse_schedule(const std::string& s);

// The built-in synthetic panel (src/data/synthetic.h gives its formula).
struct SynthParams {
  int N = 16;      // data.instruments
  int T = 2048;    // data.timesteps
  int F = 8;       // data.n_features
  int K = 1;       // data.n_targets
  float noise = 0.1f;
  uint64_t seed = 7;
  // data.memory: 0, the formula of src/data/synthetic.h; > 0, its long-memory variant: each target an exponential
  // average of one feature over about `memory` rows (a task a window of fewer rows sees only in part).
  int memory = 0;
};

// One boundary on the time axis, in one of three units. In a TOML config: a float is a fraction, an integer
// an index, a string a time value (train_end = 0.7 | 1500 | "2020-01-01").
struct SplitPoint {
  enum class Kind { fraction, index, time };
  Kind kind = Kind::fraction;
  double fraction = 0;  // kind fraction: in [0, 1]; the boundary index is round(fraction · T)
  int64_t index = 0;    // kind index: a time index in [0, T]
  std::string time;     // kind time: the boundary is the first time step at or after this time, compared
                        // as parsed values (a number on a numeric axis, a date on a date axis)

  static SplitPoint at_fraction(double f);
  static SplitPoint at_index(int64_t i);
  static SplitPoint at_time(std::string t);
  std::string to_string() const;  // "fraction 0.7", "index 1500", "time '2020-01-01'"
};

struct SplitSpec {
  SplitPoint train_end = SplitPoint::at_fraction(0.7);   // train is [0, train_end)
  SplitPoint valid_end = SplitPoint::at_fraction(0.85);  // valid is [train_end + gap, valid_end)
  int gap = 0;                                           // test is [valid_end + gap, T)
};

// Three half-open time-index ranges on the panel's time axis.
struct Split {
  int train_begin = 0, train_end = 0, valid_begin = 0, valid_end = 0, test_begin = 0, test_end = 0;
  bool has_test() const { return test_end > test_begin; }
  std::string to_string() const;  // "train [0, 700) valid [705, 850) test [855, 1000)"
};

struct DataConfig {
  std::string source = "synthetic";  // synthetic | npy | csv
  SynthParams synth;                 // source = synthetic
  std::string features, targets;     // source = npy: paths of the feature and target arrays
  std::string csv;                   // source = csv: path of the long-format file
  std::string delimiter = ",";       // source = csv: one character
  std::string time_format;           // source = csv: "" reads numbers or ISO 8601; else a strftime-style layout
                                     // ("%b %d %Y") that every time must match (docs/data.md, "Time axis")
  std::string time_column = "time", instrument_column = "instrument";
  std::vector<std::string> feature_columns, target_columns;
  bool allow_target_features = false;  // a target column that is also a feature column (a label leak) is an error unless set
  // What the model sees (docs/data.md, "Normalisation"): fitted on the training range only where a
  // statistic is fitted at all, recorded in the checkpoint so eval and predict process new data the same way.
  std::string feature_norm = "global";  // global | zscore | rank | robust (the last three per date)
  float robust_clip = 3.0f;             // feature_norm = robust: values clipped to ±robust_clip (> 0)
  std::string target_norm = "none";     // none | zscore | rank, per date
  // none | std: each target divided by its standard deviation over the training range for training, and the
  // predictions multiplied back (FeatureStats::target_scale, recorded in the checkpoint): raw returns of
  // size 1e-2 no longer leave the model's first outputs orders of magnitude off. Metrics and predictions
  // stay in the targets' units.
  std::string target_scale = "none";
  std::string nan_fill = "zero";        // zero | ffill | mean: what a missing feature becomes
};

struct SplitConfig {
  SplitSpec spec;              // train_end, valid_end, gap
  int walk_forward_folds = 0;  // > 0: that many consecutive folds instead of one split (fold 0 the earliest)
  int walk_forward_test_size = 0;   // steps per test block; 0: automatic (docs/data.md)
  int walk_forward_valid_size = 0;  // steps per validation block; 0: the test size
  int walk_forward_train_size = 0;  // 0: expanding training window; > 0: rolling window of this many steps
};

}  // namespace mlalpha
