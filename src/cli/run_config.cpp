// TOML → RunConfig. toml++ is used header-only so the binary needs no shared library beyond CUDA's.
#define TOML_HEADER_ONLY 1
#define TOML_EXCEPTIONS 1
#include "cli/run_config.h"

#include <toml++/toml.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include "core/error.h"

namespace mlalpha {

namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> d(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) d[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t prev = d[0];
    d[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cur = d[j];
      d[j] = std::min({d[j] + 1, d[j - 1] + 1, prev + (a[i - 1] == b[j - 1] ? 0 : 1)});
      prev = cur;
    }
  }
  return d[b.size()];
}

// Reads one section, remembering which keys were consumed so leftovers can be reported.
class Section {
 public:
  // overridden: "section.key" → the command-line override that set it (named in messages instead of a line).
  Section(const toml::table* t, std::string name, const std::string& src,
          const std::map<std::string, std::string>& overridden)
      : t_(t), name_(std::move(name)), src_(src), overridden_(overridden) {}

  template <typename T>
  void get(const char* key, T& out) {
    known_.push_back(key);
    if (!t_) return;
    const toml::node* n = t_->get(key);
    if (!n) return;
    convert(*n, key, out);
  }
  void get_boundary(const char* key, SplitPoint& out) {
    known_.push_back(key);
    if (!t_) return;
    const toml::node* n = t_->get(key);
    if (!n) return;
    if (auto f = n->value_exact<double>()) {
      if (!(*f > 0 && *f < 1)) fail(*n, key, "a fraction must be in (0, 1), got " + std::to_string(*f));
      out = SplitPoint::at_fraction(*f);
    } else if (auto i = n->value_exact<int64_t>()) {
      out = SplitPoint::at_index(*i);
    } else if (auto s = n->value_exact<std::string>()) {
      out = SplitPoint::at_time(*s);
    } else {
      fail(*n, key, "expected a fraction (0.7), a time index (1500) or a time value (\"2021-01-04\")");
    }
  }
  // After all get() calls: any key not asked for is a typo or unsupported.
  void check_unknown() const {
    if (!t_) return;
    for (const auto& [k, v] : *t_) {
      const std::string key(k.str());
      if (std::find(known_.begin(), known_.end(), key) != known_.end()) continue;
      std::string best;
      size_t best_d = 99;
      for (const auto& cand : known_)
        if (size_t d = edit_distance(key, cand); d < best_d) best_d = d, best = cand;
      std::string msg = where(v, key) + ": unknown key '" + name_ + "." + key + "'";
      if (best_d <= 3) msg += "; did you mean '" + name_ + "." + best + "'?";
      msg += " (valid keys in [" + name_ + "]:";
      for (const auto& c : known_) msg += " " + c;
      throw Error(msg + ")");
    }
  }

 private:
  // "file:line", or the override's own text for values given on the command line.
  std::string where(const toml::node& n, const std::string& key) const {
    if (auto it = overridden_.find(name_ + "." + key); it != overridden_.end()) return "override '" + it->second + "'";
    return src_ + ":" + std::to_string(n.source().begin.line);
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
    if (!v) fail(n, key, "expected an integer");
    if (*v < int64_t(std::numeric_limits<I>::min()) || uint64_t(*v) > uint64_t(std::numeric_limits<I>::max()))
      fail(n, key, "value " + std::to_string(*v) + " is out of range");
    out = I(*v);
  }
  void convert(const toml::node& n, const char* key, float& out) {
    auto v = n.value<double>();  // integers are accepted where a number is expected
    if (!v) fail(n, key, "expected a number");
    out = float(*v);
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

  const toml::table* t_;
  std::string name_;
  const std::string& src_;
  const std::map<std::string, std::string>& overridden_;
  std::vector<std::string> known_;
};

}  // namespace

namespace {

toml::table parse_toml(const std::string& text, const std::string& src) {
  try {
    return toml::parse(text, src);
  } catch (const toml::parse_error& e) {
    throw Error(src + ":" + std::to_string(e.source().begin.line) + ":" + std::to_string(e.source().begin.column) +
                ": TOML syntax error: " + std::string(e.description()));
  }
}

// "train.lr=2e-3" → root["train"]["lr"] = 2e-3. The value is parsed as TOML; a bare word such as
// data.source=npy is taken as the string "npy".
void apply_override(toml::table& root, const std::string& ov, std::map<std::string, std::string>& overridden) {
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
  overridden[section + "." + key] = ov;
}

}  // namespace

RunConfig parse_run_config(const std::string& text, const std::string& src, const std::vector<std::string>& overrides) {
  toml::table root = parse_toml(text, src);
  std::map<std::string, std::string> overridden;
  for (const std::string& ov : overrides) apply_override(root, ov, overridden);
  static const char* kSections[] = {"data", "split", "model", "train", "run"};
  for (const auto& [k, v] : root) {
    const std::string key(k.str());
    if (std::find(std::begin(kSections), std::end(kSections), key) == std::end(kSections) || !v.is_table())
      throw Error(src + ":" + std::to_string(v.source().begin.line) + ": unknown section or top-level key '" + key +
                  "' (expected the tables [data], [split], [model], [train], [run])");
  }
  RunConfig c;
  auto table = [&](const char* name) { return root[name].as_table(); };

  Section d(table("data"), "data", src, overridden);
  d.get("source", c.data.source);
  d.get("instruments", c.data.synth.N);
  d.get("timesteps", c.data.synth.T);
  d.get("n_features", c.data.synth.F);
  d.get("n_targets", c.data.synth.K);
  d.get("noise", c.data.synth.noise);
  d.get("seed", c.data.synth.seed);
  d.get("features", c.data.features);
  d.get("targets", c.data.targets);
  d.get("csv", c.data.csv);
  d.get("time_column", c.data.time_column);
  d.get("instrument_column", c.data.instrument_column);
  d.get("feature_columns", c.data.feature_columns);
  d.get("target_columns", c.data.target_columns);
  d.check_unknown();

  Section s(table("split"), "split", src, overridden);
  s.get_boundary("train_end", c.split.spec.train_end);
  s.get_boundary("valid_end", c.split.spec.valid_end);
  s.get("gap", c.split.spec.gap);
  s.get("walk_forward_folds", c.split.walk_forward_folds);
  s.check_unknown();

  Section m(table("model"), "model", src, overridden);
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

  Section t(table("train"), "train", src, overridden);
  std::string loss = to_string(c.train.loss), schedule = to_string(c.train.schedule);
  t.get("batch", c.train.B);
  t.get("seq_len", c.train.L);
  t.get("steps", c.train.steps);
  t.get("lr", c.train.lr);
  t.get("min_lr_ratio", c.train.min_lr_ratio);
  t.get("warmup", c.train.warmup);
  t.get("schedule", schedule);
  t.get("weight_decay", c.train.weight_decay);
  t.get("beta1", c.train.beta1);
  t.get("beta2", c.train.beta2);
  t.get("eps", c.train.eps);
  t.get("clip", c.train.clip);
  t.get("loss", loss);
  t.get("huber_delta", c.train.huber_delta);
  t.get("burn_in", c.train.burn_in);
  t.get("seed", c.train.seed);
  t.get("log_every", c.train.log_every);
  t.check_unknown();
  try {
    c.train.loss = parse_loss(loss);
    c.train.schedule = parse_schedule(schedule);
  } catch (const Error& e) {
    throw Error(src + ": train." + std::string(e.what()));
  }

  Section r(table("run"), "run", src, overridden);
  r.get("device", c.run.device);
  r.get("tf32", c.run.tf32);
  r.get("graph", c.run.graph);
  r.get("out_dir", c.run.out_dir);
  r.get("eval_every", c.run.eval_every);
  r.get("metric", c.run.metric);
  r.get("patience", c.run.patience);
  r.get("stop_after", c.run.stop_after);
  r.check_unknown();
  return c;
}

RunConfig load_run_config(const std::string& path, const std::vector<std::string>& overrides) {
  if (path.empty()) return parse_run_config("", "(defaults)", overrides);
  std::ifstream in(path, std::ios::binary);
  require(bool(in), path + ": cannot open the config file");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_run_config(ss.str(), path, overrides);
}

void RunConfig::validate() const {
  require(data.source == "synthetic" || data.source == "npy" || data.source == "csv",
          "data.source must be 'synthetic', 'npy' or 'csv', got '" + data.source + "'");
  if (data.source == "npy")
    require(!data.features.empty() && !data.targets.empty(), "data.source = 'npy' needs data.features and data.targets");
  if (data.source == "csv")
    require(!data.csv.empty() && !data.feature_columns.empty() && !data.target_columns.empty(),
            "data.source = 'csv' needs data.csv, data.feature_columns and data.target_columns");
  require(split.spec.gap >= 0, "split.gap must be >= 0, got " + std::to_string(split.spec.gap));
  require(split.walk_forward_folds >= 0, "split.walk_forward_folds must be >= 0");
  require(run.device == "auto" || run.device == "cpu" || run.device == "gpu",
          "run.device must be 'auto', 'cpu' or 'gpu', got '" + run.device + "'");
  require(run.eval_every >= 0, "run.eval_every must be >= 0");
  require(run.patience >= 0, "run.patience must be >= 0");
  require(run.stop_after >= 0, "run.stop_after must be >= 0");
  require(!run.out_dir.empty(), "run.out_dir must not be empty");
  model.validate();
  train.validate();
}

}  // namespace mlalpha
