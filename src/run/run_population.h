#pragma once
// The run loop of a population (config/members.h, docs/populations.md): the members train
// together, fold by fold or all folds at once (run.parallel_folds), each with a solo run's files in its
// own folder, then leaderboard.csv and the mean-ensemble of their best weights.
#include <cstdint>
#include <vector>

#include "config/members.h"
#include "data/panel.h"
#include "mlalpha/run.h"
#include "run/run_common.h"
#include "train/population.h"

namespace mlalpha {

// cfg is resolved and validated against `panel`, `plans` are checked and the run folder is claimed;
// members = expand_population(cfg, plans.size()). Fills result.members, leaderboard_file and the ensemble.
// resume: continue the population in cfg.run.out_dir (run/population_resume.h): finished folds are read back,
// the others' members continue from their last.safetensors and member.json; checked before anything is written.
void run_population(const RunConfig& cfg, const Panel& panel, const std::vector<FoldPlan>& plans,
                    const std::vector<MemberSpec>& members, uint64_t fingerprint, bool described, bool resume,
                    Reporter& rep, RunResult& result);

}  // namespace mlalpha
