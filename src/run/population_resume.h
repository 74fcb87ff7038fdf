#pragma once
// How a population resume resolves its configuration (docs/populations.md, "Resume and run.stop_after").
#include <string>
#include <vector>

#include "mlalpha/config.h"

namespace mlalpha {

// The config a population resume runs: the recorded one, with the caller's explicit changes that a resume
// may make (resume_may_change, the run settings but run.parallel_folds and run.out_dir) applied; any other
// explicit setting that differs is refused, naming it. run.stop_after is the caller's (it ends one invocation). `changes` receives a line per applied change.
RunConfig resolve_population_resume(const RunConfig& config, const std::string& resume, const std::string& dir,
                                    std::vector<std::string>* changes);

// The train settings a resume may change when the caller sets them explicitly (src/run/run.cpp).
bool resume_may_change(const std::string& key);

}  // namespace mlalpha
