// The flags that set configuration keys (flags.h).
#include "flags.h"

#include <charconv>

#include "mlalpha/error.h"

namespace mlalpha {

namespace {

// Integers and numbers are kept as the text the user typed and checked here, so an out-of-range count is an
// error instead of CLI11's silent saturation to the largest int64, and the value is read exactly once.
std::string integer_error(const std::string& s) {
  int64_t v = 0;
  const char* b = s.data() + (!s.empty() && s[0] == '+');
  const auto r = std::from_chars(b, s.data() + s.size(), v);
  if (r.ec == std::errc::result_out_of_range) return "'" + s + "' is out of range for an integer";
  if (r.ec != std::errc() || r.ptr != s.data() + s.size() || b == s.data() + s.size()) return "'" + s + "' is not an integer";
  return "";
}
const CLI::Validator kInteger([](std::string& s) { return integer_error(s); }, "INT");
const CLI::Validator kNumber(
    [](std::string& s) -> std::string {
      double v = 0;
      const char* b = s.data() + (!s.empty() && s[0] == '+');
      const auto r = std::from_chars(b, s.data() + s.size(), v);
      if (r.ec != std::errc() || r.ptr != s.data() + s.size() || b == s.data() + s.size()) return "'" + s + "' is not a number";
      return "";
    },
    "NUMBER");
// train.batch: an integer, or "time" for cross-sectional batches (docs/config.md).
const CLI::Validator kBatch(
    [](std::string& s) -> std::string {
      if (s == "time" || integer_error(s).empty()) return "";
      return "'" + s + "' is neither an integer (windows per step) nor 'time' (cross-sectional batches)";
    },
    "INT|time");

}  // namespace

void Flags::add(CLI::App& c, const char* name, Flag& f, const char* help) {
  f.name = std::string(name).substr(0, std::string(name).find(','));
  CLI::Option* o = c.add_option_function<std::string>(name, [&f](const std::string& v) { f.value = v; },
                                                      std::string(help) + " (" + f.key + ")");
  if (f.key == "train.batch") o->check(kBatch);
  else if (f.kind == ConfigSetting::Kind::integer) o->check(kInteger);
  else if (f.kind == ConfigSetting::Kind::number) o->check(kNumber);
  else o->type_name("TEXT");
}

void add_precision(CLI::App& c, std::string& precision, bool& tf32, const std::string& key_note) {
  // An empty value is the "not given" of `precision`: refused here, where it is still told from an absent flag.
  c.add_option("--precision", precision, std::string(kPrecisionHelp) + key_note)
      ->type_name("fp32|tf32|bf16")
      ->check([](const std::string& v) {
        return v.empty() ? std::string("an empty value; give fp32, tf32 or bf16") : std::string();
      });
  c.add_flag("--tf32", tf32, "the older spelling of --precision tf32");
}

void add_common(CLI::App& c, CommonArgs& a) {
  c.add_option("--config,-c", a.config, "TOML run configuration (see configs/example.toml)")->check(CLI::ExistingFile);
  c.add_option("--set", a.overrides, "override a config key: --set train.lr=2e-3 (repeatable; the value in TOML syntax)");
}

void Flags::add_all(CLI::App& c, bool training) {
  add(c, "--device", device, "auto | cpu | gpu");
  add(c, "--threads", threads,
      "CPU worker threads, 0 = every CPU this process may use (the default; the results do not depend on it)");
  add_precision(c, precision, tf32, " (train.precision)");
  if (!training) return;
  add(c, "--steps", steps, "optimizer steps");
  add(c, "--batch,-B", batch, "windows per step, or 'time': train.dates cross-sections of train.instruments instruments");
  add(c, "--seq-len,-L", seq_len, "window length");
  add(c, "--lr", lr, "peak learning rate");
  add(c, "--warmup", warmup, "linear warm-up steps (unset: a tenth of the steps, at most 20)");
  add(c, "--schedule", schedule, "cosine | constant");
  add(c, "--weight-decay", weight_decay, "AdamW decoupled weight decay");
  add(c, "--clip", clip, "global gradient-norm clip, <= 0 disables");
  add(c, "--loss", loss, "mse | huber | ic (ic needs --batch time)");
  add(c, "--burn-in", burn_in, "leading positions of each window left out of the loss");
  add(c, "--seed", seed, "initialisation and sampling seed");
  add(c, "--models", models, "train this many models together, member r with seed + r");
  c.add_option("--sweep", sweep,
               "train a population over these values, KEY one of lr, weight_decay, clip, warmup: --sweep "
               "lr=1e-3,3e-4 (repeatable, one KEY each; sets sweep.KEY)")
      ->allow_extra_args(false)
      ->type_name("KEY=V1,V2,...")
      ->check(CLI::Validator(
          [](std::string& s) -> std::string {
            try {
              sweep_override(s);
              return "";
            } catch (const Error& e) {
              return e.what();
            }
          },
          ""));
  add(c, "--log-every", log_every, "log interval in steps");
  add(c, "--eval-every", eval_every, "validation interval in steps (0: at the end)");
  add(c, "--metric", metric, "early-stopping metric: mse | ic | rank_ic | icir | dir_acc");
  add(c, "--patience", patience, "evaluations without improvement before stopping (0: never)");
  add(c, "--out-dir,-o", out_dir, "where metrics, plot and checkpoints go (taken as typed)");
  add(c, "--stop-after", stop_after, "end this invocation after N steps, saving the last checkpoint");
  add(c, "--save-every", save_every,
      "also save the last checkpoint every N steps, so a crash or kill loses at most N steps (0: at the end only)");
  add(c, "--d-model", d_model, "model width D");
  add(c, "--layers", layers, "Mamba2 layers");
  add(c, "--d-state", d_state, "SSM state size N");
  add(c, "--head-dim", head_dim, "head dim P");
  add(c, "--chunk", chunk, "SSD chunk length Q (at most 1024; longer than --seq-len computes nothing more)");
  add(c, "--instruments", instruments, "synthetic data: instruments");
  add(c, "--timesteps", timesteps, "synthetic data: time steps");
  add(c, "--features", n_features, "synthetic data: features");
  add(c, "--noise", noise, "synthetic data: target noise");
  c.add_flag("--no-graph", no_graph, "launch each GPU step eagerly instead of replaying a CUDA graph (run.graph)");
}

std::vector<ConfigSetting> Flags::settings() const {
  std::vector<ConfigSetting> out;
  auto emit = [&](const Flag& f) {
    if (!f.value) return;
    ConfigSetting s{f.kind, f.key, *f.value, "flag '" + f.name + " " + *f.value + "'"};
    if (f.key == "train.batch" && *f.value == "time") s.kind = ConfigSetting::Kind::text;
    out.push_back(std::move(s));
  };
  for (const Flag* f : {&steps, &batch, &seq_len, &warmup, &log_every, &seed, &eval_every, &patience, &d_model, &layers,
                        &d_state, &head_dim, &chunk, &instruments, &timesteps, &n_features, &burn_in, &stop_after,
                        &save_every, &models, &threads, &lr, &weight_decay, &clip, &noise, &device, &out_dir, &metric, &loss,
                        &schedule})
    emit(*f);
  if (const std::optional<Precision> p = precision_flag(precision, tf32)) {
    out.push_back({ConfigSetting::Kind::text, "train.precision", to_string(*p), "--precision"});
    // The flag decides, over a config file's older spelling run.tf32 = true as well.
    out.push_back({ConfigSetting::Kind::toml, "run.tf32", "false", "--precision"});
  }
  if (no_graph) out.push_back({ConfigSetting::Kind::toml, "run.graph", "false", "--no-graph"});
  for (const std::string& s : sweep_overrides(sweep)) {
    const size_t eq = s.find('=');
    out.push_back({ConfigSetting::Kind::toml, s.substr(0, eq), s.substr(eq + 1), "--sweep"});
  }
  return out;
}

}  // namespace mlalpha
