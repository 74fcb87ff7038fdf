#include "checkpoint/config_json.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <set>
#include <type_traits>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace mlalpha {
namespace {

using ojson = nlohmann::ordered_json;

// The one list of fields per config: serialisation, parsing and comparison all walk it, so adding a field
// to a config means adding one line here (test_checkpoint's ConfigJson.CoversEveryField reminds you).
template <typename V>
void visit_fields(ModelConfig& c, V&& v) {
  v("F", c.F), v("K", c.K), v("D", c.D), v("NL", c.NL), v("expand", c.expand), v("P", c.P), v("G", c.G);
  v("N", c.N), v("W", c.W), v("Q", c.Q);
  v("dt_min", c.dt_min), v("dt_max", c.dt_max), v("dt_init_floor", c.dt_init_floor);
  v("dt_limit_lo", c.dt_limit_lo), v("dt_limit_hi", c.dt_limit_hi);
}

template <typename V>
void visit_fields(TrainConfig& c, V&& v) {
  v("B", c.B), v("batch_mode", c.batch_mode), v("dates", c.dates), v("instruments", c.instruments);
  v("L", c.L), v("steps", c.steps), v("lr", c.lr), v("min_lr_ratio", c.min_lr_ratio);
  v("warmup", c.warmup), v("schedule", c.schedule), v("weight_decay", c.weight_decay);
  v("beta1", c.beta1), v("beta2", c.beta2), v("eps", c.eps), v("clip", c.clip), v("loss", c.loss);
  v("huber_delta", c.huber_delta), v("burn_in", c.burn_in), v("seed", c.seed), v("log_every", c.log_every);
  v("models", c.models), v("precision", c.precision), v("init", c.init), v("state", c.state);
}

// ---- encoding: exact, human-readable
ojson encode(int v) { return v; }
ojson encode(int64_t v) { return v; }
ojson encode(uint64_t v) { return v; }
ojson encode(LossKind v) { return to_string(v); }
ojson encode(Schedule v) { return to_string(v); }
ojson encode(BatchMode v) { return to_string(v); }
ojson encode(Precision v) { return to_string(v); }
ojson encode(StateMode v) { return to_string(v); }
ojson encode(const std::string& v) { return v; }
ojson encode(float v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  // The shortest decimal that reads back as this float, held as the double nearest to it: JSON prints
  // that double with the same short digits (1e-3f → 0.001, not 0.0010000000474974513).
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf - 1, v);
  *r.ptr = '\0';
  return std::strtod(buf, nullptr);
}

// ---- decoding: strict, naming the field
struct Field {
  const std::string& where;
  std::string name;
  [[noreturn]] void fail(const std::string& what, const ojson& got) const {
    throw Error(where + ": field '" + name + "' must be " + what + ", got " + got.dump());
  }
};

template <typename I>
void decode_int(const ojson& j, I& out, const Field& f) {
  if (!j.is_number_integer()) f.fail("an integer", j);
  if (j.is_number_unsigned() ? !std::in_range<I>(j.get<uint64_t>()) : !std::in_range<I>(j.get<int64_t>()))
    f.fail("an integer in the range of its type", j);
  out = j.is_number_unsigned() ? I(j.get<uint64_t>()) : I(j.get<int64_t>());
}
void decode(const ojson& j, int& out, const Field& f) { decode_int(j, out, f); }
void decode(const ojson& j, int64_t& out, const Field& f) { decode_int(j, out, f); }
void decode(const ojson& j, uint64_t& out, const Field& f) { decode_int(j, out, f); }
void decode(const ojson& j, float& out, const Field& f) {
  if (j.is_string()) {
    const std::string s = j.get<std::string>();
    if (s == "inf") out = std::numeric_limits<float>::infinity();
    else if (s == "-inf") out = -std::numeric_limits<float>::infinity();
    else if (s == "nan") out = std::numeric_limits<float>::quiet_NaN();
    else f.fail("a number (or \"inf\", \"-inf\", \"nan\")", j);
    return;
  }
  if (!j.is_number()) f.fail("a number", j);
  const double d = j.get<double>();
  if (std::abs(d) > double(std::numeric_limits<float>::max())) f.fail("a number within float range", j);
  out = float(d);
}
void decode(const ojson& j, LossKind& out, const Field& f) {
  if (!j.is_string() || (j != "mse" && j != "huber" && j != "ic")) f.fail("\"mse\", \"huber\" or \"ic\"", j);
  out = parse_loss(j.get<std::string>());
}
void decode(const ojson& j, Schedule& out, const Field& f) {
  if (!j.is_string() || (j != "cosine" && j != "constant")) f.fail("\"cosine\" or \"constant\"", j);
  out = parse_schedule(j.get<std::string>());
}

void decode(const ojson& j, BatchMode& out, const Field& f) {
  if (!j.is_string() || (j != "windows" && j != "time")) f.fail("\"windows\" or \"time\"", j);
  out = j == "time" ? BatchMode::Time : BatchMode::Windows;
}

void decode(const ojson& j, StateMode& out, const Field& f) {
  if (!j.is_string() || (j != "zero" && j != "carry")) f.fail("\"zero\" or \"carry\"", j);
  out = parse_state_mode(j.get<std::string>());
}

void decode(const ojson& j, std::string& out, const Field& f) {
  if (!j.is_string()) f.fail("a string", j);
  out = j.get<std::string>();
}

void decode(const ojson& j, Precision& out, const Field& f) {
  if (!j.is_string() || (j != "fp32" && j != "tf32" && j != "bf16")) f.fail("\"fp32\", \"tf32\" or \"bf16\"", j);
  out = parse_precision(j.get<std::string>());
}

// Fields added after checkpoints were first written: a checkpoint without them keeps the default (the
// windows batch mode it was trained with; one model, as every checkpoint holds one member's weights;
// fp32, or tf32 given then as run.tf32, which was not recorded; the zero state of every model before train.state).
bool optional_field(const std::string& name) {
  return name == "batch_mode" || name == "dates" || name == "instruments" || name == "models" || name == "precision" ||
         name == "init" || name == "state";
}

// A field written only when it differs from the default: train.state = "zero" stays out of the JSON, so a
// zero-state checkpoint's metadata is byte for byte what it was before the setting existed.
template <typename F>
bool omitted(const F& field) {
  if constexpr (std::is_same_v<F, StateMode>) return field == StateMode::Zero;
  else return false;
}

ojson parse_json(const std::string& text, const std::string& where, const char* what) {
  try {
    return ojson::parse(text);
  } catch (const ojson::exception& e) {  // parse_error, and out_of_range for a number beyond double's range
    throw Error(where + ": " + what + " is not valid JSON: " + e.what());
  }
}

template <typename C>
std::string config_to_json(C c) {
  ojson j = ojson::object();
  visit_fields(c, [&](const char* name, auto& field) {
    if (!omitted(field)) j[name] = encode(field);
  });
  return j.dump();
}

template <typename C>
C config_from_json(const std::string& text, const std::string& where, const char* what) {
  const ojson j = parse_json(text, where, what);
  const std::string ctx = where + ": " + what;
  require(j.is_object(), ctx + " must be a JSON object, got " + j.dump());
  C c;
  std::set<std::string> known;
  visit_fields(c, [&](const char* name, auto& field) {
    known.insert(name);
    if (!j.contains(name) && optional_field(name)) return;
    require(j.contains(name), ctx + " lacks the field '" + std::string(name) + "'");
    decode(j[name], field, Field{ctx, name});
  });
  for (const auto& [k, _] : j.items())
    require(known.count(k) != 0, ctx + " has an unknown field '" + k + "' (written by a newer ml-alpha?)");
  return c;
}

std::vector<float> float_array(const ojson& j, const std::string& ctx, const char* name) {
  require(j.contains(name) && j[name].is_array(), ctx + ": field '" + std::string(name) + "' must be an array");
  std::vector<float> out;
  for (size_t i = 0; i < j[name].size(); ++i) {
    float v = 0;
    decode(j[name][i], v, Field{ctx, std::string(name) + "[" + std::to_string(i) + "]"});
    out.push_back(v);
  }
  return out;
}

}  // namespace

std::string to_json(const ModelConfig& c) { return config_to_json(c); }
std::string to_json(const TrainConfig& c) { return config_to_json(c); }

std::string to_json(const FeatureStats& s) {
  ojson j = ojson::object();
  j["mean"] = ojson::array();
  j["stdev"] = ojson::array();
  for (float v : s.mean) j["mean"].push_back(encode(v));
  for (float v : s.stdev) j["stdev"].push_back(encode(v));
  if (!s.target_scale.empty()) {  // data.target_scale; absent in checkpoints without it
    j["target_scale"] = ojson::array();
    for (float v : s.target_scale) j["target_scale"].push_back(encode(v));
  }
  return j.dump();
}

std::string to_json(const std::vector<std::string>& names) { return ojson(names).dump(); }

ModelConfig model_config_from_json(const std::string& text, const std::string& where) {
  return config_from_json<ModelConfig>(text, where, "model_config");
}

TrainConfig train_config_from_json(const std::string& text, const std::string& where) {
  return config_from_json<TrainConfig>(text, where, "train_config");
}

FeatureStats feature_stats_from_json(const std::string& text, const std::string& where) {
  const ojson j = parse_json(text, where, "feature_stats");
  const std::string ctx = where + ": feature_stats";
  require(j.is_object(), ctx + " must be a JSON object, got " + j.dump());
  for (const auto& [k, _] : j.items())
    require(k == "mean" || k == "stdev" || k == "target_scale", ctx + " has an unknown field '" + k + "'");
  FeatureStats s;
  s.mean = float_array(j, ctx, "mean");
  s.stdev = float_array(j, ctx, "stdev");
  if (j.contains("target_scale")) {
    s.target_scale = float_array(j, ctx, "target_scale");
    for (float v : s.target_scale)
      require(std::isfinite(v) && v > 0, ctx + ": target_scale entries must be finite and > 0");
  }
  require(s.mean.size() == s.stdev.size(), ctx + ": mean has " + std::to_string(s.mean.size()) + " entries but stdev " +
                                               std::to_string(s.stdev.size()));
  return s;
}

std::vector<std::string> names_from_json(const std::string& text, const std::string& where) {
  const ojson j = parse_json(text, where, "name list");
  require(j.is_array(), where + ": name list must be a JSON array of strings, got " + j.dump());
  std::vector<std::string> out;
  for (const ojson& v : j) {
    require(v.is_string(), where + ": name list entries must be strings, got " + v.dump());
    out.push_back(v.get<std::string>());
  }
  return out;
}

std::vector<std::string> model_config_differences(const ModelConfig& a, const ModelConfig& b) {
  std::vector<std::pair<std::string, std::string>> va, vb;
  ModelConfig ca = a, cb = b;
  visit_fields(ca, [&](const char* name, auto& field) { va.emplace_back(name, encode(field).dump()); });
  visit_fields(cb, [&](const char* name, auto& field) { vb.emplace_back(name, encode(field).dump()); });
  std::vector<std::string> out;
  for (size_t i = 0; i < va.size(); ++i)
    if (va[i].second != vb[i].second) out.push_back(va[i].first + " = " + va[i].second + " vs " + vb[i].second);
  return out;
}

}  // namespace mlalpha
