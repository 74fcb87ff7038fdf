#include "cli/data_setup.h"

#include <algorithm>

#include "core/error.h"
#include "data/csv.h"
#include "data/normalize.h"
#include "data/npy.h"

namespace mlalpha {

Panel load_panel(const DataConfig& d) {
  if (d.source == "synthetic") return make_synthetic(d.synth);
  if (d.source == "npy") return load_npy_panel({d.features, d.targets});
  if (d.source == "csv") {
    CsvSpec spec;
    spec.path = d.csv;
    spec.time_column = d.time_column;
    spec.instrument_column = d.instrument_column;
    spec.feature_columns = d.feature_columns;
    spec.target_columns = d.target_columns;
    return load_csv_panel(spec);
  }
  throw Error("data.source must be 'synthetic', 'npy' or 'csv', got '" + d.source + "'");
}

std::vector<Split> make_splits(const SplitConfig& s, const Panel& p) {
  if (s.walk_forward_folds > 0) {
    WalkForwardSpec w;
    w.folds = s.walk_forward_folds;
    w.gap = s.spec.gap;
    return walk_forward(p.T, w);
  }
  return {make_split(s.spec, p.T, p.times)};
}

Panel slice_panel(const Panel& p, int t0, int t1) {
  require(0 <= t0 && t0 < t1 && t1 <= p.T, "slice_panel: bad range");
  Panel out = p;
  out.T = t1 - t0;
  out.x.resize(size_t(p.N) * out.T * p.F);
  out.y.resize(size_t(p.N) * out.T * p.K);
  for (int i = 0; i < p.N; ++i) {
    std::copy_n(p.x.begin() + (size_t(i) * p.T + t0) * p.F, size_t(out.T) * p.F, out.x.begin() + size_t(i) * out.T * p.F);
    std::copy_n(p.y.begin() + (size_t(i) * p.T + t0) * p.K, size_t(out.T) * p.K, out.y.begin() + size_t(i) * out.T * p.K);
  }
  if (!p.times.empty()) out.times.assign(p.times.begin() + t0, p.times.begin() + t1);
  return out;
}

Panel normalized(const Panel& p, const FeatureStats& stats) {
  Panel out = p;
  normalize_features(out, stats);
  return out;
}

}  // namespace mlalpha
