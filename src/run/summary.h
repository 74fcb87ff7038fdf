#pragma once
// What a run leaves beside its models, written after every fold so an interrupted run keeps what it finished.
// The loop is one; what differs is the summary chosen at the start:
//   a solo run: its folds in RunResult::folds; walk-forward: folds.csv / folds.json and the pooled
//     out-of-sample predictions (oos_pred);
//   a population: every member in RunResult::members, each fold's leaderboard and mean-ensemble;
//     walk-forward: each member's and the ensemble's pooled out-of-sample predictions and the run's leaderboard
//     of them.
#include <memory>
#include <vector>

#include "mlalpha/run.h"
#include "run/folds.h"
#include "run/train_loop.h"

namespace mlalpha {

class Summary {
 public:
  virtual ~Summary() = default;
  // The models of the folds `folds` after training (or testing again); `final`: no fold follows in this
  // invocation. Frees what the models' predictions held once they are summarised.
  virtual void add(const std::vector<int>& folds, std::vector<Trained>& trained, bool final) = 0;
};

std::unique_ptr<Summary> make_solo_summary(RunContext& c, const std::vector<FoldPlan>& plans, RunResult& result);
std::unique_ptr<Summary> make_population_summary(RunContext& c, const std::vector<FoldPlan>& plans,
                                                 const std::vector<MemberSpec>& members, RunResult& result);

}  // namespace mlalpha
