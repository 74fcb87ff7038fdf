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

GpuModel::GpuModel(Context& ctx, const ModelLayout& layout, int B, int L, Precision precision, ModelUse use)
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
  // The buffers are sized from the fp32 shapes, as the memory estimate (train/train_plan.cpp) sizes them: the
  // SSD's saved buffer and scratch of the chunk-parallel path are at least those of the walks that bf16 mode
  // takes (ssd_uses_walk), which use a prefix of each.
  const LayerShapes s(c, B, L);
  const size_t M = size_t(M_);
  xbc16_ = is_bf16() && gpu::ssd_uses_walk(shapes(c, B, L, precision).ssd);
  acts_.resize(c.NL);
  for (LayerActs& a : acts_) {
    a.h_in = alloc(M * s.D);
    if (is_bf16()) a.hn16 = alloc16(M * s.D);
    else a.hn = alloc(M * s.D);
    a.rstd = alloc(M);
    if (is_bf16()) a.zx16 = alloc16(M * s.proj);
    else a.zx = alloc(M * s.proj);
    if (xbc16_) a.xbc16 = alloc16(M * s.cd);
    else a.xbc = alloc(M * s.cd);
    a.delta = alloc(M * s.H);
    if (is_bf16()) a.y16 = alloc16(M * s.di);
    else a.y = alloc(M * s.di);
    if (is_bf16()) a.gout16 = alloc16(M * s.di);
    else a.gout = alloc(M * s.di);
    a.grstd = alloc(M * c.G);
    a.states = alloc(gpu::ssd_saved_floats(s.ssd));  // the chunk states (and each chunk's C·Bᵀ, chunk-parallel path)
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
  if (is_bf16()) dg16_ = alloc16(M * s.di);
  else dg_ = alloc(M * s.di);
  if (xbc16_) dy16_ = alloc16(M * s.di);
  else dy_ = alloc(M * s.di);
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
  // One scratch buffer serves the SSD backward and the loss in turn (stream order makes the reuse safe);
  // the parameter partials have a region per op, summed together at the end of backward(): a training model's.
  ws_ = alloc(gpu_scratch_floats(s, B, L, c.K));
  if (use == ModelUse::kTrain) partials_ = alloc(GradPartials(s, c.NL, precision).total);
}

LossParams GpuModel::loss_params(const TrainConfig& tc, int G) const {
  return {B_, L_, lay_.cfg.K, tc.loss, tc.huber_delta, tc.burn_in, G};
}

float* GpuModel::resid(int l) { return l < lay_.cfg.NL ? acts_[l].h_in.data() : h_.data(); }

// One GEMM of the model in its precision: fp32 operands (FP32, TF32) or their bf16 forms with the weights'
// bf16 copy (BF16). x, w_off name the input and the weight; r, when non-null, is the residual added.
void GpuModel::linear_fwd(gpu::Gemm& g, const LinearParams& p, Operand x, size_t w_off, const float* b,
                          const float* r, float* y, cudaStream_t st) {
  if (is_bf16()) {
    const gpu::LinearInputsBf16 in{x.b16, P16_ + w_off, b};
    if (r) gpu::linear_fwd_add(g, p, in, r, y, st);
    else gpu::linear_fwd(g, p, in, y, st);
  } else {
    const LinearInputs<float> in{.x = x.f32, .w = P_ + w_off, .b = b};
    if (r) gpu::linear_fwd_add(g, p, in, r, y, st);
    else gpu::linear_fwd(g, p, in, y, st);
  }
}

// The backward of one GEMM (linear_bwd's grads): dx reads the weight, dw reads x; dy.f32 feeds db.
// db_part: db's partials region (GradPartials) when grads.db is set; dw_part (BF16): dW's K-split partials
// region when grads.dw is set (null where the shape takes no split); both sums join colsums_.
void GpuModel::linear_bwd(gpu::Gemm& g, const LinearParams& p, Operand x, size_t w_off, Operand dy,
                          const LinearGrads<float>& grads, cudaStream_t st, float* db_part, float* dw_part) {
  if (is_bf16())
    gpu::linear_bwd(g, p, {x.b16, P16_ + w_off, nullptr}, {dy.b16, dy.f32}, grads, db_part, st, &colsums_,
                    dw_part);
  else gpu::linear_bwd(g, p, {.x = x.f32, .w = P_ + w_off}, dy.f32, grads, db_part, st, &colsums_);
}

// BF16 (docs/decisions.md "bf16"): every GEMM on bf16 operands (the weights' bf16 copy P16, activations and
// gradients rounded to bf16 where they are written) with fp32 accumulation; the residual stream, the norms'
// statistics, the math of conv, softplus and the gated norm, the SSD's inputs, decays and states and every
// gradient that is not a GEMM operand stay fp32. The bf16 operands are written by their producers: the norms
// (hn, gout, hfn, and dh's copy), the backward's dzx by its three producers (gated norm, softplus, conv); the two
// whose producer is outside the model (x, dout) by one cast each. Two GEMM outputs are stored in bf16 because
// only element-wise ops read them: in_proj's zx (read by conv, softplus, the gated norm) and out_proj's dx
// (read by the gated norm's backward), each the fp32 sum rounded once in the GEMM's epilogue.
void GpuModel::forward(const float* P, const float* x, const bf16* P16, const CarryState<float>* carry,
                       bool x16_written) {
  const bool h16 = is_bf16();
  require(!h16 || P16 != nullptr, "GpuModel::forward: bf16 precision needs the weights' bf16 copy");
  const ModelConfig& c = lay_.cfg;
  const LayerShapes s = shapes(c, B_, L_, gemm_.precision);
  cudaStream_t st = ctx_.stream();
  x_ = x, P_ = P, P16_ = P16;
  // Carry: the conv's in windows copied (zeros for a null pointer) before any layer writes an out window.
  const size_t nconv = carry_conv_floats(c, B_), nssm = carry_ssm_floats(c, B_);
  carried_ = carry != nullptr;
  require(!carry || (carry->rows == nullptr) == (carry->dates == nullptr), "GpuModel::forward: CarryState rows without dates");
  map_ = RowMap{B_, L_, carry ? carry->rows : nullptr, carry ? carry->dates : nullptr};
  if (map_.rows && outd_.size() == 0) {
    outd_ = DeviceBuffer<float>(size_t(M_) * c.K);
    doutd_ = DeviceBuffer<float>(size_t(M_) * c.K);
  }
  if (carry) {
    if (conv_in_.size() == 0) conv_in_ = DeviceBuffer<float>(size_t(c.NL) * nconv);
    if (carry->conv_in)
      MLALPHA_CUDA_CHECK(cudaMemcpyAsync(conv_in_.data(), carry->conv_in, conv_in_.bytes(), cudaMemcpyDeviceToDevice, st));
    else MLALPHA_CUDA_CHECK(cudaMemsetAsync(conv_in_.data(), 0, conv_in_.bytes(), st));
  }
  if (h16 && !x16_written) gpu::cast_bf16(x, x16_.data(), size_t(M_) * c.F, st);
  // The residual stream moves forward through buffers, never in place: h_0 = resid(0) is written by the
  // input projection, layer l reads h_l = resid(l) and writes h_{l+1} = h_l + mixer(h_l) to resid(l + 1),
  // so every layer's input stays where its backward (rmsnorm_bwd) reads it, without a copy.
  linear_fwd(gemm_, s.input, {x, x16_.data()}, lay_.in_w, P + lay_.in_b, nullptr, resid(0), st);
  for (int l = 0; l < c.NL; ++l) {
    const LayerOffsets& o = lay_.layers[l];
    LayerActs& a = acts_[l];
    const float* h = resid(l);
    const RmsNormInputs<float> norm_in{.x = h, .w = P + o.norm_w};
    if (h16) gpu::rmsnorm_fwd(s.norm, norm_in, a.hn16.data(), a.rstd.data(), st);
    else gpu::rmsnorm_fwd(s.norm, norm_in, a.hn.data(), a.rstd.data(), st);
    if (h16) gpu::linear_fwd(gemm_, s.in_proj, {a.hn16.data(), P16 + o.in_proj_w, nullptr}, a.zx16.data(), st);
    else linear_fwd(gemm_, s.in_proj, {a.hn.data(), nullptr}, o.in_proj_w, nullptr, nullptr, a.zx.data(), st);
    // zx in the precision's buffer (the other is empty: its slices stay null)
    const ZxCols<const float> zx = h16 ? ZxCols<const float>{} : zx_cols<const float>(s, a.zx.data());
    const ZxCols<const bf16> zx16 = h16 ? zx_cols<const bf16>(s, a.zx16.data()) : ZxCols<const bf16>{};
    const Conv1dInputs<float> conv_in{
        .x = zx.xBC, .w = P + o.conv_w, .bias = P + o.conv_b,
        .window0 = carry ? conv_in_.data() + l * nconv : nullptr,
        .window_last = carry && carry->conv_out && !map_.rows ? carry->conv_out + l * nconv : nullptr};
    if (h16) {
      // the conv and the softplus in one launch (conv1d.h conv1d_dt_fwd_bf16: the two ops' bits)
      const gpu::DtInputsBf16 dt_in{.dt = zx16.dt, .dt_bias = P + o.dt_bias};
      if (xbc16_) gpu::conv1d_dt_fwd_bf16(s.conv, zx16.xBC, conv_in, a.xbc16.data(), s.dt, dt_in, a.delta.data(), st);
      else gpu::conv1d_dt_fwd_bf16(s.conv, zx16.xBC, conv_in, a.xbc.data(), s.dt, dt_in, a.delta.data(), st);
    } else {
      gpu::conv1d_silu_fwd(s.conv, conv_in, a.xbc.data(), st);
      gpu::dt_softplus_fwd(s.dt, {.dt = zx.dt, .dt_bias = P + o.dt_bias}, a.delta.data(), st);
    }
    if (map_.rows) {  // padding rows: Δ = 0 moves no state; the conv's window ends at the last present row
      if (carry->conv_out) {
        float* tail = carry->conv_out + l * nconv;
        if (h16) gpu::window_tail(s.conv, map_, zx16.xBC, conv_in_.data() + l * nconv, tail, st);
        else gpu::window_tail(s.conv, map_, zx.xBC, conv_in_.data() + l * nconv, tail, st);
      }
      gpu::mask_rows(map_, s.H, s.H, a.delta.data(), st);
    }
    // xbc in the buffer of its precision (the other's slices are null; xbc16_: SsdXbcBf16 in place of x, Bm, Cm)
    const XbcCols<const float> xbc = xbc16_ ? XbcCols<const float>{} : xbc_cols<const float>(s, a.xbc.data());
    const XbcCols<const bf16> xbc16 = xbc16_ ? xbc_cols<const bf16>(s, a.xbc16.data()) : XbcCols<const bf16>{};
    const SsdInputs<float> ssd_in{.x = xbc.x, .delta = a.delta.data(), .A_log = P + o.A_log, .Bm = xbc.B, .Cm = xbc.C,
                                  .Dskip = P + o.D, .h0 = carry && carry->ssm_in ? carry->ssm_in + l * nssm : nullptr,
                                  .h_last = carry && carry->ssm_out ? carry->ssm_out + l * nssm : nullptr};
    if (xbc16_)
      gpu::ssd_fwd_bf16(s.ssd, ssd_in, SsdXbcBf16{.x = xbc16.x, .Bm = xbc16.B, .Cm = xbc16.C}, a.y16.data(),
                        a.states.data(), st);
    else if (h16) gpu::ssd_fwd_bf16(s.ssd, ssd_in, a.y16.data(), a.states.data(), st);
    else gpu::ssd_fwd(s.ssd, ssd_in, a.y.data(), a.states.data(), st);
    if (h16)
      gpu::gated_rmsnorm_fwd(s.gnorm, gpu::GatedNormInputsBf16{.y = a.y16.data(), .z = zx16.z, .w = P + o.gnorm_w},
                             a.gout16.data(), a.grstd.data(), st);
    else
      gpu::gated_rmsnorm_fwd(s.gnorm, GatedNormInputs<float>{.y = a.y.data(), .z = zx.z, .w = P + o.gnorm_w},
                             a.gout.data(), a.grstd.data(), st);
    // h_{l+1} (M, D) = h_l + gout · out_projᵀ: the residual add is the GEMM epilogue (C = h_l, beta = 1,
    // D = h_{l+1}, out of place), so the mixer output is never stored and no add kernel runs.
    linear_fwd(gemm_, s.out_proj, {a.gout.data(), a.gout16.data()}, o.out_proj_w, nullptr, h, resid(l + 1), st);
  }
  const RmsNormInputs<float> normf_in{.x = h_.data(), .w = P + lay_.norm_f};
  if (h16) gpu::rmsnorm_fwd(s.norm, normf_in, hfn16_.data(), rstdf_.data(), st);
  else gpu::rmsnorm_fwd(s.norm, normf_in, hfn_.data(), rstdf_.data(), st);
  linear_fwd(gemm_, s.head, {hfn_.data(), hfn16_.data()}, lay_.head_w, P + lay_.head_b, nullptr, out_.data(), st);
}

void GpuModel::loss(const float* y, const LossParams& lp, float* loss_out) {
  require(lp.B == B_ && lp.L == L_ && lp.K == lay_.cfg.K, "GpuModel::loss: shape differs from the model's (B, L, K)");
  // The MSE / Huber loss without a row map computes dout in its own gradient kernel, which also writes, in BF16,
  // dout's bf16 copy (the head's dy; the IC loss and a row map leave it to a cast at the start of backward()) and,
  // at K = 1, the head bias's per-chunk partials (linear_bias_grad's bits), which backward() only sums.
  const bool own_grad_kernel = !map_.rows && lp.kind != LossKind::IC;
  dout16_written_ = is_bf16() && own_grad_kernel;
  head_db_written_ = partials_.size() > 0 && own_grad_kernel && lp.K == 1;
  if (!map_.rows) {
    const LayerShapes s(lay_.cfg, B_, L_);
    float* db_part = head_db_written_ ? partials_.data() + GradPartials(s, lay_.cfg.NL, gemm_.precision).head_db
                                      : nullptr;
    gpu::loss_fwd_bwd(lp, {.out = out_.data(), .y = y},
                      {.loss = loss_out ? loss_out : loss_.data(), .count = count_.data(), .dout = dout_.data(),
                       .dout16 = dout16_written_ ? dout16_.data() : nullptr, .db_partial = db_part},
                      ws_.data(), ctx_.stream());
    return;
  }
  // Present rows first: the loss sees the predictions at their dates (y's order), its gradient goes back.
  cudaStream_t st = ctx_.stream();
  gpu::rows_to_dates(map_, lay_.cfg.K, out_.data(), outd_.data(), st);
  gpu::loss_fwd_bwd(lp, {.out = outd_.data(), .y = y},
                    {.loss = loss_out ? loss_out : loss_.data(), .count = count_.data(), .dout = doutd_.data()}, ws_.data(), st);
  gpu::dates_to_rows(map_, lay_.cfg.K, doutd_.data(), dout_.data(), st);
}

void GpuModel::backward(const float* P, float* Gr, float* dx, const bf16* P16) {
  const bool h16 = is_bf16();
  require(partials_.size() > 0, "GpuModel::backward: the model was built for forward passes only (ModelUse::kForward)");
  require(!h16 || P16 != nullptr, "GpuModel::backward: bf16 precision needs the weights' bf16 copy");
  const ModelConfig& c = lay_.cfg;
  const LayerShapes s = shapes(c, B_, L_, gemm_.precision);
  cudaStream_t st = ctx_.stream();
  float* ws = ws_.data();
  const GradPartials parts(s, c.NL, gemm_.precision);
  // A region of `n` floats, or null when empty (the shape takes no split of dW)
  auto region = [&](size_t off, size_t n) { return n > 0 ? partials_.data() + off : nullptr; };
  float* part = partials_.data();
  P_ = P, P16_ = P16;
  bf16* dh16 = h16 ? dh16_.data() : nullptr;  // RMSNorm's backward also writes dh's bf16 copy in bf16
  if (h16 && !dout16_written_) gpu::cast_bf16(dout_.data(), dout16_.data(), size_t(M_) * c.K, st);
  // the head bias: its partials written by loss() (head_db_written_), or here by linear_bwd
  linear_bwd(gemm_, s.head, {hfn_.data(), hfn16_.data()}, lay_.head_w, {dout_.data(), dout16_.data()},
             {.dx = dhfn_.data(), .dw = Gr + lay_.head_w, .db = head_db_written_ ? nullptr : Gr + lay_.head_b}, st,
             part + parts.head_db, region(parts.head_dw, parts.total - parts.head_dw));
  if (head_db_written_) gpu::linear_bias_grad_sum(s.head, part + parts.head_db, Gr + lay_.head_b, st, &colsums_);
  gpu::rmsnorm_bwd(s.norm, {.x = h_.data(), .w = P + lay_.norm_f}, rstdf_.data(), dhfn_.data(),
                   {.dx = dh_.data(), .dw = Gr + lay_.norm_f}, false, part + parts.final_norm, st, dh16, &colsums_);
  // Each layer's two weight-gradient GEMMs go to the side stream as soon as their inputs are ready and run
  // alongside the main stream's chain (nothing on it reads dW). The main stream waits only where it is
  // about to overwrite what they read: dh (out_proj's dy, rewritten by the layer's last RMSNorm backward;
  // slot 0) and dzx (in_proj's dy, rewritten by the next layer's gated-norm backward; slot 1), in either
  // precision's buffers.
  const Operand dh{dh_.data(), dh16_.data()}, dzx_op{dzx_.data(), dzx16_.data()};
  for (int l = c.NL - 1; l >= 0; --l) {
    const LayerOffsets& o = lay_.layers[l];
    const LayerActs& a = acts_[l];
    float* lp = part + parts.layer(l);  // this layer's partials: norm, gnorm, dt, conv, ssd
    float *p_norm = lp, *p_gnorm = lp + parts.norm, *p_dt = p_gnorm + parts.gnorm, *p_conv = p_dt + parts.dt;
    float* p_ssd = p_conv + parts.conv;
    float* p_in_dw = region(parts.layer(l) + parts.norm + parts.gnorm + parts.dt + parts.conv + parts.ssd, parts.in_dw);
    float* p_out_dw = region(parts.layer(l) + parts.per_layer - parts.out_dw, parts.out_dw);
    // dg (M, di) = dh · W_out: in bf16 (dg16_) in BF16, read only by the gated norm's backward
    if (h16) gpu::linear_bwd_dx(gemm_, s.out_proj, P16 + o.out_proj_w, dh16_.data(), dg16_.data(), st);
    else linear_bwd(gemm_, s.out_proj, {}, o.out_proj_w, dh, {.dx = dg_.data()}, st);
    side_.fork(st);
    linear_bwd(gemm_side_, s.out_proj, {a.gout.data(), a.gout16.data()}, o.out_proj_w, dh, {.dw = Gr + o.out_proj_w},
               side_.get(), nullptr, p_out_dw);
    side_.done(0);
    if (l < c.NL - 1) side_.join(st, 1);
    // The activations' column slices and the same slices of their gradient buffers; in bf16 in_proj's dy
    // exists only in bf16 (dzx16_), written by its three producers.
    const ZxCols<const float> zx = h16 ? ZxCols<const float>{} : zx_cols<const float>(s, a.zx.data());
    const ZxCols<const bf16> zx16 = h16 ? zx_cols<const bf16>(s, a.zx16.data()) : ZxCols<const bf16>{};
    const ZxCols<float> dzx = h16 ? ZxCols<float>{} : zx_cols(s, dzx_.data());
    const ZxCols<bf16> dzx16 = h16 ? zx_cols(s, dzx16_.data()) : ZxCols<bf16>{};
    const XbcCols<const float> xbc = xbc16_ ? XbcCols<const float>{} : xbc_cols<const float>(s, a.xbc.data());
    const XbcCols<const bf16> xbc16 = xbc16_ ? xbc_cols<const bf16>(s, a.xbc16.data()) : XbcCols<const bf16>{};
    const XbcCols<float> dxbc = xbc_cols(s, dxbc_.data());
    if (xbc16_)  // dy in bf16 (dy16_), the reverse walk's only input of it
      gpu::gated_rmsnorm_bwd(s.gnorm, gpu::GatedNormInputsBf16{.y = a.y16.data(), .z = zx16.z, .w = P + o.gnorm_w},
                             a.grstd.data(), dg16_.data(), {.dw = Gr + o.gnorm_w}, p_gnorm, st, dzx16.z,
                             dy16_.data(), &colsums_);
    else if (h16)
      gpu::gated_rmsnorm_bwd(s.gnorm, gpu::GatedNormInputsBf16{.y = a.y16.data(), .z = zx16.z, .w = P + o.gnorm_w},
                             a.grstd.data(), dg16_.data(), {.dy = dy_.data(), .dw = Gr + o.gnorm_w}, p_gnorm, st,
                             dzx16.z, &colsums_);
    else
      gpu::gated_rmsnorm_bwd(s.gnorm, {.y = a.y.data(), .z = zx.z, .w = P + o.gnorm_w}, a.grstd.data(), dg_.data(),
                             {.dy = dy_.data(), .dz = dzx.z, .dw = Gr + o.gnorm_w}, p_gnorm, st, nullptr, &colsums_);
    const SsdInputs<float> ssd_in{.x = xbc.x, .delta = a.delta.data(), .A_log = P + o.A_log, .Bm = xbc.B,
                                  .Cm = xbc.C, .Dskip = P + o.D};
    const SsdGrads<float> ssd_g{.dx = dxbc.x, .ddelta = ddelta_.data(), .dA_log = Gr + o.A_log, .dB = dxbc.B,
                                .dC = dxbc.C, .dD = Gr + o.D};
    // dA_log's, dD's sums join colsums_ on the walks (their partials in this layer's region, not the shared ws)
    const gpu::SsdParamDefer ssd_defer{.batch = &colsums_, .partials = p_ssd};
    if (xbc16_)
      gpu::ssd_bwd(s.ssd, ssd_in, SsdXbcBf16{.x = xbc16.x, .Bm = xbc16.B, .Cm = xbc16.C}, a.states.data(),
                   dy16_.data(), ssd_g, ws, st, &ssd_defer);
    else gpu::ssd_bwd(s.ssd, ssd_in, a.states.data(), dy_.data(), ssd_g, ws, st, &ssd_defer);
    if (map_.rows) gpu::mask_rows(map_, s.H, s.H, ddelta_.data(), st);
    if (!h16)
      gpu::dt_softplus_bwd(s.dt, {.dt = zx.dt, .dt_bias = P + o.dt_bias}, ddelta_.data(),
                           {.ddt = dzx.dt, .ddt_bias = Gr + o.dt_bias}, p_dt, st, nullptr, &colsums_);
    // The forward's in window (no dwindow0 asked: the gradient stops at the window's boundary); the SSD reads
    // its h0 from the saved chunk states.
    const float* window0 = carried_ ? conv_in_.data() + l * carry_conv_floats(c, B_) : nullptr;
    const Conv1dInputs<float> conv_in{.x = zx.xBC, .w = P + o.conv_w, .bias = P + o.conv_b, .window0 = window0};
    if (h16)  // the softplus's backward and the conv's in one launch (conv1d.h conv1d_dt_bwd_bf16: their bits)
      gpu::conv1d_dt_bwd_bf16(s.conv, zx16.xBC, conv_in, dxbc_.data(), {.dw = Gr + o.conv_w, .dbias = Gr + o.conv_b},
                              p_conv, dzx16.xBC, s.dt, gpu::DtInputsBf16{.dt = zx16.dt, .dt_bias = P + o.dt_bias},
                              ddelta_.data(), Gr + o.dt_bias, p_dt, dzx16.dt, st, &colsums_);
    else
      gpu::conv1d_silu_bwd(s.conv, conv_in, dxbc_.data(), {.dx = dzx.xBC, .dw = Gr + o.conv_w, .dbias = Gr + o.conv_b},
                           p_conv, st, nullptr, &colsums_);
    linear_bwd(gemm_, s.in_proj, {}, o.in_proj_w, dzx_op, {.dx = dhn_.data()}, st);
    side_.fork(st);
    linear_bwd(gemm_side_, s.in_proj, {a.hn.data(), a.hn16.data()}, o.in_proj_w, dzx_op, {.dw = Gr + o.in_proj_w},
               side_.get(), nullptr, p_in_dw);
    side_.done(1);
    side_.join(st, 0);
    gpu::rmsnorm_bwd(s.norm, {.x = a.h_in.data(), .w = P + o.norm_w}, a.rstd.data(), dhn_.data(),
                     {.dx = dh_.data(), .dw = Gr + o.norm_w}, true, p_norm, st, dh16, &colsums_);
  }
  side_.join(st, 1);  // every weight gradient is in before the optimizer reads them
  linear_bwd(gemm_, s.input, {x_, x16_.data()}, lay_.in_w, dh, {.dx = dx, .dw = Gr + lay_.in_w, .db = Gr + lay_.in_b},
             st, part + parts.input_db, region(parts.input_dw, parts.head_dw - parts.input_dw));
  // Every parameter partial of the pass, summed in one launch (each in its own op's fixed order; in BF16 the
  // weight gradients' K slices too, written by the side stream's GEMMs, all joined above).
  colsums_.run(st);
}

}  // namespace mlalpha
