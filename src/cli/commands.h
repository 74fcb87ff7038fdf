#pragma once
// The subcommands of `ml-alpha` (main.cpp parses the flags and calls these).
#include <optional>
#include <string>
#include <vector>

#include "mlalpha/config.h"
#include "mlalpha/precision.h"

namespace mlalpha {

struct CommonArgs {
  std::string config;                    // TOML file ("" = defaults)
  std::vector<std::string> overrides;    // --set "section.key=value" (the value in TOML syntax)
  std::vector<ConfigSetting> settings;   // the flags' values, as typed (after the overrides)
};

struct TrainArgs : CommonArgs {
  std::string resume;      // a run folder, or a checkpoint of one, to continue
  bool overwrite = false;  // replace a run already in run.out_dir
  int gpus = 0;            // --gpus N (0: not given): data-parallel over N GPUs of this host, one process each
  std::vector<std::string> argv;  // the command line as given (the --gpus launcher re-runs it per rank)
};
int cmd_train(const TrainArgs& a);

// `--sweep KEY=V1,V2,...` as the override "sweep.KEY=[V1, V2, ...]" (KEY one of lr, weight_decay, clip,
// warmup; numbers, integers for warmup). Throws Error naming the bad part.
std::string sweep_override(const std::string& arg);
// Every --sweep argument in order; a KEY given twice is an error (its values belong in one list).
std::vector<std::string> sweep_overrides(const std::vector<std::string>& args);

// `--precision P` and its older spelling `--tf32` (same as --precision tf32), as the command line gave them
// (precision "" and tf32 false: neither given, so the config decides). Throws Error for a bad P, or for
// --tf32 with another --precision.
std::optional<Precision> precision_flag(const std::string& precision, bool tf32);
// --precision's help: what each precision computes (mlalpha/precision.h).
extern const char* const kPrecisionHelp;

struct EvalArgs : CommonArgs {
  std::string checkpoint;
  std::string split = "test";  // train | valid | test
  int fold = -1;               // walk-forward fold (0-based); -1: the checkpoint's own
  std::string members;         // checkpoint is a population run folder: EnsembleSelection::parse's text ("" = all)
  std::string long_short_svg;  // eval: where to write the cumulative long-short plot ("" = none)
  // What a date's prediction is: window | carry (mlalpha/model.h, PredictMode); "": the checkpoint's default
  // (carry for a model trained with train.state = "carry", else window: default_predict_mode).
  std::string mode;
};
int cmd_eval(const EvalArgs& a);

struct PredictArgs : EvalArgs {
  std::string out;  // prefix: <out>.npy and <out>.csv
};
int cmd_predict(const PredictArgs& a);

// The checks eval, predict and stream share before they run a checkpoint: a processing setting (data.feature_norm,
// target_norm, nan_fill, robust_clip) given with another value than the checkpoint was trained with, and a
// --precision other than fp32 on the CPU (whose kernels are fp32), and a --set of a setting the command never
// reads (model., train. but precision, ...), are refused. `command` names the commands in the message ("eval and
// predict"); `reads_split` says whether split. settings choose its range; `compute` is cfg.compute() resolved.
void check_inference_settings(const RunConfig& cfg, const CommonArgs& a, const DataConfig& trained,
                              const std::string& checkpoint, const std::string& command, bool reads_split,
                              const Compute& compute);

// `ml-alpha stream` (cmd_stream.cpp).
struct StreamArgs : CommonArgs {
  std::string checkpoint;        // a checkpoint, or a population run folder (its members' mean)
  std::string members;           // with a run folder: EnsembleSelection::parse's text ("" = all)
  int fold = -1;                 // with a walk-forward population's run folder
  std::string input = "-";       // the rows: a file, or "-" for standard input
  std::string output = "-";      // the predictions: a file, or "-" for standard output
  std::string mode = "carry";    // carry | window
  std::string instruments;       // "a,b,c"
  std::string instruments_file;  // one name a line
  std::string history;           // a CSV of earlier rows to warm up on (a new stream only)
  std::string state;             // resumed from when it exists; written after every time step
  bool new_instruments = false;  // an instrument seen for the first time joins the stream
};
int cmd_stream(const StreamArgs& a);

struct SynthArgs : CommonArgs {
  std::string out_dir = "data/synthetic";
  std::string format = "both";  // npy | csv | both
  bool overwrite = false;        // replace the files of a panel already in out_dir
};
int cmd_synth(const SynthArgs& a);

// checkpoint: a checkpoint file, a population run folder, a stream's state file, or "" (the CUDA devices only);
// state: a stream's state file to describe ("": none).
int cmd_info(const std::string& checkpoint, int fold = -1, const std::string& state = "");

}  // namespace mlalpha
