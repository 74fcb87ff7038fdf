// TOML run configuration: the shipped example parses to the documented values; unknown keys, wrong
// types and syntax errors are rejected naming the file, line and key.
#include <gtest/gtest.h>

#include "mlalpha/config.h"
#include "core/error.h"

namespace mlalpha {
namespace {

std::string error_of(const std::string& text) {
  try {
    parse_run_config(text, "cfg.toml");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(RunConfig, ExampleFileParses) {
  const RunConfig c = load_run_config(std::string(MLALPHA_SOURCE_DIR) + "/configs/example.toml");
  EXPECT_EQ(c.data.source, "synthetic");
  EXPECT_EQ(c.data.synth.N, 16);
  EXPECT_EQ(c.model.D, 32);
  EXPECT_EQ(c.train.B, 16);
  EXPECT_FLOAT_EQ(c.train.lr, 1e-3f);
  EXPECT_EQ(c.split.spec.train_end.kind, SplitPoint::Kind::fraction);
  EXPECT_DOUBLE_EQ(c.split.spec.valid_end.fraction, 0.85);
  EXPECT_EQ(c.run.metric, "ic");
  EXPECT_NO_THROW(c.validate());
}

TEST(RunConfig, ValuesAndBoundaryKinds) {
  const RunConfig c = parse_run_config(R"(
[split]
train_end = 1500
valid_end = "2021-06-30"
gap = 5
[model]
d_model = 64
[train]
lr = 3e-4
loss = "huber"
steps = 10
)",
                                       "x.toml");
  EXPECT_EQ(c.split.spec.train_end.kind, SplitPoint::Kind::index);
  EXPECT_EQ(c.split.spec.train_end.index, 1500);
  EXPECT_EQ(c.split.spec.valid_end.kind, SplitPoint::Kind::time);
  EXPECT_EQ(c.split.spec.valid_end.time, "2021-06-30");
  EXPECT_EQ(c.split.spec.gap, 5);
  EXPECT_EQ(c.model.D, 64);
  EXPECT_FLOAT_EQ(c.train.lr, 3e-4f);
  EXPECT_EQ(c.train.loss, LossKind::Huber);
  EXPECT_EQ(c.train.steps, 10);
}

TEST(RunConfig, UnknownKeyNamesItLineAndSuggestion) {
  const std::string e = error_of("[train]\nbatch = 4\nlerning_rate = 0.1\n");
  EXPECT_NE(e.find("cfg.toml:3: unknown key 'train.lerning_rate'"), std::string::npos) << e;
  const std::string e2 = error_of("[train]\nbach = 4\n");
  EXPECT_NE(e2.find("did you mean 'train.batch'?"), std::string::npos) << e2;
  EXPECT_NE(error_of("[optimizer]\nlr = 1\n").find("unknown section or top-level key 'optimizer'"), std::string::npos);
}

TEST(RunConfig, WrongTypesAndValues) {
  EXPECT_NE(error_of("[train]\nbatch = \"four\"\n").find("cfg.toml:2: train.batch: expected an integer"),
            std::string::npos);
  EXPECT_NE(error_of("[run]\ntf32 = 1\n").find("run.tf32: expected true or false"), std::string::npos);
  EXPECT_NE(error_of("[split]\ntrain_end = 1.5\n").find("a fraction must be in (0, 1]"), std::string::npos);
  EXPECT_NE(error_of("[train]\nloss = \"l1\"\n").find("'l1'"), std::string::npos);
  EXPECT_NE(error_of("[train\nbatch = 4\n").find("cfg.toml:1"), std::string::npos);  // syntax error with line
  RunConfig c = parse_run_config("[train]\nlr = -1.0\n", "cfg.toml");
  try {
    c.validate();
    FAIL() << "negative lr accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("train.lr must be a finite number > 0, got -1"), std::string::npos);
  }
}

TEST(RunConfig, OverridesUseTheSameRules) {
  const RunConfig c = parse_run_config("[train]\nlr = 1e-3\n", "cfg.toml",
                                       {"train.lr=2e-3", "data.source=npy", "run.tf32=true", "model.d_model=48"});
  EXPECT_FLOAT_EQ(c.train.lr, 2e-3f);
  EXPECT_EQ(c.data.source, "npy");
  EXPECT_TRUE(c.run.tf32);
  EXPECT_EQ(c.model.D, 48);
  try {
    parse_run_config("", "cfg.toml", {"train.lerning_rate=1"});
    FAIL() << "unknown override accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("override 'train.lerning_rate=1': unknown key 'train.lerning_rate'"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(parse_run_config("", "cfg.toml", {"lr=1"}), Error);
  EXPECT_THROW(parse_run_config("", "cfg.toml", {"train.batch=many"}), Error);  // a string where an integer goes
}

}  // namespace
}  // namespace mlalpha
