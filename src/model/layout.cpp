#include "model/layout.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/rng.h"

namespace mlalpha {

ModelLayout::ModelLayout(const ModelConfig& c) : cfg(c) {
  cfg.validate();
  const int64_t D = c.D, F = c.F, K = c.K, di = c.d_inner(), H = c.H();
  in_w = table.add("input_proj.weight", {D, F}, true);
  in_b = table.add("input_proj.bias", {D}, false);
  for (int i = 0; i < c.NL; ++i) {
    const std::string pre = "layers." + std::to_string(i) + ".";
    const std::string mx = pre + "mixer.";
    LayerOffsets o{};
    o.norm_w = table.add(pre + "norm.weight", {D}, false);
    o.in_proj_w = table.add(mx + "in_proj.weight", {c.in_proj_dim(), D}, true);
    o.conv_w = table.add(mx + "conv1d.weight", {c.conv_dim(), 1, c.W}, true);
    o.conv_b = table.add(mx + "conv1d.bias", {c.conv_dim()}, false);
    o.dt_bias = table.add(mx + "dt_bias", {H}, false);
    o.A_log = table.add(mx + "A_log", {H}, false);
    o.D = table.add(mx + "D", {H}, false);
    o.gnorm_w = table.add(mx + "norm.weight", {di}, false);
    o.out_proj_w = table.add(mx + "out_proj.weight", {D, di}, true);
    layers.push_back(o);
  }
  norm_f = table.add("norm_f.weight", {D}, false);
  head_w = table.add("head.weight", {K, D}, true);
  head_b = table.add("head.bias", {K}, false);
}

std::vector<float> init_params(const ModelLayout& lay, uint64_t seed) {
  const ModelConfig& c = lay.cfg;
  std::vector<float> w(lay.table.total(), 0.0f);
  // One RNG stream per tensor (its index in the table): adding a tensor later leaves the others' values.
  uint64_t stream = 0;
  auto uniform = [&](size_t off, size_t n, double bound) {
    HostRng r(seed, stream++);
    for (size_t i = 0; i < n; ++i) w[off + i] = static_cast<float>(r.uniform(-bound, bound));
  };
  auto fill = [&](size_t off, size_t n, float v) {
    ++stream;
    std::fill(w.begin() + off, w.begin() + off + n, v);
  };
  const int di = c.d_inner(), H = c.H(), D = c.D, cd = c.conv_dim();
  uniform(lay.in_w, size_t(D) * c.F, 1.0 / std::sqrt(double(c.F)));  // PyTorch Linear default U(±1/√fan_in)
  // The input bias too (PyTorch's Linear default): with a zero bias an all-missing input row (x = 0 after
  // the NaN fill) gives h = 0 exactly, where every RMSNorm's Jacobian is 1/√ε ≈ 316 and the first
  // gradients grow by orders of magnitude per layer (docs/data.md, "Missing rows").
  uniform(lay.in_b, D, 1.0 / std::sqrt(double(c.F)));
  for (const LayerOffsets& o : lay.layers) {
    fill(o.norm_w, D, 1.0f);
    uniform(o.in_proj_w, size_t(c.in_proj_dim()) * D, 1.0 / std::sqrt(double(D)));
    uniform(o.conv_w, size_t(cd) * c.W, 1.0 / std::sqrt(double(c.W)));  // depthwise: fan_in = W
    uniform(o.conv_b, cd, 1.0 / std::sqrt(double(c.W)));
    {  // dt = exp(U(ln dt_min, ln dt_max)) clamped ≥ floor; dt_bias = softplus⁻¹(dt) = dt + ln(−expm1(−dt))
      HostRng r(seed, stream++);
      for (int h = 0; h < H; ++h) {
        double dt = std::exp(r.uniform(std::log(double(c.dt_min)), std::log(double(c.dt_max))));
        dt = std::max(dt, double(c.dt_init_floor));
        w[o.dt_bias + h] = static_cast<float>(dt + std::log(-std::expm1(-dt)));
      }
    }
    {  // A ~ U(1, 16), A_log = ln A
      HostRng r(seed, stream++);
      for (int h = 0; h < H; ++h) w[o.A_log + h] = static_cast<float>(std::log(r.uniform(1.0, 16.0)));
    }
    fill(o.D, H, 1.0f);
    fill(o.gnorm_w, di, 1.0f);
    // out_proj: U(±1/√d_inner) then scaled by 1/√NL
    uniform(o.out_proj_w, size_t(D) * di, 1.0 / std::sqrt(double(di)) / std::sqrt(double(c.NL)));
  }
  fill(lay.norm_f, D, 1.0f);
  uniform(lay.head_w, size_t(c.K) * D, 1.0 / std::sqrt(double(D)));
  fill(lay.head_b, c.K, 0.0f);
  return w;
}

}  // namespace mlalpha
