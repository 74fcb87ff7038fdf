// Ensemble (include/mlalpha/ensemble.h) on small CPU populations: all members predict bitwise the run's own
// ensemble/pred.npy, a selection is the mean of its members' Model::predict, and each refusal says why.
#include <gtest/gtest.h>

#include <filesystem>

#include "compute_util.h"
#include "data/npy.h"
#include "mlalpha/ensemble.h"
#include "mlalpha/run.h"
#include "population_fixture.h"
#include "predict/predict_session.h"
#include "test_util.h"

namespace fs = std::filesystem;

namespace mlalpha {
namespace {

using test::contains;
using test::error_of;
using test::same_bits;

class EnsembleTest : public test::PopulationFixture {};

std::vector<float> npy(const fs::path& p) { return read_npy(p.string()).data.to_vector(); }

// The mean of Model::predict over `files` in the given order, summed in double.
std::vector<float> mean_by_hand(const std::vector<fs::path>& files, const Panel& raw, TimeRange r,
                                PredictMode mode = PredictMode::window, const Compute& compute = test::on_cpu()) {
  std::vector<double> sum;
  for (const fs::path& f : files) {
    const std::vector<float> p = Model::load(f.string()).predict(raw, r, compute, mode);
    if (sum.empty()) sum.assign(p.size(), 0.0);
    for (size_t i = 0; i < p.size(); ++i) sum[i] += double(p[i]);
  }
  std::vector<float> out(sum.size());
  for (size_t i = 0; i < sum.size(); ++i) out[i] = float(sum[i] / double(files.size()));
  return out;
}

TEST_F(EnsembleTest, AllMembersPredictTheRunsEnsembleAndTopKIsTheMeanOfThoseMembers) {
  RunConfig cfg = config("pop", {"sweep.lr=[0.002, 0.02]"});
  cfg.train.models = 2;  // 4 members: two rates by two seeds
  const RunResult r = run_training(cfg);
  ASSERT_EQ(r.members.size(), 4u);
  ASSERT_TRUE(r.has_ensemble);
  const Panel raw = load_panel(cfg.data);
  const Split split = make_splits(cfg.split, raw).front();
  const TimeRange test{split.test_begin, split.test_end};

  const Ensemble all = Ensemble::load((dir_ / "pop").string());
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all.name(0), "member-00");
  EXPECT_EQ(all.name(3), "member-03");
  EXPECT_EQ(all.checkpoint(2), (dir_ / "pop/member-02/best.safetensors").string());
  EXPECT_EQ(all.fold(), 0);
  EXPECT_FALSE(all.member(0).has_optimizer_state());  // prediction reads the weights alone
  const std::vector<float> pred = all.predict(raw, test, test::on_cpu());
  const std::vector<float> run_pred = npy(dir_ / "pop/ensemble/pred.npy");
  EXPECT_TRUE(same_bits(pred, run_pred));
  EXPECT_FALSE(std::isnan(pred[size_t(test.t0) * raw.K]));
  EXPECT_TRUE(std::isnan(pred[0]));  // outside the range
  ScoreOptions so;
  so.train = {split.train_begin, split.train_end};
  const MetricsResult m = all.evaluate(raw, test, test::on_cpu(), so);
  EXPECT_EQ(m.mean.ic, r.ensemble.mean.ic);
  EXPECT_EQ(m.mean.mse, r.ensemble.mean.mse);
  EXPECT_EQ(m.mean.mse_mean, r.ensemble.mean.mse_mean);
  EXPECT_EQ(m.mean.ls_mean, r.ensemble.mean.ls_mean);

  // top:2 takes the leaderboard's ranks 1 and 2 and averages them in member order.
  const Ensemble top = Ensemble::load((dir_ / "pop").string(), EnsembleSelection::parse("top:2"));
  ASSERT_EQ(top.size(), 2u);
  EXPECT_LT(top.name(0), top.name(1));
  EXPECT_EQ(std::min(top.rank(0), top.rank(1)), 1);
  EXPECT_EQ(std::max(top.rank(0), top.rank(1)), 2);
  std::vector<fs::path> files{top.checkpoint(0), top.checkpoint(1)};
  const std::vector<float> top_pred = top.predict(raw, test, test::on_cpu());
  EXPECT_TRUE(same_bits(top_pred, mean_by_hand(files, raw, test)));
  EXPECT_FALSE(same_bits(top_pred, pred));

  // Named members, in any order, are averaged in member order.
  const Ensemble two = Ensemble::load((dir_ / "pop").string(), EnsembleSelection::parse("member-03, member-01"));
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two.name(0), "member-01");
  const TimeRange valid{split.valid_begin, split.valid_end};
  EXPECT_TRUE(same_bits(two.predict(raw, valid, test::on_cpu()),
                        mean_by_hand({dir_ / "pop/member-01/best.safetensors", dir_ / "pop/member-03/best.safetensors"},
                                     raw, valid)));
  // One member is that member's own prediction.
  const Ensemble one = Ensemble::load((dir_ / "pop").string(), EnsembleSelection::parse("member-02"));
  EXPECT_TRUE(same_bits(one.predict(raw, test, test::on_cpu()), one.member(0).predict(raw, test, test::on_cpu())));

  // A member without best weights is read from its last checkpoint.
  fs::remove(dir_ / "pop/member-01/best.safetensors");
  const Ensemble no_best = Ensemble::load((dir_ / "pop").string(), EnsembleSelection::parse("member-01"));
  EXPECT_EQ(no_best.checkpoint(0), (dir_ / "pop/member-01/last.safetensors").string());
  EXPECT_EQ(no_best.member(0).step(), 30);
}

// The members share one model object and one loaded panel (one device model and one upload on the GPU): the
// counts say so, and each mode's mean is still bitwise the mean of the members' own predictions.
TEST_F(EnsembleTest, OneModelAndOneLoadedPanelServeEveryMember) {
  RunConfig cfg = config("pop", {"sweep.lr=[0.002, 0.02]"});
  cfg.train.models = 2;  // 4 members
  run_training(cfg);
  const Panel raw = load_panel(cfg.data);
  const Split split = make_splits(cfg.split, raw).front();
  const TimeRange test{split.test_begin, split.test_end};
  const Ensemble all = Ensemble::load((dir_ / "pop").string());
  ASSERT_EQ(all.size(), 4u);
  std::vector<fs::path> files;
  for (size_t i = 0; i < all.size(); ++i) files.push_back(all.checkpoint(i));
  for (const PredictMode mode : {PredictMode::window, PredictMode::carry}) {
    for (const bool reference : {false, true}) {
      const Compute compute = reference ? test::on_cpu_reference() : test::on_cpu(2);
      PredictStats stats;
      const std::vector<float> got = predict_ensemble(all, raw, test, compute, mode, nullptr, &stats);
      EXPECT_EQ(stats.panels_loaded, 1) << to_string(mode);
      EXPECT_EQ(stats.models_built, reference ? 0 : 1) << to_string(mode);  // the reference model holds nothing
      EXPECT_TRUE(same_bits(got, mean_by_hand(files, raw, test, mode, compute))) << to_string(mode);
      // Through the Predictor interface: the same bits.
      const Predictor& predictor = all;
      EXPECT_TRUE(same_bits(predictor.predict(raw, test, compute, mode), got)) << to_string(mode);
    }
  }
  // A change in any member's weights changes the ensemble's output (the test above would see a member skipped or
  // run with another's weights).
  const std::vector<float> all4 = all.predict(raw, test, test::on_cpu());
  const Ensemble three = Ensemble::load((dir_ / "pop").string(), EnsembleSelection::parse("member-00,member-01,member-02"));
  EXPECT_FALSE(same_bits(three.predict(raw, test, test::on_cpu()), all4));
}

TEST_F(EnsembleTest, AWalkForwardFoldIsChosenByItsFolderOrIndex) {
  RunConfig cfg = config("wf", {"split.walk_forward_folds=2", "split.walk_forward_test_size=30"});
  cfg.train.models = 2;
  run_training(cfg);
  const Panel raw = load_panel(cfg.data);
  const Split s1 = make_splits(cfg.split, raw)[1];
  const TimeRange test{s1.test_begin, s1.test_end};
  const Ensemble by_dir = Ensemble::load((dir_ / "wf/fold-1").string());
  const Ensemble by_index = Ensemble::load((dir_ / "wf").string(), {}, 1);
  EXPECT_EQ(by_dir.fold(), 1);
  EXPECT_EQ(by_index.dir(), (dir_ / "wf/fold-1").string());
  EXPECT_EQ(by_dir.member(1).fold(), 1);
  const std::vector<float> pred = by_dir.predict(raw, test, test::on_cpu());
  EXPECT_TRUE(same_bits(pred, npy(dir_ / "wf/fold-1/ensemble/pred.npy")));
  EXPECT_TRUE(same_bits(pred, by_index.predict(raw, test, test::on_cpu())));
  EXPECT_TRUE(contains(error_of([&] { Ensemble::load((dir_ / "wf").string()); }), "walk-forward population with 2 folds"));
  EXPECT_TRUE(contains(error_of([&] { Ensemble::load((dir_ / "wf").string(), {}, 2); }), "folds 0 to 1, not fold 2"));
  EXPECT_TRUE(contains(error_of([&] { Ensemble::load((dir_ / "wf/fold-0").string(), {}, 1); }), "is fold 0, not fold 1"));
}

TEST_F(EnsembleTest, RefusalsSayWhatIsWrong) {
  RunConfig cfg = config("pop");
  cfg.train.models = 3;
  run_training(cfg);
  const std::string run = (dir_ / "pop").string();
  EXPECT_TRUE(contains(error_of([&] { Ensemble::load(run, EnsembleSelection::parse("top:4")); }), "ranks 3 members"));
  const std::string unknown = error_of([&] { Ensemble::load(run, EnsembleSelection::parse("member-00,member-07")); });
  EXPECT_TRUE(contains(unknown, "no member 'member-07'; its members: member-00, member-01, member-02"));
  EXPECT_TRUE(contains(error_of([&] { Ensemble::load((dir_ / "pop/member-00").string()); }), "holds no population run"));
  EXPECT_TRUE(contains(error_of([] { EnsembleSelection::parse("top:0"); }), "K >= 1"));
  EXPECT_TRUE(contains(error_of([] { EnsembleSelection::parse("member-00,,member-01"); }), "empty name"));
  EXPECT_TRUE(contains(error_of([&] { Ensemble::load(run, EnsembleSelection::parse("member-01,member-01")); }), "named twice"));

  // A member whose model differs is named with the setting.
  RunConfig other = config("other", {"model.d_model=8", "train.steps=10"});
  run_training(other);
  for (const char* f : {"best.safetensors", "best.safetensors.optim.safetensors"})
    fs::copy_file(dir_ / "other" / f, dir_ / "pop/member-02" / f, fs::copy_options::overwrite_existing);
  const std::string differs = error_of([&] { Ensemble::load(run); });
  EXPECT_TRUE(contains(differs, "member-02"));
  EXPECT_TRUE(contains(differs, "d_model = 8"));

  fs::remove(dir_ / "pop/member-01/best.safetensors");
  fs::remove(dir_ / "pop/member-01/last.safetensors");
  const std::string missing = error_of([&] { Ensemble::load(run, EnsembleSelection::parse("member-01")); });
  EXPECT_TRUE(contains(missing, "member-01 has no checkpoint"));
  fs::remove(dir_ / "pop/leaderboard.csv");
  fs::remove(dir_ / "pop/leaderboard.json");
  EXPECT_TRUE(contains(error_of([&] { Ensemble::load(run, EnsembleSelection::parse("top:1")); }), "which is missing"));
}

}  // namespace
}  // namespace mlalpha
