// RunConfig → TOML text (src/config/run_config.h, include/mlalpha/config.h's to_toml): every key of the
// file with its value, the inverse of the parser in run_config.cpp. A checkpoint records its run's [data]
// and [split] this way, and a resume compares settings key by key.
#include "config/toml.h"

#include <charconv>
#include <cmath>
#include <sstream>

#include "config/run_config.h"
#include "mlalpha/config.h"

namespace mlalpha {

namespace {

// A float setting as the double the user wrote (0.1f → 0.1, not 0.10000000149011612): its shortest
// decimal text read back as a double, which parses to the same float.
double as_written(float f) {
  if (!std::isfinite(f)) return double(f);
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, f);
  double d = 0;
  std::from_chars(buf, r.ptr, d);
  return d;
}

toml::array string_array(const std::vector<std::string>& v) {
  toml::array a;
  for (const auto& s : v) a.push_back(s);
  return a;
}

toml::array float_array(const std::vector<float>& v) {
  toml::array a;
  for (float f : v) a.push_back(as_written(f));
  return a;
}

void put_boundary(toml::table& t, const char* key, const SplitPoint& p) {
  if (p.kind == SplitPoint::Kind::fraction) t.insert_or_assign(key, p.fraction);
  else if (p.kind == SplitPoint::Kind::index) t.insert_or_assign(key, p.index);
  else t.insert_or_assign(key, p.time);
}

// Every key of the file with its value, section by section (the inverse of parse_run_config).
toml::table to_table(const RunConfig& c) {
  toml::table data, split, model, train, sweep, run;
  data.insert_or_assign("source", c.data.source);
  data.insert_or_assign("instruments", c.data.synth.N);
  data.insert_or_assign("timesteps", c.data.synth.T);
  data.insert_or_assign("n_features", c.data.synth.F);
  data.insert_or_assign("n_targets", c.data.synth.K);
  data.insert_or_assign("noise", as_written(c.data.synth.noise));
  data.insert_or_assign("memory", c.data.synth.memory);
  data.insert_or_assign("seed", int64_t(c.data.synth.seed));
  data.insert_or_assign("features", c.data.features);
  data.insert_or_assign("targets", c.data.targets);
  data.insert_or_assign("csv", c.data.csv);
  data.insert_or_assign("delimiter", c.data.delimiter);
  data.insert_or_assign("time_format", c.data.time_format);
  data.insert_or_assign("time_column", c.data.time_column);
  data.insert_or_assign("instrument_column", c.data.instrument_column);
  data.insert_or_assign("feature_columns", string_array(c.data.feature_columns));
  data.insert_or_assign("target_columns", string_array(c.data.target_columns));
  data.insert_or_assign("allow_target_features", c.data.allow_target_features);
  data.insert_or_assign("feature_norm", c.data.feature_norm);
  data.insert_or_assign("robust_clip", as_written(c.data.robust_clip));
  data.insert_or_assign("target_norm", c.data.target_norm);
  data.insert_or_assign("target_scale", c.data.target_scale);
  data.insert_or_assign("nan_fill", c.data.nan_fill);
  put_boundary(split, "train_end", c.split.spec.train_end);
  put_boundary(split, "valid_end", c.split.spec.valid_end);
  split.insert_or_assign("gap", c.split.spec.gap);
  split.insert_or_assign("walk_forward_folds", c.split.walk_forward_folds);
  split.insert_or_assign("walk_forward_test_size", c.split.walk_forward_test_size);
  split.insert_or_assign("walk_forward_valid_size", c.split.walk_forward_valid_size);
  split.insert_or_assign("walk_forward_train_size", c.split.walk_forward_train_size);
  const ModelConfig& m = c.model;
  model.insert_or_assign("d_model", m.D);
  model.insert_or_assign("layers", m.NL);
  model.insert_or_assign("expand", m.expand);
  model.insert_or_assign("head_dim", m.P);
  model.insert_or_assign("groups", m.G);
  model.insert_or_assign("d_state", m.N);
  model.insert_or_assign("conv_width", m.W);
  model.insert_or_assign("chunk", m.Q);
  model.insert_or_assign("dt_min", as_written(m.dt_min));
  model.insert_or_assign("dt_max", as_written(m.dt_max));
  model.insert_or_assign("dt_init_floor", as_written(m.dt_init_floor));
  model.insert_or_assign("dt_limit_lo", as_written(m.dt_limit_lo));
  model.insert_or_assign("dt_limit_hi", as_written(m.dt_limit_hi));
  const TrainConfig& t = c.train;
  if (t.batch_mode == BatchMode::Time) train.insert_or_assign("batch", "time");
  else train.insert_or_assign("batch", t.B);
  train.insert_or_assign("dates", t.dates);
  train.insert_or_assign("instruments", t.instruments);
  train.insert_or_assign("seq_len", t.L);
  train.insert_or_assign("steps", t.steps);
  train.insert_or_assign("lr", as_written(t.lr));
  train.insert_or_assign("min_lr_ratio", as_written(t.min_lr_ratio));
  train.insert_or_assign("warmup", t.warmup);
  train.insert_or_assign("schedule", to_string(t.schedule));
  train.insert_or_assign("weight_decay", as_written(t.weight_decay));
  train.insert_or_assign("beta1", as_written(t.beta1));
  train.insert_or_assign("beta2", as_written(t.beta2));
  train.insert_or_assign("eps", as_written(t.eps));
  train.insert_or_assign("clip", as_written(t.clip));
  train.insert_or_assign("loss", to_string(t.loss));
  train.insert_or_assign("huber_delta", as_written(t.huber_delta));
  train.insert_or_assign("burn_in", t.burn_in);
  train.insert_or_assign("seed", int64_t(t.seed));
  train.insert_or_assign("log_every", t.log_every);
  train.insert_or_assign("models", t.models);
  train.insert_or_assign("precision", to_string(t.precision));
  train.insert_or_assign("init", t.init);
  train.insert_or_assign("state", to_string(t.state));
  sweep.insert_or_assign("lr", float_array(c.sweep.lr));
  sweep.insert_or_assign("weight_decay", float_array(c.sweep.weight_decay));
  sweep.insert_or_assign("clip", float_array(c.sweep.clip));
  toml::array warmup;
  for (int64_t w : c.sweep.warmup) warmup.push_back(w);
  sweep.insert_or_assign("warmup", std::move(warmup));
  run.insert_or_assign("device", c.run.device);
  run.insert_or_assign("threads", c.run.threads);
  run.insert_or_assign("cpu_kernels", c.run.cpu_kernels);
  run.insert_or_assign("graph", c.run.graph);
  run.insert_or_assign("out_dir", c.run.out_dir);
  run.insert_or_assign("eval_every", c.run.eval_every);
  run.insert_or_assign("metric", c.run.metric);
  run.insert_or_assign("patience", c.run.patience);
  run.insert_or_assign("stop_after", c.run.stop_after);
  run.insert_or_assign("save_every", c.run.save_every);
  run.insert_or_assign("quantiles", c.run.quantiles);
  run.insert_or_assign("periods_per_year", c.run.periods_per_year);
  run.insert_or_assign("parallel_folds", c.run.parallel_folds);
  toml::table root;
  root.insert_or_assign("data", std::move(data));
  root.insert_or_assign("split", std::move(split));
  root.insert_or_assign("model", std::move(model));
  root.insert_or_assign("train", std::move(train));
  root.insert_or_assign("sweep", std::move(sweep));
  root.insert_or_assign("run", std::move(run));
  return root;
}

// A value as TOML text. Floats take their shortest exact form (0.1, not toml++'s 0.10000000000000001): every
// float setting is stored as the double as_written() gives, so the text is what the user wrote.
std::string node_text(const toml::node& n) {
  if (const auto* f = n.as_floating_point()) {
    const double v = f->get();
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    char buf[40];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    std::string t(buf, r.ptr);
    if (t.find_first_of(".en") == std::string::npos) t += ".0";  // stays a TOML float
    return t;
  }
  if (const auto* a = n.as_array()) {  // element by element, so floats keep their short form
    std::string t = "[";
    for (size_t i = 0; i < a->size(); ++i) t += (i ? ", " : "") + node_text(*a->get(i));
    return t + "]";
  }
  toml::table t;
  t.insert_or_assign("v", n);
  std::ostringstream s;
  s << t;
  const std::string line = s.str();  // "v = <value>"
  return line.substr(line.find('=') + 2);
}

}  // namespace

std::map<std::string, std::string> run_config_values(const RunConfig& c) {
  std::map<std::string, std::string> out;
  const toml::table root = to_table(c);
  for (const auto& [section, t] : root)
    for (const auto& [key, v] : *t.as_table()) out[std::string(section.str()) + "." + std::string(key.str())] = node_text(v);
  return out;
}

std::string to_toml(const RunConfig& c, const std::vector<std::string>& sections_in) {
  const toml::table all = to_table(c);
  const std::vector<std::string> sections =
      sections_in.empty() ? std::vector<std::string>{"data", "split", "model", "train", "sweep", "run"} : sections_in;
  std::string text;
  for (const auto& s : sections) {
    const toml::table* t = all.get_as<toml::table>(s);
    if (!t) continue;
    // A [sweep] list left empty sweeps nothing and is not written (the parser refuses `lr = []`); a
    // [sweep] without lists is left out.
    std::string lines;
    for (const auto& [key, v] : *t) {
      if (s == "sweep" && v.is_array() && v.as_array()->empty()) continue;
      lines += std::string(key.str()) + " = " + node_text(v) + "\n";
    }
    if (s == "sweep" && lines.empty()) continue;
    text += (text.empty() ? "[" : "\n[") + s + "]\n" + lines;
  }
  return text;
}

}  // namespace mlalpha
