// Bad configurations are rejected with a message naming the field, the value and what was expected;
// the parameter table has mamba_ssm's names and shapes; initialisation follows DESIGN section 1.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/error.h"
#include "model/layout.h"
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
  EXPECT_EQ(w[lay.in_b], 0.0f);
  EXPECT_EQ(w[lay.norm_f], 1.0f);
}

}  // namespace
}  // namespace mlalpha
