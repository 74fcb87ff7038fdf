// The fast CPU model (src/model/model_cpu.h) against the reference model: loss, output and every gradient tensor against
// RefModel<double> (the fp32 reference's own error printed beside it) on ragged shapes — L not a multiple
// of Q, L < Q, L = 1, B = 1, G > 1, K > 1, NaN targets, burn-in, MSE and Huber — with fresh inputs each run;
// bit-reproducibility for a thread count and across thread counts; inference = forward; and the
// optimizer (global norm, AdamW) against the reference's.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <new>
#include <numeric>

#include "model/model_cpu.h"
#include "train/optim_cpu.h"
#include "cpu/thread_pool.h"
#include "model/model_ref.h"
#include "test_util.h"
#include "tolerances.h"
#include "train/optim.h"

// Every operator new of this test binary is counted while g_count_news is set (the step must make none).
namespace {
std::atomic<bool> g_count_news{false};
std::atomic<long> g_news{0};
}  // namespace
void* operator new(size_t n) {
  if (g_count_news.load(std::memory_order_relaxed)) g_news.fetch_add(1);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }

namespace mlalpha::test {
namespace {

struct Case {
  const char* name;
  int B, L;
  int D, NL, P, G, N, Q, F, K;
  LossKind loss;
  int burn_in;
};

ModelConfig config_of(const Case& cs) {
  ModelConfig c;
  c.F = cs.F;
  c.K = cs.K;
  c.D = cs.D;
  c.NL = cs.NL;
  c.P = cs.P;
  c.G = cs.G;
  c.N = cs.N;
  c.Q = cs.Q;
  if (std::string(cs.name) == "dt_clamped") {  // Δ clamped on both sides: the clamp's zero gradient
    c.dt_limit_lo = 0.01f;
    c.dt_limit_hi = 0.05f;
  }
  return c;
}

// Parameters from the real initialisation, moved off their special values (norms 1, biases 0, D 1) so that
// no gradient term hides behind a zero.
std::vector<float> random_params(const ModelLayout& lay, std::mt19937_64& rng) {
  std::vector<float> p = init_params(lay, rng());
  const std::vector<float> noise = random_vec<float>(p.size(), rng, -0.2, 0.2);
  for (size_t i = 0; i < p.size(); ++i) p[i] += noise[i];
  return p;
}

struct Batch {
  std::vector<float> x, y;
};
Batch random_batch(const ModelConfig& c, int B, int L, std::mt19937_64& rng) {
  Batch b{random_vec<float>(size_t(B) * L * c.F, rng, -2, 2), random_vec<float>(size_t(B) * L * c.K, rng, -1, 1)};
  std::bernoulli_distribution nan(0.1);
  for (float& v : b.y)
    if (nan(rng)) v = std::numeric_limits<float>::quiet_NaN();
  return b;
}

// One forward + loss + backward of the fast model; grads from a zero arena.
struct Result {
  std::vector<float> out, grads, dx;
  float loss;
};
Result run_fast(cpu::CpuModel& m, const ModelLayout& lay, const std::vector<float>& P, const Batch& b, int B, int L,
                const LossParams& lp) {
  Result r;
  r.out = m.forward(P.data(), b.x.data(), B, L);
  r.loss = m.loss(b.y.data(), lp).loss;
  r.grads.assign(lay.table.total(), 0.0f);
  r.dx.assign(b.x.size(), std::numeric_limits<float>::quiet_NaN());  // poisoned: every element must be written
  m.backward(P.data(), r.grads.data(), r.dx.data());
  return r;
}

template <typename G>
double rel_l2(const std::vector<G>& got, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double e = double(got[i]) - ref[i];
    num += e * e, den += ref[i] * ref[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

// A model of the case's shape, random parameters and a random batch (the rng's salt varies by test).
struct Problem {
  Case cs;
  ModelLayout lay;
  std::mt19937_64 rng;
  std::vector<float> P;
  Batch b;
  LossParams lp;
  Problem(const Case& c, uint64_t salt)
      : cs(c), lay(config_of(c)), rng(make_rng(salt)), P(random_params(lay, rng)),
        b(random_batch(lay.cfg, c.B, c.L, rng)), lp{c.B, c.L, lay.cfg.K, c.loss, 1.0f, 0} {}
};

class CpuModelExact : public ::testing::TestWithParam<Case> {};

TEST_P(CpuModelExact, LossAndEveryGradientMatchTheReference) {
  const Case cs = GetParam();
  const ModelLayout lay(config_of(cs));
  const ModelConfig& c = lay.cfg;
  auto rng = make_rng(cs.B * 1000 + cs.L * 7 + cs.G);
  const std::vector<float> P = random_params(lay, rng);
  const Batch b = random_batch(c, cs.B, cs.L, rng);
  // kind IC: cross-sections of 4 windows (a group counts from 3 valid targets)
  const LossParams lp{cs.B, cs.L, c.K, cs.loss, 0.5f, cs.burn_in, cs.loss == LossKind::IC ? 4 : 0};

  cpu::CpuModel fast(lay, {.threads = 2});
  const Result r = run_fast(fast, lay, P, b, cs.B, cs.L, lp);

  RefModel<double> refd(lay, false);
  const std::vector<double> Pd = cast_vec<double>(P), xd = cast_vec<double>(b.x), yd = cast_vec<double>(b.y);
  const std::vector<double> outd = refd.forward(Pd.data(), xd.data(), cs.B, cs.L);
  const double lossd = refd.loss(yd.data(), lp).loss;
  std::vector<double> gd(Pd.size(), 0.0), dxd(xd.size());
  refd.backward(Pd.data(), gd.data(), dxd.data());

  RefModel<float> reff(lay, false);
  reff.forward(P.data(), b.x.data(), cs.B, cs.L);
  const float lossf = reff.loss(b.y.data(), lp).loss;
  std::vector<float> gf(P.size(), 0.0f), dxf(b.x.size());
  reff.backward(P.data(), gf.data(), dxf.data());

  // The loss is a mean of e² = (out − y)²: relative to the size of its terms (|out| + |y|)², since an e that
  // cancels (out ≈ y, likeliest with few valid targets) carries out's absolute rounding, not a relative one.
  double terms = 0;
  long long valid = 0;
  for (size_t i = 0; i < yd.size(); ++i)
    if (!std::isnan(yd[i]) && int((i / c.K) % cs.L) >= cs.burn_in)
      terms += (std::abs(outd[i]) + std::abs(yd[i])) * (std::abs(outd[i]) + std::abs(yd[i])), ++valid;
  terms /= double(std::max(valid, 1LL));
  if (cs.loss == LossKind::IC) terms = 1.0;  // a mean of correlations, each within [−1, 1]
  EXPECT_NEAR(r.loss, lossd, tol::kCpuFastLossRel * (std::abs(lossd) + terms)) << "fp32 reference: " << lossf;
  const double gnorm = std::sqrt(std::inner_product(gd.begin(), gd.end(), gd.begin(), 0.0));
  ASSERT_GT(gnorm, 0.0) << "a zero gradient compares nothing";
  EXPECT_TRUE(rel_l2_close(r.out, outd, tol::kCpuFastRelL2, "out"));
  EXPECT_TRUE(rel_l2_close(r.dx, dxd, cs.loss == LossKind::IC ? tol::kCpuFastIcRelL2 : tol::kCpuFastRelL2, "dx"));
  double worst = 0, worst_f = 0;
  std::string worst_name;
  for (const ParamTensor& t : lay.table.tensors()) {
    const auto slice = [&](const auto& v) {
      using T = typename std::decay_t<decltype(v)>::value_type;
      return std::vector<T>(v.begin() + t.offset, v.begin() + t.offset + t.numel);
    };
    const auto got = slice(r.grads);
    const auto ref = slice(gd);
    if (t.name == "head.bias") {
      // Σ_rows ∂loss/∂out: a sum that can cancel (few rows), and under the IC loss cancels exactly (a shift
      // of the predictions leaves it unchanged): bounded by the size of its terms, Σ_rows |∂loss/∂out|.
      std::vector<double> dout(outd.size());
      ref::loss_fwd_bwd<double>(lp, {.out = outd.data(), .y = yd.data()}, dout.data());
      for (int k = 0; k < c.K; ++k) {
        double terms_k = 0;
        for (size_t i = k; i < dout.size(); i += c.K) terms_k += std::abs(dout[i]);
        EXPECT_LE(std::abs(got[k] - ref[k]), tol::kCpuFastRelL2 * terms_k) << "head.bias[" << k << "]";
      }
      continue;
    }
    const double e = rel_l2(got, ref), ef = rel_l2(slice(gf), ref);
    const bool head_sum = t.name.ends_with(".A_log") || t.name.ends_with(".dt_bias") || t.name.ends_with(".D");
    const double tol = cs.loss == LossKind::IC ? tol::kCpuFastIcRelL2
                       : head_sum              ? tol::kCpuFastHeadSumRelL2
                                               : tol::kCpuFastRelL2;
    EXPECT_LE(e, tol) << t.name << ": rel L2 " << e << " (RefModel<float>: " << ef << ")";
    if (e > worst) worst = e, worst_name = t.name;
    worst_f = std::max(worst_f, ef);
  }
  // The measured errors, for docs/testing.md: the fast model's and the fp32 reference's worst tensor.
  std::printf("[%s] worst gradient rel L2: fast %.3g (%s), RefModel<float> %.3g; loss rel %.3g\n", cs.name, worst,
              worst_name.c_str(), worst_f, std::abs(r.loss - lossd) / std::abs(lossd));
}

// B = 1, L = 1, L < Q, L not a multiple of Q, G > 1, K > 1, Huber, burn-in, several chunks, the S shape's
// N, P, Q (smaller B, L), Δ clamped.
const Case kCases[] = {
    {"ragged", 3, 37, 16, 2, 8, 1, 8, 16, 5, 1, LossKind::MSE, 0},
    {"B1", 1, 50, 16, 2, 8, 1, 8, 16, 4, 2, LossKind::Huber, 3},
    {"L1", 4, 1, 16, 1, 8, 1, 8, 16, 3, 1, LossKind::MSE, 0},
    {"groups", 2, 29, 16, 2, 4, 2, 6, 8, 3, 2, LossKind::MSE, 2},
    {"short_chunks", 2, 70, 24, 3, 12, 1, 16, 64, 6, 1, LossKind::Huber, 0},
    {"default_like", 4, 64, 32, 2, 16, 1, 16, 64, 8, 1, LossKind::MSE, 0},
    {"S_like", 2, 130, 64, 2, 32, 1, 64, 64, 16, 1, LossKind::MSE, 0},
    {"dt_clamped", 2, 45, 16, 2, 8, 1, 8, 16, 4, 1, LossKind::MSE, 0},
    {"ic_loss", 8, 33, 16, 2, 8, 1, 8, 16, 4, 1, LossKind::IC, 0},
};
INSTANTIATE_TEST_SUITE_P(Shapes, CpuModelExact, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

// The same inputs give the same bits: twice on one model, and on models of 1, 2 and 3 threads (the tasks
// and reduction orders do not depend on the thread count).
TEST(CpuModel, BitReproducibleForAnyThreadCount) {
  const Problem t({"", 3, 150, 32, 2, 16, 1, 16, 64, 8, 1, LossKind::MSE, 0}, 77);
  const auto& [cs, lay, rng, P, b, lp] = t;
  cpu::CpuModel m1(lay, {.threads = 1}), m2(lay, {.threads = 2}), m3(lay, {.threads = 3});
  const Result a = run_fast(m2, lay, P, b, cs.B, cs.L, lp);
  const Result again = run_fast(m2, lay, P, b, cs.B, cs.L, lp);
  EXPECT_TRUE(same_bits(a.out, again.out)) << "out, twice";
  EXPECT_TRUE(same_bits(a.grads, again.grads)) << "grads, twice";
  EXPECT_EQ(a.loss, again.loss);
  for (cpu::CpuModel* m : {&m1, &m3}) {
    const Result o = run_fast(*m, lay, P, b, cs.B, cs.L, lp);
    EXPECT_TRUE(same_bits(a.out, o.out)) << m->threads() << " threads";
    EXPECT_TRUE(same_bits(a.grads, o.grads)) << m->threads() << " threads";
    EXPECT_TRUE(same_bits(a.dx, o.dx)) << m->threads() << " threads";
  }
}

// A batch with a non-finite feature gives non-finite gradients (the trainer skips that step), and leaves
// nothing behind: the next batch's output, gradients and dx are bitwise those of a fresh model. (A buffer
// overwritten as 0 · old + new kept the NaN, and every later step was skipped.)
TEST(CpuModel, NonFiniteBatchLeavesNothingBehind) {
  const Problem t({"", 3, 40, 16, 2, 8, 1, 8, 16, 4, 1, LossKind::MSE, 2}, 81);
  const auto& [cs, lay, rng, P, b, lp] = t;
  cpu::CpuModel fresh(lay, {.threads = 2}), used(lay, {.threads = 2});
  const Result want = run_fast(fresh, lay, P, b, cs.B, cs.L, lp);
  Batch bad = b;
  bad.x[size_t(cs.L + 5) * lay.cfg.F + 1] = std::numeric_limits<float>::infinity();  // window 1, row 5
  const Result poisoned = run_fast(used, lay, P, bad, cs.B, cs.L, lp);
  EXPECT_FALSE(std::all_of(poisoned.grads.begin(), poisoned.grads.end(), [](float v) { return std::isfinite(v); }));
  const Result got = run_fast(used, lay, P, b, cs.B, cs.L, lp);
  EXPECT_TRUE(same_bits(got.out, want.out));
  EXPECT_TRUE(same_bits(got.grads, want.grads));
  EXPECT_TRUE(same_bits(got.dx, want.dx));
}

// backward() adds into the arena; infer() gives forward()'s output bits without caching; a smaller batch
// after a larger one reuses the buffers and still matches.
TEST(CpuModel, AccumulatesAndInfersLikeForward) {
  Problem t({"", 2, 40, 16, 2, 8, 1, 8, 16, 4, 1, LossKind::MSE, 0}, 78);
  auto& [cs, lay, rng, P, b, lp] = t;
  cpu::CpuModel m(lay, {.threads = 2});
  m.reserve(4, 64);
  const Result r = run_fast(m, lay, P, b, cs.B, cs.L, lp);
  std::vector<float> g0 = random_vec<float>(P.size(), rng), g = g0;
  m.backward(P.data(), g.data(), nullptr);
  // g0 + grads up to rounding: the GEMMs add into the arena block by block, so the sums round differently
  for (size_t i = 0; i < g.size(); ++i)
    ASSERT_NEAR(g[i], g0[i] + r.grads[i], 1e-6 * (std::abs(g0[i]) + std::abs(r.grads[i]))) << "element " << i;
  std::vector<float> out(r.out.size(), std::numeric_limits<float>::quiet_NaN());
  m.infer(P.data(), b.x.data(), cs.B, cs.L, out.data());
  EXPECT_TRUE(same_bits(out, r.out));
  // A model that only ever infers holds one layer's forward buffers, and still gives the same bits.
  cpu::CpuModel inf(lay, {.threads = 3});
  std::fill(out.begin(), out.end(), std::numeric_limits<float>::quiet_NaN());
  inf.infer(P.data(), b.x.data(), cs.B, cs.L, out.data());
  EXPECT_TRUE(same_bits(out, r.out));
  EXPECT_LT(cpu::CpuModel::floats_needed(lay.cfg, cs.B, cs.L, 3, false),
            cpu::CpuModel::floats_needed(lay.cfg, cs.B, cs.L, 3, true) / 2);
  EXPECT_NE(error_of([&] { m.backward(P.data(), g.data(), nullptr); }).find("forward() and loss()"), std::string::npos);
}

// After the first step of a shape, a whole step (forward, loss, backward, norm, AdamW; and an inference)
// allocates nothing.
TEST(CpuModel, StepAllocatesNothing) {
  const Problem t({"", 3, 90, 16, 2, 8, 1, 8, 32, 4, 1, LossKind::MSE, 0}, 80);
  const auto& [cs, lay, rng, P0, b, lp] = t;
  cpu::CpuModel m(lay, {.threads = 2});
  std::vector<float> P = P0, G(P.size()), mom(P.size()), vel(P.size()), out(b.y.size());
  std::vector<double> part(cpu::norm_blocks(P.size()));
  const std::vector<unsigned char> decay = lay.table.decay_mask();
  auto step = [&](int64_t k) {
    std::fill(G.begin(), G.end(), 0.0f);
    m.forward(P.data(), b.x.data(), cs.B, cs.L);
    m.loss(b.y.data(), lp);
    m.backward(P.data(), G.data(), nullptr);
    const double nsq = cpu::grad_norm_sq(m.pool(), G.data(), G.size(), part.data());
    cpu::adamw(m.pool(), P.data(), G.data(), mom.data(), vel.data(), decay.data(), P.size(), {.step = k},
               float(1.0 / std::max(1.0, std::sqrt(nsq))));
    m.infer(P.data(), b.x.data(), cs.B, cs.L, out.data());
  };
  step(1);
  g_news = 0;
  g_count_news = true;
  step(2);
  step(3);
  g_count_news = false;
  EXPECT_EQ(g_news.load(), 0) << "operator new calls in two steps";
  EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](float v) { return std::isfinite(v); }));
}

TEST(CpuOptim, NormAndAdamWMatchTheReference) {
  auto rng = make_rng(79);
  const size_t n = 100003;  // several norm blocks and a ragged tail
  cpu::ThreadPool pool(3);
  const std::vector<float> g = random_vec<float>(n, rng, -0.05, 0.05);
  std::vector<double> part(cpu::norm_blocks(n));
  const double got = cpu::grad_norm_sq(pool, g.data(), n, part.data());
  const double ref = ref::grad_norm_sq(g.data(), n);
  EXPECT_NEAR(got, ref, tol::kCpuNormSqRel * ref);
  std::vector<float> p = random_vec<float>(n, rng), m = random_vec<float>(n, rng, -0.01, 0.01);
  std::vector<float> v = random_vec<float>(n, rng, 0.0, 1e-4);
  std::vector<unsigned char> decay(n);
  for (size_t i = 0; i < n; ++i) decay[i] = (rng() & 1) != 0;
  std::vector<float> p2 = p, m2 = m, v2 = v;
  const ClipResult clip = clip_scale(got, 0.5f);
  ASSERT_LT(clip.scale, 1.0f);  // the clip is active, so the scale is exercised
  const AdamWParams a{.lr = 3e-3f, .beta1 = 0.9f, .beta2 = 0.99f, .eps = 1e-8f, .weight_decay = 0.1f, .step = 7};
  ref::adamw(p.data(), g.data(), m.data(), v.data(), decay.data(), n, a, clip.scale);
  cpu::adamw(pool, p2.data(), g.data(), m2.data(), v2.data(), decay.data(), n,
             {.lr = a.lr, .beta1 = a.beta1, .beta2 = a.beta2, .eps = a.eps, .weight_decay = a.weight_decay,
              .step = a.step},
             clip.scale);
  EXPECT_TRUE(same_bits(p, p2));
  EXPECT_TRUE(same_bits(m, m2));
  EXPECT_TRUE(same_bits(v, v2));
}

// Every task runs once; a worker index is in [0, threads) and never held by two tasks at once (the SSD's
// per-worker scratch relies on it), whichever worker claims which task.
TEST(ThreadPool, EveryTaskOnceAndErrorsRethrown) {
  cpu::ThreadPool pool(3);
  std::vector<int> hits(1000, 0), worker(1000, -1);
  std::atomic<int> busy[3] = {0, 0, 0};
  std::atomic<int> overlaps{0};
  for (int round = 0; round < 20; ++round) {
    std::fill(hits.begin(), hits.end(), 0);
    pool.run(1000, [&](int t, int w) {
      if (w < 0 || w >= 3) return;
      if (busy[w].fetch_add(1) != 0) ++overlaps;
      ++hits[t], worker[t] = w;
      busy[w].fetch_sub(1);
    });
    for (int t = 0; t < 1000; ++t) ASSERT_TRUE(hits[t] == 1 && worker[t] >= 0 && worker[t] < 3) << "task " << t;
  }
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_NE(error_of([&] { pool.run(10, [](int t, int) { if (t == 7) throw Error("task 7 failed"); }); })
                .find("task 7"),
            std::string::npos);
}

}  // namespace
}  // namespace mlalpha::test
