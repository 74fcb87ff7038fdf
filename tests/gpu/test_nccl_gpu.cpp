// dist/nccl.h on one GPU (a world of one: the machines with several GPUs were not lent): the communicator
// forms, its in-place sum equals the input bitwise (eagerly and inside a captured CUDA graph replayed twice),
// wait_or_abort returns on finished work and aborts, naming rank, wait and limit, on work that hangs; an
// aborted or moved-from communicator refuses further work. Skips without a GPU (gpu_main.cpp) or without
// libnccl.so.2. The trainer's data-parallel path (GpuTrainerOptions::comm) in a world of one trains to the
// same bits as a plain run, in both precisions, eagerly and from the captured graph.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/context.h"
#include "core/cuda_graph.h"
#include "core/error.h"
#include "data/synthetic.h"
#include "dist/nccl.h"
#include "gpu_util.h"
#include "test_util.h"
#include "train/trainer_gpu.h"

namespace mlalpha::dist {
namespace {

using namespace std::chrono_literals;

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, 3.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(gen);
  v[0] = -0.0f;  // a sum that added +0 would turn it into +0
  v[1] = 1e-40f;  // subnormal
  return v;
}

using test::error_of;

class NcclGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    try {
      lib_ = std::make_shared<const NcclLib>();
    } catch (const Error& e) {
      GTEST_SKIP() << "no usable NCCL: " << e.what();
    }
  }
  Communicator world_of_one() { return make_communicator(lib_, RankInfo{}, IdExchange{}, CommOptions{}); }
  std::shared_ptr<const NcclLib> lib_;
};

TEST_F(NcclGpu, AWorldOfOneSumsToItsInputBitwise) {
  Context ctx(0);
  Communicator comm = world_of_one();
  EXPECT_EQ(comm.rank(), 0);
  EXPECT_EQ(comm.world(), 1);
  const size_t n = (size_t(1) << 20) + 3;  // not a multiple of any vector width
  const std::vector<float> h = random_floats(n, 23);
  DeviceBuffer<float> d = test::to_device(h);
  comm.all_reduce_sum(d.data(), n, ctx.stream());
  comm.wait_or_abort(ctx.stream(), 30s, "the eager all-reduce");
  const std::vector<float> got = d.download();
  ASSERT_EQ(got.size(), n);
  EXPECT_EQ(0, std::memcmp(got.data(), h.data(), n * sizeof(float)));
  EXPECT_FALSE(comm.aborted());
}

TEST_F(NcclGpu, TheSumInsideACapturedGraphReplaysTwice) {
  Context ctx(0);
  Communicator comm = world_of_one();
  const size_t n = 123457;
  const std::vector<float> h = random_floats(n, 5);
  const DeviceBuffer<float> src = test::to_device(h);
  DeviceBuffer<float> buf(n);
  // The copy makes each replay's result depend on the graph having run (the buffer is poisoned before).
  const CudaGraph graph = capture_graph(ctx.stream(), [&] {
    MLALPHA_CUDA_CHECK(cudaMemcpyAsync(buf.data(), src.data(), n * sizeof(float), cudaMemcpyDeviceToDevice, ctx.stream()));
    comm.all_reduce_sum(buf.data(), n, ctx.stream());
  });
  size_t nodes = 0;
  MLALPHA_CUDA_CHECK(cudaGraphGetNodes(graph.get(), nullptr, &nodes));
  EXPECT_GE(nodes, 1u);
  const CudaGraphExec exec(graph);
  for (int replay = 0; replay < 2; ++replay) {
    buf.fill_bytes(0xFF, ctx.stream());
    exec.launch(ctx.stream());
    comm.wait_or_abort(ctx.stream(), 30s, "graph replay " + std::to_string(replay));
    const std::vector<float> got = buf.download();
    EXPECT_EQ(0, std::memcmp(got.data(), h.data(), n * sizeof(float))) << "replay " << replay;
  }
}

TEST_F(NcclGpu, WaitOrAbortReturnsOnFinishedWorkAndAbortsOnHungWork) {
  Context ctx(0);
  Communicator comm = world_of_one();
  comm.wait_or_abort(ctx.stream(), 5s, "an idle stream");
  CudaEvent done(cudaEventDisableTiming);
  done.record(ctx.stream());
  comm.wait_or_abort(done.get(), 5s, "a recorded event");
  EXPECT_FALSE(comm.aborted());

  // Work that does not finish in time: a host function holding the stream for 1.5 s (released from another
  // thread, so nothing here can deadlock whatever the abort waits for).
  std::atomic<bool> release{false};
  const auto hold = [](void* flag) {
    while (!static_cast<std::atomic<bool>*>(flag)->load()) std::this_thread::sleep_for(1ms);
  };
  MLALPHA_CUDA_CHECK(cudaLaunchHostFunc(ctx.stream(), hold, &release));
  std::thread releaser([&] {
    std::this_thread::sleep_for(1500ms);
    release = true;
  });
  const std::string what = error_of([&] { comm.wait_or_abort(ctx.stream(), 200ms, "the step 100 log"); });
  releaser.join();
  ctx.synchronize();
  EXPECT_NE(what.find("rank 0 of 1 waited"), std::string::npos) << what;
  EXPECT_NE(what.find("for the step 100 log (the limit is 200 ms)"), std::string::npos) << what;
  EXPECT_NE(what.find("aborted"), std::string::npos) << what;
  // The wait itself (not the abort after it) stopped near its limit, well before the work finished.
  const size_t at = what.find("waited ");
  ASSERT_NE(at, std::string::npos) << what;
  const long waited_ms = std::stol(what.substr(at + 7));
  EXPECT_GE(waited_ms, 200) << what;
  EXPECT_LT(waited_ms, 1000) << what;
  EXPECT_TRUE(comm.aborted());

  DeviceBuffer<float> d(4);
  const std::string after = error_of([&] { comm.all_reduce_sum(d.data(), 4, ctx.stream()); });
  EXPECT_NE(after.find("the communicator was aborted"), std::string::npos) << after;
}

TEST_F(NcclGpu, AMovedFromCommunicatorRefusesWork) {
  Context ctx(0);
  Communicator a = world_of_one();
  Communicator b = std::move(a);
  DeviceBuffer<float> d(8);
  d.fill_bytes(0, ctx.stream());
  EXPECT_NO_THROW(b.all_reduce_sum(d.data(), 8, ctx.stream()));
  b.wait_or_abort(ctx.stream(), 5s, "the moved-to communicator's sum");
  EXPECT_NE(error_of([&] { a.all_reduce_sum(d.data(), 8, ctx.stream()); }).find("moved from"), std::string::npos);
}

// The data-parallel step (population_trainer_gpu.cpp reduce_over_ranks) with a world of one: the gradient and
// loss all-reduces sit inside the captured graph and must change nothing, so 60 steps (graph replay from
// step 2), their records and the weights equal a plain run's bitwise.
void expect_world_of_one_equals_plain(const std::shared_ptr<const NcclLib>& lib, Precision precision, bool graph) {
  SCOPED_TRACE(std::string(to_string(precision)) + (graph ? " graph" : " eager"));
  const Panel data = make_synthetic({6, 300, 5, 1, 0.1f, 21});
  ModelConfig mc;
  mc.F = 5, mc.K = 1, mc.D = 32, mc.NL = 2, mc.P = 16, mc.G = 1, mc.N = 16, mc.Q = 16;
  TrainConfig tc;
  tc.B = 4, tc.L = 40, tc.steps = 60, tc.lr = 1e-3f, tc.warmup = 5, tc.seed = 9, tc.log_every = 10, tc.burn_in = 2;
  tc.precision = precision;
  auto run = [&](Communicator* comm, std::vector<StepRecord>* recs) {
    Context ctx(0);
    GpuTrainerOptions o;
    o.graph = graph;
    o.comm = comm;
    GpuTrainer tr(ctx, mc, tc, data, o);
    for (int s = 1; s <= 60; ++s) {
      tr.step();
      if (s % 20 == 0) recs->push_back(tr.record(s));
    }
    return tr.params();
  };
  std::vector<StepRecord> plain_recs, dist_recs;
  const std::vector<float> plain = run(nullptr, &plain_recs);
  Context ctx(0);
  Communicator comm = make_communicator(lib, RankInfo{}, IdExchange{}, CommOptions{});
  const std::vector<float> dp = run(&comm, &dist_recs);
  ASSERT_EQ(plain.size(), dp.size());
  EXPECT_EQ(0, std::memcmp(plain.data(), dp.data(), plain.size() * sizeof(float))) << "the weights differ";
  ASSERT_EQ(plain_recs.size(), dist_recs.size());
  for (size_t i = 0; i < plain_recs.size(); ++i) {
    EXPECT_EQ(plain_recs[i].step, dist_recs[i].step);
    EXPECT_EQ(0, std::memcmp(&plain_recs[i].loss, &dist_recs[i].loss, sizeof(float))) << "step " << plain_recs[i].step;
    EXPECT_EQ(0, std::memcmp(&plain_recs[i].grad_norm, &dist_recs[i].grad_norm, sizeof(float)));
  }
  EXPECT_TRUE(std::isfinite(plain_recs.back().loss));
  EXPECT_LT(plain_recs.back().loss, plain_recs.front().loss);  // it trained
}

TEST_F(NcclGpu, TrainerWorldOfOneEqualsPlainRunBitwise) {
  expect_world_of_one_equals_plain(lib_, Precision::FP32, true);
  expect_world_of_one_equals_plain(lib_, Precision::FP32, false);
  expect_world_of_one_equals_plain(lib_, Precision::BF16, true);
}

}  // namespace
}  // namespace mlalpha::dist
