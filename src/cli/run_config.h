#pragma once
// Everything one `ml-alpha` run needs, as read from a TOML file (docs/config.md) and then overridden by
// command-line flags. Unknown or misspelt keys are errors that name the key, its line and the nearest
// valid key.
#include <cstdint>
#include <string>
#include <vector>

#include "data/synthetic.h"
#include "mlalpha/config.h"

namespace mlalpha {

struct DataConfig {
  std::string source = "synthetic";  // synthetic | npy | csv
  SynthParams synth;                 // source = synthetic
  std::string features, targets;     // source = npy: paths of the feature and target arrays
  std::string csv;                   // source = csv: path of the long-format file
  std::string time_column = "time", instrument_column = "instrument";
  std::vector<std::string> feature_columns, target_columns;
};

// A split boundary as written in the config: a fraction of T (0 < f < 1), a time index (integer), or a
// time value (string, compared with the panel's time labels).
struct Boundary {
  enum Kind { Fraction, Index, Time } kind = Fraction;
  double fraction = 0;
  int64_t index = 0;
  std::string time;
};

struct SplitConfig {
  Boundary train_end{Boundary::Fraction, 0.7, 0, ""};
  Boundary valid_end{Boundary::Fraction, 0.85, 0, ""};
  int gap = 0;                 // time steps dropped between train/valid and valid/test
  int walk_forward_folds = 0;  // > 0: that many consecutive folds instead of one split
};

struct RunSettings {
  std::string device = "auto";  // auto | cpu | gpu
  bool tf32 = false;
  bool graph = true;
  std::string out_dir = "runs/latest";
  int64_t eval_every = 100;     // validation every N steps (0 = only at the end)
  std::string metric = "ic";    // early-stopping / best-checkpoint metric
  int patience = 0;             // evaluations without improvement before stopping (0 = never stop early)
};

struct RunConfig {
  DataConfig data;
  SplitConfig split;
  ModelConfig model;
  TrainConfig train;
  RunSettings run;
  void validate() const;  // every section, with the key names of the file
};

// Parses a TOML file; throws Error naming the file, line and key on any problem.
RunConfig load_run_config(const std::string& path);
// Parses TOML text (source_name names it in messages); the same rules.
RunConfig parse_run_config(const std::string& text, const std::string& source_name);

}  // namespace mlalpha
