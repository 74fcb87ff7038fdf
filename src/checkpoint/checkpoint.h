#pragma once
// Checkpoints (docs/checkpoints.md). A checkpoint at path P is two safetensors files:
//   P                       the weights, tensor names and shapes of DESIGN section 1 (ModelLayout's
//                           ParamTable), so mamba_ssm / PyTorch load them unchanged; __metadata__ holds
//                           the format version, model and train configs, feature statistics and names,
//                           the data config (when recorded), the step and a save id; the safetensors
//                           layer adds CRC-32 checksums of the tensor data and of the metadata.
//   P + ".optim.safetensors" the AdamW moments ("exp_avg.<name>", "exp_avg_sq.<name>") and the counters
//                           (step, adam_step, skipped_total, seed) with the same save id; a carry-trained
//                           model's last checkpoint adds its lanes' carried states ("carry.conv", "carry.ssm").
// Both become current in one atomic step (core/atomic_file.h, AtomicFileSet: temporary files, then a journal
// renamed last, then the renames it lists): a kill leaves the old pair or the new one (completed from the
// journal at the run's next start), never a torn file; a sidecar from another save is detected on load.
// The arena padding between tensors is not stored (it is always zero).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/atomic_file.h"
#include "data/panel.h"
#include "mlalpha/config.h"
#include "model/layout.h"

namespace mlalpha {

// Everything a trainer needs to continue bit-exactly. params, m, v use the arena layout
// (ModelLayout::table.total() floats, padding zero). The batch sampler is a pure function of
// (seed, step), so these two numbers are its whole state; train.state = "carry" adds the states its lanes carry
// into the next step (the sampler's position is the step).
struct TrainState {
  std::vector<float> params, m, v;
  // train.state = "carry": the states after the last step, layer-major (model/layer_shapes.h, CarryState):
  // conv (NL, B, W − 1, conv_dim), ssm (NL, B, H, P, N), fp32 as the trainer holds them. Empty otherwise (and
  // before the first step: zeros).
  std::vector<float> carry_conv, carry_ssm;
  int64_t step = 0;           // steps taken (drives the schedule and the sampler)
  int64_t adam_step = 0;      // AdamW updates applied (drives the bias corrections) = step − skipped_total
  int64_t skipped_total = 0;  // steps skipped for a non-finite gradient norm
  uint64_t seed = 0;          // the sampler's seed (= TrainConfig::seed of the run)
};

struct CheckpointMeta {
  ModelConfig model;
  TrainConfig train;
  FeatureStats stats;  // empty, or (F) each: inference normalises with these
  std::vector<std::string> feature_names, target_names;  // empty, or (F) and (K)
  // The run's record as a JSON object: {"settings": the [data] and [split] settings as TOML, "fold": the
  // walk-forward fold, "fingerprint": the data's} (src/run/run.cpp), so eval / predict / resume find the
  // data the model was trained on. Empty: not recorded (older checkpoints); metadata 'data_config'.
  std::string data_json;
};

// The weights file alone (predict / eval): no sidecar needed.
struct CheckpointWeights {
  CheckpointMeta meta;
  int64_t step = 0;
  std::vector<float> params;  // arena layout of ModelLayout(meta.model)
};

struct Checkpoint {
  CheckpointMeta meta;
  TrainState state;
};

constexpr int kCheckpointFormatVersion = 1;

inline std::string optim_sidecar_path(const std::string& path) { return path + ".optim.safetensors"; }

// Throws unless `s` can be loaded into a trainer of `n` arena floats and train.seed `seed`: params, m and v of
// n floats each, consistent counters, the same seed. Messages start with `who` ("CpuTrainer::load_state").
void check_train_state(const TrainState& s, size_t n, uint64_t seed, const std::string& who);
// Throws unless s.carry_conv and s.carry_ssm are whole lanes of the model's carried states (the same lane count in
// both; none at all is fine) and finite. Messages start with `who`.
void check_carry_sizes(const TrainState& s, const ModelConfig& c, const std::string& who);

// Writes P and its sidecar atomically. Checks that meta.model is the layout's config, the arenas have
// table.total() floats and only finite values (a diverged model is refused, naming the tensor), the
// counters are consistent, the stats/names have F and K entries (or none) and data_json is empty or a
// JSON object.
void save_checkpoint(const std::string& path, const ModelLayout& layout, const TrainState& state,
                     const CheckpointMeta& meta);
// The same checks; P and its sidecar join `set` (a run's checkpoint commits with its record: run/recorder.cpp).
void write_checkpoint(AtomicFileSet& set, const std::string& path, const ModelLayout& layout, const TrainState& state,
                      const CheckpointMeta& meta);

// Weights only. The tensors must be exactly those of ModelLayout(meta.model) (names, shapes) and hold
// finite values only (a NaN or ±Inf is an error naming the tensor and the element); the checksums
// must match when present (files without them load unchecked).
CheckpointWeights load_checkpoint_weights(const std::string& path);
// Weights only, into a model of config `expect`: a different config or tensor shape is an error naming
// the tensor (or field) and both shapes (values).
CheckpointWeights load_checkpoint_weights(const std::string& path, const ModelConfig& expect);

// Weights + sidecar (resume). The sidecar must exist and come from the same save (save id and step).
Checkpoint load_checkpoint(const std::string& path);
Checkpoint load_checkpoint(const std::string& path, const ModelConfig& expect);

}  // namespace mlalpha
