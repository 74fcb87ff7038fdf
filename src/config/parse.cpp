// TOML → RunConfig (docs/config.md): the file, then the overrides and settings, read section by section.
#include <algorithm>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "config/toml.h"
#include "config/toml_section.h"
#include "core/error.h"
#include "mlalpha/config.h"

namespace mlalpha {

using config_detail::Origins;
using config_detail::Section;

namespace {

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

// The table and key a "section.key" names; the section is created when missing.
toml::table& section_of(toml::table& root, const std::string& section, const std::string& src) {
  if (!root.contains(section)) root.insert(section, toml::table{});
  toml::table* t = root[section].as_table();
  if (!t) throw Error(src + ": '" + section + "' is not a table");
  return *t;
}

// A bare word as the TOML string it spells: a literal string (no escapes: a Windows path keeps its
// backslashes), or a basic string with its backslashes and quotes escaped when it holds a single quote.
std::string quoted(const std::string& word) {
  if (word.find_first_of("'\n\r") == std::string::npos) return "'" + word + "'";
  std::string q = "\"";
  for (const char c : word) q += c == '\\' || c == '"' ? std::string(1, '\\') + c : std::string(1, c);
  return q + "\"";
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
    parsed = parse_toml("v = " + quoted(value), src);
  }
  section_of(root, section, src).insert_or_assign(key, *parsed.get("v"));
  origins.override[section + "." + key] = src;
}

// A program's or a flag's setting (include/mlalpha/config.h, ConfigSetting): text, integers and numbers go
// into the table as values, never through TOML text.
void apply_setting(toml::table& root, const ConfigSetting& s, Origins& origins) {
  const size_t dot = s.key.find('.');
  const std::string src = s.origin.empty() ? "setting '" + s.key + "'" : s.origin;
  if (dot == std::string::npos || dot == 0 || dot + 1 == s.key.size())
    throw Error(src + ": '" + s.key + "' is not a section.key name, e.g. train.lr");
  if (s.kind == ConfigSetting::Kind::toml) {
    apply_override(root, s.key + "=" + s.value, origins);
    origins.override[s.key] = src;
    return;
  }
  toml::table& t = section_of(root, s.key.substr(0, dot), src);
  const std::string key = s.key.substr(dot + 1);
  const char* b = s.value.data() + (!s.value.empty() && s.value[0] == '+');
  const char* e = s.value.data() + s.value.size();
  if (s.kind == ConfigSetting::Kind::text) {
    t.insert_or_assign(key, s.value);
  } else if (s.kind == ConfigSetting::Kind::integer) {
    int64_t v = 0;
    const auto r = std::from_chars(b, e, v);
    if (r.ec == std::errc::result_out_of_range) throw Error(src + ": '" + s.value + "' is out of range for an integer");
    if (r.ec != std::errc() || r.ptr != e || b == e) throw Error(src + ": '" + s.value + "' is not an integer");
    t.insert_or_assign(key, v);
  } else {
    double v = 0;
    const auto r = std::from_chars(b, e, v);
    if (r.ec != std::errc() || r.ptr != e || b == e) throw Error(src + ": '" + s.value + "' is not a number");
    t.insert_or_assign(key, v);
  }
  origins.override[s.key] = src;
}

RunConfig parse_impl(const std::string& text, const std::string& src, const std::vector<std::string>& overrides,
                     const std::string& base_dir, const std::vector<ConfigSetting>& settings,
                     std::vector<std::string>* keys) {
  toml::table root = parse_toml(text, src);
  Origins origins{src, {}};
  for (const std::string& ov : overrides) apply_override(root, ov, origins);
  for (const ConfigSetting& s : settings) apply_setting(root, s, origins);
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
  d.get("memory", c.data.synth.memory);
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
  d.get_choice("target_scale", c.data.target_scale, {"none", "std"});
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
              precision = to_string(c.train.precision), state = to_string(c.train.state);
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
  t.get_path("init", c.train.init, base_dir);
  t.get_choice("state", state, {"zero", "carry"});
  t.check_unknown();
  // Unset, the warm-up follows the steps (config_types.h, default_warmup): a 15-step run needs no --warmup.
  if (!c.given.count("train.warmup")) c.train.warmup = default_warmup(c.train.steps);
  c.train.loss = parse_loss(loss);
  c.train.schedule = parse_schedule(schedule);
  c.train.precision = parse_precision(precision);
  c.train.state = parse_state_mode(state);

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
  r.get("threads", c.run.threads);
  r.get_choice("cpu_kernels", c.run.cpu_kernels, {"fast", "reference"});
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
    parse_impl("", "defaults", {}, "", {}, &out);
    return out;
  }();
  return keys;
}

RunConfig parse_run_config(const std::string& text, const std::string& src, const std::vector<std::string>& overrides,
                           const std::string& base_dir, const std::vector<ConfigSetting>& settings) {
  // The file's values are checked on their own first: a flag or --set that replaces a key must not hide a bad
  // value of it in the file (the file is read again without the flag, by the next command or a person).
  if (!text.empty() && (!overrides.empty() || !settings.empty())) parse_impl(text, src, {}, base_dir, {}, nullptr);
  // The same for a --set that a flag replaces (--steps 2 --set train.steps='"ten"'): the value was dropped unread.
  if (!overrides.empty() && !settings.empty()) parse_impl(text, src, overrides, base_dir, {}, nullptr);
  return parse_impl(text, src, overrides, base_dir, settings, nullptr);
}

RunConfig load_run_config(const std::string& path, const std::vector<std::string>& overrides,
                          const std::vector<ConfigSetting>& settings) {
  if (path.empty()) return parse_run_config("", "defaults", overrides, "", settings);
  namespace fs = std::filesystem;
  std::error_code ec;
  require(fs::exists(path, ec), path + ": no such config file");
  require(!fs::is_directory(path, ec), path + ": is a directory, expected a TOML config file");
  require(fs::is_regular_file(path, ec), path + ": is not a regular file (a device, FIFO or socket), expected a TOML "
                                         "config file");
  std::ifstream in(path, std::ios::binary);
  require(bool(in), path + ": cannot open the config file");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_run_config(ss.str(), path, overrides, fs::path(path).parent_path().string(), settings);
}

ComputeRequest RunConfig::compute() const {
  ComputeRequest r;
  r.device = run.device, r.precision = to_string(train.precision), r.threads = run.threads, r.kernels = run.cpu_kernels;
  return r;
}

bool RunConfig::was_given_in(const std::string& section) const {
  const std::string prefix = section + ".";
  for (const auto& k : given)
    if (k.compare(0, prefix.size(), prefix) == 0) return true;
  return false;
}

}  // namespace mlalpha
