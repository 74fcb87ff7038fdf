#pragma once
// Where each tensor of the perception model lives in the flat arenas (DESIGN section 1 names and
// shapes), and its initialisation. Both backends and the checkpoint code use this one layout.
#include <cstdint>
#include <vector>

#include "core/param_table.h"
#include "mlalpha/config_types.h"

namespace mlalpha {

struct LayerOffsets {
  size_t norm_w;      // layers.i.norm.weight              (D)
  size_t in_proj_w;   // layers.i.mixer.in_proj.weight     (in_proj_dim, D)
  size_t conv_w;      // layers.i.mixer.conv1d.weight      (conv_dim, 1, W)
  size_t conv_b;      // layers.i.mixer.conv1d.bias        (conv_dim)
  size_t dt_bias;     // layers.i.mixer.dt_bias            (H)
  size_t A_log;       // layers.i.mixer.A_log              (H)
  size_t D;           // layers.i.mixer.D                  (H)
  size_t gnorm_w;     // layers.i.mixer.norm.weight        (d_inner)
  size_t out_proj_w;  // layers.i.mixer.out_proj.weight    (D, d_inner)
};

struct ModelLayout {
  explicit ModelLayout(const ModelConfig& cfg);
  ModelConfig cfg;
  ParamTable table;
  size_t in_w, in_b;  // input_proj.{weight (D, F), bias (D)}
  std::vector<LayerOffsets> layers;
  size_t norm_f;          // norm_f.weight (D)
  size_t head_w, head_b;  // head.{weight (K, D), bias (K)}
};

// Parameters as DESIGN section 1 initialises them, reproducible from the seed: (table.total()).
std::vector<float> init_params(const ModelLayout& layout, uint64_t seed);

}  // namespace mlalpha
