// The model with carried states (CarryState, model/layer_shapes.h; train.state = "carry"):
// - a forward over window k, then over window k + 1 from the states window k ended with, is one forward over
//   both (the reference in double bit for bit with the recurrent SSD, the chunked one and the fast CPU model
//   within their tolerances), at a first window shorter than the conv's W − 1 and windows not a multiple of Q;
// - the reference model's gradients against central finite differences with a nonzero initial state;
// - the fast model's loss and gradients against the reference's with a nonzero initial state;
// - zero in states are no states, bit for bit (the zero-state training path is today's).
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "fd_util.h"
#include "model_fd_util.h"
#include "model/layer_shapes.h"
#include "model/model_cpu.h"
#include "model/model_ref.h"
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

}  // namespace
}  // namespace mlalpha::test
