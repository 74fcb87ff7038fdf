// The model with carried states (CarryState, model/layer_shapes.h; train.state = "carry"):
// - a forward over window k, then over window k + 1 from the states window k ended with, is one forward over
//   both (the reference in double bit for bit with the recurrent SSD, the chunked one and the fast CPU model
//   within their tolerances), at a first window shorter than the conv's W − 1 and windows not a multiple of Q;
// - the reference model's gradients against central finite differences with a nonzero initial state;
// - the fast model's loss and gradients against the reference's with a nonzero initial state;
// - zero in states are no states, bit for bit (the zero-state training path is today's).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "fd_util.h"
#include "model_fd_util.h"
#include "model/layer_shapes.h"
#include "model/model_cpu.h"
#include "model/model_ref.h"
#include "ops/carry_rows/carry_rows.h"
#include "test_util.h"
#include "tolerances.h"

namespace mlalpha::test {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Layer-major carried states of B windows.
struct States {
  std::vector<double> conv, ssm;
  States(const ModelConfig& c, int B, double fill)
      : conv(size_t(c.NL) * carry_conv_floats(c, B), fill), ssm(size_t(c.NL) * carry_ssm_floats(c, B), fill) {}
};

struct Split {
  int B, L1, L2;
};
const Split kSplits[] = {{2, 2, 9}, {1, 8, 5}, {3, 5, 7}};

// The reference in double: window 1 from random states, window 2 from window 1's final states, against one forward
// over both from the same states: outputs and final states bit for bit (recurrent SSD), to kChunkedVsRecurrent
// (chunked SSD).
TEST(ModelCarry, ReferenceHandOverIsOneForward) {
  const ModelLayout lay(small_fd_config());
  const ModelConfig& c = lay.cfg;
  for (const Split& sp : kSplits) {
    auto rng = make_rng(sp.L1 * 13 + sp.L2);
    const auto params = fd_params(lay, rng);
    const int L = sp.L1 + sp.L2;
    const auto x = random_vec<double>(size_t(sp.B) * L * c.F, rng, -1.5, 1.5);
    States s0(c, sp.B, 0.0);
    s0.conv = random_vec<double>(s0.conv.size(), rng);
    s0.ssm = random_vec<double>(s0.ssm.size(), rng);
    for (bool chunked : {false, true}) {
      const std::string what = "B=" + std::to_string(sp.B) + " L=" + std::to_string(sp.L1) + "+" +
                               std::to_string(sp.L2) + (chunked ? " chunked" : " recurrent");
      RefModel<double> model(lay, chunked);
      States whole(c, sp.B, kNaN), s1(c, sp.B, kNaN), s2(c, sp.B, kNaN);
      const CarryState<double> cw{s0.conv.data(), s0.ssm.data(), whole.conv.data(), whole.ssm.data()};
      const std::vector<double> y_whole = model.forward(params.data(), x.data(), sp.B, L, &cw);
      const CarryState<double> c1{s0.conv.data(), s0.ssm.data(), s1.conv.data(), s1.ssm.data()};
      const auto x1 = time_slice<double>(x, sp.B, L, c.F, 0, sp.L1);
      const auto x2 = time_slice<double>(x, sp.B, L, c.F, sp.L1, sp.L2);
      const std::vector<double> y1 = model.forward(params.data(), x1.data(), sp.B, sp.L1, &c1);
      const CarryState<double> c2{s1.conv.data(), s1.ssm.data(), s2.conv.data(), s2.ssm.data()};
      const std::vector<double> y2 = model.forward(params.data(), x2.data(), sp.B, sp.L2, &c2);
      const auto w1 = time_slice<double>(y_whole, sp.B, L, c.K, 0, sp.L1);
      const auto w2 = time_slice<double>(y_whole, sp.B, L, c.K, sp.L1, sp.L2);
      if (chunked) {
        const double tol = tol::kChunkedVsRecurrent;
        EXPECT_TRUE(all_close(y1, w1, tol, tol, what + " window 1"));
        EXPECT_TRUE(all_close(y2, w2, tol, tol, what + " window 2"));
        EXPECT_TRUE(all_close(s2.conv, whole.conv, tol, tol, what + " conv state"));
        EXPECT_TRUE(all_close(s2.ssm, whole.ssm, tol, tol, what + " ssm state"));
      } else {
        EXPECT_EQ(y1, w1) << what;
        EXPECT_EQ(y2, w2) << what;
        EXPECT_EQ(s2.conv, whole.conv) << what;
        EXPECT_EQ(s2.ssm, whole.ssm) << what;
      }
    }
  }
}

// The fast CPU model (fp32), the states handed over in fp32, against the reference's one forward over both in
// double: the fast path's error class.
TEST(ModelCarry, FastHandOverTracksTheReference) {
  const ModelLayout lay(small_fd_config());
  const ModelConfig& c = lay.cfg;
  for (const Split& sp : kSplits) {
    auto rng = make_rng(sp.L1 * 17 + sp.L2 * 3);
    const auto params = fd_params(lay, rng);
    const int L = sp.L1 + sp.L2;
    const auto x = random_vec<double>(size_t(sp.B) * L * c.F, rng, -1.5, 1.5);
    States s0(c, sp.B, 0.0), whole(c, sp.B, kNaN);
    s0.conv = random_vec<double>(s0.conv.size(), rng);
    s0.ssm = random_vec<double>(s0.ssm.size(), rng);
    RefModel<double> ref(lay);
    const CarryState<double> cw{s0.conv.data(), s0.ssm.data(), whole.conv.data(), whole.ssm.data()};
    const std::vector<double> y_whole = ref.forward(params.data(), x.data(), sp.B, L, &cw);

    cpu::CpuModel fast(lay, {.threads = 2});
    const auto pf = cast_vec<float>(params);
    const auto x1 = cast_vec<float>(time_slice<double>(x, sp.B, L, c.F, 0, sp.L1));
    const auto x2 = cast_vec<float>(time_slice<double>(x, sp.B, L, c.F, sp.L1, sp.L2));
    auto conv = cast_vec<float>(s0.conv), ssm = cast_vec<float>(s0.ssm);
    // In and out the same buffers, as the trainer hands them: the model copies the in states first.
    const CarryState<float> cs{conv.data(), ssm.data(), conv.data(), ssm.data()};
    const std::vector<float> y1 = fast.forward(pf.data(), x1.data(), sp.B, sp.L1, &cs);
    const std::vector<float> y2 = fast.forward(pf.data(), x2.data(), sp.B, sp.L2, &cs);
    const std::string what = "B=" + std::to_string(sp.B) + " L=" + std::to_string(sp.L1) + "+" + std::to_string(sp.L2);
    const auto w1 = time_slice<double>(y_whole, sp.B, L, c.K, 0, sp.L1);
    const auto w2 = time_slice<double>(y_whole, sp.B, L, c.K, sp.L1, sp.L2);
    EXPECT_TRUE(rel_l2_close(y1, w1, tol::kCpuFastRelL2, what + " window 1"));
    EXPECT_TRUE(rel_l2_close(y2, w2, tol::kCpuFastRelL2, what + " window 2"));
    EXPECT_TRUE(rel_l2_close(conv, whole.conv, tol::kCpuFastRelL2, what + " conv state"));
    EXPECT_TRUE(rel_l2_close(ssm, whole.ssm, tol::kCpuFastRelL2, what + " ssm state"));
  }
}

// Every parameter tensor's and the input's gradient against central finite differences of the loss, the windows
// starting from nonzero states (whose own gradient is stopped: they are constants of the loss).
TEST(ModelCarry, GradientsAgainstFiniteDifferences) {
  const ModelLayout lay(small_fd_config());
  const ModelConfig& c = lay.cfg;
  for (bool chunked : {false, true}) {
    const int B = 2, L = 6;
    auto rng = make_rng(chunked ? 71 : 70);
    auto params = fd_params(lay, rng);
    auto x = random_vec<double>(size_t(B) * L * c.F, rng, -1.5, 1.5);
    auto y = random_vec<double>(size_t(B) * L * c.K, rng);
    y[1] = std::numeric_limits<double>::quiet_NaN();
    States s0(c, B, 0.0);
    s0.conv = random_vec<double>(s0.conv.size(), rng);
    s0.ssm = random_vec<double>(s0.ssm.size(), rng);
    const CarryState<double> carry{s0.conv.data(), s0.ssm.data(), nullptr, nullptr};
    const LossParams lp{B, L, c.K, LossKind::MSE, 1.0f, 1};
    RefModel<double> model(lay, chunked);
    auto f = [&] {
      model.forward(params.data(), x.data(), B, L, &carry);
      return model.loss(y.data(), lp).loss;
    };
    f();
    std::vector<double> grads(params.size(), 0.0), dx(x.size());
    model.backward(params.data(), grads.data(), dx.data());
    fd_check_every_tensor(lay, params, grads, f, chunked ? " (chunked)" : "");
    EXPECT_TRUE(fd_check({"input x", &x, dx}, f, 24));
  }
}

// The fast model's loss and gradients with nonzero in states against the reference's (double).
TEST(ModelCarry, FastGradientsTrackTheReference) {
  const ModelLayout lay(small_fd_config());
  const ModelConfig& c = lay.cfg;
  const int B = 3, L = 7;
  auto rng = make_rng(91);
  const auto params = fd_params(lay, rng);
  const auto x = random_vec<double>(size_t(B) * L * c.F, rng, -1.5, 1.5);
  const auto y = random_vec<double>(size_t(B) * L * c.K, rng);
  States s0(c, B, 0.0);
  s0.conv = random_vec<double>(s0.conv.size(), rng);
  s0.ssm = random_vec<double>(s0.ssm.size(), rng);
  const LossParams lp{B, L, c.K, LossKind::MSE, 1.0f, 0};
  RefModel<double> ref(lay);
  const CarryState<double> cd{s0.conv.data(), s0.ssm.data(), nullptr, nullptr};
  ref.forward(params.data(), x.data(), B, L, &cd);
  const double loss_ref = ref.loss(y.data(), lp).loss;
  std::vector<double> g_ref(params.size(), 0.0), dx_ref(x.size());
  ref.backward(params.data(), g_ref.data(), dx_ref.data());

  cpu::CpuModel fast(lay, {.threads = 2});
  const auto pf = cast_vec<float>(params), xf = cast_vec<float>(x), yf = cast_vec<float>(y);
  const auto conv = cast_vec<float>(s0.conv), ssm = cast_vec<float>(s0.ssm);
  const CarryState<float> cf{conv.data(), ssm.data(), nullptr, nullptr};
  fast.forward(pf.data(), xf.data(), B, L, &cf);
  const double loss_fast = fast.loss(yf.data(), lp).loss;
  std::vector<float> g_fast(params.size(), 0.0f), dx_fast(x.size());
  fast.backward(pf.data(), g_fast.data(), dx_fast.data());
  EXPECT_NEAR(loss_fast, loss_ref, tol::kCpuFastLossRel * std::abs(loss_ref));
  EXPECT_TRUE(rel_l2_close(dx_fast, dx_ref, tol::kCpuFastRelL2, "dx"));
  for (const auto& t : lay.table.tensors()) {
    const std::vector<float> got(g_fast.begin() + t.offset, g_fast.begin() + t.offset + t.numel);
    const std::vector<double> want(g_ref.begin() + t.offset, g_ref.begin() + t.offset + t.numel);
    // head.bias and the final norm sum over every row: the head-sum class of the fast path
    const bool head_sum = t.name == "head.bias" || t.name == "norm_f.weight";
    EXPECT_TRUE(rel_l2_close(got, want, head_sum ? tol::kCpuFastHeadSumRelL2 : tol::kCpuFastRelL2, t.name));
  }
}

// Zero in states (explicit zeros, or a CarryState with null in pointers) are no carried state, bit for bit, in
// both models: output, loss and gradients.
TEST(ModelCarry, ZeroStatesAreNoStates) {
  const ModelLayout lay(small_fd_config());
  const ModelConfig& c = lay.cfg;
  const int B = 2, L = 9;
  auto rng = make_rng(5);
  const auto params = fd_params(lay, rng);
  const auto x = random_vec<double>(size_t(B) * L * c.F, rng);
  const auto y = random_vec<double>(size_t(B) * L * c.K, rng);
  const LossParams lp{B, L, c.K, LossKind::MSE, 1.0f, 0};
  const States zero(c, B, 0.0);
  const CarryState<double> zeros{zero.conv.data(), zero.ssm.data(), nullptr, nullptr}, nulls{};
  auto run_ref = [&](const CarryState<double>* carry) {
    RefModel<double> m(lay);
    std::vector<double> out = m.forward(params.data(), x.data(), B, L, carry);
    out.push_back(m.loss(y.data(), lp).loss);
    std::vector<double> g(params.size(), 0.0);
    m.backward(params.data(), g.data(), nullptr);
    out.insert(out.end(), g.begin(), g.end());
    return out;
  };
  const auto none = run_ref(nullptr);
  EXPECT_EQ(run_ref(&zeros), none);
  EXPECT_EQ(run_ref(&nulls), none);
  const auto pf = cast_vec<float>(params), xf = cast_vec<float>(x), yf = cast_vec<float>(y);
  const auto zf = cast_vec<float>(zero.conv), zs = cast_vec<float>(zero.ssm);
  const CarryState<float> fzeros{zf.data(), zs.data(), nullptr, nullptr};
  auto run_fast = [&](const CarryState<float>* carry) {
    cpu::CpuModel m(lay, {.threads = 2});
    std::vector<float> out = m.forward(pf.data(), xf.data(), B, L, carry);
    out.push_back(m.loss(yf.data(), lp).loss);
    std::vector<float> g(params.size(), 0.0f);
    m.backward(pf.data(), g.data(), nullptr);
    out.insert(out.end(), g.begin(), g.end());
    return out;
  };
  const auto fnone = run_fast(nullptr);
  EXPECT_EQ(run_fast(&fzeros), fnone);
}

// ---- lanes with padding rows (CarryState::rows, dates: time batches skipping missing dates)

// Three lanes of L = 9: full, 4 present rows, 2 (fewer than the conv's W − 1 = 3: the out window takes rows of
// window0); the padding rows hold random inputs, which must not matter.
const int kPadB = 3, kPadL = 9;
const std::vector<int> kPadRows = {9, 4, 2};
std::vector<int> pad_dates() {
  std::vector<int> d(size_t(kPadB) * kPadL, -1);
  for (int r = 0; r < kPadL; ++r) d[size_t(r)] = r;
  const int lane1[] = {0, 2, 3, 7}, lane2[] = {1, 8};
  for (int r = 0; r < 4; ++r) d[size_t(kPadL) + r] = lane1[r];
  for (int r = 0; r < 2; ++r) d[size_t(2 * kPadL) + r] = lane2[r];
  return d;
}

// Each lane's out states and present rows' outputs against a forward over its present rows alone (B = 1, L = n_b)
// from the same in states: the state runs over present rows only, as the stream's does. The recurrent SSD in
// double: padding rows (Δ = 0) leave the state as it was, so within 1e-13; the chunked one within its tolerance.
TEST(ModelCarry, PaddingRowsMoveNoState) {
  const ModelLayout lay(small_fd_config());
  const ModelConfig& c = lay.cfg;
  for (bool chunked : {false, true}) {
    auto rng = make_rng(chunked ? 301 : 300);
    const auto params = fd_params(lay, rng);
    const auto x = random_vec<double>(size_t(kPadB) * kPadL * c.F, rng, -1.5, 1.5);
    States s0(c, kPadB, 0.0), out(c, kPadB, kNaN);
    s0.conv = random_vec<double>(s0.conv.size(), rng);
    s0.ssm = random_vec<double>(s0.ssm.size(), rng);
    const std::vector<int> dates = pad_dates();
    CarryState<double> cs{s0.conv.data(), s0.ssm.data(), out.conv.data(), out.ssm.data()};
    cs.rows = kPadRows.data(), cs.dates = dates.data();
    RefModel<double> model(lay, chunked);
    const std::vector<double> y = model.forward(params.data(), x.data(), kPadB, kPadL, &cs);
    const double tol = chunked ? tol::kChunkedVsRecurrent : 1e-13;
    const size_t nconv = carry_conv_floats(c, 1), nssm = carry_ssm_floats(c, 1);
    for (int b = 0; b < kPadB; ++b) {
      const int n = kPadRows[size_t(b)];
      const std::string what = std::string(chunked ? "chunked" : "recurrent") + " lane " + std::to_string(b);
      States one_in(c, 1, 0.0), one_out(c, 1, kNaN);
      for (int l = 0; l < c.NL; ++l) {
        std::copy_n(s0.conv.begin() + (size_t(l) * kPadB + b) * nconv, nconv, one_in.conv.begin() + size_t(l) * nconv);
        std::copy_n(s0.ssm.begin() + (size_t(l) * kPadB + b) * nssm, nssm, one_in.ssm.begin() + size_t(l) * nssm);
      }
      const std::vector<double> xb(x.begin() + size_t(b) * kPadL * c.F, x.begin() + (size_t(b) * kPadL + n) * c.F);
      const CarryState<double> one{one_in.conv.data(), one_in.ssm.data(), one_out.conv.data(), one_out.ssm.data()};
      RefModel<double> alone(lay, chunked);
      const std::vector<double> ya = alone.forward(params.data(), xb.data(), 1, n, &one);
      const std::vector<double> yb(y.begin() + size_t(b) * kPadL * c.K, y.begin() + (size_t(b) * kPadL + n) * c.K);
      EXPECT_TRUE(rel_l2_close(yb, ya, tol, what + " outputs"));
      std::vector<double> conv_b, ssm_b;
      for (int l = 0; l < c.NL; ++l) {
        conv_b.insert(conv_b.end(), out.conv.begin() + (size_t(l) * kPadB + b) * nconv,
                      out.conv.begin() + (size_t(l) * kPadB + b + 1) * nconv);
        ssm_b.insert(ssm_b.end(), out.ssm.begin() + (size_t(l) * kPadB + b) * nssm,
                     out.ssm.begin() + (size_t(l) * kPadB + b + 1) * nssm);
      }
      EXPECT_EQ(conv_b, one_out.conv) << what << ": the conv window is a copy of inputs";
      EXPECT_TRUE(rel_l2_close(ssm_b, one_out.ssm, tol, what + " SSM state"));
    }
  }
}

// With padding rows: the loss over targets in date order (NaN where a lane has no row), its gradients against
// central finite differences (reference), and the fast model's against the reference's.
TEST(ModelCarry, PaddingRowsGradients) {
  const ModelLayout lay(small_fd_config());
  const ModelConfig& c = lay.cfg;
  auto rng = make_rng(310);
  auto params = fd_params(lay, rng);
  auto x = random_vec<double>(size_t(kPadB) * kPadL * c.F, rng, -1.5, 1.5);
  auto y = random_vec<double>(size_t(kPadB) * kPadL * c.K, rng);
  const std::vector<int> dates = pad_dates();
  for (int b = 0; b < kPadB; ++b)  // dates without a present row have NaN targets, as the gather writes them
    for (int t = 0; t < kPadL; ++t) {
      bool has = false;
      for (int r = 0; r < kPadRows[size_t(b)]; ++r) has |= dates[size_t(b) * kPadL + r] == t;
      if (!has) std::fill_n(y.begin() + (size_t(b) * kPadL + t) * c.K, c.K, kNaN);
    }
  States s0(c, kPadB, 0.0);
  s0.conv = random_vec<double>(s0.conv.size(), rng);
  s0.ssm = random_vec<double>(s0.ssm.size(), rng);
  CarryState<double> cs{s0.conv.data(), s0.ssm.data(), nullptr, nullptr};
  cs.rows = kPadRows.data(), cs.dates = dates.data();
  for (LossKind loss : {LossKind::MSE, LossKind::IC}) {
    const LossParams lp{kPadB, kPadL, c.K, loss, 1.0f, 0, loss == LossKind::IC ? kPadB : 0};
    RefModel<double> model(lay);
    auto f = [&] {
      model.forward(params.data(), x.data(), kPadB, kPadL, &cs);
      return model.loss(y.data(), lp).loss;
    };
    const double l0 = f();
    ASSERT_TRUE(std::isfinite(l0));
    std::vector<double> grads(params.size(), 0.0), dx(x.size());
    model.backward(params.data(), grads.data(), dx.data());
    const std::string tag = loss == LossKind::IC ? " (IC, padding rows)" : " (MSE, padding rows)";
    fd_check_every_tensor(lay, params, grads, f, tag);
    EXPECT_TRUE(fd_check({"input x", &x, dx}, f, 24));
    for (int b = 0; b < kPadB; ++b)  // a padding row's input reaches no loss
      for (int r = kPadRows[size_t(b)]; r < kPadL; ++r)
        for (int k = 0; k < c.F; ++k) EXPECT_EQ(dx[(size_t(b) * kPadL + r) * c.F + k], 0.0) << tag;

    cpu::CpuModel fast(lay, {.threads = 2});
    const auto pf = cast_vec<float>(params), xf = cast_vec<float>(x), yf = cast_vec<float>(y);
    const auto conv = cast_vec<float>(s0.conv), ssm = cast_vec<float>(s0.ssm);
    CarryState<float> cf{conv.data(), ssm.data(), nullptr, nullptr};
    cf.rows = kPadRows.data(), cf.dates = dates.data();
    fast.forward(pf.data(), xf.data(), kPadB, kPadL, &cf);
    EXPECT_NEAR(fast.loss(yf.data(), lp).loss, l0, tol::kCpuFastRelL2 * (1 + std::abs(l0)));
    std::vector<float> gf(params.size(), 0.0f);
    fast.backward(pf.data(), gf.data(), nullptr);
    for (const auto& t : lay.table.tensors()) {
      const std::vector<float> a(gf.begin() + t.offset, gf.begin() + t.offset + t.numel);
      const std::vector<double> r(grads.begin() + t.offset, grads.begin() + t.offset + t.numel);
      EXPECT_TRUE(rel_l2_close(a, r, tol::kCpuFastRelL2, t.name + tag));
    }
  }
}

// The row ops' reference: window_tail at n_b = L is the conv's window_last; dates_to_rows is rows_to_dates'
// adjoint (⟨rows_to_dates(u), v⟩ = ⟨u, dates_to_rows(v)⟩ for random u, v).
TEST(ModelCarry, RowOpsReference) {
  auto rng = make_rng(320);
  const Conv1dParams p{kPadB, kPadL, 5, 4, 7};
  const auto xin = random_vec<double>(size_t(kPadB) * kPadL * p.ld_x, rng);
  const auto w0 = random_vec<double>(size_t(kPadB) * (p.W - 1) * p.C, rng);
  const auto w = random_vec<double>(size_t(p.C) * p.W, rng), bias = random_vec<double>(size_t(p.C), rng);
  std::vector<double> y(size_t(kPadB) * kPadL * p.C), last(w0.size(), kNaN), tail(w0.size(), kNaN);
  ref::conv1d_silu_fwd<double>(p, {.x = xin.data(), .w = w.data(), .bias = bias.data(), .window0 = w0.data(),
                                   .window_last = last.data()}, y.data());
  const std::vector<int> full(size_t(kPadB), kPadL), dates = pad_dates();
  ref::window_tail<double>(p, {kPadB, kPadL, full.data(), dates.data()}, xin.data(), w0.data(), tail.data());
  EXPECT_EQ(tail, last);
  const RowMap m{kPadB, kPadL, kPadRows.data(), dates.data()};
  const int K = 2;
  const auto u = random_vec<double>(size_t(kPadB) * kPadL * K, rng), v = random_vec<double>(u.size(), rng);
  std::vector<double> ud(u.size(), kNaN), vr(u.size(), kNaN);
  ref::rows_to_dates<double>(m, K, u.data(), ud.data());
  ref::dates_to_rows<double>(m, K, v.data(), vr.data());
  double a = 0, b = 0;
  for (size_t i = 0; i < u.size(); ++i) a += ud[i] * v[i], b += u[i] * vr[i];
  EXPECT_NEAR(a, b, 1e-12 * (1 + std::abs(a)));
  EXPECT_NE(a, 0.0);
  std::vector<double> masked = u;
  ref::mask_rows<double>(m, K, K, masked.data());
  for (int bb = 0; bb < kPadB; ++bb)
    for (int r = 0; r < kPadL; ++r)
      for (int k = 0; k < K; ++k) {
        const size_t i = (size_t(bb) * kPadL + r) * K + k;
        EXPECT_EQ(masked[i], r < kPadRows[size_t(bb)] ? u[i] : 0.0);
      }
}

}  // namespace
}  // namespace mlalpha::test
