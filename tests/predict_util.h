#pragma once
// Helpers of the prediction and streaming suites: a checkpoint of random weights written with chosen settings
// (model, train.seq_len, data processing, statistics), and raw panels with the rows real data has: missing rows,
// NaN cells, an instrument listed late, a row with a target but no feature; a panel's bars through a stream.
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "checkpoint/run_record.h"
#include "mlalpha/model.h"
#include "mlalpha/stream.h"
#include "stream_util.h"
#include "test_util.h"

namespace mlalpha::test {

// Writes a checkpoint of `mc` (random weights from `seed`, never round numbers) trained with windows of C rows,
// recording the data processing `data` and statistics `stats`, and loads it back.
inline Model write_model(const std::string& path, const ModelConfig& mc, int C, const DataConfig& data,
                         const FeatureStats& stats, uint64_t seed, const std::vector<std::string>& features = {},
                         const std::vector<std::string>& targets = {}) {
  const ModelLayout lay(mc);
  std::mt19937_64 rng(seed);
  TrainState st;
  st.params = noisy_params(lay, rng);
  st.m.assign(st.params.size(), 0.0f);
  st.v.assign(st.params.size(), 0.0f);
  st.step = st.adam_step = 1;
  st.seed = 1;
  CheckpointMeta meta;
  meta.model = mc;
  meta.train.L = C;
  meta.train.B = 4;
  meta.train.seed = 1;
  meta.stats = stats;
  meta.feature_names = features;
  meta.target_names = targets;
  RunConfig rc;
  rc.data = data;
  meta.data_json = encode_run_record(rc, false, 0, 0);
  save_checkpoint(path, lay, st, meta);
  return Model::load_weights(path);
}

inline DataConfig processing(const std::string& feature_norm, const std::string& nan_fill,
                             const std::string& target_norm = "none") {
  DataConfig d;
  d.feature_norm = feature_norm, d.nan_fill = nan_fill, d.target_norm = target_norm;
  return d;
}

// Statistics that are not the identity (global normalisation changes every value).
inline FeatureStats some_stats(int F, std::mt19937_64& rng) {
  FeatureStats s;
  s.mean = random_vec<float>(size_t(F), rng, -0.5, 0.5);
  s.stdev = random_vec<float>(size_t(F), rng, 0.5, 2.0);
  return s;
}

// A raw panel of N instruments "i0".. and T numeric times "100", "101", ..: values in (−2, 2); instrument 1
// missing (every feature and target NaN) at times 5, 6 and T − 3; instrument 2 listed at time 12 (missing before);
// instrument 0 a NaN feature at time 9 and T − 2; instrument 3 a row with a target but no feature at time 15
// (each pattern only where the panel has that instrument and time: a panel of 3 instruments has no instrument 3).
inline Panel raw_panel(int N, int T, int F, int K, std::mt19937_64& rng) {
  Panel p;
  p.N = N, p.T = T, p.F = F, p.K = K;
  p.x = random_vec<float>(size_t(N) * T * F, rng, -2, 2);
  p.y = random_vec<float>(size_t(N) * T * K, rng, -1, 1);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto missing = [&](int i, int t, bool targets) {
    for (int f = 0; f < F; ++f) p.x[(size_t(i) * T + t) * F + f] = nan;
    if (targets)
      for (int k = 0; k < K; ++k) p.y[(size_t(i) * T + t) * K + k] = nan;
  };
  if (N > 1)
    for (int t : {5, 6, T - 3})
      if (t >= 0 && t < T) missing(1, t, true);
  if (N > 2)
    for (int t = 0; t < std::min(12, T); ++t) missing(2, t, true);
  if (T > 9) p.x[(size_t(0) * T + 9) * F] = nan;
  if (T >= 2) p.x[(size_t(0) * T + T - 2) * F + (F - 1)] = nan;
  if (N > 3 && T > 15) missing(3, 15, false);
  for (int i = 0; i < N; ++i) p.instruments.push_back("i" + std::to_string(i));
  for (int t = 0; t < T; ++t) p.times.push_back(std::to_string(100 + t));
  for (int f = 0; f < F; ++f) p.feature_names.push_back("f" + std::to_string(f));
  for (int k = 0; k < K; ++k) p.target_names.push_back("y" + std::to_string(k));
  parse_panel_times(p);
  return p;
}

// Panel row (i, t) of `p` as a bar's (I, F) block for instruments in p's order.
inline std::vector<float> bar_of(const Panel& p, int t) {
  std::vector<float> x(size_t(p.N) * p.F);
  for (int i = 0; i < p.N; ++i) std::copy_n(p.x.data() + (size_t(i) * p.T + t) * p.F, p.F, x.data() + size_t(i) * p.F);
  return x;
}

// Every bar of [t0, t1) of `p` through the stream (its instruments in p's order), with p's times: (T', I, K).
inline std::vector<float> run(StreamPredictor& s, const Panel& p, int t0, int t1) {
  std::vector<float> out;
  for (int t = t0; t < t1; ++t) {
    const std::vector<float> o = s.step(bar_of(p, t), {}, p.time_values.empty() ? NAN : p.time_values[size_t(t)]);
    out.insert(out.end(), o.begin(), o.end());
  }
  return out;
}

// predict's (N, T, K) as the stream's (T, N, K), NaN where the stream has no prediction (absent rows).
inline std::vector<float> as_stream(const std::vector<float>& pred, const Panel& raw, int K) {
  std::vector<float> out(size_t(raw.T) * raw.N * K, std::numeric_limits<float>::quiet_NaN());
  for (int t = 0; t < raw.T; ++t)
    for (int i = 0; i < raw.N; ++i)
      if (input_row(raw, i, t) & kRowFeatures)
        for (int k = 0; k < K; ++k) out[(size_t(t) * raw.N + i) * K + k] = pred[(size_t(i) * raw.T + t) * K + k];
  return out;
}

inline std::vector<bool> nan_of(const std::vector<float>& v) {
  std::vector<bool> m(v.size());
  for (size_t i = 0; i < v.size(); ++i) m[i] = std::isnan(v[i]);
  return m;
}

inline ModelConfig small_model(int F, int K) {
  ModelConfig mc;
  mc.F = F, mc.K = K, mc.D = 16, mc.NL = 2, mc.P = 8, mc.N = 8, mc.Q = 8, mc.G = 1, mc.W = 4;
  return mc;
}

}  // namespace mlalpha::test
