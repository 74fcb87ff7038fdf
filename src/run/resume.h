#pragma once
// Where a resume continues and with which settings (docs/config.md, "Resume"): one path for a solo run and a
// population, for run folders of every format (checkpoint/run_records.h). A resume continues in the run's own
// folder; its recorded settings govern, and the caller's explicit settings apply where a resume may change
// them (the schedule-like train settings, the run settings but run.parallel_folds) and are refused where they
// may not (the data, the model, the split, the batch, the seeds, a setting the population sweeps).
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "mlalpha/config.h"

namespace mlalpha {

struct ResumeSource {
  std::filesystem::path dir;  // the run folder
  // 2: run.json; 1: a population's population.json; 0: a solo run of an older ml-alpha, recorded in its
  // checkpoints only (its [run] settings are the caller's).
  int format = 2;
  bool population = false;
  RunConfig recorded;         // the run's settings (format 0: model and train from the checkpoint)
  bool has_record = true;     // format 0: the checkpoint records its data and split
  bool complete = true;       // false: a kill ended the run before all its outputs were written
  bool described = false;     // the recorded data settings load the data
  uint64_t fingerprint = 0;   // of the data (has_record)
  std::string record_file;    // where the settings were read, for messages
  // Format 0: the checkpoint to continue, the fold it belongs to and its step.
  std::string checkpoint;
  int fold = 0;
  int64_t step = 0;
};

// The run `resume` names: a run folder, or a checkpoint in one (a model folder's last.safetensors); for a solo
// run of an older ml-alpha any of its checkpoints. Throws Error saying what is missing.
ResumeSource locate_resume(const std::string& resume);
// The configuration the resume runs; `changes` receives a line per applied change.
RunConfig resolve_resume(const RunConfig& config, const std::string& resume, const ResumeSource& src,
                         std::vector<std::string>* changes);
// The train settings a resume may change when the caller sets them explicitly.
bool resume_may_change(const std::string& key);

}  // namespace mlalpha
