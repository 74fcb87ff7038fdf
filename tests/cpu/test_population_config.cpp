// Populations in the configuration (docs/config.md, "Populations"): train.models, [sweep] and
// run.parallel_folds parse from a file and from overrides, round-trip through to_toml, and are refused
// naming the entry; expand_population's order, names, seeds, settings, folds and size limit.
#include <gtest/gtest.h>

#include <algorithm>

#include "mlalpha/config.h"
#include "test_util.h"
#include "checkpoint/config_json.h"
#include "config/members.h"
#include "config/run_config.h"

namespace mlalpha {
namespace {

using test::contains;
using test::error_of;

RunConfig parse(const std::string& text, const std::vector<std::string>& overrides = {}) {
  return parse_run_config(text, "pop.toml", overrides);
}
// The message of parsing (and validating) text with overrides.
std::string refusal(const std::string& text, const std::vector<std::string>& overrides = {}) {
  return error_of([&] { parse(text, overrides).validate(); });
}

TEST(PopulationConfig, ParsesFromTheFile) {
  const RunConfig c = parse(R"(
[train]
models = 3
steps = 200
[sweep]
lr = [1e-3, 3e-4, 1]
weight_decay = 0
clip = [0.5, 2]
warmup = [10, 50]
[split]
walk_forward_folds = 2
[run]
parallel_folds = true
)");
  EXPECT_EQ(c.train.models, 3);
  EXPECT_EQ(c.sweep.lr, (std::vector<float>{1e-3f, 3e-4f, 1.0f}));  // an integer is a number
  EXPECT_EQ(c.sweep.weight_decay, (std::vector<float>{0.0f}));     // a single value is a list of one
  EXPECT_EQ(c.sweep.clip, (std::vector<float>{0.5f, 2.0f}));
  EXPECT_EQ(c.sweep.warmup, (std::vector<int64_t>{10, 50}));
  EXPECT_TRUE(c.run.parallel_folds);
  for (const char* k : {"train.models", "sweep.lr", "sweep.weight_decay", "sweep.clip", "sweep.warmup", "run.parallel_folds"})
    EXPECT_TRUE(c.was_given(k)) << k;
  EXPECT_NO_THROW(c.validate());
  EXPECT_TRUE(is_population(c));

  const RunConfig d = parse("");
  EXPECT_EQ(d.train.models, 1);
  EXPECT_TRUE(d.sweep.empty());
  EXPECT_FALSE(d.run.parallel_folds);
  EXPECT_FALSE(is_population(d));
  EXPECT_TRUE(is_population(parse("", {"train.models=2"})));
  EXPECT_TRUE(is_population(parse("", {"sweep.clip=0.5"})));
  EXPECT_FALSE(is_population(parse("", {"run.parallel_folds=true"})));  // no walk-forward folds to train together
  EXPECT_TRUE(is_population(parse("", {"run.parallel_folds=true", "split.walk_forward_folds=3"})));
}

TEST(PopulationConfig, ParsesFromOverrides) {
  const RunConfig c = parse("[sweep]\nlr = 0.1\n", {"sweep.lr=[1e-3,3e-4]", "train.models=4", "sweep.warmup=[0, 5]",
                                                     "run.parallel_folds=true"});
  EXPECT_EQ(c.sweep.lr, (std::vector<float>{1e-3f, 3e-4f}));  // the override replaces the file's list
  EXPECT_EQ(c.sweep.warmup, (std::vector<int64_t>{0, 5}));
  EXPECT_EQ(c.train.models, 4);
  EXPECT_TRUE(c.run.parallel_folds);
  EXPECT_TRUE(c.was_given("sweep.warmup"));
}

TEST(PopulationConfig, KeysAreListedInOrder) {
  const auto& keys = run_config_keys();
  const auto at = [&](const std::string& k) { return std::find(keys.begin(), keys.end(), k) - keys.begin(); };
  for (const char* k : {"train.models", "sweep.lr", "sweep.weight_decay", "sweep.clip", "sweep.warmup", "run.parallel_folds"})
    EXPECT_LT(at(k), ptrdiff_t(keys.size())) << k;
  EXPECT_LT(at("train.models"), at("sweep.lr"));
  EXPECT_LT(at("sweep.lr"), at("sweep.weight_decay"));
  EXPECT_LT(at("sweep.clip"), at("sweep.warmup"));
  EXPECT_LT(at("sweep.warmup"), at("run.device"));
}

TEST(PopulationConfig, RoundTripsThroughToml) {
  const RunConfig c = parse("", {"sweep.lr=[1e-3, 3e-4]", "sweep.clip=[0, 1.5]", "sweep.warmup=[3]", "train.models=5",
                                 "run.parallel_folds=true"});
  const std::string text = to_toml(c);
  EXPECT_TRUE(contains(text, "\n[sweep]\nclip = [0.0, 1.5]\nlr = [0.001, 3e-04]\nwarmup = [3]\n\n[run]"));
  EXPECT_TRUE(contains(text, "models = 5\n"));
  EXPECT_TRUE(contains(text, "parallel_folds = true\n"));
  const RunConfig back = parse(text);
  EXPECT_EQ(back.sweep.lr, c.sweep.lr);
  EXPECT_TRUE(back.sweep.weight_decay.empty());  // not swept: not written, read back as not swept
  EXPECT_EQ(back.sweep.clip, c.sweep.clip);
  EXPECT_EQ(back.sweep.warmup, c.sweep.warmup);
  EXPECT_EQ(back.train.models, 5);
  EXPECT_TRUE(back.run.parallel_folds);
  EXPECT_EQ(run_config_values(back), run_config_values(c));

  // Nothing swept: no [sweep] table, and the text still reads back.
  const std::string plain = to_toml(parse(""));
  EXPECT_EQ(plain.find("[sweep]"), std::string::npos);
  EXPECT_TRUE(contains(plain, "models = 1\n"));
  EXPECT_TRUE(contains(plain, "parallel_folds = false\n"));
  EXPECT_NO_THROW(parse(plain).validate());
  const auto values = run_config_values(parse(""));
  EXPECT_EQ(values.at("sweep.lr"), "[]");
  EXPECT_EQ(run_config_values(c).at("sweep.lr"), "[0.001, 3e-04]");
}

TEST(PopulationConfig, BadValuesNameTheEntry) {
  EXPECT_TRUE(contains(refusal("", {"sweep.lr=[1e-3, 2e-3, 0]"}),
                       "sweep.lr[2] = 0 must be a finite number > 0 (as train.lr)"));
  EXPECT_TRUE(contains(refusal("", {"sweep.weight_decay=[0, -0.5]"}),
                       "sweep.weight_decay[1] = -0.5 must be >= 0 (as train.weight_decay)"));
  EXPECT_TRUE(contains(refusal("", {"sweep.clip=[1, inf]"}), "sweep.clip[1] = inf must be finite"));
  EXPECT_TRUE(contains(refusal("[train]\nsteps = 100\n", {"sweep.warmup=[10, 100]"}),
                       "sweep.warmup[1] = 100 must be less than train.steps = 100"));
  EXPECT_TRUE(contains(refusal("", {"sweep.warmup=[-1]"}), "sweep.warmup[0] = -1 must be >= 0"));
  EXPECT_TRUE(contains(refusal("", {"sweep.lr=[1e-3, 3e-4, 0.001]"}), "sweep.lr[2] = 0.001 repeats sweep.lr[0]"));
  EXPECT_TRUE(contains(refusal("", {"sweep.warmup=[4, 4]"}), "sweep.warmup[1] = 4 repeats sweep.warmup[0]"));
  // A swept setting replaces the train setting, so only the swept values have to fit.
  EXPECT_NO_THROW(parse("[train]\nsteps = 10\nwarmup = 20\n[sweep]\nwarmup = [2, 5]\n").validate());
  EXPECT_TRUE(contains(refusal("[train]\nsteps = 10\nwarmup = 20\n"), "train.warmup = 20 must be less than train.steps = 10"));
}

TEST(PopulationConfig, BadShapesNameTheKeyAndPlace) {
  EXPECT_TRUE(contains(refusal("[sweep]\nlr = []\n"), "pop.toml:2: sweep.lr = []: give at least one value or drop the key"));
  EXPECT_TRUE(contains(refusal("", {"sweep.clip=[]"}),
                       "override 'sweep.clip=[]': sweep.clip = []: give at least one value or drop the key"));
  EXPECT_TRUE(contains(refusal("[sweep]\nlr = [1e-3,\n  \"fast\"]\n"), "pop.toml:3: sweep.lr[1]: expected a number"));
  EXPECT_TRUE(contains(refusal("[sweep]\nwarmup = [10, 2.5]\n"), "sweep.warmup[1]: expected an integer"));
  EXPECT_TRUE(contains(refusal("", {"sweep.lr=[true]"}), "override 'sweep.lr=[true]': sweep.lr[0]: expected a number"));
  EXPECT_TRUE(contains(refusal("", {"sweep.lr=[1e300]"}), "sweep.lr[0]: value 1e+300 is out of range for a 32-bit float"));
  EXPECT_TRUE(contains(refusal("[sweep]\nlearning_rate = [1e-3]\n"),
                       "unknown key 'sweep.learning_rate'; did you mean 'sweep.lr'?"));
  EXPECT_TRUE(contains(refusal("", {"sweep.wd=[0.1]"}), "did you mean 'sweep.weight_decay'?"));
  EXPECT_TRUE(contains(refusal("sweep = 3\n"), "unknown section or top-level key 'sweep'"));
  EXPECT_TRUE(contains(refusal("", {"train.models=0"}), "train.models must be in [1, 4096] (models trained together), got 0"));
  EXPECT_TRUE(contains(refusal("", {"train.models=4097"}), "train.models must be in [1, 4096]"));
  EXPECT_TRUE(contains(refusal("", {"train.models=2.5"}), "train.models: expected an integer"));
  EXPECT_TRUE(contains(refusal("", {"run.parallel_folds=1"}), "run.parallel_folds: expected true or false"));
  EXPECT_TRUE(contains(refusal("[train]\nn_models = 4\n"), "did you mean 'train.models'?"));
}

// ---------------------------------------------------------------------------------------------- expansion

// "lr=0.001 seed=2" for a member's settings.
std::string settings_of(const MemberSpec& m) {
  std::string s;
  for (const auto& [k, v] : m.settings) s += (s.empty() ? "" : " ") + k + "=" + v;
  return s;
}

TEST(PopulationMembers, OneMemberWithoutASweep) {
  RunConfig c = parse("[train]\nseed = 9\nlr = 2e-3\n");
  const auto m = expand_population(c, 1);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].index, 0);
  EXPECT_EQ(m[0].name, "member-00");
  EXPECT_EQ(m[0].train.seed, 9u);
  EXPECT_EQ(m[0].train.lr, 2e-3f);
  EXPECT_EQ(m[0].fold, 0);
  EXPECT_TRUE(m[0].settings.empty());
  // Folds in turn (run.parallel_folds = false) are not members.
  EXPECT_EQ(expand_population(c, 4).size(), 1u);
}

TEST(PopulationMembers, OrderNamesSeedsAndSettings) {
  const RunConfig c = parse("[train]\nmodels = 2\nseed = 100\nwarmup = 7\n[sweep]\nlr = [1e-3, 3e-4]\nclip = [0.5, 1, 2]\n");
  const auto m = expand_population(c, 1);
  ASSERT_EQ(m.size(), 12u);  // 2 lr × 3 clip × 2 seeds
  const char* want[] = {"lr=0.001 clip=0.5 seed=100",  "lr=0.001 clip=0.5 seed=101",  "lr=0.001 clip=1 seed=100",
                        "lr=0.001 clip=1 seed=101",    "lr=0.001 clip=2 seed=100",    "lr=0.001 clip=2 seed=101",
                        "lr=0.0003 clip=0.5 seed=100", "lr=0.0003 clip=0.5 seed=101", "lr=0.0003 clip=1 seed=100",
                        "lr=0.0003 clip=1 seed=101",   "lr=0.0003 clip=2 seed=100",   "lr=0.0003 clip=2 seed=101"};
  for (size_t i = 0; i < m.size(); ++i) {
    EXPECT_EQ(m[i].index, int(i));
    EXPECT_EQ(settings_of(m[i]), want[i]) << i;
    EXPECT_EQ(m[i].train.models, 1);
    EXPECT_EQ(m[i].train.warmup, 7);  // not swept: the run's
    EXPECT_EQ(m[i].fold, 0);
  }
  EXPECT_EQ(m[0].name, "member-00");
  EXPECT_EQ(m[11].name, "member-11");
  EXPECT_EQ(m[7].train.lr, 3e-4f);
  EXPECT_EQ(m[7].train.clip, 0.5f);
  EXPECT_EQ(m[7].train.seed, 101u);
  EXPECT_EQ(m[4].train.clip, 2.0f);
  EXPECT_EQ(m[4].train.seed, 100u);
}

TEST(PopulationMembers, EverySweptKeyAndWideNames) {
  const RunConfig c = parse("[train]\nsteps = 500\n[sweep]\nlr = [0.01, 0.02, 0.03, 0.04, 0.05]\n"
                            "weight_decay = [0, 0.1]\nclip = [1, 0]\nwarmup = [0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100]\n");
  const auto m = expand_population(c, 1);
  ASSERT_EQ(m.size(), 220u);
  EXPECT_EQ(m[0].name, "member-000");  // padded to the width of 219
  EXPECT_EQ(m[219].name, "member-219");
  EXPECT_EQ(settings_of(m[0]), "lr=0.01 weight_decay=0 clip=1 warmup=0");
  EXPECT_EQ(settings_of(m[1]), "lr=0.01 weight_decay=0 clip=1 warmup=10");  // warmup innermost
  EXPECT_EQ(settings_of(m[11]), "lr=0.01 weight_decay=0 clip=0 warmup=0");
  EXPECT_EQ(settings_of(m[22]), "lr=0.01 weight_decay=0.1 clip=1 warmup=0");
  EXPECT_EQ(settings_of(m[44]), "lr=0.02 weight_decay=0 clip=1 warmup=0");
  EXPECT_EQ(settings_of(m[219]), "lr=0.05 weight_decay=0.1 clip=0 warmup=100");
  EXPECT_EQ(m[219].train.weight_decay, 0.1f);
  EXPECT_EQ(m[219].train.warmup, 100);
  EXPECT_EQ(m[219].train.seed, c.train.seed);  // one model per combination: the run's seed, not listed
}

TEST(PopulationMembers, ParallelFoldsMultiply) {
  const RunConfig c = parse("[train]\nmodels = 3\n[sweep]\nlr = [1e-3, 2e-3]\n[run]\nparallel_folds = true\n");
  const auto m = expand_population(c, 4);
  ASSERT_EQ(m.size(), 24u);
  for (size_t i = 0; i < m.size(); ++i) EXPECT_EQ(m[i].fold, int(i / 6)) << i;  // fold outermost
  // The fold is MemberSpec::fold, not a setting: a member has one name and the same settings in every fold.
  EXPECT_EQ(settings_of(m[0]), "lr=0.001 seed=1");
  EXPECT_EQ(settings_of(m[5]), "lr=0.002 seed=3");
  EXPECT_EQ(settings_of(m[6]), "lr=0.001 seed=1");
  EXPECT_EQ(settings_of(m[23]), "lr=0.002 seed=3");
  EXPECT_EQ(m[23].name, "member-05");
  EXPECT_EQ(m[23].index, 23);
  EXPECT_EQ(m[5].name, m[23].name);
  // One fold (or a plain split) has nothing to vary.
  EXPECT_EQ(expand_population(c, 1).size(), 6u);
  EXPECT_EQ(expand_population(c, 0).size(), 6u);
  EXPECT_EQ(settings_of(expand_population(c, 0)[5]), "lr=0.002 seed=3");
  // Folds alone are a population of one per fold.
  const auto f = expand_population(parse("[run]\nparallel_folds = true\n"), 3);
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(settings_of(f[2]), "");
  EXPECT_EQ(f[2].name, "member-00");
  EXPECT_EQ(f[2].fold, 2);
}

TEST(PopulationMembers, SizeLimit) {
  RunConfig c = parse("[train]\nmodels = 4096\n");
  EXPECT_EQ(expand_population(c, 1).size(), 4096u);
  EXPECT_EQ(expand_population(c, 1).back().name, "member-4095");
  c = parse("[train]\nmodels = 1024\n[sweep]\nlr = [1e-3, 2e-3]\nclip = [1, 2]\n[run]\nparallel_folds = true\n");
  EXPECT_EQ(expand_population(c, 1).size(), 4096u);
  const std::string e = error_of([&] { expand_population(c, 3); });
  EXPECT_TRUE(contains(e, "the population has 12288 members: train.models (1024) × sweep.lr (2 values) × "
                          "sweep.clip (2 values) × 3 folds (run.parallel_folds); at most 4096 train together"));
  EXPECT_TRUE(contains(e, "run.parallel_folds = false"));
  c.run.parallel_folds = false;  // the folds in turn: 4096 members each
  EXPECT_EQ(expand_population(c, 3).size(), 4096u);
}

TEST(PopulationMembers, InvalidSweepsAreRefused) {
  RunConfig c = parse("[train]\nsteps = 50\n");
  c.sweep.warmup = {10, 60};
  EXPECT_TRUE(contains(error_of([&] { expand_population(c, 1); }), "sweep.warmup[1] = 60 must be less than train.steps = 50"));
  c.sweep.warmup = {};
  c.sweep.lr = {1e-3f, 1e-3f};
  EXPECT_TRUE(contains(error_of([&] { expand_population(c, 1); }), "sweep.lr[1] = 0.001 repeats sweep.lr[0]"));
  c.sweep.lr = {1e-3f};
  c.train.models = 0;
  EXPECT_TRUE(contains(error_of([&] { expand_population(c, 1); }), "train.models must be in [1, 4096], got 0"));
  // A member's own settings are checked as it trains them, naming the member.
  c.train.models = 2;
  c.train.beta1 = 1.5f;
  EXPECT_TRUE(contains(error_of([&] { expand_population(c, 1); }),
                       "member-00 (lr = 0.001, seed = 1): train.beta1 must be in [0, 1), got 1.5"));
}

TEST(PopulationMembers, CheckpointsRecordOneModel) {
  TrainConfig t;
  t.models = 1;
  const std::string j = to_json(t);
  EXPECT_TRUE(contains(j, "\"models\":1"));
  EXPECT_EQ(train_config_from_json(j, "ckpt").models, 1);
  // A checkpoint written before populations has no "models": one model.
  std::string old = j;
  old.erase(old.find(",\"models\":1"), std::string(",\"models\":1").size());
  EXPECT_EQ(old.find("models"), std::string::npos);
  EXPECT_EQ(train_config_from_json(old, "ckpt").models, 1);
}

}  // namespace
}  // namespace mlalpha
