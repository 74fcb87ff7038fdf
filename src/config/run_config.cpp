// TOML → RunConfig (docs/config.md).
#include "config/toml.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <type_traits>

#include "core/error.h"
#include "core/suggest.h"
#include "data/csv.h"
#include "data/normalize.h"
#include "mlalpha/config.h"
#include "mlalpha/metric_table.h"

namespace mlalpha {

namespace {

// The shortest text that reads back to v (0.1, 1.0000001), for messages.
template <typename F>
std::string shortest(F v) {
  char buf[40];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

// Where each value came from, for messages: "file:line", or the override's own text.
struct Origins {
  std::string src;                              // the file (or "defaults")
  std::map<std::string, std::string> override;  // "section.key" → the override that set it
};

// Reads one section, remembering which keys were consumed so leftovers can be reported.
class Section {
 public:
  // keys (may be null) collects every valid "section.key" asked for.
  Section(const toml::table* t, std::string name, const Origins& origins, std::set<std::string>& given,
          std::vector<std::string>* keys)
      : t_(t), name_(std::move(name)), origins_(origins), given_(given), keys_(keys) {}

  template <typename T>
  void get(const char* key, T& out) {
    if (const toml::node* n = node(key)) convert(*n, key, out);
  }
  // A path: relative ones written in the file resolve against `base` (the file's folder).
  void get_path(const char* key, std::string& out, const std::string& base) {
    const toml::node* n = node(key);
    if (!n) return;
    convert(*n, key, out);
    if (!base.empty() && !from_override(key) && !out.empty() && std::filesystem::path(out).is_relative())
      out = (std::filesystem::path(base) / out).lexically_normal().string();
  }
  // A name from a fixed list (train.loss, run.device): anything else names the choices.
  void get_choice(const char* key, std::string& out, std::initializer_list<const char*> choices) {
    const toml::node* n = node(key);
    if (!n) return;
    convert(*n, key, out);
    std::string list;
    for (const char* c : choices) {
      if (out == c) return;
      list += std::string(list.empty() ? "" : ", ") + "'" + c + "'";
    }
    fail(*n, key, "must be one of " + list + ", got '" + out + "'");
  }
  void get_boundary(const char* key, SplitPoint& out) {
    const toml::node* n = node(key);
    if (!n) return;
    if (auto f = n->value_exact<double>()) {
      if (!(*f > 0 && *f <= 1)) fail(*n, key, "a fraction must be in (0, 1], got " + shortest(*f));
      out = SplitPoint::at_fraction(*f);
    } else if (auto i = n->value_exact<int64_t>()) {
      out = SplitPoint::at_index(*i);
    } else if (auto s = n->value_exact<std::string>()) {
      out = SplitPoint::at_time(*s);
    } else {
      fail(*n, key, "expected a fraction (0.7), a time index (1500) or a time value (\"2021-01-04\")");
    }
  }
  // train.batch: an integer (windows per step) or the string "time" (cross-sectional batches).
  void get_batch(const char* key, int& windows, BatchMode& mode) {
    const toml::node* n = node(key);
    if (!n) return;
    const auto text = n->value_exact<std::string>();
    if (text && *text == "time") {
      mode = BatchMode::Time;
      return;
    }
    if (!n->value_exact<int64_t>())
      fail(*n, key,
           "expected an integer (windows per step, e.g. 16) or the string \"time\" (cross-sections of "
           "train.dates dates × train.instruments instruments), got " +
               (text ? "'" + *text + "'" : std::string("a value of another type")));
    convert(*n, key, windows);
    mode = BatchMode::Windows;
  }
  // A [sweep] list: an array of values (a single value is a list of one); an empty array is refused, as it
  // would sweep nothing. Each entry is converted as the train setting of the same name.
  template <typename T>
  void get_list(const char* key, std::vector<T>& out) {
    const toml::node* n = node(key);
    if (!n) return;
    out.clear();
    const toml::array* a = n->as_array();
    if (!a) {
      out.push_back(entry_value<T>(*n, key, std::string(key)));
      return;
    }
    if (a->empty())
      throw Error(where(*n, key) + ": " + name_ + "." + key + " = []: give at least one value or drop the key");
    for (size_t i = 0; i < a->size(); ++i)
      out.push_back(entry_value<T>(*a->get(i), key, std::string(key) + "[" + std::to_string(i) + "]"));
  }
  // After all get() calls: any key not asked for is a typo or unsupported.
  void check_unknown() const {
    if (!t_) return;
    for (const auto& [k, v] : *t_) {
      const std::string key(k.str());
      if (std::find(known_.begin(), known_.end(), key) != known_.end()) continue;
      std::string msg = where(v, key) + ": unknown key '" + name_ + "." + key + "'";
      if (const std::string best = suggest_run_config_key(name_ + "." + key); !best.empty())
        msg += "; did you mean '" + best + "'?";
      msg += " (valid keys in [" + name_ + "]:";
      for (const auto& c : known_) msg += " " + c;
      throw Error(msg + ")");
    }
  }

 private:
  const toml::node* node(const char* key) {
    known_.push_back(key);
    if (keys_) keys_->push_back(name_ + "." + key);
    if (!t_) return nullptr;
    const toml::node* n = t_->get(key);
    if (n) given_.insert(name_ + "." + key);
    return n;
  }
  bool from_override(const std::string& key) const { return origins_.override.count(name_ + "." + key) > 0; }
  std::string where(const toml::node& n, const std::string& key) const {
    if (auto it = origins_.override.find(name_ + "." + key); it != origins_.override.end())
      return "override '" + it->second + "'";
    return origins_.src + ":" + std::to_string(n.source().begin.line);
  }
  [[noreturn]] void fail(const toml::node& n, const char* key, const std::string& what) const {
    throw Error(where(n, key) + ": " + name_ + "." + key + ": " + what);
  }
  void convert(const toml::node& n, const char* key, std::string& out) {
    auto v = n.value_exact<std::string>();
    if (!v) fail(n, key, "expected a string");
    out = *v;
  }
  void convert(const toml::node& n, const char* key, bool& out) {
    auto v = n.value_exact<bool>();
    if (!v) fail(n, key, "expected true or false");
    out = *v;
  }
  template <typename I>
  std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>> convert(const toml::node& n, const char* key, I& out) {
    auto v = n.value_exact<int64_t>();
    if (!v) {
      const auto text = n.value_exact<std::string>();  // an override too long for TOML's int64 arrives as text
      const bool digits = text && !text->empty() &&
                          text->find_first_not_of("0123456789", (*text)[0] == '-' || (*text)[0] == '+') == std::string::npos;
      fail(n, key, digits ? "value " + *text + " is out of range for an integer" : std::string("expected an integer"));
    }
    if (*v < int64_t(std::numeric_limits<I>::min()) || uint64_t(*v) > uint64_t(std::numeric_limits<I>::max()))
      fail(n, key, "value " + std::to_string(*v) + " is out of range");
    out = I(*v);
  }
  void convert(const toml::node& n, const char* key, float& out) {
    auto v = n.value<double>();  // integers are accepted where a number is expected
    if (!v) fail(n, key, "expected a number");
    if (std::isfinite(*v) && std::fabs(*v) > double(std::numeric_limits<float>::max()))
      fail(n, key, "value " + shortest(*v) + " is out of range for a 32-bit float");
    out = float(*v);
  }
  void convert(const toml::node& n, const char* key, double& out) {
    auto v = n.value<double>();  // integers are accepted where a number is expected
    if (!v) fail(n, key, "expected a number");
    out = *v;
  }
  void convert(const toml::node& n, const char* key, std::vector<std::string>& out) {
    const toml::array* a = n.as_array();
    if (!a) fail(n, key, "expected an array of strings");
    out.clear();
    for (const auto& e : *a) {
      auto s = e.value_exact<std::string>();
      if (!s) fail(e, key, "expected an array of strings");
      out.push_back(*s);
    }
  }

  // One entry of a list: a number (integers accepted) for a float, an integer for an integer. `label` is
  // the key with the entry's index ("lr[2]"); where() still locates the list's key.
  template <typename T>
  T entry_value(const toml::node& e, const char* key, const std::string& label) const {
    const std::string at = where(e, key) + ": " + name_ + "." + label + ": ";
    if constexpr (std::is_floating_point_v<T>) {
      const auto v = e.value<double>();
      if (!v || e.is_boolean()) throw Error(at + "expected a number");
      if (std::isfinite(*v) && std::fabs(*v) > double(std::numeric_limits<T>::max()))
        throw Error(at + "value " + shortest(*v) + " is out of range for a 32-bit float");
      return T(*v);
    } else {
      const auto v = e.value_exact<int64_t>();
      if (!v) throw Error(at + "expected an integer");
      return T(*v);
    }
  }

  const toml::table* t_;
  std::string name_;
  const Origins& origins_;
  std::set<std::string>& given_;
  std::vector<std::string>* keys_;
  std::vector<std::string> known_;
};

// Refuses what toml++ 3.3 mishandles (undefined behaviour found by fuzz/fuzz_toml.cpp): control
// characters other than tab, CR and LF, and non-ASCII bytes outside strings and comments (a bare key or
// value of such bytes is invalid TOML anyway). Strings and comments are skipped by a small lexer.
void check_toml_bytes(const std::string& text, const std::string& src) {
  enum { code, comment, basic, literal, ml_basic, ml_literal } st = code;
  int line = 1;
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '\n') {
      ++line;
      if (st == comment) st = code;
      continue;
    }
    if ((c < 0x20 && c != '\t' && c != '\r') || c == 0x7f)
      throw Error(src + ":" + std::to_string(line) + ": TOML syntax error: control character " + std::to_string(int(c)) +
                  " (only tab, CR and LF may appear)");
    auto starts = [&](const char* s) { return text.compare(i, std::strlen(s), s) == 0; };
    switch (st) {
      case code:
        if (c >= 0x80)
          throw Error(src + ":" + std::to_string(line) +
                      ": TOML syntax error: a non-ASCII character outside a string or comment (quote such keys and values)");
        if (c == '#') st = comment;
        else if (starts("\"\"\"")) st = ml_basic, i += 2;
        else if (starts("'''")) st = ml_literal, i += 2;
        else if (c == '"') st = basic;
        else if (c == '\'') st = literal;
        break;
      case basic:
        if (c == '\\') ++i;
        else if (c == '"') st = code;
        break;
      case literal:
        if (c == '\'') st = code;
        break;
      case ml_basic:
        if (c == '\\') ++i;
        else if (starts("\"\"\"")) st = code, i += 2;
        break;
      case ml_literal:
        if (starts("'''")) st = code, i += 2;
        break;
      case comment:
        break;
    }
  }
}

toml::table parse_toml(const std::string& text, const std::string& src) {
  check_toml_bytes(text, src);
  try {
    return toml::parse(text, src);
  } catch (const toml::parse_error& e) {
    throw Error(src + ":" + std::to_string(e.source().begin.line) + ":" + std::to_string(e.source().begin.column) +
                ": TOML syntax error: " + std::string(e.description()));
  }
}

// "train.lr=2e-3" → root["train"]["lr"] = 2e-3. The value is parsed as TOML; a bare word such as
// data.source=npy is taken as the string "npy".
void apply_override(toml::table& root, const std::string& ov, Origins& origins) {
  const size_t eq = ov.find('='), dot = ov.find('.');
  if (eq == std::string::npos || dot == std::string::npos || dot > eq)
    throw Error("override '" + ov + "': expected section.key=value, e.g. train.lr=2e-3");
  const std::string section = ov.substr(0, dot), key = ov.substr(dot + 1, eq - dot - 1), value = ov.substr(eq + 1);
  const std::string src = "override '" + ov + "'";
  toml::table parsed;
  try {
    parsed = toml::parse("v = " + value, src);
  } catch (const toml::parse_error&) {
    parsed = parse_toml("v = \"" + value + "\"", src);
  }
  if (!root.contains(section)) root.insert(section, toml::table{});
  toml::table* t = root[section].as_table();
  if (!t) throw Error(src + ": '" + section + "' is not a table");
  t->insert_or_assign(key, *parsed.get("v"));
  origins.override[section + "." + key] = ov;
}

}  // namespace

namespace {

// Settings of other tools (mamba_ssm, PyTorch loops, Qlib) a user may write instead of ours.
const std::map<std::string, std::string>& key_aliases() {
  static const std::map<std::string, std::string> aliases = {
      {"train.learning_rate", "train.lr"},     {"train.batch_size", "train.batch"},
      {"train.max_steps", "train.steps"},      {"train.num_steps", "train.steps"},
      {"train.n_steps", "train.steps"},        {"train.warmup_steps", "train.warmup"},
      {"train.grad_clip", "train.clip"},       {"train.max_grad_norm", "train.clip"},
      {"train.clip_grad_norm", "train.clip"},  {"train.seq_length", "train.seq_len"},
      {"train.sequence_length", "train.seq_len"}, {"train.window", "train.seq_len"},
      {"train.lookback", "train.seq_len"},     {"train.wd", "train.weight_decay"},
      {"model.n_layers", "model.layers"},      {"model.num_layers", "model.layers"},
      {"model.n_layer", "model.layers"},       {"model.d_conv", "model.conv_width"},
      {"model.headdim", "model.head_dim"},     {"model.ngroups", "model.groups"},
      {"model.chunk_size", "model.chunk"},     {"model.state_size", "model.d_state"},
      {"model.hidden_size", "model.d_model"},  {"model.dim", "model.d_model"},
      {"run.output_dir", "run.out_dir"},       {"run.outdir", "run.out_dir"},
      {"run.early_stopping_patience", "run.patience"},
      {"train.n_models", "train.models"},      {"train.num_models", "train.models"},
      {"train.population", "train.models"},    {"train.population_size", "train.models"},
      {"sweep.learning_rate", "sweep.lr"},     {"sweep.wd", "sweep.weight_decay"},
      {"sweep.grad_clip", "sweep.clip"},       {"sweep.max_grad_norm", "sweep.clip"},
      {"sweep.warmup_steps", "sweep.warmup"},  {"run.parallel_fold", "run.parallel_folds"},
  };
  return aliases;
}

RunConfig parse_impl(const std::string& text, const std::string& src, const std::vector<std::string>& overrides,
                     const std::string& base_dir, std::vector<std::string>* keys) {
  toml::table root = parse_toml(text, src);
  Origins origins{src, {}};
  for (const std::string& ov : overrides) apply_override(root, ov, origins);
  static const char* kSections[] = {"data", "split", "model", "train", "sweep", "run"};
  for (const auto& [k, v] : root) {
    const std::string key(k.str());
    if (std::find(std::begin(kSections), std::end(kSections), key) != std::end(kSections) && v.is_table()) continue;
    std::string msg = src + ":" + std::to_string(v.source().begin.line) + ": unknown section or top-level key '" + key + "'";
    if (const std::string best = suggest_run_config_key(key); !best.empty() && !v.is_table())
      msg += "; did you mean '" + best + "'?";
    throw Error(msg + " (expected the tables [data], [split], [model], [train], [sweep], [run])");
  }
  RunConfig c;
  auto table = [&](const char* name) { return root[name].as_table(); };

  Section d(table("data"), "data", origins, c.given, keys);
  d.get_choice("source", c.data.source, {"synthetic", "npy", "csv"});
  d.get("instruments", c.data.synth.N);
  d.get("timesteps", c.data.synth.T);
  d.get("n_features", c.data.synth.F);
  d.get("n_targets", c.data.synth.K);
  d.get("noise", c.data.synth.noise);
  d.get("seed", c.data.synth.seed);
  d.get_path("features", c.data.features, base_dir);
  d.get_path("targets", c.data.targets, base_dir);
  d.get_path("csv", c.data.csv, base_dir);
  d.get("delimiter", c.data.delimiter);
  d.get("time_format", c.data.time_format);
  d.get("time_column", c.data.time_column);
  d.get("instrument_column", c.data.instrument_column);
  d.get("feature_columns", c.data.feature_columns);
  d.get("target_columns", c.data.target_columns);
  d.get("allow_target_features", c.data.allow_target_features);
  d.get_choice("feature_norm", c.data.feature_norm, {"global", "zscore", "rank", "robust"});
  d.get("robust_clip", c.data.robust_clip);
  d.get_choice("target_norm", c.data.target_norm, {"none", "zscore", "rank"});
  d.get_choice("nan_fill", c.data.nan_fill, {"zero", "ffill", "mean"});
  d.check_unknown();

  Section s(table("split"), "split", origins, c.given, keys);
  s.get_boundary("train_end", c.split.spec.train_end);
  s.get_boundary("valid_end", c.split.spec.valid_end);
  s.get("gap", c.split.spec.gap);
  s.get("walk_forward_folds", c.split.walk_forward_folds);
  s.get("walk_forward_test_size", c.split.walk_forward_test_size);
  s.get("walk_forward_valid_size", c.split.walk_forward_valid_size);
  s.get("walk_forward_train_size", c.split.walk_forward_train_size);
  s.check_unknown();

  Section m(table("model"), "model", origins, c.given, keys);
  m.get("d_model", c.model.D);
  m.get("layers", c.model.NL);
  m.get("expand", c.model.expand);
  m.get("head_dim", c.model.P);
  m.get("groups", c.model.G);
  m.get("d_state", c.model.N);
  m.get("conv_width", c.model.W);
  m.get("chunk", c.model.Q);
  m.get("dt_min", c.model.dt_min);
  m.get("dt_max", c.model.dt_max);
  m.get("dt_init_floor", c.model.dt_init_floor);
  m.get("dt_limit_lo", c.model.dt_limit_lo);
  m.get("dt_limit_hi", c.model.dt_limit_hi);
  m.check_unknown();

  Section t(table("train"), "train", origins, c.given, keys);
  std::string loss = to_string(c.train.loss), schedule = to_string(c.train.schedule),
              precision = to_string(c.train.precision);
  t.get_batch("batch", c.train.B, c.train.batch_mode);
  t.get("dates", c.train.dates);
  t.get("instruments", c.train.instruments);
  t.get("seq_len", c.train.L);
  t.get("steps", c.train.steps);
  t.get("lr", c.train.lr);
  t.get("min_lr_ratio", c.train.min_lr_ratio);
  t.get("warmup", c.train.warmup);
  t.get_choice("schedule", schedule, {"cosine", "constant"});
  t.get("weight_decay", c.train.weight_decay);
  t.get("beta1", c.train.beta1);
  t.get("beta2", c.train.beta2);
  t.get("eps", c.train.eps);
  t.get("clip", c.train.clip);
  t.get_choice("loss", loss, {"mse", "huber", "ic"});
  t.get("huber_delta", c.train.huber_delta);
  t.get("burn_in", c.train.burn_in);
  t.get("seed", c.train.seed);
  t.get("log_every", c.train.log_every);
  t.get("models", c.train.models);
  t.get_choice("precision", precision, {"fp32", "tf32", "bf16"});
  t.check_unknown();
  c.train.loss = parse_loss(loss);
  c.train.schedule = parse_schedule(schedule);
  c.train.precision = parse_precision(precision);

  Section w(table("sweep"), "sweep", origins, c.given, keys);
  w.get_list("lr", c.sweep.lr);
  w.get_list("weight_decay", c.sweep.weight_decay);
  w.get_list("clip", c.sweep.clip);
  w.get_list("warmup", c.sweep.warmup);
  w.check_unknown();

  Section r(table("run"), "run", origins, c.given, keys);
  r.get_choice("device", c.run.device, {"auto", "cpu", "gpu"});
  // run.tf32 = true: the older spelling of train.precision = "tf32" (kept so existing configs run). It is
  // given as train.precision, the key every later comparison (a resume's) knows; false says nothing.
  bool tf32 = false;
  r.get("tf32", tf32);
  c.given.erase("run.tf32");
  if (tf32) {
    require(!c.given.count("train.precision") || c.train.precision == Precision::TF32,
            "run.tf32 = true contradicts train.precision = \"" + to_string(c.train.precision) +
                "\": give only train.precision");
    c.train.precision = Precision::TF32;
    c.given.insert("train.precision");
  }
  r.get("graph", c.run.graph);
  r.get("out_dir", c.run.out_dir);
  r.get("eval_every", c.run.eval_every);
  r.get("metric", c.run.metric);
  r.get("patience", c.run.patience);
  r.get("stop_after", c.run.stop_after);
  r.get("save_every", c.run.save_every);
  r.get("quantiles", c.run.quantiles);
  r.get("periods_per_year", c.run.periods_per_year);
  r.get("parallel_folds", c.run.parallel_folds);
  r.check_unknown();
  return c;
}

}  // namespace

const std::vector<std::string>& run_config_keys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> out;
    parse_impl("", "defaults", {}, "", &out);
    return out;
  }();
  return keys;
}

std::string suggest_run_config_key(const std::string& key) {
  return closest_name(key, run_config_keys(), key_aliases());
}

RunConfig parse_run_config(const std::string& text, const std::string& src, const std::vector<std::string>& overrides,
                           const std::string& base_dir) {
  return parse_impl(text, src, overrides, base_dir, nullptr);
}

RunConfig load_run_config(const std::string& path, const std::vector<std::string>& overrides) {
  if (path.empty()) return parse_run_config("", "defaults", overrides);
  namespace fs = std::filesystem;
  std::error_code ec;
  require(fs::exists(path, ec), path + ": no such config file");
  require(!fs::is_directory(path, ec), path + ": is a directory, expected a TOML config file");
  std::ifstream in(path, std::ios::binary);
  require(bool(in), path + ": cannot open the config file");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_run_config(ss.str(), path, overrides, fs::path(path).parent_path().string());
}

bool RunConfig::was_given_in(const std::string& section) const {
  const std::string prefix = section + ".";
  for (const auto& k : given)
    if (k.compare(0, prefix.size(), prefix) == 0) return true;
  return false;
}

namespace {

// A float as the user would write it: the shortest text that reads back to the same float.
std::string num(float v) { return shortest(v); }

// "sweep.lr[2]": the entry of a sweep list a message names.
std::string entry(const char* key, size_t i) { return std::string("sweep.") + key + "[" + std::to_string(i) + "]"; }

// A list names each value once: a repeat would train the same member twice.
template <typename T, typename Text>
void distinct(const char* key, const std::vector<T>& v, Text text) {
  for (size_t i = 0; i < v.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      require(!(v[i] == v[j]), entry(key, i) + " = " + text(v[i]) + " repeats " + entry(key, j) +
                                   ": give each value once");
}

}  // namespace

void SweepConfig::validate(const TrainConfig& train) const {
  const auto itext = [](int64_t v) { return std::to_string(v); };
  for (size_t i = 0; i < lr.size(); ++i)
    require(std::isfinite(lr[i]) && lr[i] > 0, entry("lr", i) + " = " + num(lr[i]) + " must be a finite number > 0 (as train.lr)");
  for (size_t i = 0; i < weight_decay.size(); ++i)
    require(weight_decay[i] >= 0, entry("weight_decay", i) + " = " + num(weight_decay[i]) + " must be >= 0 (as train.weight_decay)");
  for (size_t i = 0; i < clip.size(); ++i)
    require(std::isfinite(clip[i]), entry("clip", i) + " = " + num(clip[i]) +
                                        " must be finite (as train.clip; <= 0 disables clipping)");
  for (size_t i = 0; i < warmup.size(); ++i) {
    require(warmup[i] >= 0, entry("warmup", i) + " = " + itext(warmup[i]) + " must be >= 0 (as train.warmup)");
    require(warmup[i] < train.steps, entry("warmup", i) + " = " + itext(warmup[i]) + " must be less than train.steps = " +
                                         itext(train.steps) + " (the learning rate would never reach its peak)");
  }
  distinct("lr", lr, num);
  distinct("weight_decay", weight_decay, num);
  distinct("clip", clip, num);
  distinct("warmup", warmup, itext);
}

void RunConfig::validate() const {
  require(data.source == "synthetic" || data.source == "npy" || data.source == "csv",
          "data.source must be 'synthetic', 'npy' or 'csv', got '" + data.source + "'");
  if (data.source == "npy")
    require(!data.features.empty() && !data.targets.empty(), "data.source = 'npy' needs data.features and data.targets");
  if (data.source == "csv") {
    require(!data.csv.empty(), "data.source = 'csv' needs data.csv (the path of the long-format file)");
    require(!data.feature_columns.empty(), "data.source = 'csv' needs data.feature_columns (the feature column names)");
    require(!data.target_columns.empty(), "data.source = 'csv' needs data.target_columns (the target column names)");
    for (const std::string& t : data.target_columns)
      require(data.allow_target_features ||
                  std::find(data.feature_columns.begin(), data.feature_columns.end(), t) == data.feature_columns.end(),
              "data.target_columns: '" + t + "' is also in data.feature_columns, so the model would see the label it "
              "predicts; remove it from data.feature_columns (or set data.allow_target_features = true)");
  }
  csv_delimiter_from_string(data.delimiter, "data.delimiter");
  check_preprocessing(data);
  if (data.source == "synthetic") {
    require(data.synth.N >= 1, "data.instruments must be >= 1, got " + std::to_string(data.synth.N));
    require(data.synth.T >= 2, "data.timesteps must be >= 2, got " + std::to_string(data.synth.T));
    require(data.synth.F >= 1, "data.n_features must be >= 1, got " + std::to_string(data.synth.F));
    require(data.synth.K >= 1, "data.n_targets must be >= 1, got " + std::to_string(data.synth.K));
    require(std::isfinite(data.synth.noise) && data.synth.noise >= 0,
            "data.noise must be a finite number >= 0, got " + std::to_string(data.synth.noise));
    require(int64_t(data.synth.N) * data.synth.T * std::max(data.synth.F, data.synth.K) <= (int64_t(1) << 31),
            "data.instruments × data.timesteps × data.n_features = " +
                std::to_string(int64_t(data.synth.N) * data.synth.T * data.synth.F) +
                " values is beyond the 2^31 a synthetic panel may hold");
  }
  require(split.spec.gap >= 0, "split.gap must be >= 0, got " + std::to_string(split.spec.gap));
  require(split.walk_forward_folds >= 0, "split.walk_forward_folds must be >= 0, got " +
                                             std::to_string(split.walk_forward_folds));
  require(split.walk_forward_test_size >= 0 && split.walk_forward_valid_size >= 0 && split.walk_forward_train_size >= 0,
          "split.walk_forward_test_size, walk_forward_valid_size and walk_forward_train_size must be >= 0");
  require(split.walk_forward_folds > 0 || (split.walk_forward_test_size == 0 && split.walk_forward_valid_size == 0 &&
                                           split.walk_forward_train_size == 0),
          "split.walk_forward_test_size / valid_size / train_size need split.walk_forward_folds > 0");
  require(run.device == "auto" || run.device == "cpu" || run.device == "gpu",
          "run.device must be 'auto', 'cpu' or 'gpu', got '" + run.device + "'");
  require(run.eval_every >= 0, "run.eval_every must be >= 0, got " + std::to_string(run.eval_every));
  require(run.patience >= 0, "run.patience must be >= 0, got " + std::to_string(run.patience));
  require(run.stop_after >= 0, "run.stop_after must be >= 0, got " + std::to_string(run.stop_after));
  require(run.save_every >= 0, "run.save_every must be >= 0 (0: save the last checkpoint only when the invocation ends), got " +
                                  std::to_string(run.save_every));
  require(!run.out_dir.empty(), "run.out_dir must not be empty");
  require(run.quantiles >= 2, "run.quantiles must be >= 2 (the long-short return is the top minus the bottom group), got " +
                                  std::to_string(run.quantiles));
  require(std::isfinite(run.periods_per_year) && run.periods_per_year >= 0,
          "run.periods_per_year must be a finite number >= 0 (0: from the time axis), got " +
              std::to_string(run.periods_per_year));
  {
    std::vector<std::string> names = metric_names();
    for (const std::string& q : quantile_names(run.quantiles)) names.push_back(q);
    std::string list;
    for (const auto& n : metric_names()) list += (list.empty() ? "" : ", ") + n;
    list += ", q1 .. q" + std::to_string(run.quantiles);
    require(std::find(names.begin(), names.end(), run.metric) != names.end(),
            "run.metric must be one of " + list + ", got '" + run.metric + "'");
  }
  model.validate();
  sweep.validate(train);
  // The train settings a sweep replaces are checked as its first member trains them (a warm-up too long for
  // train.steps is no error when every member's swept warm-up fits).
  TrainConfig first = train;
  if (!sweep.lr.empty()) first.lr = sweep.lr[0];
  if (!sweep.weight_decay.empty()) first.weight_decay = sweep.weight_decay[0];
  if (!sweep.clip.empty()) first.clip = sweep.clip[0];
  if (!sweep.warmup.empty()) first.warmup = sweep.warmup[0];
  first.validate();
}

}  // namespace mlalpha
