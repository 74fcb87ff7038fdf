// Key suggestions (include/mlalpha/config.h, suggest_run_config_key): every valid key and a table of other
// tools' names, ranked by similarity (core/suggest.h).
#include <map>
#include <string>

#include "core/suggest.h"
#include "mlalpha/config.h"

namespace mlalpha {

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

}  // namespace

std::string suggest_run_config_key(const std::string& key) {
  return closest_name(key, run_config_keys(), key_aliases());
}

}  // namespace mlalpha
