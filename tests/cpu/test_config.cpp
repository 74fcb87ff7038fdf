// Bad configurations are rejected with a message naming the field, the value and what was expected;
// the parameter table has mamba_ssm's names and shapes; initialisation follows DESIGN section 1.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>
#include <string>

#include "core/error.h"
#include "model/layout.h"
#include "model/model_ref.h"
#include "mlalpha/config.h"

namespace mlalpha {
namespace {

template <typename F>
std::string error_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Config, RejectsImpossibleModels) {
  ModelConfig c;
  c.D = 30;
  c.P = 16;  // d_inner = 60 is not a multiple of 16
  EXPECT_NE(error_of([&] { c.validate(); }).find("model.head_dim = 16 must divide d_inner"), std::string::npos);
  c = ModelConfig{};
  c.D = 0;
  EXPECT_NE(error_of([&] { c.validate(); }).find("model.d_model must be >= 1, got 0"), std::string::npos);
  c = ModelConfig{};
  c.G = 3;  // H = 4 heads
  EXPECT_NE(error_of([&] { c.validate(); }).find("model.groups = 3 must divide the number of heads"), std::string::npos);
  c = ModelConfig{};
  c.N = -2;
  EXPECT_NE(error_of([&] { c.validate(); }).find("model.d_state must be >= 1, got -2"), std::string::npos);
  EXPECT_EQ(error_of([] { ModelConfig{}.validate(); }), "");
}

TEST(Config, RejectsImpossibleTraining) {
  TrainConfig t;
  t.lr = -1e-3f;
  EXPECT_NE(error_of([&] { t.validate(); }).find("train.lr must be a finite number > 0, got -0.001"), std::string::npos);
  t = TrainConfig{};
  t.B = 0;
  EXPECT_NE(error_of([&] { t.validate(); }).find("train.batch must be >= 1, got 0"), std::string::npos);
  t = TrainConfig{};
  t.burn_in = t.L;
  EXPECT_NE(error_of([&] { t.validate(); }).find("train.burn_in must be in [0, train.seq_len)"), std::string::npos);
  t = TrainConfig{};
  t.beta2 = 1.0f;
  EXPECT_NE(error_of([&] { t.validate(); }).find("train.beta2"), std::string::npos);
  EXPECT_NE(error_of([] { parse_loss("l1"); }).find("'l1'"), std::string::npos);
  EXPECT_EQ(error_of([] { TrainConfig{}.validate(); }), "");
}

TEST(Layout, NamesShapesAndDecay) {
  ModelConfig c;
  c.F = 5; c.K = 2; c.D = 16; c.NL = 2; c.P = 8; c.G = 2; c.N = 4; c.W = 4;
  const ModelLayout lay(c);
  const auto& in = lay.table.at("layers.1.mixer.in_proj.weight");
  EXPECT_EQ(in.shape, (std::vector<int64_t>{2 * 32 + 2 * 2 * 4 + 4, 16}));
  EXPECT_TRUE(in.decay);
  EXPECT_EQ(lay.table.at("layers.0.mixer.conv1d.weight").shape, (std::vector<int64_t>{32 + 16, 1, 4}));
  for (const char* nd : {"input_proj.bias", "layers.0.norm.weight", "layers.0.mixer.A_log", "layers.0.mixer.D",
                         "layers.0.mixer.dt_bias", "layers.0.mixer.norm.weight", "layers.0.mixer.conv1d.bias",
                         "norm_f.weight", "head.bias"})
    EXPECT_FALSE(lay.table.at(nd).decay) << nd;
  EXPECT_EQ(lay.table.tensors().size(), 2u + 9u * 2 + 3u);
  for (const auto& t : lay.table.tensors()) EXPECT_EQ(t.offset % ParamTable::kAlign, 0u) << t.name;
  EXPECT_NE(error_of([&] { lay.table.at("nope"); }).find("'nope'"), std::string::npos);
}

TEST(Layout, InitialisationFollowsDesign) {
  ModelConfig c;
  c.D = 64; c.NL = 4; c.P = 16;
  const ModelLayout lay(c);
  const auto w = init_params(lay, 42);
  EXPECT_EQ(w, init_params(lay, 42));  // reproducible from the seed
  EXPECT_NE(w, init_params(lay, 43));
  const auto& o = lay.layers[0];
  for (int h = 0; h < c.H(); ++h) {
    const double A = std::exp(double(w[o.A_log + h]));
    EXPECT_GE(A, 1.0);
    EXPECT_LE(A, 16.0);
    const double dt = std::log1p(std::exp(double(w[o.dt_bias + h])));  // softplus(dt_bias) = dt
    EXPECT_GE(dt, 1e-3 * 0.999);
    EXPECT_LE(dt, 1e-1 * 1.001);
    EXPECT_EQ(w[o.D + h], 1.0f);
  }
  const double bound = 1.0 / std::sqrt(double(c.d_inner())) / std::sqrt(double(c.NL));
  double maxabs = 0;
  for (int i = 0; i < c.D * c.d_inner(); ++i) maxabs = std::max(maxabs, std::abs(double(w[o.out_proj_w + i])));
  EXPECT_LE(maxabs, bound);
  EXPECT_GT(maxabs, 0.9 * bound);
  double bias_max = 0;
  for (int i = 0; i < c.D; ++i) bias_max = std::max(bias_max, std::abs(double(w[lay.in_b + i])));
  EXPECT_LE(bias_max, 1.0 / std::sqrt(double(c.F)));  // U(±1/√F), PyTorch's Linear default
  EXPECT_GT(bias_max, 0.5 / std::sqrt(double(c.F)));
  EXPECT_EQ(w[lay.norm_f], 1.0f);
}

// Windows that start in a stretch of missing rows (every feature NaN → 0, targets NaN) and end on observed
// rows: at initialisation the gradient norm stays of the order of the same windows fully observed. With a
// zero input bias h was exactly 0 on the missing rows, every RMSNorm there had the Jacobian 1/√1e-5, and
// with 3 layers the norm was ~5e4 times larger (the five-stock panel of docs/data.md: 5.5e5 against 9.1).
TEST(Layout, MissingRowsDoNotBlowUpTheFirstGradient) {
  ModelConfig c;
  c.F = 2; c.K = 1; c.D = 32; c.NL = 3; c.P = 16; c.N = 16;
  const ModelLayout lay(c);
  const std::vector<float> w = init_params(lay, 1);
  const int B = 4, L = 64;
  std::vector<float> x(size_t(B) * L * c.F), y(size_t(B) * L);
  uint64_t r = 12345;
  auto u = [&] { return float((r = r * 6364136223846793005ull + 1442695040888963407ull) >> 40) / float(1 << 24) * 2 - 1; };
  for (float& v : x) v = 1.7f * u();
  for (float& v : y) v = 0.1f * u();
  auto grad_norm = [&](const std::vector<float>& xb, const std::vector<float>& yb) {
    RefModel<double> m(lay);
    const std::vector<double> wd(w.begin(), w.end()), xd(xb.begin(), xb.end()), yd(yb.begin(), yb.end());
    std::vector<double> g(w.size(), 0.0);
    m.forward(wd.data(), xd.data(), B, L);
    m.loss(yd.data(), {B, L, c.K, LossKind::MSE, 1.0f, 0});
    m.backward(wd.data(), g.data(), nullptr);
    double sq = 0;
    for (double v : g) sq += v * v;
    return std::sqrt(sq);
  };
  const double observed = grad_norm(x, y);
  std::vector<float> xm = x, ym = y;
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < 40; ++t) {  // the first 40 rows of each window are missing
      for (int f = 0; f < c.F; ++f) xm[(size_t(b) * L + t) * c.F + f] = 0.0f;
      ym[size_t(b) * L + t] = NAN;
    }
  const double missing = grad_norm(xm, ym);
  EXPECT_GT(observed, 0.0);
  EXPECT_LT(missing, 10 * observed) << "missing rows " << missing << ", observed " << observed;
}

}  // namespace
}  // namespace mlalpha
