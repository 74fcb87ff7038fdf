#pragma once
// The configuration of a run (docs/config.md lists every key): the settings structs of
// mlalpha/config_types.h, the population sweep and the run around them. load_run_config() reads them from
// a TOML file and `section.key=value` overrides, refusing unknown keys with the nearest valid one.
#include <set>
#include <string>
#include <vector>

#include "mlalpha/compute.h"
#include "mlalpha/config_types.h"
#include "mlalpha/device.h"

namespace mlalpha {

struct RunSettings {
  std::string device = "auto";  // auto | cpu | gpu
  // The CPU backend: worker threads (0 = every CPU this process may use, at most 64; the bits do not depend
  // on it) and the model it runs, "fast" or "reference". With device and train.precision: RunConfig::compute().
  int threads = 0;
  std::string cpu_kernels = "fast";
  bool graph = true;
  std::string out_dir = "runs/latest";
  int64_t eval_every = 100;     // validation every N steps (0 = only at the end)
  std::string metric = "ic";    // early-stopping / best-checkpoint metric
  int patience = 0;             // evaluations without improvement before stopping (0 = never stop early)
  int64_t stop_after = 0;       // > 0: end this invocation after that many steps (saving `last`); resume later
  int64_t save_every = 0;       // > 0: also save `last` (and what a resume needs) every N steps; 0: at the end only
  int quantiles = 5;            // quantile portfolios per time step in the metrics (>= 2)
  double periods_per_year = 0;  // annualises ls_sharpe; 0: from the time axis (dates only, else NaN)
  // Walk-forward folds of a population trained together, as members of one population (each samples and
  // validates on its own fold's ranges), instead of one population per fold in turn.
  bool parallel_folds = false;
};

// [sweep]: optimiser settings a population tries. Each non-empty list replaces the train setting of the
// same name with each of its values; the population is the product of the lists (lr outermost, then
// weight_decay, clip, warmup) times train.models seeds.
struct SweepConfig {
  std::vector<float> lr, weight_decay, clip;
  std::vector<int64_t> warmup;
  bool empty() const { return lr.empty() && weight_decay.empty() && clip.empty() && warmup.empty(); }
  // Every value passes the check of the train setting it replaces (sweep.lr[i] > 0, sweep.warmup[i] <
  // train.steps, ...) and appears once in its list; messages name "sweep.lr[2]" and the value.
  void validate(const TrainConfig& train) const;
};

struct RunConfig {
  DataConfig data;
  SplitConfig split;
  ModelConfig model;
  TrainConfig train;
  SweepConfig sweep;
  RunSettings run;
  // The "section.key" names the TOML file or an override set explicitly (not left at the default): a
  // resume and eval/predict use them to tell a deliberate change from a default.
  std::set<std::string> given;
  bool was_given(const std::string& key) const { return given.count(key) > 0; }
  bool was_given_in(const std::string& section) const;  // any key of "data", "model", ...
  void validate() const;  // every section, with the key names of the file
  // run.device, train.precision, run.threads and run.cpu_kernels as a request for resolve() (mlalpha/compute.h),
  // named by their keys.
  ComputeRequest compute() const;
};

// A setting given by a program or a command line flag, applied after the file and the "section.key=value"
// overrides. kind toml: `value` is TOML, as an override's; text: the string itself, never parsed (a path stays
// as typed, backslashes and quotes included); integer, number: decimal text read exactly (std::from_chars),
// never through TOML. `origin` names it in messages ("--out-dir"; empty: "section.key").
struct ConfigSetting {
  enum class Kind { toml, text, integer, number };
  Kind kind = Kind::toml;
  std::string key, value, origin;
};

// Parses a TOML file (empty path: defaults only), then applies command-line overrides written as
// "section.key=value" (the value in TOML syntax; a bare word is taken as the string it spells, backslashes
// included), then `settings`, with the same checks as the file. Relative data paths written in the file
// (data.features, data.targets, data.csv) resolve against the file's folder; those given as overrides or
// settings, and run.out_dir, against the working directory. Throws Error naming the file, override or flag,
// line and key on any problem; an unknown key gets the most similar valid key as a suggestion.
RunConfig load_run_config(const std::string& path, const std::vector<std::string>& overrides = {},
                          const std::vector<ConfigSetting>& settings = {});
// The same from TOML text. source_name names it in messages; base_dir ("" = none) is the folder that
// relative paths in the text resolve against.
RunConfig parse_run_config(const std::string& text, const std::string& source_name,
                           const std::vector<std::string>& overrides = {}, const std::string& base_dir = "",
                           const std::vector<ConfigSetting>& settings = {});

// The settings of the given sections ("data", "model", ...; empty: all) as a TOML document that
// parse_run_config reads back to the same values.
std::string to_toml(const RunConfig& c, const std::vector<std::string>& sections = {});

// The valid keys of the TOML file, as "section.key", in the order of docs/config.md.
const std::vector<std::string>& run_config_keys();
// The valid key most similar to `key` ("train.lerning_rate" → "train.lr"), or "" when none is close.
std::string suggest_run_config_key(const std::string& key);

}  // namespace mlalpha
