#include "model/model_cpu.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <thread>

#include "core/error.h"
#include "cpu/blas.h"
#include "cpu/rows.h"
#include "ops/conv1d/conv1d_cpu.h"
#include "ops/dt_softplus/dt_softplus_cpu.h"
#include "ops/gated_rmsnorm/gated_rmsnorm_cpu.h"
#include "ops/rmsnorm/rmsnorm_cpu.h"
#include "cpu/simd.h"
#include "ops/ssd/ssd_cpu.h"
#include "cpu/thread_pool.h"
#include "model/layer_shapes.h"

namespace mlalpha::cpu {

namespace {
// require() for the per-step checks: the message is built only when the check fails (require's
// std::string argument would allocate on every call, and a step allocates nothing).
void check(bool ok, const char* what) {
  if (!ok) throw Error(what);
}
int blocks_of(int M) { return (M + kRowBlock - 1) / kRowBlock; }
// The widest GEMM's N + K (gemm_rows's padded block).
int max_nk(const ModelConfig& c) {
  const LayerShapes s(c, 1, 1);
  return s.D + std::max({s.proj, s.di, c.F, c.K});
}
int chunks_of(int B, int L, int Q) { return B * ((L + Q - 1) / Q); }
// Grows v to at least n elements (never shrinks, so a smaller batch later allocates nothing).
void grow(std::vector<float>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}
}  // namespace

CpuModel::CpuModel(const ModelLayout& layout, CpuOptions opt) : lay_(layout) {
  require(cpu_supported(), "the fast CPU model needs a CPU with AVX2 and FMA (x86-64-v3); this one has not: use the "
                           "reference CPU model (run.cpu_kernels = \"reference\", --set run.cpu_kernels=reference)");
  blas_single_threaded();  // our workers call it concurrently; it must not start threads of its own
  if (opt.pool) {
    require(opt.pool->threads() <= kMaxCpuThreads, "CpuModel: the shared pool has more than " +
                                                       std::to_string(kMaxCpuThreads) + " threads");
    pool_ = opt.pool;
  } else {
    own_pool_ = std::make_unique<ThreadPool>(resolve_threads(opt.threads));
    pool_ = own_pool_.get();
  }
  check_blas_address_space(pool_->threads());
  acts_.resize(lay_.cfg.NL);
}

int resolve_threads(int threads) {
  require(threads >= 0 && threads <= kMaxCpuThreads, "the CPU threads (run.threads) must be 0 (every CPU this process "
                                                     "may use) or 1 to " + std::to_string(kMaxCpuThreads) + ", got " +
                                                         std::to_string(threads));
  return threads > 0 ? threads : std::min(available_cpus(), kMaxCpuThreads);
}

CpuModel::~CpuModel() = default;

int CpuModel::threads() const { return pool_->threads(); }

// Every buffer's size for a batch of B windows of length L, in one place for reserve() and floats_needed().
struct CpuModel::Plan {
  size_t x, h, rows, out, layer_D, zx, xbc, delta, y, grstd, states, convT;  // forward (per layer: layer_D ..)
  size_t dD, ddi, dzx, dxbc, ddelta, part, wtmp, dw, ssd_part;          // backward
  size_t ssd_scratch, gemm_pad;
  Plan(const ModelConfig& c, int B, int L, int threads) {
    const LayerShapes s(c, B, L);
    const size_t M = size_t(s.M), nb = blocks_of(s.M);
    const SsdParams sp{B, L, s.H, c.P, c.G, c.N, c.Q, s.cd};
    x = M * c.F, h = M * s.D, rows = M, out = M * c.K, layer_D = M * s.D;
    zx = M * s.proj, xbc = M * s.cd, delta = M * s.H;
    y = M * s.di, grstd = M * c.G, states = ssd_states_floats(sp), convT = size_t(c.W) * s.cd;
    dD = M * s.D, ddi = M * s.di, dzx = M * s.proj, dxbc = M * s.cd, ddelta = M * s.H;
    wtmp = size_t(c.W + 1) * s.cd + s.H;
    part = nb * std::max({size_t(s.D), size_t(s.di), wtmp, size_t(c.K)});
    dw = std::max({dw_scratch_floats(s.M, s.proj, s.D), dw_scratch_floats(s.M, s.D, s.di),
                   dw_scratch_floats(s.M, s.D, c.F), dw_scratch_floats(s.M, c.K, s.D), size_t(1)});
    ssd_part = size_t(B) * s.H;
    ssd_scratch = size_t(threads) * ssd_scratch_floats(sp);
    gemm_pad = gemm_pad_floats(max_nk(c)) + 16;  // + 16 to align it
  }
  // Forward buffers of one layer: hn, rstd, zx, xbc, delta, y, gout, grstd, convT (+ h_in, states to train).
  size_t layer(bool training) const {
    return layer_D + rows + zx + xbc + delta + 2 * y + grstd + convT + (training ? layer_D + states : 0);
  }
  size_t total(int NL, bool training) const {
    const size_t fwd = 2 * h + rows + ssd_scratch + gemm_pad + (training ? x + out : 0) + layer(training) * (training ? NL : 1);
    return fwd + (training ? out + 3 * dD + 2 * ddi + dzx + 2 * dxbc + ddelta + part + wtmp + dw + 2 * ssd_part : 0);
  }
};

size_t CpuModel::floats_needed(const ModelConfig& c, int B, int L, int threads, bool training) {
  return Plan(c, B, L, resolve_threads(threads)).total(c.NL, training);
}

void CpuModel::reserve(int B, int L, bool training) {
  const ModelConfig& c = lay_.cfg;
  require(B >= 1 && L >= 1, "CpuModel: B and L must be >= 1");
  const Plan p(c, B, L, pool_->threads());
  grow(h_, p.h);
  grow(hfn_, p.h);
  grow(rstdf_, p.rows);
  grow(ssd_scratch_, p.ssd_scratch);
  if (gemm_pad_.size() < p.gemm_pad) {
    gemm_pad_.resize(p.gemm_pad);
    const size_t skip = (64 - reinterpret_cast<uintptr_t>(gemm_pad_.data()) % 64) % 64 / sizeof(float);
    pad_ = gemm_pad_.data() + skip;
  }
  for (int l = 0; l < (training ? c.NL : 1); ++l) {
    LayerActs& a = acts_[l];
    for (auto* v : {&a.hn}) grow(*v, p.layer_D);
    grow(a.rstd, p.rows);
    grow(a.zx, p.zx);
    grow(a.xbc, p.xbc);
    grow(a.delta, p.delta);
    grow(a.y, p.y);
    grow(a.gout, p.y);
    grow(a.grstd, p.grstd);
    grow(a.convT, p.convT);
    if (training) {
      grow(a.h_in, p.layer_D);
      grow(a.states, p.states);
    }
  }
  Caps& cap = training ? train_cap_ : infer_cap_;
  cap.rows = std::max(cap.rows, B * L);
  cap.chunks = std::max(cap.chunks, chunks_of(B, L, c.Q));
  cap.batch = std::max(cap.batch, B);
  if (!training) return;
  grow(x_, p.x);
  for (auto* v : {&dh_, &dhfn_, &dhn_}) grow(*v, p.dD);
  for (auto* v : {&dg_, &dy_}) grow(*v, p.ddi);
  grow(dzx_, p.dzx);
  grow(dxbc_, p.dxbc);
  grow(dpre_, p.dxbc);
  grow(ddelta_, p.ddelta);
  grow(part_, p.part);
  grow(wtmp_, p.wtmp);
  grow(dw_scratch_, p.dw);
  grow(ssd_dA_, p.ssd_part);
  grow(ssd_dD_, p.ssd_part);
}

void CpuModel::ensure(int B, int L, bool training) {
  check(B >= 1 && L >= 1, "CpuModel::forward: B and L must be >= 1");
  // Every buffer's size is a function of the rows B·L, the chunks B·⌈L/Q⌉ and B (the scratch of none).
  const Caps& cap = training ? train_cap_ : infer_cap_;
  if (B * L > cap.rows || chunks_of(B, L, lay_.cfg.Q) > cap.chunks || B > cap.batch) reserve(B, L, training);
  B_ = B;
  L_ = L;
}

void CpuModel::run_forward(const float* P, const float* x, bool cache, float* out, const CarryState<float>* carry) {
  const ModelConfig& c = lay_.cfg;
  const LayerShapes s(c, B_, L_);
  const size_t nconv = carry_conv_floats(c, B_), nssm = carry_ssm_floats(c, B_);
  const int M = s.M, nb = blocks_of(M);
  ThreadPool& pool = *pool_;
  auto rows = [&](auto&& fn) {  // fn(rows, block) over the fixed row blocks
    pool.run(nb, [&](int t, int) { fn(Rows{t * kRowBlock, std::min(M, (t + 1) * kRowBlock)}, t); });
  };
  float* h = h_.data();
  gemm_rows(pool, Op::T, M, s.D, c.F, x, c.F, P + lay_.in_w, c.F, 0.0f, h, s.D, pad_, P + lay_.in_b);
  const SsdParams sp{B_, L_, s.H, c.P, c.G, c.N, c.Q, s.cd};
  for (int l = 0; l < c.NL; ++l) {
    const LayerOffsets& o = lay_.layers[l];
    LayerActs& a = acts_[cache ? l : 0];
    for (int k = 0; k < c.W; ++k)  // conv weight (C, W) → (W, C), so the conv loops run along channels
      for (int ch = 0; ch < s.cd; ++ch) a.convT[size_t(k) * s.cd + ch] = P[o.conv_w + size_t(ch) * c.W + k];
    float* zx = a.zx.data();
    const ZxCols<float> z = zx_cols(s, zx);
    rows([&](Rows r, int) {
      if (cache) std::copy(h + size_t(r.begin) * s.D, h + size_t(r.end) * s.D, a.h_in.data() + size_t(r.begin) * s.D);
      rmsnorm_fwd(r, s.norm, {.x = h, .w = P + o.norm_w}, a.hn.data(), a.rstd.data());
    });
    gemm_rows(pool, Op::T, M, s.proj, s.D, a.hn.data(), s.D, P + o.in_proj_w, s.D, 0.0f, zx, s.proj, pad_);
    const float* window0 = carry && carry->conv_in ? carry->conv_in + l * nconv : nullptr;
    float* window_last = carry && carry->conv_out ? carry->conv_out + l * nconv : nullptr;
    const RowMap map{B_, L_, carry ? carry->rows : nullptr, carry ? carry->dates : nullptr};
    rows([&](Rows r, int) {
      conv_silu_fwd(r, s.conv,
                    {.x = z.xBC, .wT = a.convT.data(), .bias = P + o.conv_b, .window0 = window0,
                     .window_last = map.rows ? nullptr : window_last},
                    a.xbc.data());
      dt_fwd(r, s.dt, {.dt = z.dt, .dt_bias = P + o.dt_bias}, a.delta.data());
    });
    if (map.rows) {  // lanes with padding rows: the window after the last present row, Δ = 0 past it
      if (window_last) ref::window_tail<float>(s.conv, map, z.xBC, window0, window_last);
      ref::mask_rows<float>(map, s.H, s.H, a.delta.data());
    }
    const XbcCols<const float> xb = xbc_cols<const float>(s, a.xbc.data());
    ssd_forward(pool, sp,
                {.x = xb.x, .delta = a.delta.data(), .A_log = P + o.A_log, .Bm = xb.B, .Cm = xb.C, .Dskip = P + o.D,
                 .h0 = carry && carry->ssm_in ? carry->ssm_in + l * nssm : nullptr,
                 .h_last = carry && carry->ssm_out ? carry->ssm_out + l * nssm : nullptr},
                a.y.data(), cache ? a.states.data() : nullptr, ssd_scratch_.data());
    rows([&](Rows r, int) {
      gated_fwd(r, s.gnorm, {.y = a.y.data(), .z = z.z, .w = P + o.gnorm_w}, a.gout.data(), a.grstd.data());
    });
    // h += gout · W_outᵀ (the residual, in place)
    gemm_rows(pool, Op::T, M, s.D, s.di, a.gout.data(), s.di, P + o.out_proj_w, s.di, 1.0f, h, s.D, pad_);
  }
  rows([&](Rows r, int) { rmsnorm_fwd(r, s.norm, {.x = h, .w = P + lay_.norm_f}, hfn_.data(), rstdf_.data()); });
  gemm_rows(pool, Op::T, M, c.K, s.D, hfn_.data(), s.D, P + lay_.head_w, s.D, 0.0f, out, c.K, pad_, P + lay_.head_b);
}

const std::vector<float>& CpuModel::forward(const float* P, const float* x, int B, int L,
                                            const CarryState<float>* carry) {
  ensure(B, L, true);
  const ModelConfig& c = lay_.cfg;
  const size_t M = size_t(B) * L;
  std::copy(x, x + M * c.F, x_.begin());
  out_.resize(M * c.K);  // within capacity after the first batch of this size: no allocation
  // The in states the backward recomputes from (the conv's pre-activation, the SSD's chunk-0 state), copied
  // so the caller may overwrite its buffers; zeros stand for a null pointer.
  carried_ = carry != nullptr;
  CarryState<float> own;
  if (carry) {
    const size_t nconv = size_t(c.NL) * carry_conv_floats(c, B), nssm = size_t(c.NL) * carry_ssm_floats(c, B);
    conv_in_.resize(nconv);  // within capacity after the first batch of this size
    ssm_in_.resize(nssm);
    if (carry->conv_in) std::copy(carry->conv_in, carry->conv_in + nconv, conv_in_.begin());
    else std::fill(conv_in_.begin(), conv_in_.end(), 0.0f);
    if (carry->ssm_in) std::copy(carry->ssm_in, carry->ssm_in + nssm, ssm_in_.begin());
    else std::fill(ssm_in_.begin(), ssm_in_.end(), 0.0f);
    own = {.conv_in = conv_in_.data(), .ssm_in = ssm_in_.data(), .conv_out = carry->conv_out, .ssm_out = carry->ssm_out};
    check((carry->rows == nullptr) == (carry->dates == nullptr), "CpuModel::forward: CarryState rows without dates");
    if (carry->rows) {
      rows_.assign(carry->rows, carry->rows + B);
      dates_.assign(carry->dates, carry->dates + M);
      own.rows = rows_.data(), own.dates = dates_.data();
    }
  }
  if (!carry || !carry->rows) rows_.clear(), dates_.clear();
  run_forward(P, x_.data(), true, out_.data(), carry ? &own : nullptr);
  have_grad_ = false;
  return out_;
}

void CpuModel::infer(const float* P, const float* x, int B, int L, float* out) {
  ensure(B, L, false);
  run_forward(P, x, false, out, nullptr);
  out_.clear();  // the cache is not valid for backward()
  have_grad_ = false;
}

ref::LossResult<float> CpuModel::loss(const float* y, const LossParams& lp) {
  check(!out_.empty() && lp.B == B_ && lp.L == L_ && lp.K == lay_.cfg.K,
          "CpuModel::loss: call forward() first, with the loss's shape");
  dout_.resize(out_.size());
  if (rows_.empty()) {
    const ref::LossResult<float> r = ref::loss_fwd_bwd<float>(lp, {.out = out_.data(), .y = y}, dout_.data());
    have_grad_ = true;
    return r;
  }
  // Present rows first: the loss sees the predictions at their dates (y's order), its gradient goes back.
  const RowMap map{B_, L_, rows_.data(), dates_.data()};
  outd_.resize(out_.size());
  doutd_.resize(out_.size());
  ref::rows_to_dates<float>(map, lay_.cfg.K, out_.data(), outd_.data());
  const ref::LossResult<float> r = ref::loss_fwd_bwd<float>(lp, {.out = outd_.data(), .y = y}, doutd_.data());
  ref::dates_to_rows<float>(map, lay_.cfg.K, doutd_.data(), dout_.data());
  have_grad_ = true;
  return r;
}

void CpuModel::backward(const float* P, float* Gr, float* dx) {
  check(have_grad_ && dout_.size() == out_.size(), "CpuModel::backward: call forward() and loss() first");
  const ModelConfig& c = lay_.cfg;
  const LayerShapes s(c, B_, L_);
  const int M = s.M, nb = blocks_of(M);
  ThreadPool& pool = *pool_;
  float* part = part_.data();
  auto rows = [&](auto&& fn) {  // fn(rows, block) over the fixed row blocks
    pool.run(nb, [&](int t, int) { fn(Rows{t * kRowBlock, std::min(M, (t + 1) * kRowBlock)}, t); });
  };
  float *dh = dh_.data(), *dhfn = dhfn_.data();
  // head: out = hfn·W_headᵀ + b_head
  gemm_rows(pool, Op::N, M, s.D, c.K, dout_.data(), c.K, P + lay_.head_w, s.D, 0.0f, dhfn, s.D, pad_);
  gemm_dw(pool, M, c.K, s.D, dout_.data(), c.K, hfn_.data(), s.D, Gr + lay_.head_w, dw_scratch_.data());
  rows([&](Rows r, int t) { colsum(r, c.K, dout_.data(), c.K, part + size_t(t) * c.K); });
  reduce_partials(pool, part, nb, c.K, Gr + lay_.head_b);
  rows([&](Rows r, int t) {
    rmsnorm_bwd(r, s.norm, {.x = h_.data(), .w = P + lay_.norm_f}, rstdf_.data(), dhfn,
                {.dx = dh, .dw = part + size_t(t) * s.D}, false);
  });
  reduce_partials(pool, part, nb, s.D, Gr + lay_.norm_f);
  const SsdParams sp{B_, L_, s.H, c.P, c.G, c.N, c.Q, s.cd};
  const size_t nconv = carry_conv_floats(c, B_), nssm = carry_ssm_floats(c, B_);
  for (int l = c.NL - 1; l >= 0; --l) {
    // The forward's in states (no dwindow0, dh0 asked: the gradient stops at the window's boundary).
    const float* window0 = carried_ ? conv_in_.data() + l * nconv : nullptr;
    const float* h0 = carried_ ? ssm_in_.data() + l * nssm : nullptr;
    const LayerOffsets& o = lay_.layers[l];
    const LayerActs& a = acts_[l];
    float *dg = dg_.data(), *dyb = dy_.data();
    const ZxCols<const float> zx = zx_cols<const float>(s, a.zx.data());
    const ZxCols<float> gzx = zx_cols(s, dzx_.data());
    const XbcCols<const float> xb = xbc_cols<const float>(s, a.xbc.data());
    const XbcCols<float> gxb = xbc_cols(s, dxbc_.data());
    // out_proj
    gemm_rows(pool, Op::N, M, s.di, s.D, dh, s.D, P + o.out_proj_w, s.di, 0.0f, dg, s.di, pad_);
    gemm_dw(pool, M, s.D, s.di, dh, s.D, a.gout.data(), s.di, Gr + o.out_proj_w, dw_scratch_.data());
    // gated RMSNorm
    rows([&](Rows r, int t) {
      gated_bwd(r, s.gnorm, {.y = a.y.data(), .z = zx.z, .w = P + o.gnorm_w}, a.grstd.data(), dg,
                {.dy = dyb, .dz = gzx.z, .dw = part + size_t(t) * s.di});
    });
    reduce_partials(pool, part, nb, s.di, Gr + o.gnorm_w);
    // SSD
    ssd_backward(pool, sp,
                 {.x = xb.x, .delta = a.delta.data(), .A_log = P + o.A_log, .Bm = xb.B, .Cm = xb.C, .Dskip = P + o.D,
                  .h0 = h0},
                 a.states.data(), dyb,
                 {.dx = gxb.x, .ddelta = ddelta_.data(), .dA_log = nullptr, .dB = gxb.B, .dC = gxb.C, .dD = nullptr},
                 ssd_dA_.data(), ssd_dD_.data(), ssd_scratch_.data());
    if (!rows_.empty()) ref::mask_rows<float>({B_, L_, rows_.data(), dates_.data()}, s.H, s.H, ddelta_.data());
    reduce_partials(pool, ssd_dA_.data(), B_, s.H, Gr + o.A_log);
    reduce_partials(pool, ssd_dD_.data(), B_, s.H, Gr + o.D);
    // Δ = softplus(dt + dt_bias), then the conv's pre-activation gradient with its weight partials
    const int convw = c.W * s.cd + s.cd;  // per block: dw (W, C), then dbias (C)
    rows([&](Rows r, int t) {
      float* pc = part + size_t(t) * (convw + s.H);  // this block's conv dw, dbias, then dt_bias partials
      dt_bwd(r, s.dt, {.dt = zx.dt, .dt_bias = P + o.dt_bias}, ddelta_.data(),
             {.ddt = gzx.dt, .ddt_bias = pc + convw});
      conv_silu_bwd_pre(r, s.conv, {.x = zx.xBC, .wT = a.convT.data(), .bias = P + o.conv_b, .window0 = window0},
                        dxbc_.data(),
                        dpre_.data(), {.dw = pc, .dbias = pc + size_t(c.W) * s.cd});
    });
    std::fill(wtmp_.begin(), wtmp_.begin() + convw + s.H, 0.0f);
    reduce_partials(pool, part, nb, convw + s.H, wtmp_.data());
    for (int ch = 0; ch < s.cd; ++ch) {
      for (int k = 0; k < c.W; ++k) Gr[o.conv_w + size_t(ch) * c.W + k] += wtmp_[size_t(k) * s.cd + ch];
      Gr[o.conv_b + ch] += wtmp_[size_t(c.W) * s.cd + ch];
    }
    for (int hh = 0; hh < s.H; ++hh) Gr[o.dt_bias + hh] += wtmp_[convw + hh];
    rows([&](Rows r, int) { conv_bwd_dx(r, s.conv, a.convT.data(), dpre_.data(), gzx.xBC); });
    // in_proj, then the pre-mixer RMSNorm adds its input gradient onto the residual stream's
    gemm_rows(pool, Op::N, M, s.D, s.proj, dzx_.data(), s.proj, P + o.in_proj_w, s.D, 0.0f, dhn_.data(), s.D, pad_);
    gemm_dw(pool, M, s.proj, s.D, dzx_.data(), s.proj, a.hn.data(), s.D, Gr + o.in_proj_w, dw_scratch_.data());
    rows([&](Rows r, int t) {
      rmsnorm_bwd(r, s.norm, {.x = a.h_in.data(), .w = P + o.norm_w}, a.rstd.data(), dhn_.data(),
                  {.dx = dh, .dw = part + size_t(t) * s.D}, true);
    });
    reduce_partials(pool, part, nb, s.D, Gr + o.norm_w);
  }
  gemm_dw(pool, M, s.D, c.F, dh, s.D, x_.data(), c.F, Gr + lay_.in_w, dw_scratch_.data());
  rows([&](Rows r, int t) { colsum(r, s.D, dh, s.D, part + size_t(t) * s.D); });
  reduce_partials(pool, part, nb, s.D, Gr + lay_.in_b);
  if (dx) gemm_rows(pool, Op::N, M, c.F, s.D, dh, s.D, P + lay_.in_w, c.F, 0.0f, dx, c.F, pad_);
}

}  // namespace mlalpha::cpu
