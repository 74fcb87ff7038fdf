// The streaming predictor (mlalpha/stream.h): bars, instruments, warm-up. The state file: stream_state.cpp.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "checkpoint/run_record.h"
#include "core/error.h"
#include "core/shortest.h"
#include "model/model_cpu.h"
#include "predict/model_parts.h"
#include "predict/prediction_mean.h"
#include "predict/stream_impl.h"

namespace mlalpha {

namespace {

// FNV-1a over everything that decides a member's predictions: its weights, model shape, context length and
// data processing (settings and statistics).
uint64_t member_hash(uint64_t h, const StreamPredictor::Impl::Member& m) {
  auto bytes = [&](const void* data, size_t n) {
    const unsigned char* c = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) h = (h ^ c[i]) * 1099511628211ull;
  };
  auto text = [&](const std::string& s) { bytes(s.c_str(), s.size() + 1); };
  const ModelConfig& c = m.layout.cfg;
  const int dims[] = {c.F, c.K, c.D, c.NL, c.expand, c.P, c.G, c.N, c.W, c.Q, m.train.L};
  bytes(dims, sizeof dims);
  const float limits[] = {c.dt_limit_lo, c.dt_limit_hi, m.data.robust_clip};
  bytes(limits, sizeof limits);
  bytes(m.params.data(), m.params.size() * sizeof(float));
  text(m.data.feature_norm), text(m.data.nan_fill);
  bytes(m.stats.mean.data(), m.stats.mean.size() * sizeof(float));
  bytes(m.stats.stdev.data(), m.stats.stdev.size() * sizeof(float));
  bytes(m.stats.target_scale.data(), m.stats.target_scale.size() * sizeof(float));
  return h;
}

}  // namespace

void check_instrument_names(const std::vector<std::string>& names) {
  require(!names.empty(), "stream: give at least one instrument");
  std::unordered_map<std::string, size_t> seen;
  for (size_t i = 0; i < names.size(); ++i) {
    require(!names[i].empty(), "stream: instrument " + std::to_string(i) + " has an empty name");
    const auto [it, fresh] = seen.emplace(names[i], i);
    require(fresh, "stream: instrument '" + names[i] + "' is listed twice (positions " + std::to_string(it->second) +
                       " and " + std::to_string(i) + ")");
  }
}

StreamPredictor::Impl::Impl(std::vector<const Model*> models, std::vector<std::string> list, const StreamOptions& o)
    : opt(o) {
  require(!models.empty(), "stream: no model");
  check_instrument_names(list);
  const Model& first = *models.front();
  F = first.model_config().F, K = first.model_config().K, C = first.train_config().L;
  feature_names = first.feature_names(), target_names = first.target_names();
  if (opt.compute.gpu()) ctx = make_gpu_context();
  // On the CPU one pool serves every member in turn (an ensemble of E members does not keep E pools spinning).
  else pool = std::make_unique<cpu::ThreadPool>(opt.compute.threads());
  hash = 1469598103934665603ull;
  for (const Model* m : models) {
    require(m->train_config().L == C, "stream: the members were trained with different train.seq_len (" +
                                          std::to_string(m->train_config().L) + " vs " + std::to_string(C) + ")");
    auto mem = std::make_unique<Member>(m->model_config());
    mem->params = model_params(*m);
    mem->train = m->train_config();
    mem->data = m->data_config();
    mem->stats = m->feature_stats();
    hash = member_hash(hash, *mem);
    members.push_back(std::move(mem));
  }
  set_names(std::move(list));
  history.assign(names.size(), 0);
  for (auto& m : members) {
    m->proc = std::make_unique<BarProcessor>(m->data, m->stats, F, instruments());
    m->engine = make_stream_engine({&m->layout, &m->params, m->train, opt.mode, instruments(), ctx.get(),
                                    opt.compute, pool.get()});
  }
}

void StreamPredictor::Impl::set_names(std::vector<std::string> n) {
  names = std::move(n);
  index.clear();
  for (size_t i = 0; i < names.size(); ++i) index.emplace(names[i], int(i));
}

std::vector<int> StreamPredictor::Impl::indices(std::span<const std::string> which, const char* what) const {
  std::vector<int> out;
  for (const std::string& n : which) {
    const auto it = index.find(n);
    require(it != index.end(), std::string(what) + ": '" + n + "' is not an instrument of the stream (" +
                                   std::to_string(names.size()) + " instruments, e.g. '" + names.front() + "')");
    out.push_back(it->second);
  }
  return out;
}

void StreamPredictor::Impl::remap(std::span<const int> from, std::vector<std::string> n) {
  for (auto& m : members) {
    m->engine->remap(from, bars);
    m->proc->remap(from);
  }
  std::vector<int> next(from.size());
  for (size_t j = 0; j < from.size(); ++j)
    next[j] = from[j] >= 0 ? history[size_t(from[j])]
                           : (opt.mode == PredictMode::window ? int(std::min<int64_t>(bars, C)) : 0);
  history = std::move(next);
  set_names(std::move(n));
}

StreamPredictor::StreamPredictor(const Predictor& predictor, std::vector<std::string> instruments,
                                 const StreamOptions& o)
    : impl_(std::make_unique<Impl>(predictor.models(), std::move(instruments), o)) {}
StreamPredictor::StreamPredictor(StreamPredictor&&) noexcept = default;
StreamPredictor& StreamPredictor::operator=(StreamPredictor&&) noexcept = default;
StreamPredictor::~StreamPredictor() = default;

int StreamPredictor::instruments() const { return impl_->instruments(); }
const std::vector<std::string>& StreamPredictor::instrument_names() const { return impl_->names; }
int StreamPredictor::index_of(const std::string& name) const {
  const auto it = impl_->index.find(name);
  return it == impl_->index.end() ? -1 : it->second;
}
int StreamPredictor::features() const { return impl_->F; }
int StreamPredictor::targets() const { return impl_->K; }
const std::vector<std::string>& StreamPredictor::feature_names() const { return impl_->feature_names; }
const std::vector<std::string>& StreamPredictor::target_names() const { return impl_->target_names; }
PredictMode StreamPredictor::mode() const { return impl_->opt.mode; }
int StreamPredictor::context_length() const { return impl_->C; }
bool StreamPredictor::on_gpu() const { return impl_->ctx != nullptr; }
int64_t StreamPredictor::bars() const { return impl_->bars; }
double StreamPredictor::last_time() const { return impl_->last_time; }
std::string StreamPredictor::checkpoint_hash() const { return hex64(impl_->hash); }
std::vector<int> StreamPredictor::context() const { return impl_->history; }

std::vector<float> StreamPredictor::step(std::span<const float> x, std::span<const uint8_t> present, double time) {
  Impl& s = *impl_;
  const int I = s.instruments(), F = s.F, K = s.K;
  // Every check before anything changes: a refused bar leaves the stream as it was.
  if (x.size() != size_t(I) * F)
    throw Error("stream: a bar holds " + std::to_string(x.size()) + " values, expected " + std::to_string(I) +
                " instruments x " + std::to_string(F) + " features");
  if (!present.empty() && present.size() != size_t(I))
    throw Error("stream: `present` has " + std::to_string(present.size()) + " flags for " + std::to_string(I) +
                " instruments");
  if (!std::isnan(time) && !std::isnan(s.last_time) && !(time > s.last_time))
    throw Error("stream: the bar's time " + shortest_text(time) + " is not after the last bar's " +
                shortest_text(s.last_time) + " (times must increase from bar to bar)");
  std::vector<uint8_t> here(size_t(I), 0);
  for (int i = 0; i < I; ++i) {
    const float* row = x.data() + size_t(i) * F;
    for (int f = 0; f < F; ++f) {
      if (std::isinf(row[f]))
        throw Error("stream: instrument '" + s.names[size_t(i)] + "', feature " +
                    (size_t(f) < s.feature_names.size() ? "'" + s.feature_names[size_t(f)] + "'" : std::to_string(f)) +
                    " is " + (row[f] > 0 ? "+inf" : "-inf") + "; features must be finite or NaN (NaN: missing)");
      if (!std::isnan(row[f])) here[size_t(i)] = 1;
    }
    if (!present.empty() && present[size_t(i)] == 0) here[size_t(i)] = 0;
  }
  std::vector<int> history = s.history;
  for (int i = 0; i < I; ++i) {
    int& h = history[size_t(i)];
    if (s.opt.mode == PredictMode::window) h = std::min(h + 1, s.C);
    else if (here[size_t(i)] && h < std::numeric_limits<int>::max()) ++h;
  }
  PredictionMean mean;
  for (auto& m : s.members) {
    m->x.resize(size_t(I) * F), m->fill.resize(size_t(F)), m->out.resize(size_t(I) * K);
    m->proc->process(x.data(), here.data(), m->x.data(), m->fill.data());
    m->engine->bar(m->x.data(), here.data(), m->fill.data(), history.data(), s.bars, m->out.data());
    unscale_predictions(m->out, K, m->stats);  // data.target_scale: back to the targets' units, as predict
    mean.add(m->out);
  }
  s.history = std::move(history);
  ++s.bars;
  if (!std::isnan(time)) s.last_time = time;
  return mean.mean();
}

void StreamPredictor::reset() {
  std::vector<int> all(impl_->names.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = int(i);
  for (auto& m : impl_->members) m->engine->reset(all), m->proc->reset(all);
  std::fill(impl_->history.begin(), impl_->history.end(), 0);
}

void StreamPredictor::reset(std::span<const std::string> names) {
  const std::vector<int> which = impl_->indices(names, "stream: reset");
  for (auto& m : impl_->members) m->engine->reset(which), m->proc->reset(which);
  for (int i : which) impl_->history[size_t(i)] = 0;
}

void StreamPredictor::set_instruments(std::vector<std::string> names) {
  check_instrument_names(names);
  std::vector<int> from(names.size());
  for (size_t j = 0; j < names.size(); ++j) from[j] = index_of(names[j]);
  impl_->remap(from, std::move(names));
}

void StreamPredictor::warm_up(const Panel& history) {
  history.validate();
  Impl& s = *impl_;
  require(history.F == s.F, "stream: the warm-up history has " + std::to_string(history.F) +
                                " features, the model takes " + std::to_string(s.F));
  require(s.feature_names.empty() || history.feature_names.empty() || history.feature_names == s.feature_names,
          "stream: the warm-up history's feature columns differ from those the model was trained on");
  require(history.instruments.size() == size_t(history.N) || (history.N == 1 && s.instruments() == 1),
          "stream: the warm-up history names no instruments; it cannot be matched to the stream's");
  const std::vector<int> at = history.instruments.empty() ? std::vector<int>{0}
                                                          : s.indices(history.instruments, "stream: warm-up");
  const bool timed = history.time_values.size() == size_t(history.T);
  // The checks every bar would make, first, so a refused history changes nothing (its times increase: the
  // panel's time axis is sorted).
  require(!timed || std::isnan(s.last_time) || history.time_values.front() > s.last_time,
          "stream: the warm-up history's first time " + shortest_text(timed ? history.time_values.front() : 0.0) +
              " is not after the last bar's " + shortest_text(s.last_time));
  for (size_t v = 0; v < history.x.size(); ++v)
    if (std::isinf(history.x[v])) {
      const size_t row = v / size_t(s.F);
      throw Error("stream: warm-up: instrument '" + s.names[size_t(at[row / size_t(history.T)])] + "' at time step " +
                  std::to_string(row % size_t(history.T)) + ", feature " + std::to_string(v % size_t(s.F)) + " is " +
                  (history.x[v] > 0 ? "+inf" : "-inf") + "; features must be finite or NaN");
    }
  std::vector<float> x(size_t(s.instruments()) * s.F);
  for (int t = 0; t < history.T; ++t) {
    std::fill(x.begin(), x.end(), std::numeric_limits<float>::quiet_NaN());
    for (int i = 0; i < history.N; ++i)
      std::copy_n(history.x.data() + (size_t(i) * history.T + t) * s.F, s.F, x.data() + size_t(at[size_t(i)]) * s.F);
    step(x, {}, timed ? history.time_values[size_t(t)] : NAN);
  }
}

}  // namespace mlalpha
