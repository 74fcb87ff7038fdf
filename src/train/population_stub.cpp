// TEMPORARY (branch poprun): seeds-only expand_population / is_population so the run loop builds and is
// tested before src/train/population.cpp lands. The lead deletes this file at the merge.
#include <cstdio>

#include "train/population.h"

namespace mlalpha {

std::vector<MemberSpec> expand_population(const RunConfig& cfg, int folds) {
  std::vector<MemberSpec> out;
  const int fold_groups = cfg.run.parallel_folds && folds > 1 ? folds : 1;
  for (int f = 0; f < fold_groups; ++f)
    for (int r = 0; r < cfg.train.models; ++r) {
      MemberSpec m;
      m.index = int(out.size());
      char name[32];
      std::snprintf(name, sizeof name, "member-%02d", r);
      m.name = name;
      m.train = cfg.train;
      m.train.seed = cfg.train.seed + uint64_t(r);
      m.train.models = 1;
      m.fold = f;
      m.settings = {{"seed", std::to_string(r)}};
      out.push_back(std::move(m));
    }
  return out;
}

bool is_population(const RunConfig& cfg) { return cfg.train.models > 1 || !cfg.sweep.empty(); }

}  // namespace mlalpha
