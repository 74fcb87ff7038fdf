#include "checkpoint/checkpoint.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <random>

#include <nlohmann/json.hpp>

#include "checkpoint/config_json.h"
#include "checkpoint/safetensors.h"
#include "core/atomic_file.h"
#include "core/error.h"

namespace mlalpha {
namespace {

constexpr const char* kWeightsFormat = "ml-alpha.weights";
constexpr const char* kOptimFormat = "ml-alpha.optimizer";

// 128 random bits as hex, drawn per save and written into both files: a sidecar from any other save
// (an older one left by a crash between the two renames, or a copy from elsewhere) does not match.
std::string new_save_id() {
  std::random_device rd;
  char buf[40];
  std::snprintf(buf, sizeof buf, "%08x%08x%08x%08x", unsigned(rd()), unsigned(rd()), unsigned(rd()), unsigned(rd()));
  return buf;
}

// ---- metadata access with messages that name the file and the key
struct MetaReader {
  const SafetensorsFile& file;
  std::string where;  // "checkpoint 'P'" or "optimizer sidecar 'P.optim.safetensors'"

  const std::string& get(const std::string& key) const {
    auto it = file.metadata.find(key);
    require(it != file.metadata.end(), where + ": metadata lacks '" + key + "'");
    return it->second;
  }
  template <typename I>
  I integer(const std::string& key) const {
    const std::string& s = get(key);
    I v{};
    const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
    require(r.ec == std::errc() && r.ptr == s.data() + s.size() && !s.empty(),
            where + ": metadata '" + key + "' must be an integer, got '" + s + "'");
    return v;
  }
  void expect_format(const char* format, const char* what) const {
    auto it = file.metadata.find("format");
    require(it != file.metadata.end() && it->second == format,
            where + ": not an ml-alpha " + what + " (metadata 'format' is " +
                (it == file.metadata.end() ? std::string("missing") : "'" + it->second + "'") + ", expected '" +
                format + "')");
    const int version = integer<int>("format_version");
    require(version >= 1 && version <= kCheckpointFormatVersion,
            where + ": format version " + std::to_string(version) + " is not readable by this build (it reads 1.." +
                std::to_string(kCheckpointFormatVersion) + "; written by a newer ml-alpha?)");
  }
};

template <typename C>
void validate_in(const C& c, const std::string& where, const char* what) {
  try {
    c.validate();
  } catch (const Error& e) {
    throw Error(where + ": " + what + ": " + e.what());
  }
}

void check_counters(int64_t step, int64_t adam_step, int64_t skipped, const std::string& where) {
  require(step >= 0 && skipped >= 0 && skipped <= step && adam_step == step - skipped,
          where + ": inconsistent step counters: step " + std::to_string(step) + ", adam_step " +
              std::to_string(adam_step) + ", skipped_total " + std::to_string(skipped) +
              " (expected 0 <= skipped_total <= step and adam_step = step - skipped_total)");
}

void check_meta_sizes(const CheckpointMeta& m, const std::string& where) {
  const size_t F = size_t(m.model.F), K = size_t(m.model.K);
  require(m.stats.mean.size() == m.stats.stdev.size() && (m.stats.mean.empty() || m.stats.mean.size() == F),
          where + ": feature statistics have " + std::to_string(m.stats.mean.size()) + " means and " +
              std::to_string(m.stats.stdev.size()) + " stdevs; expected none or model.F = " + std::to_string(F));
  require(m.stats.target_scale.empty() || m.stats.target_scale.size() == K,
          where + ": " + std::to_string(m.stats.target_scale.size()) + " target scales; expected none or model.K = " +
              std::to_string(K));
  require(m.feature_names.empty() || m.feature_names.size() == F,
          where + ": " + std::to_string(m.feature_names.size()) + " feature names for model.F = " + std::to_string(F));
  require(m.target_names.empty() || m.target_names.size() == K,
          where + ": " + std::to_string(m.target_names.size()) + " target names for model.K = " + std::to_string(K));
}

// The file's tensors must be exactly the layout's, once per prefix (same shapes, nothing extra). `model`
// says whose layout it is in messages ("the model", "its own model_config").
void check_tensors(const SafetensorsFile& f, const ParamTable& table, const std::vector<std::string>& prefixes,
                   const std::string& where, const std::string& model) {
  for (const std::string& prefix : prefixes)
    for (const ParamTensor& t : table.tensors()) {
      const LoadedTensor* lt = f.find(prefix + t.name);
      require(lt != nullptr, where + " has no tensor '" + prefix + t.name + "' of shape " + shape_string(t.shape) +
                                 ", which " + model + " needs");
      require(lt->shape == t.shape, "tensor '" + prefix + t.name + "' has shape " + shape_string(lt->shape) + " in " +
                                        where + " but " + model + " expects " + shape_string(t.shape));
    }
  if (f.tensors.size() == prefixes.size() * table.tensors().size()) return;  // all found, names unique: exact
  for (const LoadedTensor& lt : f.tensors) {
    bool known = false;
    for (const std::string& prefix : prefixes)
      for (const ParamTensor& t : table.tensors()) known = known || prefix + t.name == lt.name;
    require(known, where + " has a tensor '" + lt.name + "' of shape " + shape_string(lt.shape) + " that " + model +
                       " does not have");
  }
}

// Throws unless the n floats at p are finite, naming the tensor, the first bad element and how many are bad.
void require_finite(const float* p, size_t n, const std::string& tensor, const std::string& where, const char* what) {
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < n; ++i)
    if (!std::isfinite(p[i]) && bad++ == 0) first = i;
  if (bad == 0) return;
  throw Error(where + ": tensor '" + tensor + "' holds " + (std::isnan(p[first]) ? "NaN" : "±Inf") + " at element " +
              std::to_string(first) + " (" + std::to_string(bad) + " of its " + std::to_string(n) +
              " values are not finite): " + what);
}

// Tensors → arena (table.total(), padding zero); every value must be finite.
std::vector<float> to_arena(const SafetensorsFile& f, const ParamTable& table, const std::string& prefix,
                            const std::string& where) {
  std::vector<float> a(table.total(), 0.0f);
  for (const ParamTensor& t : table.tensors()) {
    const LoadedTensor* lt = f.find(prefix + t.name);
    require_finite(lt->data.data(), lt->data.size(), prefix + t.name, where,
                   "the checkpoint is unusable (saved from a diverged run, or edited)");
    std::copy(lt->data.begin(), lt->data.end(), a.begin() + t.offset);
  }
  return a;
}

// data_json must be empty or a JSON object.
void check_data_json(const std::string& text, const std::string& where) {
  if (text.empty()) return;
  const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  require(j.is_object(), where + ": the data config must be a JSON object, got '" + text.substr(0, 60) + "'");
}

struct WeightsFile {
  CheckpointWeights w;
  std::string save_id;
};

WeightsFile read_weights(const std::string& path, const ModelConfig* expect) {
  const SafetensorsFile f = load_safetensors(path);
  const std::string where = "checkpoint '" + path + "'";
  const MetaReader mr{f, where};
  mr.expect_format(kWeightsFormat, "checkpoint");
  WeightsFile wf;
  wf.save_id = mr.get("save_id");
  CheckpointWeights& w = wf.w;
  w.step = mr.integer<int64_t>("step");
  require(w.step >= 0, where + ": metadata 'step' is negative");
  w.meta.model = model_config_from_json(mr.get("model_config"), where);
  w.meta.train = train_config_from_json(mr.get("train_config"), where);
  w.meta.stats = feature_stats_from_json(mr.get("feature_stats"), where);
  w.meta.feature_names = names_from_json(mr.get("feature_names"), where + ": feature_names");
  w.meta.target_names = names_from_json(mr.get("target_names"), where + ": target_names");
  if (const auto it = f.metadata.find("data_config"); it != f.metadata.end()) w.meta.data_json = it->second;
  check_data_json(w.meta.data_json, where + ": metadata 'data_config'");
  validate_in(w.meta.model, where, "model_config");
  validate_in(w.meta.train, where, "train_config");
  check_meta_sizes(w.meta, where);
  if (expect) {
    // Tensors first, so the message names the tensor the user would see fail in PyTorch too.
    const ModelLayout want(*expect);
    check_tensors(f, want.table, {""}, where, "the model");
    const auto diff = model_config_differences(w.meta.model, *expect);
    if (!diff.empty()) {
      std::string s;
      for (const auto& d : diff) s += (s.empty() ? "" : ", ") + d;
      throw Error(where + " was saved for a different model: " + s + " (checkpoint vs model)");
    }
  }
  const ModelLayout own(w.meta.model);
  check_tensors(f, own.table, {""}, where, "its own model_config");
  w.params = to_arena(f, own.table, "", where);
  return wf;
}

constexpr const char* kCarryConv = "carry.conv";  // (NL, B, W − 1, conv_dim)
constexpr const char* kCarrySsm = "carry.ssm";    // (NL, B, H, P, N)

// The carried states of a carry-trained model's lanes (TrainState::carry_conv, carry_ssm), when the sidecar
// holds them: checked against the model's shapes (any lane count B, the same in both), finite, then taken out of
// the file's tensor list so that the moments' check sees only its own tensors.
void take_carry(SafetensorsFile& s, const ModelConfig& c, const std::string& where, TrainState& st) {
  const LoadedTensor* ssm = s.find(kCarrySsm);
  const LoadedTensor* conv = s.find(kCarryConv);
  if (!ssm && !conv) return;
  require(ssm != nullptr, where + " has the tensor '" + std::string(kCarryConv) + "' without '" + kCarrySsm + "'");
  const int64_t B = ssm->shape.size() == 5 ? ssm->shape[1] : 0;
  const std::vector<int64_t> want_ssm{c.NL, B, c.H(), c.P, c.N}, want_conv{c.NL, B, c.W - 1, c.conv_dim()};
  require(B >= 1 && ssm->shape == want_ssm, where + ": tensor '" + std::string(kCarrySsm) + "' has shape " +
                                               shape_string(ssm->shape) + ", the model's carried SSM states are " +
                                               "(layers, lanes, H, P, N) = " + shape_string(want_ssm));
  require(c.W == 1 ? conv == nullptr : conv != nullptr && conv->shape == want_conv,
          where + ": tensor '" + std::string(kCarryConv) + "' has shape " +
              (conv ? shape_string(conv->shape) : std::string("(absent)")) +
              ", the model's carried conv windows are (layers, lanes, W − 1, conv_dim) = " + shape_string(want_conv));
  const char* bad = "the checkpoint is unusable (saved from a diverged run, or edited)";
  require_finite(ssm->data.data(), ssm->data.size(), kCarrySsm, where, bad);
  st.carry_ssm = ssm->data;
  if (conv) {
    require_finite(conv->data.data(), conv->data.size(), kCarryConv, where, bad);
    st.carry_conv = conv->data;
  }
  std::erase_if(s.tensors, [](const LoadedTensor& t) { return t.name == kCarryConv || t.name == kCarrySsm; });
}

Checkpoint read_checkpoint(const std::string& path, const ModelConfig* expect) {
  WeightsFile wf = read_weights(path, expect);
  CheckpointWeights& w = wf.w;
  const std::string weights_where = "checkpoint '" + path + "'";
  const std::string spath = optim_sidecar_path(path);
  const std::string where = "optimizer sidecar '" + spath + "'";
  SafetensorsFile s;
  try {
    s = load_safetensors(spath);
  } catch (const Error& e) {
    throw Error(weights_where + ": cannot read the optimizer state needed to resume (load the weights alone for "
                "predict/eval): " + e.what());
  }
  const MetaReader mr{s, where};
  mr.expect_format(kOptimFormat, "optimizer sidecar");
  const std::string& sid = mr.get("save_id");
  const int64_t sstep = mr.integer<int64_t>("step");
  require(sid == wf.save_id && sstep == w.step,
          where + " belongs to another save (save id " + sid + ", step " + std::to_string(sstep) + ") than " +
              weights_where + " (save id " + wf.save_id + ", step " + std::to_string(w.step) +
              "): files mixed from different checkpoints, or a crash between the two renames of a save");
  Checkpoint c;
  c.meta = std::move(w.meta);
  TrainState& st = c.state;
  st.step = sstep;
  st.adam_step = mr.integer<int64_t>("adam_step");
  st.skipped_total = mr.integer<int64_t>("skipped_total");
  st.seed = mr.integer<uint64_t>("seed");
  check_counters(st.step, st.adam_step, st.skipped_total, where);
  require(st.seed == c.meta.train.seed, where + ": seed " + std::to_string(st.seed) + " differs from train_config.seed " +
                                            std::to_string(c.meta.train.seed) + " of the weights file");
  const ModelLayout own(c.meta.model);
  take_carry(s, own.cfg, where, st);
  check_tensors(s, own.table, {"exp_avg.", "exp_avg_sq."}, where, "the checkpoint's model_config");
  st.params = std::move(w.params);
  st.m = to_arena(s, own.table, "exp_avg.", where);
  st.v = to_arena(s, own.table, "exp_avg_sq.", where);
  return c;
}

}  // namespace

void check_train_state(const TrainState& s, size_t n, uint64_t seed, const std::string& who) {
  require(s.params.size() == n && s.m.size() == n && s.v.size() == n,
          who + ": arenas of " + std::to_string(s.params.size()) + "/" + std::to_string(s.m.size()) + "/" +
              std::to_string(s.v.size()) + " floats (params/m/v), the model needs " + std::to_string(n));
  require(s.step >= 0 && s.skipped_total >= 0 && s.skipped_total <= s.step && s.adam_step == s.step - s.skipped_total,
          who + ": inconsistent counters step " + std::to_string(s.step) + ", adam_step " +
              std::to_string(s.adam_step) + ", skipped_total " + std::to_string(s.skipped_total));
  require(s.seed == seed, who + ": the state was trained with seed " + std::to_string(s.seed) +
                              " but this trainer has train.seed = " + std::to_string(seed));
}

void check_carry_sizes(const TrainState& s, const ModelConfig& c, const std::string& who) {
  const size_t per_ssm = size_t(c.NL) * c.H() * c.P * c.N, per_conv = size_t(c.NL) * (c.W - 1) * c.conv_dim();
  const size_t B = s.carry_ssm.size() / per_ssm;
  require(s.carry_ssm.size() % per_ssm == 0 && s.carry_conv.size() == B * per_conv,
          who + ": carried states of " + std::to_string(s.carry_conv.size()) + " conv and " +
              std::to_string(s.carry_ssm.size()) + " SSM floats do not make whole lanes of the model's (layers × (W − 1) "
              "× conv_dim = " + std::to_string(per_conv) + ", layers × H × P × N = " + std::to_string(per_ssm) + ")");
  require(std::all_of(s.carry_conv.begin(), s.carry_conv.end(), [](float v) { return std::isfinite(v); }) &&
              std::all_of(s.carry_ssm.begin(), s.carry_ssm.end(), [](float v) { return std::isfinite(v); }),
          who + ": the carried states hold a value that is not finite (the training diverged; lower train.lr or check "
                "the data)");
}

void save_checkpoint(const std::string& path, const ModelLayout& layout, const TrainState& state,
                     const CheckpointMeta& meta) {
  AtomicFileSet set(path + ".journal");
  write_checkpoint(set, path, layout, state, meta);
  set.commit();
}

void write_checkpoint(AtomicFileSet& set, const std::string& path, const ModelLayout& layout, const TrainState& state,
                      const CheckpointMeta& meta) {
  const std::string where = "save_checkpoint '" + path + "'";
  const auto diff = model_config_differences(meta.model, layout.cfg);
  require(diff.empty(), where + ": meta.model is not the layout's config (" + (diff.empty() ? "" : diff[0]) + ")");
  const size_t n = layout.table.total();
  for (const auto* a : {&state.params, &state.m, &state.v})
    require(a->size() == n, where + ": a state arena has " + std::to_string(a->size()) +
                                " floats, the layout needs table.total() = " + std::to_string(n));
  check_counters(state.step, state.adam_step, state.skipped_total, where);
  require(state.seed == meta.train.seed, where + ": state.seed " + std::to_string(state.seed) +
                                             " differs from meta.train.seed " + std::to_string(meta.train.seed));
  check_meta_sizes(meta, where);
  validate_in(meta.train, where, "meta.train");  // loading validates it too: never write what cannot be read
  check_data_json(meta.data_json, where + ": meta.data_json");
  check_carry_sizes(state, layout.cfg, where);
  for (const ParamTensor& t : layout.table.tensors()) {
    const char* diverged = "not saved (the training diverged; lower train.lr or check the data)";
    require_finite(state.params.data() + t.offset, t.numel, t.name, where, diverged);
    require_finite(state.m.data() + t.offset, t.numel, "exp_avg." + t.name, where, diverged);
    require_finite(state.v.data() + t.offset, t.numel, "exp_avg_sq." + t.name, where, diverged);
  }

  const std::string save_id = new_save_id(), step = std::to_string(state.step),
                    version = std::to_string(kCheckpointFormatVersion);
  std::vector<TensorView> weights, moments;
  for (const ParamTensor& t : layout.table.tensors()) weights.push_back({t.name, t.shape, state.params.data() + t.offset});
  for (const ParamTensor& t : layout.table.tensors()) moments.push_back({"exp_avg." + t.name, t.shape, state.m.data() + t.offset});
  for (const ParamTensor& t : layout.table.tensors())
    moments.push_back({"exp_avg_sq." + t.name, t.shape, state.v.data() + t.offset});
  if (!state.carry_ssm.empty()) {
    const ModelConfig& c = layout.cfg;
    const int64_t B = int64_t(state.carry_ssm.size() / (size_t(c.NL) * c.H() * c.P * c.N));
    moments.push_back({kCarrySsm, {c.NL, B, c.H(), c.P, c.N}, state.carry_ssm.data()});
    if (c.W > 1) moments.push_back({kCarryConv, {c.NL, B, c.W - 1, c.conv_dim()}, state.carry_conv.data()});
  }
  SafetensorsMetadata wmeta{{"format", kWeightsFormat},
                                  {"format_version", version},
                                  {"save_id", save_id},
                                  {"step", step},
                                  {"model_config", to_json(meta.model)},
                                  {"train_config", to_json(meta.train)},
                                  {"feature_stats", to_json(meta.stats)},
                                  {"feature_names", to_json(meta.feature_names)},
                                  {"target_names", to_json(meta.target_names)}};
  if (!meta.data_json.empty()) wmeta["data_config"] = meta.data_json;
  const SafetensorsMetadata ometa{{"format", kOptimFormat},
                                  {"format_version", version},
                                  {"save_id", save_id},
                                  {"step", step},
                                  {"adam_step", std::to_string(state.adam_step)},
                                  {"skipped_total", std::to_string(state.skipped_total)},
                                  {"seed", std::to_string(state.seed)}};
  // Both become current with the rest of the set, in one step (the set's journal).
  write_safetensors(set.add(path), weights, wmeta);
  write_safetensors(set.add(optim_sidecar_path(path)), moments, ometa);
}

CheckpointWeights load_checkpoint_weights(const std::string& path) { return read_weights(path, nullptr).w; }
CheckpointWeights load_checkpoint_weights(const std::string& path, const ModelConfig& expect) {
  return read_weights(path, &expect).w;
}
Checkpoint load_checkpoint(const std::string& path) { return read_checkpoint(path, nullptr); }
Checkpoint load_checkpoint(const std::string& path, const ModelConfig& expect) { return read_checkpoint(path, &expect); }

}  // namespace mlalpha
