// `ml-alpha eval | predict | synth | info`.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "cli/backend.h"
#include "cli/commands.h"
#include "cli/data_setup.h"
#include "core/context.h"
#include "data/fileio.h"
#include "data/npy.h"
#include "train/config_json.h"
#include "train/metrics.h"

namespace mlalpha {

namespace {

// Everything eval and predict share: the checkpoint's model and statistics applied to the config's data.
struct Evaluation {
  RunConfig cfg;
  CheckpointWeights w;
  Panel norm;
  Split split;
  int t0 = 0, t1 = 0;
};

Evaluation prepare(const EvalArgs& a, bool allow_all) {
  require(!a.checkpoint.empty(), "--checkpoint is required");
  Evaluation e;
  e.cfg = load_run_config(a.config, a.overrides);
  e.w = load_checkpoint_weights(a.checkpoint);
  const Panel panel = load_panel(e.cfg.data);
  panel.validate();
  const ModelConfig& mc = e.w.meta.model;
  require(panel.F == mc.F && panel.K == mc.K, a.checkpoint + ": the model takes F = " + std::to_string(mc.F) +
                                                  " features and K = " + std::to_string(mc.K) +
                                                  " targets, the data has F = " + std::to_string(panel.F) +
                                                  ", K = " + std::to_string(panel.K));
  if (!e.w.meta.feature_names.empty() && !panel.feature_names.empty())
    require(e.w.meta.feature_names == panel.feature_names,
            a.checkpoint + ": the data's feature columns differ from those the model was trained on");
  const std::vector<Split> splits = make_splits(e.cfg.split, panel);
  require(a.fold >= 0 && size_t(a.fold) < splits.size(),
          "--fold " + std::to_string(a.fold) + " does not exist (" + std::to_string(splits.size()) + " folds)");
  e.split = splits[a.fold];
  e.norm = normalized(panel, e.w.meta.stats);  // the training statistics stored with the model
  if (a.split == "train") e.t0 = e.split.train_begin, e.t1 = e.split.train_end;
  else if (a.split == "valid") e.t0 = e.split.valid_begin, e.t1 = e.split.valid_end;
  else if (a.split == "test") e.t0 = e.split.test_begin, e.t1 = e.split.test_end;
  else if (a.split == "all" && allow_all) e.t0 = 0, e.t1 = panel.T;
  else throw Error("--split must be train, valid, test" + std::string(allow_all ? " or all" : "") + ", got '" + a.split + "'");
  require(e.t1 > e.t0, "the " + a.split + " split is empty (" + e.split.to_string() + ")");
  return e;
}

std::vector<float> run_predictions(const Evaluation& e) {
  const ModelLayout layout(e.w.meta.model);
  const TrainConfig& tc = e.w.meta.train;
  return predict_with(e.cfg, layout, e.w.params, e.norm, {tc.L, tc.burn_in, tc.B, e.t0, e.t1});
}

std::string label(const std::vector<std::string>& names, size_t i) {
  return i < names.size() ? names[i] : std::to_string(i);
}

}  // namespace

int cmd_eval(const EvalArgs& a) {
  const Evaluation e = prepare(a, false);
  const std::vector<float> pred = run_predictions(e);
  MetricsInput in;
  in.pred = pred;
  in.y = e.norm.y;
  in.N = e.norm.N;
  in.T = e.norm.T;
  in.K = e.norm.K;
  in.t0 = e.t0;
  in.t1 = e.t1;
  const MetricsResult r = compute_metrics(in);
  std::printf("%s (step %lld) on the %s split, time steps [%d, %d):\n", a.checkpoint.c_str(),
              static_cast<long long>(e.w.step), a.split.c_str(), e.t0, e.t1);
  std::printf("| target | mse | ic | rank_ic | icir | dir_acc | points |\n|---|---|---|---|---|---|---|\n");
  auto row = [](const std::string& name, const Metrics& m) {
    std::printf("| %s | %.6g | %.4f | %.4f | %.3f | %.4f | %lld |\n", name.c_str(), m.mse, m.ic, m.rank_ic, m.icir,
                m.dir_acc, static_cast<long long>(m.points));
  };
  for (size_t k = 0; k < r.per_target.size(); ++k) row(label(e.norm.target_names, k), r.per_target[k]);
  if (r.per_target.size() > 1) row("mean", r.mean);
  return 0;
}

int cmd_predict(const PredictArgs& a) {
  require(!a.out.empty(), "--out is required (a path prefix: <out>.npy and <out>.csv are written)");
  const Evaluation e = prepare(a, true);
  const std::vector<float> pred = run_predictions(e);
  const Panel& p = e.norm;
  const int64_t shape[3] = {p.N, p.T, p.K};
  write_npy(a.out + ".npy", pred, shape);
  std::ostringstream csv;
  csv.precision(9);
  csv << "time,instrument";
  for (int k = 0; k < p.K; ++k) csv << ",pred_" << label(p.target_names, k);
  for (int k = 0; k < p.K; ++k) csv << ",target_" << label(p.target_names, k);
  csv << "\n";
  size_t rows = 0;
  for (int t = e.t0; t < e.t1; ++t)
    for (int i = 0; i < p.N; ++i) {
      const size_t base = (size_t(i) * p.T + t) * p.K;
      if (std::isnan(pred[base])) continue;
      csv << label(p.times, t) << "," << label(p.instruments, i);
      for (int k = 0; k < p.K; ++k) csv << "," << pred[base + k];
      for (int k = 0; k < p.K; ++k) {
        csv << ",";
        if (!std::isnan(p.y[base + k])) csv << p.y[base + k];
      }
      csv << "\n";
      ++rows;
    }
  write_file_atomic(a.out + ".csv", csv.str());
  std::printf("wrote %s.npy (%d, %d, %d; NaN outside the %s split) and %s.csv (%zu rows)\n", a.out.c_str(), p.N, p.T,
              p.K, a.split.c_str(), a.out.c_str(), rows);
  return 0;
}

int cmd_synth(const SynthArgs& a) {
  const RunConfig cfg = load_run_config(a.config, a.overrides);
  require(a.format == "npy" || a.format == "csv" || a.format == "both",
          "--format must be npy, csv or both, got '" + a.format + "'");
  const Panel p = make_synthetic(cfg.data.synth);
  std::filesystem::create_directories(a.out_dir);
  const std::string dir = a.out_dir + "/";
  if (a.format != "csv") {
    const int64_t xs[3] = {p.N, p.T, p.F}, ys[3] = {p.N, p.T, p.K};
    write_npy(dir + "features.npy", p.x, xs);
    write_npy(dir + "targets.npy", p.y, ys);
    std::printf("wrote %sfeatures.npy (%d, %d, %d) and %stargets.npy (%d, %d, %d)\n", dir.c_str(), p.N, p.T, p.F,
                dir.c_str(), p.N, p.T, p.K);
  }
  if (a.format != "npy") {
    std::ostringstream csv;
    csv.precision(9);
    csv << "time,instrument";
    for (int f = 0; f < p.F; ++f) csv << ",f" << f;
    for (int k = 0; k < p.K; ++k) csv << ",y" << k;
    csv << "\n";
    for (int t = 0; t < p.T; ++t)
      for (int i = 0; i < p.N; ++i) {
        csv << t << ",inst" << i;
        for (int f = 0; f < p.F; ++f) csv << "," << p.x[(size_t(i) * p.T + t) * p.F + f];
        for (int k = 0; k < p.K; ++k) csv << "," << p.y[(size_t(i) * p.T + t) * p.K + k];
        csv << "\n";
      }
    write_file_atomic(dir + "panel.csv", csv.str());
    std::printf("wrote %spanel.csv (long format: time, instrument, f0..f%d, y0..y%d)\n", dir.c_str(), p.F - 1, p.K - 1);
  }
  return 0;
}

int cmd_info(const std::string& checkpoint) {
  const int n = cuda_device_count();
  std::printf("CUDA devices: %d\n", n);
  for (int i = 0; i < n; ++i) std::printf("  [%d] %s\n", i, cuda_device_summary(i).c_str());
  if (checkpoint.empty()) return 0;
  const CheckpointWeights w = load_checkpoint_weights(checkpoint);
  const ModelLayout layout(w.meta.model);
  std::printf("%s: step %lld, %zu parameters\n  model %s\n  train %s\n", checkpoint.c_str(),
              static_cast<long long>(w.step), layout.table.count(), to_json(w.meta.model).c_str(),
              to_json(w.meta.train).c_str());
  for (const auto& t : layout.table.tensors()) {
    std::string shape;
    for (size_t d = 0; d < t.shape.size(); ++d) shape += (d ? ", " : "") + std::to_string(t.shape[d]);
    std::printf("  %-40s (%s)\n", t.name.c_str(), shape.c_str());
  }
  return 0;
}

}  // namespace mlalpha
