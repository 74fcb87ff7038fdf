#pragma once
// Everything one `ml-alpha` run needs, as read from a TOML file (docs/config.md) and then overridden by
// command-line flags. Unknown or misspelt keys are errors that name the key, its line and the nearest
// valid key.
#include <cstdint>
#include <string>
#include <vector>

#include "data/split.h"
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

// Split boundaries are data/split.h's SplitPoint: in the file a float is a fraction of T, an integer a
// time index, a string a time value.
struct SplitConfig {
  SplitSpec spec;              // train_end, valid_end, gap
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
  int64_t stop_after = 0;       // > 0: end this invocation after that many steps (saving `last`); resume later
};

struct RunConfig {
  DataConfig data;
  SplitConfig split;
  ModelConfig model;
  TrainConfig train;
  RunSettings run;
  void validate() const;  // every section, with the key names of the file
};

// Parses a TOML file (empty path: defaults only), then applies command-line overrides written as
// "section.key=value" (the value in TOML syntax; a bare word is taken as a string), with the same checks
// as the file. Throws Error naming the file or override, line and key on any problem.
RunConfig load_run_config(const std::string& path, const std::vector<std::string>& overrides = {});
// The same from TOML text (source_name names it in messages).
RunConfig parse_run_config(const std::string& text, const std::string& source_name,
                           const std::vector<std::string>& overrides = {});

}  // namespace mlalpha
