#include "model/model_gpu.h"

#include <algorithm>

#include "model/layer_shapes.h"
#include "ops/cast/cast.h"

namespace mlalpha {
namespace {
// The layer's op parameters; the SSD's chunk products run in the model's precision like the GEMMs.
LayerShapes shapes(const ModelConfig& c, int B, int L, Precision precision) {
  LayerShapes s(c, B, L);
  s.ssd.precision = precision;
  return s;
}
}  // namespace

DeviceBuffer<float> GpuModel::alloc(size_t n) {
  bytes_ += n * sizeof(float);
  return DeviceBuffer<float>(n);
}
DeviceBuffer<__nv_bfloat16> GpuModel::alloc16(size_t n) {
  bytes_ += n * sizeof(__nv_bfloat16);
  return DeviceBuffer<__nv_bfloat16>(n);
}

GpuModel::GpuModel(Context& ctx, const ModelLayout& layout, int B, int L, Precision precision)
    : ctx_(ctx),
      lay_(layout),
      B_(B),
      L_(L),
      M_(B * L),
      gemm_(ctx, precision),
      side_ws_(Context::kWorkspaceBytes),
      gemm_side_(ctx.blas(), side_ws_.data(), side_ws_.bytes(), precision) {
  require(B >= 1 && L >= 1, "GpuModel: B and L must be >= 1, got B=" + std::to_string(B) + " L=" + std::to_string(L));
  const ModelConfig& c = lay_.cfg;
  const LayerShapes s(c, B, L);
  const size_t M = size_t(M_);
  acts_.resize(c.NL);
  for (LayerActs& a : acts_) {
    a.h_in = alloc(M * s.D);
    if (is_bf16()) a.hn16 = alloc16(M * s.D);
    else a.hn = alloc(M * s.D);
    a.rstd = alloc(M);
    a.zx = alloc(M * s.proj);
    a.xbc = alloc(M * s.cd);
    a.delta = alloc(M * s.H);
    a.y = alloc(M * s.di);
    if (is_bf16()) a.gout16 = alloc16(M * s.di);
    else a.gout = alloc(M * s.di);
    a.grstd = alloc(M * c.G);
    a.states = alloc(gpu::ssd_saved_floats(s.ssd));  // the chunk states and each chunk's C·Bᵀ
  }
  h_ = alloc(M * s.D);
  if (is_bf16()) hfn16_ = alloc16(M * s.D);
  else hfn_ = alloc(M * s.D);
  rstdf_ = alloc(M);
  out_ = alloc(M * c.K);
  dout_ = alloc(M * c.K);
  loss_ = alloc(1);
  count_ = DeviceBuffer<int>(1);
  dhfn_ = alloc(M * s.D);
  dh_ = alloc(M * s.D);
  dg_ = alloc(M * s.di);
  dy_ = alloc(M * s.di);
  if (!is_bf16()) dzx_ = alloc(M * s.proj);  // bf16: dzx16_ only
  dxbc_ = alloc(M * s.cd);
  ddelta_ = alloc(M * s.H);
  dhn_ = alloc(M * s.D);
  if (is_bf16()) {
    x16_ = alloc16(M * c.F);
    dout16_ = alloc16(M * c.K);
    dh16_ = alloc16(M * s.D);
    dzx16_ = alloc16(M * s.proj);
  }
  // One scratch buffer serves every op in turn (stream order makes the reuse safe).
  const size_t ws = std::max({gpu::rmsnorm_bwd_workspace_floats(s.norm),
                              gpu::linear_bwd_workspace_floats(s.input),
                              gpu::linear_bwd_workspace_floats(s.head),
                              gpu::conv1d_silu_bwd_workspace_floats(s.conv),
                              gpu::dt_softplus_bwd_workspace_floats(s.dt),
                              gpu::ssd_bwd_workspace_floats(s.ssd),
                              gpu::gated_rmsnorm_bwd_workspace_floats(s.gnorm),
                              gpu::loss_workspace_floats_any(B, L, c.K), size_t(1)});
  ws_ = alloc(ws);
}

LossParams GpuModel::loss_params(const TrainConfig& tc, int G) const {
  return {B_, L_, lay_.cfg.K, tc.loss, tc.huber_delta, tc.burn_in, G};
}

float* GpuModel::resid(int l) { return l < lay_.cfg.NL ? acts_[l].h_in.data() : h_.data(); }

void GpuModel::forward(const float* P, const float* x, const bf16* P16) {
  x_ = x;
  if (is_bf16()) {
    require(P16 != nullptr, "GpuModel::forward: bf16 precision needs the weights' bf16 copy");
    return forward_bf16(P, P16);
  }
  const ModelConfig& c = lay_.cfg;
  const LayerShapes s = shapes(c, B_, L_, gemm_.precision);
  cudaStream_t st = ctx_.stream();
  // The residual stream moves forward through buffers, never in place: h_0 = resid(0) is written by the
  // input projection, layer l reads h_l = resid(l) and writes h_{l+1} = h_l + mixer(h_l) to resid(l + 1),
  // so every layer's input stays where its backward (rmsnorm_bwd) reads it, without a copy.
  gpu::linear_fwd(gemm_, s.input, {.x = x, .w = P + lay_.in_w, .b = P + lay_.in_b}, resid(0), st);
  for (int l = 0; l < c.NL; ++l) {
    const LayerOffsets& o = lay_.layers[l];
    LayerActs& a = acts_[l];
    const float* h = resid(l);
    gpu::rmsnorm_fwd(s.norm, {.x = h, .w = P + o.norm_w}, a.hn.data(), a.rstd.data(), st);
    gpu::linear_fwd(gemm_, s.in_proj, {.x = a.hn.data(), .w = P + o.in_proj_w}, a.zx.data(), st);
    const ZxCols<const float> zx = zx_cols<const float>(s, a.zx.data());
    gpu::conv1d_silu_fwd(s.conv, {.x = zx.xBC, .w = P + o.conv_w, .bias = P + o.conv_b}, a.xbc.data(), st);
    gpu::dt_softplus_fwd(s.dt, {.dt = zx.dt, .dt_bias = P + o.dt_bias}, a.delta.data(), st);
    const XbcCols<const float> xbc = xbc_cols<const float>(s, a.xbc.data());
    gpu::ssd_fwd(s.ssd,
                 {.x = xbc.x, .delta = a.delta.data(), .A_log = P + o.A_log, .Bm = xbc.B, .Cm = xbc.C,
                  .Dskip = P + o.D},
                 a.y.data(), a.states.data(), st);
    gpu::gated_rmsnorm_fwd(s.gnorm, {.y = a.y.data(), .z = zx.z, .w = P + o.gnorm_w}, a.gout.data(),
                           a.grstd.data(), st);
    // h_{l+1} (M, D) = h_l + gout · out_projᵀ: the residual add is the GEMM epilogue (C = h_l, beta = 1,
    // D = h_{l+1}, out of place), so the mixer output is never stored and no add kernel runs.
    gpu::linear_fwd_add(gemm_, s.out_proj, {.x = a.gout.data(), .w = P + o.out_proj_w}, h, resid(l + 1), st);
  }
  gpu::rmsnorm_fwd(s.norm, {.x = h_.data(), .w = P + lay_.norm_f}, hfn_.data(), rstdf_.data(), st);
  gpu::linear_fwd(gemm_, s.head, {.x = hfn_.data(), .w = P + lay_.head_w, .b = P + lay_.head_b}, out_.data(), st);
}

void GpuModel::loss(const float* y, const LossParams& lp, float* loss_out) {
  require(lp.B == B_ && lp.L == L_ && lp.K == lay_.cfg.K, "GpuModel::loss: shape differs from the model's (B, L, K)");
  gpu::loss_fwd_bwd(lp, {.out = out_.data(), .y = y},
                    {.loss = loss_out ? loss_out : loss_.data(), .count = count_.data(), .dout = dout_.data()}, ws_.data(), ctx_.stream());
}

void GpuModel::backward(const float* P, float* Gr, float* dx, const bf16* P16) {
  if (is_bf16()) {
    require(P16 != nullptr, "GpuModel::backward: bf16 precision needs the weights' bf16 copy");
    return backward_bf16(P, P16, Gr, dx);
  }
  const ModelConfig& c = lay_.cfg;
  const LayerShapes s = shapes(c, B_, L_, gemm_.precision);
  cudaStream_t st = ctx_.stream();
  float* ws = ws_.data();
  gpu::linear_bwd(gemm_, s.head, {.x = hfn_.data(), .w = P + lay_.head_w}, dout_.data(),
                  {.dx = dhfn_.data(), .dw = Gr + lay_.head_w, .db = Gr + lay_.head_b}, ws, st);
  gpu::rmsnorm_bwd(s.norm, {.x = h_.data(), .w = P + lay_.norm_f}, rstdf_.data(), dhfn_.data(),
                   {.dx = dh_.data(), .dw = Gr + lay_.norm_f}, false, ws, st);
  // Each layer's two weight-gradient GEMMs go to the side stream as soon as their inputs are ready and run
  // alongside the main stream's chain (nothing on it reads dW). The main stream waits only where it is
  // about to overwrite what they read: dh_ (out_proj's dy, rewritten by the layer's last RMSNorm backward;
  // slot 0) and dzx_ (in_proj's dy, rewritten by the next layer's gated-norm backward; slot 1).
  for (int l = c.NL - 1; l >= 0; --l) {
    const LayerOffsets& o = lay_.layers[l];
    const LayerActs& a = acts_[l];
    gpu::linear_bwd(gemm_, s.out_proj, {.w = P + o.out_proj_w}, dh_.data(), {.dx = dg_.data()}, ws, st);
    side_.fork(st);
    gpu::linear_bwd(gemm_side_, s.out_proj, {.x = a.gout.data()}, dh_.data(), {.dw = Gr + o.out_proj_w}, nullptr,
                    side_.get());
    side_.done(0);
    if (l < c.NL - 1) side_.join(st, 1);
    // The activations' column slices and the same slices of their gradient buffers.
    const ZxCols<const float> zx = zx_cols<const float>(s, a.zx.data());
    const ZxCols<float> dzx = zx_cols(s, dzx_.data());
    const XbcCols<const float> xbc = xbc_cols<const float>(s, a.xbc.data());
    const XbcCols<float> dxbc = xbc_cols(s, dxbc_.data());
    gpu::gated_rmsnorm_bwd(s.gnorm, {.y = a.y.data(), .z = zx.z, .w = P + o.gnorm_w}, a.grstd.data(), dg_.data(),
                           {.dy = dy_.data(), .dz = dzx.z, .dw = Gr + o.gnorm_w}, ws, st);
    gpu::ssd_bwd(s.ssd,
                 {.x = xbc.x, .delta = a.delta.data(), .A_log = P + o.A_log, .Bm = xbc.B, .Cm = xbc.C,
                  .Dskip = P + o.D},
                 a.states.data(), dy_.data(),
                 {.dx = dxbc.x, .ddelta = ddelta_.data(), .dA_log = Gr + o.A_log, .dB = dxbc.B, .dC = dxbc.C,
                  .dD = Gr + o.D},
                 ws, st);
    gpu::dt_softplus_bwd(s.dt, {.dt = zx.dt, .dt_bias = P + o.dt_bias}, ddelta_.data(),
                         {.ddt = dzx.dt, .ddt_bias = Gr + o.dt_bias}, ws, st);
    gpu::conv1d_silu_bwd(s.conv, {.x = zx.xBC, .w = P + o.conv_w, .bias = P + o.conv_b}, dxbc_.data(),
                         {.dx = dzx.xBC, .dw = Gr + o.conv_w, .dbias = Gr + o.conv_b}, ws, st);
    gpu::linear_bwd(gemm_, s.in_proj, {.w = P + o.in_proj_w}, dzx_.data(), {.dx = dhn_.data()}, ws, st);
    side_.fork(st);
    gpu::linear_bwd(gemm_side_, s.in_proj, {.x = a.hn.data()}, dzx_.data(), {.dw = Gr + o.in_proj_w}, nullptr,
                    side_.get());
    side_.done(1);
    side_.join(st, 0);
    gpu::rmsnorm_bwd(s.norm, {.x = a.h_in.data(), .w = P + o.norm_w}, a.rstd.data(), dhn_.data(),
                     {.dx = dh_.data(), .dw = Gr + o.norm_w}, true, ws, st);
  }
  side_.join(st, 1);  // every weight gradient is in before the optimizer reads them
  gpu::linear_bwd(gemm_, s.input, {.x = x_, .w = P + lay_.in_w}, dh_.data(),
                  {.dx = dx, .dw = Gr + lay_.in_w, .db = Gr + lay_.in_b}, ws, st);
}

// BF16 (docs/decisions.md "bf16"): the same computation with every GEMM on bf16 operands (the weights'
// bf16 copy P16, activations and gradients rounded to bf16 where they are written) and fp32 accumulation;
// the residual stream, norms' statistics, conv, softplus, the SSD's decays and states and all gradients
// that are not GEMM operands stay fp32. The bf16 operands are written by their producers (the norms) or,
// the backward's dzx by its three producers (gated norm, softplus, conv), and the two whose producer is
// outside the model (x, dout) by one cast each.
void GpuModel::forward_bf16(const float* P, const bf16* P16) {
  const ModelConfig& c = lay_.cfg;
  const LayerShapes s = shapes(c, B_, L_, gemm_.precision);
  cudaStream_t st = ctx_.stream();
  gpu::cast_bf16(x_, x16_.data(), size_t(M_) * c.F, st);
  gpu::linear_fwd(gemm_, s.input, {.x = x16_.data(), .w = P16 + lay_.in_w, .b = P + lay_.in_b}, resid(0), st);
  for (int l = 0; l < c.NL; ++l) {
    const LayerOffsets& o = lay_.layers[l];
    LayerActs& a = acts_[l];
    const float* h = resid(l);
    gpu::rmsnorm_fwd(s.norm, {.x = h, .w = P + o.norm_w}, a.hn16.data(), a.rstd.data(), st);
    gpu::linear_fwd(gemm_, s.in_proj, {.x = a.hn16.data(), .w = P16 + o.in_proj_w}, a.zx.data(), st);
    const ZxCols<const float> zx = zx_cols<const float>(s, a.zx.data());
    gpu::conv1d_silu_fwd(s.conv, {.x = zx.xBC, .w = P + o.conv_w, .bias = P + o.conv_b}, a.xbc.data(), st);
    gpu::dt_softplus_fwd(s.dt, {.dt = zx.dt, .dt_bias = P + o.dt_bias}, a.delta.data(), st);
    const XbcCols<const float> xbc = xbc_cols<const float>(s, a.xbc.data());
    gpu::ssd_fwd(s.ssd,
                 {.x = xbc.x, .delta = a.delta.data(), .A_log = P + o.A_log, .Bm = xbc.B, .Cm = xbc.C,
                  .Dskip = P + o.D},
                 a.y.data(), a.states.data(), st);
    gpu::gated_rmsnorm_fwd(s.gnorm, {.y = a.y.data(), .z = zx.z, .w = P + o.gnorm_w}, a.gout16.data(),
                           a.grstd.data(), st);
    gpu::linear_fwd_add(gemm_, s.out_proj, {.x = a.gout16.data(), .w = P16 + o.out_proj_w}, h, resid(l + 1), st);
  }
  gpu::rmsnorm_fwd(s.norm, {.x = h_.data(), .w = P + lay_.norm_f}, hfn16_.data(), rstdf_.data(), st);
  gpu::linear_fwd(gemm_, s.head, {.x = hfn16_.data(), .w = P16 + lay_.head_w, .b = P + lay_.head_b}, out_.data(),
                  st);
}

// The fp32 backward's order and side-stream overlap (see backward()); the side stream's GEMMs read dh16_
// and dzx16_, which are rewritten at the same points as dh_ and dzx_, so the same two joins guard them.
void GpuModel::backward_bf16(const float* P, const bf16* P16, float* Gr, float* dx) {
  const ModelConfig& c = lay_.cfg;
  const LayerShapes s = shapes(c, B_, L_, gemm_.precision);
  cudaStream_t st = ctx_.stream();
  float* ws = ws_.data();
  gpu::cast_bf16(dout_.data(), dout16_.data(), size_t(M_) * c.K, st);
  gpu::linear_bwd(gemm_, s.head, {.x = hfn16_.data(), .w = P16 + lay_.head_w}, {dout16_.data(), dout_.data()},
                  {.dx = dhfn_.data(), .dw = Gr + lay_.head_w, .db = Gr + lay_.head_b}, ws, st);
  gpu::rmsnorm_bwd(s.norm, {.x = h_.data(), .w = P + lay_.norm_f}, rstdf_.data(), dhfn_.data(),
                   {.dx = dh_.data(), .dw = Gr + lay_.norm_f}, false, ws, st, dh16_.data());
  for (int l = c.NL - 1; l >= 0; --l) {
    const LayerOffsets& o = lay_.layers[l];
    const LayerActs& a = acts_[l];
    gpu::linear_bwd(gemm_, s.out_proj, {.w = P16 + o.out_proj_w}, {dh16_.data()}, {.dx = dg_.data()}, ws, st);
    side_.fork(st);
    gpu::linear_bwd(gemm_side_, s.out_proj, {.x = a.gout16.data()}, {dh16_.data()}, {.dw = Gr + o.out_proj_w},
                    nullptr, side_.get());
    side_.done(0);
    if (l < c.NL - 1) side_.join(st, 1);
    const ZxCols<const float> zx = zx_cols<const float>(s, a.zx.data());
    const ZxCols<bf16> dzx = zx_cols(s, dzx16_.data());  // in_proj's dy, written in bf16 by its three producers
    const XbcCols<const float> xbc = xbc_cols<const float>(s, a.xbc.data());
    const XbcCols<float> dxbc = xbc_cols(s, dxbc_.data());
    gpu::gated_rmsnorm_bwd(s.gnorm, {.y = a.y.data(), .z = zx.z, .w = P + o.gnorm_w}, a.grstd.data(), dg_.data(),
                           {.dy = dy_.data(), .dw = Gr + o.gnorm_w}, ws, st, dzx.z);
    gpu::ssd_bwd(s.ssd,
                 {.x = xbc.x, .delta = a.delta.data(), .A_log = P + o.A_log, .Bm = xbc.B, .Cm = xbc.C,
                  .Dskip = P + o.D},
                 a.states.data(), dy_.data(),
                 {.dx = dxbc.x, .ddelta = ddelta_.data(), .dA_log = Gr + o.A_log, .dB = dxbc.B, .dC = dxbc.C,
                  .dD = Gr + o.D},
                 ws, st);
    gpu::dt_softplus_bwd(s.dt, {.dt = zx.dt, .dt_bias = P + o.dt_bias}, ddelta_.data(),
                         {.ddt_bias = Gr + o.dt_bias}, ws, st, dzx.dt);
    gpu::conv1d_silu_bwd(s.conv, {.x = zx.xBC, .w = P + o.conv_w, .bias = P + o.conv_b}, dxbc_.data(),
                         {.dw = Gr + o.conv_w, .dbias = Gr + o.conv_b}, ws, st, dzx.xBC);
    gpu::linear_bwd(gemm_, s.in_proj, {.w = P16 + o.in_proj_w}, {dzx16_.data()}, {.dx = dhn_.data()}, ws, st);
    side_.fork(st);
    gpu::linear_bwd(gemm_side_, s.in_proj, {.x = a.hn16.data()}, {dzx16_.data()}, {.dw = Gr + o.in_proj_w}, nullptr,
                    side_.get());
    side_.done(1);
    side_.join(st, 0);
    gpu::rmsnorm_bwd(s.norm, {.x = a.h_in.data(), .w = P + o.norm_w}, a.rstd.data(), dhn_.data(),
                     {.dx = dh_.data(), .dw = Gr + o.norm_w}, true, ws, st, dh16_.data());
  }
  side_.join(st, 1);
  gpu::linear_bwd(gemm_, s.input, {.x = x16_.data(), .w = P16 + lay_.in_w}, {dh16_.data(), dh_.data()},
                  {.dx = dx, .dw = Gr + lay_.in_w, .db = Gr + lay_.in_b}, ws, st);
}

}  // namespace mlalpha
