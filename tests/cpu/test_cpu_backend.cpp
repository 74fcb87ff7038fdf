// The CPU backend wired to the fast CPU model (src/cpu): the trainer against the reference trainer, the bits
// on any thread count, a population's members on one shared pool bitwise their solo runs, run.threads and
// run.cpu_kernels in the configuration, the run record and a resume, the memory estimate and prediction.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "compute_util.h"
#include "checkpoint/checkpoint.h"
#include "model/model_cpu.h"
#include "cpu/thread_pool.h"
#include "data/synthetic.h"
#include "mlalpha/model.h"
#include "mlalpha/run.h"
#include "test_files.h"
#include "test_util.h"
#include "tolerances.h"
#include "train/engine.h"
#include "train/train_plan.h"
#include "train/trainer_cpu.h"

namespace fs = std::filesystem;

namespace mlalpha {
namespace {

struct TrainCase {
  ModelConfig mc;
  TrainConfig tc;
  Panel data;
};

// A fresh panel per process (MLALPHA_TEST_SEED replays one); `seed` is the training seed.
TrainCase small_setup(uint64_t seed = 3) {
  static const uint64_t data_seed = test::make_rng(90)() % 1000000;
  TrainCase s;
  s.data = make_synthetic({6, 300, 4, 1, 0.1f, data_seed});
  s.mc.F = 4, s.mc.K = 1, s.mc.D = 32, s.mc.NL = 2, s.mc.P = 16, s.mc.N = 16, s.mc.Q = 16;
  s.tc.B = 6, s.tc.L = 40, s.tc.steps = 40, s.tc.lr = 1e-3f, s.tc.warmup = 5, s.tc.burn_in = 4, s.tc.seed = seed;
  return s;
}

std::vector<float> train(const TrainCase& s, int steps, const CpuTrainerOptions& opt, std::vector<float>* losses = nullptr) {
  CpuTrainer tr(s.mc, s.tc, s.data, {}, opt);
  for (int i = 0; i < steps; ++i) {
    const StepRecord r = tr.step();
    if (losses) losses->push_back(r.loss);
  }
  return tr.params();
}

// The default CPU trainer runs the fast model; the reference (run.cpu_kernels = "reference") is the other
// computation of the same function: after 20 steps the weights agree to the trainer-parity tolerance (the
// GPU trainer's against the reference), the losses to 1e-5 relative, and they are not the same bits.
TEST(CpuBackend, FastTrainerTracksTheReferenceTrainer) {
  const TrainCase s = small_setup();
  std::vector<float> fast_loss, ref_loss;
  const std::vector<float> fast = train(s, 20, {}, &fast_loss);
  const std::vector<float> ref = train(s, 20, {.compute = test::on_cpu_reference()}, &ref_loss);
  for (size_t i = 0; i < fast_loss.size(); ++i)
    EXPECT_NEAR(fast_loss[i], ref_loss[i], 1e-5 * std::abs(ref_loss[i])) << "step " << i + 1;
  const ModelLayout lay(s.mc);
  double worst = 0;
  std::string where;
  for (const auto& t : lay.table.tensors()) {
    const std::vector<float> f(fast.begin() + t.offset, fast.begin() + t.offset + t.numel);
    const std::vector<float> r(ref.begin() + t.offset, ref.begin() + t.offset + t.numel);
    EXPECT_TRUE(test::weights_close(f, r, tol::kTrainParityRelL2, s.tc.lr, t.name));
    double num = 0, den = 0;
    for (size_t i = 0; i < f.size(); ++i) num += double(f[i] - r[i]) * (f[i] - r[i]), den += double(r[i]) * r[i];
    if (std::sqrt(num / den) > worst) worst = std::sqrt(num / den), where = t.name;
  }
  std::printf("fast vs reference trainer after 20 steps: worst tensor rel-L2 %.3g (%s)\n", worst, where.c_str());
  EXPECT_FALSE(test::same_bits(fast, ref)) << "the fast and the reference trainer gave the same bits: one did not run";
  CpuTrainer tr(s.mc, s.tc, s.data, {}, {.compute = test::on_cpu_reference()});
  EXPECT_TRUE(tr.reference());
  EXPECT_EQ(tr.threads(), 1);
}

// A trainer's weights do not depend on the thread count, nor on a pool shared with other trainers.
TEST(CpuBackend, TrainerBitsForAnyThreadCount) {
  const TrainCase s = small_setup();
  const std::vector<float> one = train(s, 12, {.compute = test::on_cpu(1)});
  for (int t : {2, 3}) EXPECT_TRUE(test::same_bits(train(s, 12, {.compute = test::on_cpu(t)}), one)) << t << " threads";
  cpu::ThreadPool pool(2);
  EXPECT_TRUE(test::same_bits(train(s, 12, {.pool = &pool}), one)) << "a shared pool";
}

// A population on the CPU: its members, stepped in turn on one pool, each bitwise the same model trained
// alone (another seed, another lr), and each member predicts with its own weights.
TEST(CpuBackend, PopulationMembersOnOnePoolAreTheirSoloRuns) {
  const TrainCase a = small_setup(3);
  TrainCase b = small_setup(4);
  b.tc.lr = 3e-3f;
  const std::vector<Member> members = {plan_member(a.mc, a.tc, a.data, {0, 250}), plan_member(a.mc, b.tc, a.data, {0, 250})};
  const std::unique_ptr<Engine> engine = make_cpu_engine(members, test::on_cpu(2));
  EXPECT_EQ(engine->detail(), "2 threads");
  for (int i = 0; i < 10; ++i) engine->step();
  for (int m = 0; m < 2; ++m) {
    CpuTrainer solo(a.mc, members[size_t(m)].train(), a.data, {0, 250}, {.compute = test::on_cpu(1)});
    for (int i = 0; i < 10; ++i) solo.step();
    EXPECT_TRUE(test::same_bits(engine->state(m).params, solo.params())) << "member " << m;
    const WindowPlan plan = tiled_windows(a.data.N, a.data.T, a.tc.L, a.tc.burn_in, 250, 300);
    EXPECT_TRUE(test::same_bits(engine->predict(m, plan, nullptr),
                                solo.predict(a.data, plan, members[size_t(m)].batch())))
        << "member " << m;
  }
  EXPECT_EQ(make_cpu_engine(members, test::on_cpu_reference())->detail(), "reference model, 1 thread");
}

// The memory estimate counts the buffers of the model that will run: the fast model's (floats_needed, which
// grows with the threads' SSD scratch) or the reference's.
TEST(CpuBackend, MemoryEstimateOfTheModelThatRuns) {
  const TrainCase s = small_setup();
  const MemoryEstimate fast = estimate_cpu_training(s.mc, s.tc, s.data.N, test::on_cpu(2));
  EXPECT_EQ(fast.activations, double(cpu::CpuModel::floats_needed(s.mc, s.tc.B, s.tc.L, 2, true)) * 4);
  EXPECT_GT(estimate_cpu_training(s.mc, s.tc, s.data.N, test::on_cpu(8)).activations, fast.activations);
  const MemoryEstimate ref = estimate_cpu_training(s.mc, s.tc, s.data.N, test::on_cpu_reference());
  EXPECT_EQ(ref.params, fast.params);
  EXPECT_GT(ref.activations, 0.0);
  EXPECT_NE(ref.activations, fast.activations);
}

TEST(CpuBackend, ThreadsAndKernelsInTheConfiguration) {
  const RunConfig d = parse_run_config("", "t");
  EXPECT_EQ(d.run.threads, 0);
  EXPECT_EQ(d.run.cpu_kernels, "fast");
  EXPECT_FALSE(resolve(d.compute()).reference());
  const RunConfig c = parse_run_config("[run]\nthreads = 3\ncpu_kernels = \"reference\"\n", "t");
  EXPECT_EQ(resolve(c.compute()).threads(), 3);
  EXPECT_TRUE(resolve(c.compute()).reference());
  const RunConfig back = parse_run_config(to_toml(c), "round trip");
  EXPECT_EQ(back.run.threads, 3);
  EXPECT_EQ(back.run.cpu_kernels, "reference");
  EXPECT_TRUE(test::contains(test::error_of([] { parse_run_config("", "t", {"run.threads=65"}).validate(); }),
                             "run.threads must be 0 (every CPU this process may use) or 1 to 64, got 65"));
  EXPECT_TRUE(test::contains(test::error_of([] { parse_run_config("", "t", {"run.threads=-1"}).validate(); }), "run.threads"));
  // Past the configuration (a program's own request): resolve() refuses it, naming the setting.
  EXPECT_TRUE(test::contains(test::error_of([] { resolve({.threads = 100}); }),
                             "run.threads must be 0 (every CPU this process may use) or 1 to 64, got 100"));
  EXPECT_TRUE(test::contains(test::error_of([] { parse_run_config("", "t", {"run.cpu_kernels=\"slow\""}); }),
                             "must be one of 'fast', 'reference', got 'slow'"));
  EXPECT_EQ(suggest_run_config_key("run.thread"), "run.threads");
}

class CpuRun : public ::testing::Test {
 protected:
  RunConfig config(const std::string& name, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> ov = {"run.device=\"cpu\"", "data.instruments=4", "data.timesteps=300", "data.n_features=3",
                                   "model.d_model=16", "model.head_dim=8", "train.batch=4", "train.seq_len=32",
                                   "train.steps=30", "train.warmup=2", "train.log_every=5", "run.eval_every=10"};
    ov.insert(ov.end(), extra.begin(), extra.end());
    return parse_run_config("", "test", ov, "", {{ConfigSetting::Kind::text, "run.out_dir", (tmp_.path / name).string(), ""}});
  }
  // The run's messages, its engine's among them.
  RunResult run(const RunConfig& c, std::vector<std::string>* messages, RunOptions o = {}) {
    o.callback = [messages](const RunEvent& e) {
      if (e.kind == RunEvent::Kind::message && messages) messages->push_back(e.message);
      return true;
    };
    return run_training(c, o);
  }
  test::TempDir tmp_;
};

// metrics.jsonl without its test records: an invocation that ends early (run.stop_after) tests its best weights
// there, in the middle of the file.
std::string train_and_valid_records(const fs::path& jsonl) {
  std::string kept, line;
  std::istringstream in(test::read_bytes(jsonl));
  while (std::getline(in, line))
    if (line.find("\"split\":\"test\"") == std::string::npos) kept += line + "\n";
  return kept;
}

bool any_contains(const std::vector<std::string>& lines, const std::string& what) {
  for (const std::string& l : lines)
    if (test::contains(l, what)) return true;
  return false;
}

// run.threads changes no bit of a run: weights, optimizer state and every record are the same on 1 and 2
// threads; it is recorded in run.json, and a resume may change it and still continues bitwise.
TEST_F(CpuRun, ThreadsChangeNoBitAndAResumeMayChangeThem) {
  std::vector<std::string> msg1, msg2, msg_ref;
  run(config("one", {"run.threads=1"}), &msg1);
  run(config("two", {"run.threads=2"}), &msg2);
  EXPECT_TRUE(any_contains(msg1, "cpu engine (1 thread)"));
  EXPECT_TRUE(any_contains(msg2, "cpu engine (2 threads)"));
  const fs::path one = tmp_.path / "one", two = tmp_.path / "two";
  const Checkpoint a = load_checkpoint((one / "last.safetensors").string()),
                   b = load_checkpoint((two / "last.safetensors").string());
  EXPECT_TRUE(test::same_bits(a.state.params, b.state.params));
  EXPECT_TRUE(test::same_bits(a.state.m, b.state.m));
  EXPECT_TRUE(test::same_bits(a.state.v, b.state.v));
  EXPECT_EQ(test::read_bytes(one / "metrics.jsonl"), test::read_bytes(two / "metrics.jsonl"));
  EXPECT_TRUE(test::contains(test::read_bytes(one / "run.json"), "threads = 1"));
  // Stopped at step 12 on 1 thread, resumed on 2: the straight run's bits.
  run(config("resumed", {"run.threads=1", "run.stop_after=12"}), nullptr);
  std::vector<std::string> msg_resume;
  RunOptions o;
  o.resume = (tmp_.path / "resumed").string();
  run(parse_run_config("", "test", {"run.threads=2"}), &msg_resume, o);
  EXPECT_TRUE(any_contains(msg_resume, "run.threads: 1 -> 2 (set explicitly)"));
  const Checkpoint c = load_checkpoint((tmp_.path / "resumed/last.safetensors").string());
  EXPECT_TRUE(test::same_bits(c.state.params, a.state.params));
  EXPECT_EQ(train_and_valid_records(tmp_.path / "resumed/metrics.jsonl"), train_and_valid_records(one / "metrics.jsonl"));
  // The reference model, selected: other bits, the same run.
  run(config("ref", {"run.cpu_kernels=\"reference\""}), &msg_ref);
  EXPECT_TRUE(any_contains(msg_ref, "cpu engine (reference model, 1 thread)"));
  const Checkpoint r = load_checkpoint((tmp_.path / "ref/last.safetensors").string());
  EXPECT_FALSE(test::same_bits(r.state.params, a.state.params));
  EXPECT_TRUE(test::rel_l2_close(r.state.params, a.state.params, tol::kTrainParityRelL2, "reference vs fast after 30 steps"));
}

// Prediction through the public API: the same bits on any thread count; the reference within the fp32 bound.
TEST_F(CpuRun, ModelPredictsOnAnyThreadCount) {
  const RunResult r = run(config("p"), nullptr);
  const Model m = Model::load(r.folds[0].dir + "/best.safetensors");
  const Panel p = load_panel(m.data_config());
  const TimeRange test_range = split_range(r.folds[0].split, "test", p.T);
  const std::vector<float> a = m.predict(p, test_range, test::on_cpu(1), PredictMode::window);
  const std::vector<float> b = m.predict(p, test_range, test::on_cpu(3), PredictMode::window);
  EXPECT_TRUE(test::same_bits(a, b));
  const std::vector<float> ref = m.predict(p, test_range, test::on_cpu_reference(), PredictMode::window);
  std::vector<float> fa, fr;
  for (size_t i = 0; i < a.size(); ++i)
    if (!std::isnan(a[i])) fa.push_back(a[i]), fr.push_back(ref[i]);
  ASSERT_FALSE(fa.empty());
  EXPECT_TRUE(test::rel_l2_close(fa, fr, tol::kCpuFastRelL2, "fast vs reference predictions"));
  EXPECT_DOUBLE_EQ(m.evaluate(p, test_range, test::on_cpu(2), {}, PredictMode::window).mean.mse,
                   r.folds[0].test.mean.mse);  // the run's own test score, predicted by the same model
}

}  // namespace
}  // namespace mlalpha
