#include "model/model_step.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "core/error.h"
#include "model/model_cpu.h"
#include "cpu/rows.h"
#include "ops/conv1d/conv1d_cpu.h"
#include "ops/dt_softplus/dt_softplus_cpu.h"
#include "ops/gated_rmsnorm/gated_rmsnorm_cpu.h"
#include "ops/rmsnorm/rmsnorm_cpu.h"
#include "cpu/simd.h"
#include "ops/dt_softplus/dt_softplus.h"
#include "ops/gated_rmsnorm/gated_rmsnorm.h"
#include "ops/rmsnorm/rmsnorm.h"

namespace mlalpha {

StepDims step_dims(const ModelConfig& c, int instruments) {
  StepDims d;
  d.I = instruments;
  d.F = c.F, d.K = c.K, d.D = c.D, d.di = c.d_inner(), d.H = c.H(), d.P = c.P, d.G = c.G, d.N = c.N, d.W = c.W;
  d.cd = c.conv_dim(), d.proj = c.in_proj_dim();
  d.dt_lo = c.dt_limit_lo, d.dt_hi = c.dt_limit_hi;
  return d;
}

// ---- StepState ----

StepState StepState::zeros(const ModelConfig& c, int instruments) {
  require(instruments >= 1, "a stream needs at least one instrument, got " + std::to_string(instruments));
  StepState s;
  s.layers = c.NL, s.instruments = instruments;
  s.conv_rows = c.W - 1, s.conv_dim = c.conv_dim();
  s.heads = c.H(), s.head_dim = c.P, s.d_state = c.N;
  s.conv.assign(size_t(c.NL) * instruments * s.conv_per_instrument(), 0.0f);
  s.ssm.assign(size_t(c.NL) * instruments * s.ssm_per_instrument(), 0.0f);
  return s;
}

void StepState::check(const ModelConfig& c) const {
  auto field = [](const char* what, int got, int want) {
    require(got == want, std::string("stream state: ") + what + " is " + std::to_string(got) + ", the model's is " +
                             std::to_string(want) + " (a state of another model)");
  };
  field("the layer count (model.layers)", layers, c.NL);
  field("the conv window's rows (model.conv_width - 1)", conv_rows, c.W - 1);
  field("conv_dim (d_inner + 2 * model.groups * model.d_state)", conv_dim, c.conv_dim());
  field("the head count H", heads, c.H());
  field("the head dim (model.head_dim)", head_dim, c.P);
  field("the state size (model.d_state)", d_state, c.N);
  require(instruments >= 1, "stream state: no instrument (instruments = " + std::to_string(instruments) + ")");
  const size_t want_conv = size_t(layers) * instruments * conv_per_instrument();
  const size_t want_ssm = size_t(layers) * instruments * ssm_per_instrument();
  require(conv.size() == want_conv, "stream state: conv holds " + std::to_string(conv.size()) +
                                        " floats, expected layers x instruments x (W - 1) x conv_dim = " +
                                        std::to_string(want_conv));
  require(ssm.size() == want_ssm, "stream state: ssm holds " + std::to_string(ssm.size()) +
                                      " floats, expected layers x instruments x H x P x N = " +
                                      std::to_string(want_ssm));
  auto finite = [](const std::vector<float>& v, const char* what) {
    const auto bad = std::find_if(v.begin(), v.end(), [](float f) { return !std::isfinite(f); });
    require(bad == v.end(), std::string("stream state: ") + what + " holds a non-finite value at float " +
                                std::to_string(bad - v.begin()) + " (no stepper writes one: a damaged state)");
  };
  finite(conv, "conv");
  finite(ssm, "ssm");
}

StepState StepState::remapped(std::span<const int> from) const {
  require(!from.empty(), "stream state: remapping to no instrument");
  for (size_t j = 0; j < from.size(); ++j)
    require(from[j] >= -1 && from[j] < instruments,
            "stream state: new instrument " + std::to_string(j) + " takes old instrument " + std::to_string(from[j]) +
                ", which is not in [-1, " + std::to_string(instruments) + ") (-1: a new instrument)");
  StepState out = *this;
  out.instruments = static_cast<int>(from.size());
  const size_t cpi = conv_per_instrument(), spi = ssm_per_instrument(), J = from.size();
  out.conv.assign(size_t(layers) * J * cpi, 0.0f);
  out.ssm.assign(size_t(layers) * J * spi, 0.0f);
  for (int l = 0; l < layers; ++l)
    for (size_t j = 0; j < J; ++j) {
      if (from[j] < 0) continue;
      const size_t src = size_t(l) * instruments + from[j], dst = size_t(l) * J + j;
      std::copy_n(conv.begin() + src * cpi, cpi, out.conv.begin() + dst * cpi);
      std::copy_n(ssm.begin() + src * spi, spi, out.ssm.begin() + dst * spi);
    }
  return out;
}

void StepState::reset(std::span<const int> which) {
  for (int i : which)
    require(i >= 0 && i < instruments, "stream state: cannot reset instrument " + std::to_string(i) + " of " +
                                           std::to_string(instruments));
  const size_t cpi = conv_per_instrument(), spi = ssm_per_instrument();
  for (int l = 0; l < layers; ++l)
    for (int i : which) {
      const size_t k = size_t(l) * instruments + i;
      std::fill_n(conv.begin() + k * cpi, cpi, 0.0f);
      std::fill_n(ssm.begin() + k * spi, spi, 0.0f);
    }
}

// ---- CpuStepper ----

namespace {

// (rows, cols) → (cols, rows)
std::vector<float> transposed(const float* w, int rows, int cols) {
  std::vector<float> t(size_t(rows) * cols);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) t[size_t(c) * rows + r] = w[size_t(r) * cols + c];
  return t;
}

// y (M, OUT) = x (M, IN)·W + b, or y += x·W (add; then b is null), with wT = Wᵀ (IN, OUT). Each output is the
// reference Linear's sum (ref::linear_fwd, linear_fwd_add: b or 0, then the inputs in order, then the residual
// added), accumulated along a contiguous row of wT so the compiler vectorises over the outputs. The rows advance
// together, input by input: each row of wT is read once for all M rows (a weight matrix streamed once a block,
// not once an instrument), and every output still takes its terms in the same order. acc (M, OUT).
void linear_rows(int M, int IN, int OUT, const float* x, const float* wT, const float* b, float* y, bool add,
                 float* acc) {
  float* a = add ? acc : y;
  for (int m = 0; m < M; ++m)
    for (int o = 0; o < OUT; ++o) a[size_t(m) * OUT + o] = b ? b[o] : 0.0f;
  for (int i = 0; i < IN; ++i) {
    const float* wr = wT + size_t(i) * OUT;
    for (int m = 0; m < M; ++m) {
      const float xi = x[size_t(m) * IN + i];
      float* am = a + size_t(m) * OUT;
      for (int o = 0; o < OUT; ++o) am[o] += xi * wr[o];
    }
  }
  if (add)
    for (size_t k = 0; k < size_t(M) * OUT; ++k) y[k] += acc[k];
}

}  // namespace

CpuStepper::CpuStepper(const ModelLayout& layout, std::span<const float> params, int instruments,
                       CpuStepperOptions options)
    : lay_(layout),
      dims_(step_dims(layout.cfg, 1)),
      reference_(options.reference),
      state_(StepState::zeros(layout.cfg, instruments)) {
  require(params.size() == lay_.table.total(), "CpuStepper: the weights hold " + std::to_string(params.size()) +
                                                   " floats, the model's arena " +
                                                   std::to_string(lay_.table.total()));
  const int threads = options.pool ? options.pool->threads() : cpu::resolve_threads(options.threads);  // 0 to 64
  require(reference_ || cpu::cpu_supported(),
          "the fast CPU stepper needs a CPU with AVX2 and FMA (x86-64-v3); this one has not: use the reference "
          "kernels (run.cpu_kernels = \"reference\", --set run.cpu_kernels=reference)");
  P_.assign(params.begin(), params.end());
  const StepDims& d = dims_;
  if (reference_) {
    in_wT_ = transposed(P_.data() + lay_.in_w, d.D, d.F);
    head_wT_ = transposed(P_.data() + lay_.head_w, d.K, d.D);
    for (const LayerOffsets& o : lay_.layers) {
      in_proj_wT_.push_back(transposed(P_.data() + o.in_proj_w, d.proj, d.D));
      out_proj_wT_.push_back(transposed(P_.data() + o.out_proj_w, d.D, d.di));
    }
  } else {
    in_fast_ = cpu::PackedLinear(P_.data() + lay_.in_w, P_.data() + lay_.in_b, d.D, d.F);
    head_fast_ = cpu::PackedLinear(P_.data() + lay_.head_w, P_.data() + lay_.head_b, d.K, d.D);
    for (const LayerOffsets& o : lay_.layers) {
      in_proj_fast_.emplace_back(P_.data() + o.in_proj_w, nullptr, d.proj, d.D);
      out_proj_fast_.emplace_back(P_.data() + o.out_proj_w, nullptr, d.D, d.di);
      conv_wT_.push_back(transposed(P_.data() + o.conv_w, d.cd, d.W));
    }
  }
  if (!options.pool) own_pool_ = std::make_unique<cpu::ThreadPool>(threads);
  pool_ = options.pool ? options.pool : own_pool_.get();
  scratch_.resize(threads);
  const size_t R = kMaxBlockRows;
  for (Scratch& s : scratch_) {
    s.x.resize(R * d.F), s.h.resize(R * d.D), s.hn.resize(R * d.D), s.rstd.resize(R);
    s.zx.resize(R * d.proj), s.xbc.resize(R * d.cd), s.delta.resize(R * d.H), s.y.resize(R * d.di);
    s.gout.resize(R * d.di), s.grstd.resize(R * d.G), s.head.resize(R * d.K);
    if (reference_) s.acc.resize(R * std::max({d.D, d.proj, d.K}));
    s.present.resize(R);
  }
}

void CpuStepper::step(const float* x, const uint8_t* mask, float* out) {
  const int I = state_.instruments, T = pool_->threads();
  // Tasks of at most kMaxBlockRows instruments, a multiple of the thread count where there are more than T of
  // them, so the workers get equal shares. Rows never interact, so the split changes no bit.
  int tasks = std::min(T, I);
  if ((I + tasks - 1) / tasks > kMaxBlockRows) tasks = ((I + kMaxBlockRows - 1) / kMaxBlockRows + T - 1) / T * T;
  const int rows = (I + tasks - 1) / tasks;
  tasks = (I + rows - 1) / rows;
  pool_->run(tasks, [&](int task, int worker) {
    const int first = task * rows, count = std::min(rows, I - first);
    Scratch& s = scratch_[worker];
    prepare_rows(first, count, x, mask, s);
    if (reference_) rows_reference(first, count, s);
    else rows_fast(first, count, s);
    write_rows(first, count, s, out);
  });
}

// Presence and the NaN fill (model_step.h): s.x (rows, F), s.present (rows).
void CpuStepper::prepare_rows(int first, int rows, const float* x, const uint8_t* mask, Scratch& s) const {
  const int F = dims_.F;
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + size_t(first + r) * F;
    bool any = false;
    for (int f = 0; f < F; ++f) {
      const bool ok = std::isfinite(xr[f]);
      any |= ok;
      s.x[size_t(r) * F + f] = ok ? xr[f] : 0.0f;
    }
    s.present[r] = any && (mask == nullptr || mask[first + r] != 0) ? 1 : 0;
  }
}

// The reference ops, in RefModel<float>'s order (the stepper's exactness test compares bit for bit).
void CpuStepper::rows_reference(int first, int M, Scratch& s) {
  const StepDims& d = dims_;
  const int I = state_.instruments, GN = d.G * d.N;
  const size_t cpi = state_.conv_per_instrument(), spi = state_.ssm_per_instrument();
  const float* P = P_.data();
  linear_rows(M, d.F, d.D, s.x.data(), in_wT_.data(), P + lay_.in_b, s.h.data(), false, s.acc.data());
  for (int l = 0; l < lay_.cfg.NL; ++l) {
    const LayerOffsets& o = lay_.layers[l];
    ref::rmsnorm_fwd<float>({M, d.D}, {s.h.data(), P + o.norm_w}, s.hn.data(), s.rstd.data());
    linear_rows(M, d.D, d.proj, s.hn.data(), in_proj_wT_[l].data(), nullptr, s.zx.data(), false, s.acc.data());
    float* conv = state_.conv.data() + (size_t(l) * I + first) * cpi;  // (M, W−1, cd)
    ref::conv_step<float>(M, d.cd, d.W, d.proj, s.zx.data() + d.di, P + o.conv_w, P + o.conv_b, conv, s.xbc.data(),
                          s.present.data());
    ref::dt_softplus_fwd<float>({M, d.H, d.proj, d.dt_lo, d.dt_hi}, {s.zx.data() + d.di + d.cd, P + o.dt_bias},
                                s.delta.data());
    float* ssm = state_.ssm.data() + (size_t(l) * I + first) * spi;  // (M, H, P, N)
    const float* xbc = s.xbc.data();
    ref::ssd_step<float>(d, M, d.cd, xbc, s.delta.data(), P + o.A_log, xbc + d.di, xbc + d.di + GN, P + o.D, ssm,
                         s.y.data(), s.present.data());
    ref::gated_rmsnorm_fwd<float>({M, d.di, d.G, d.proj}, {s.y.data(), s.zx.data(), P + o.gnorm_w}, s.gout.data(),
                                  s.grstd.data());
    linear_rows(M, d.di, d.D, s.gout.data(), out_proj_wT_[l].data(), nullptr, s.h.data(), true, s.acc.data());
  }
  ref::rmsnorm_fwd<float>({M, d.D}, {s.h.data(), P + lay_.norm_f}, s.hn.data(), s.rstd.data());
  linear_rows(M, d.D, d.K, s.hn.data(), head_wT_.data(), P + lay_.head_b, s.head.data(), false, s.acc.data());
}

// The same layer with the fast kernels: the projections on packed panels, the norms and Δ from the fast
// training path (ops/*/*_cpu.h), the conv and SSM steps of ops/mamba_step/mamba_step_cpu.h.
void CpuStepper::rows_fast(int first, int M, Scratch& s) {
  const StepDims& d = dims_;
  const int I = state_.instruments, GN = d.G * d.N;
  const size_t cpi = state_.conv_per_instrument(), spi = state_.ssm_per_instrument();
  const float* P = P_.data();
  const cpu::Rows rows{0, M};
  in_fast_.apply(M, s.x.data(), d.F, s.h.data(), d.D, false);
  for (int l = 0; l < lay_.cfg.NL; ++l) {
    const LayerOffsets& o = lay_.layers[l];
    cpu::rmsnorm_fwd(rows, {M, d.D}, {s.h.data(), P + o.norm_w}, s.hn.data(), s.rstd.data());
    in_proj_fast_[l].apply(M, s.hn.data(), d.D, s.zx.data(), d.proj, false);
    float* conv = state_.conv.data() + (size_t(l) * I + first) * cpi;  // (M, W−1, cd)
    cpu::conv_step(M, d.cd, d.W, d.proj, s.zx.data() + d.di, conv_wT_[l].data(), P + o.conv_b, conv, s.xbc.data(),
                   s.present.data());
    cpu::dt_fwd(rows, {M, d.H, d.proj, d.dt_lo, d.dt_hi}, {s.zx.data() + d.di + d.cd, P + o.dt_bias}, s.delta.data());
    float* ssm = state_.ssm.data() + (size_t(l) * I + first) * spi;  // (M, H, P, N)
    const float* xbc = s.xbc.data();
    cpu::ssd_step(d, M, d.cd, xbc, s.delta.data(), P + o.A_log, xbc + d.di, xbc + d.di + GN, P + o.D, ssm,
                  s.y.data(), s.present.data());
    cpu::gated_fwd(rows, {M, d.di, d.G, d.proj}, {s.y.data(), s.zx.data(), P + o.gnorm_w}, s.gout.data(),
                   s.grstd.data());
    out_proj_fast_[l].apply(M, s.gout.data(), d.di, s.h.data(), d.D, true);
  }
  cpu::rmsnorm_fwd(rows, {M, d.D}, {s.h.data(), P + lay_.norm_f}, s.hn.data(), s.rstd.data());
  head_fast_.apply(M, s.hn.data(), d.D, s.head.data(), d.K, false);
}

void CpuStepper::write_rows(int first, int rows, const Scratch& s, float* out) const {
  const int K = dims_.K;
  for (int r = 0; r < rows; ++r)
    for (int k = 0; k < K; ++k)
      out[size_t(first + r) * K + k] =
          s.present[r] ? s.head[size_t(r) * K + k] : std::numeric_limits<float>::quiet_NaN();
}

void CpuStepper::reset() { state_ = StepState::zeros(lay_.cfg, state_.instruments); }
void CpuStepper::reset(std::span<const int> which) { state_.reset(which); }

void CpuStepper::import_state(const StepState& s) {
  s.check(lay_.cfg);
  state_ = s;
}

void CpuStepper::remap(std::span<const int> from) { state_ = state_.remapped(from); }

}  // namespace mlalpha
