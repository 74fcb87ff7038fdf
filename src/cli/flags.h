#pragma once
// The flags of `ml-alpha` that set configuration keys (docs/config.md): each given flag becomes a
// ConfigSetting with the value as typed (text, integer or number; never pasted into TOML), applied after the
// file and the --set overrides, so a flag wins over a --set of the same key. Host-only (CLI11).
#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "commands.h"
#include "mlalpha/config.h"

namespace mlalpha {

// A flag that sets `key` when given, with the text the user typed.
struct Flag {
  // A constructor rather than aggregate initialisation: the Flags table below names only key and kind.
  Flag(std::string key, ConfigSetting::Kind kind = ConfigSetting::Kind::text) : key(std::move(key)), kind(kind) {}
  std::string key;
  ConfigSetting::Kind kind = ConfigSetting::Kind::text;
  std::optional<std::string> value;
  std::string name;  // "--steps", for messages (set by Flags::add)
};

struct Flags {
  Flag steps{"train.steps", ConfigSetting::Kind::integer}, batch{"train.batch", ConfigSetting::Kind::integer},
      seq_len{"train.seq_len", ConfigSetting::Kind::integer}, warmup{"train.warmup", ConfigSetting::Kind::integer},
      log_every{"train.log_every", ConfigSetting::Kind::integer}, seed{"train.seed", ConfigSetting::Kind::integer},
      eval_every{"run.eval_every", ConfigSetting::Kind::integer}, patience{"run.patience", ConfigSetting::Kind::integer},
      d_model{"model.d_model", ConfigSetting::Kind::integer}, layers{"model.layers", ConfigSetting::Kind::integer},
      d_state{"model.d_state", ConfigSetting::Kind::integer}, head_dim{"model.head_dim", ConfigSetting::Kind::integer},
      chunk{"model.chunk", ConfigSetting::Kind::integer}, instruments{"data.instruments", ConfigSetting::Kind::integer},
      timesteps{"data.timesteps", ConfigSetting::Kind::integer},
      n_features{"data.n_features", ConfigSetting::Kind::integer}, burn_in{"train.burn_in", ConfigSetting::Kind::integer},
      stop_after{"run.stop_after", ConfigSetting::Kind::integer},
      save_every{"run.save_every", ConfigSetting::Kind::integer}, models{"train.models", ConfigSetting::Kind::integer},
      threads{"run.threads", ConfigSetting::Kind::integer};
  Flag lr{"train.lr", ConfigSetting::Kind::number}, weight_decay{"train.weight_decay", ConfigSetting::Kind::number},
      clip{"train.clip", ConfigSetting::Kind::number}, noise{"data.noise", ConfigSetting::Kind::number};
  Flag device{"run.device"}, out_dir{"run.out_dir"}, metric{"run.metric"}, loss{"train.loss"},
      schedule{"train.schedule"};
  std::string precision;  // --precision as given ("" = the config's)
  bool tf32 = false, no_graph = false;
  std::vector<std::string> sweep;  // --sweep KEY=V1,V2,... as given

  // A flag `name` (e.g. "--steps,-S") that sets f.
  static void add(CLI::App& c, const char* name, Flag& f, const char* help);
  // The flags of a subcommand: --device, --threads and --precision always, the training ones when `training`.
  void add_all(CLI::App& c, bool training);
  // The settings of the flags given, in a fixed order.
  std::vector<ConfigSetting> settings() const;
};

// --precision P and its older spelling --tf32; precision_flag (commands.h) reads them after parsing.
void add_precision(CLI::App& c, std::string& precision, bool& tf32, const std::string& key_note);
// --config FILE and --set section.key=value.
void add_common(CLI::App& c, CommonArgs& a);

}  // namespace mlalpha
