#pragma once
// Settings that are valid alone but make a degenerate run on this panel: nothing to learn (the IC loss on a
// single series, per-date processing of one instrument) or a selection metric that cannot be computed (an IC
// over two instruments, quantile portfolios of fewer instruments than quantiles). Such a run would train,
// print "best ic nan" and report success; it is refused before the run folder is touched, with what to change.
// Legitimate but suspicious settings come back as warnings ("warning: ..."), which the run reports as messages.
#include <string>
#include <vector>

#include "data/panel.h"
#include "mlalpha/config.h"
#include "mlalpha/run.h"
#include "run/folds.h"

namespace mlalpha {

// Refuses (Error) or returns warnings for the run `cfg` on `panel` split into `plans`. `fresh`: no model
// continues from a checkpoint (train.init is then read and checked against the model).
std::vector<std::string> check_run_data(const RunConfig& cfg, const Panel& panel, const std::vector<FoldPlan>& plans,
                                        bool fresh);

// After the run: a model whose run.metric was NaN at every validation had no best checkpoint to choose (the
// first validation's weights stand in). Throws Error naming the models and why, so the run ends non-zero; its
// files stay for inspection, unless `overwriting` (--overwrite): then the old run is restored (the message says so).
void require_selection_metric(const RunConfig& cfg, const RunResult& result, bool overwriting);

}  // namespace mlalpha
