// CUPTI runtime-API callbacks over 200 graph-replayed training steps: zero device→host copies, zero
// allocations, and synchronisations only at the configured log points (DESIGN section 2).
#include <cupti.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "data/synthetic.h"
#include "train/population_trainer.h"

namespace mlalpha::test {
namespace {

struct ApiCounts {
  long memcpy_any = 0, memcpy_d2h = 0, alloc = 0, sync = 0, graph_launch = 0, total = 0;
};

void CUPTIAPI on_runtime_api(void* user, CUpti_CallbackDomain, CUpti_CallbackId cbid, const void* data) {
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  if (cb->callbackSite != CUPTI_API_ENTER) return;
  auto* c = static_cast<ApiCounts*>(user);
  const std::string name = cb->functionName ? cb->functionName : "";
  ++c->total;
  if (name.rfind("cudaMemcpy", 0) == 0) {
    ++c->memcpy_any;
    cudaMemcpyKind kind = cudaMemcpyDefault;  // unknown direction counts as device→host
    if (cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020)
      kind = static_cast<const cudaMemcpy_v3020_params*>(cb->functionParams)->kind;
    else if (cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020)
      kind = static_cast<const cudaMemcpyAsync_v3020_params*>(cb->functionParams)->kind;
    if (kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDefault) ++c->memcpy_d2h;
  }
  if (name.find("Malloc") != std::string::npos || name.find("HostAlloc") != std::string::npos) ++c->alloc;
  if (name.find("Synchronize") != std::string::npos) ++c->sync;
  if (name.rfind("cudaGraphLaunch", 0) == 0) ++c->graph_launch;
}

TrainConfig counted_config() {
  TrainConfig tc;
  tc.B = 8; tc.L = 64; tc.steps = 202; tc.log_every = 50;
  return tc;
}

// A population of `members` (seeds tc.seed + m, member 1 with its own lr and weight decay); one member is
// the single-model trainer (GpuTrainer is the population of one).
void count_two_hundred_steps(const TrainConfig& tc, int members = 1) {
  const Panel data = make_synthetic({8, 512, 6, 1, 0.1f, 5});
  ModelConfig mc;
  mc.F = 6; mc.D = 64; mc.NL = 2; mc.P = 16; mc.N = 32; mc.Q = 32;
  Context ctx;
  std::vector<PopulationMember> pm;
  for (int m = 0; m < members; ++m) {
    pm.push_back({tc, &data});
    pm.back().train.seed = tc.seed + uint64_t(m);
    if (m == 1) pm.back().train.lr *= 0.3f, pm.back().train.weight_decay = 0.1f;
  }
  PopulationTrainer pop(ctx, mc, pm);
  struct {
    PopulationTrainer& p;
    void step() { p.step(); }
    void synchronize() { p.synchronize(); }
    int64_t steps_enqueued() const { return p.steps_enqueued(0); }
    StepRecord record(int64_t s) { return p.record(0, s); }
  } tr{pop};
  tr.step();  // eager first step (plans) and
  tr.step();  // the graph capture stay outside the count
  tr.synchronize();

  ApiCounts c;
  CUpti_SubscriberHandle sub;
  ASSERT_EQ(cuptiSubscribe(&sub, reinterpret_cast<CUpti_CallbackFunc>(on_runtime_api), &c), CUPTI_SUCCESS);
  ASSERT_EQ(cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API), CUPTI_SUCCESS);
  int log_points = 0;
  for (int i = 0; i < 200; ++i) {
    tr.step();
    if (tr.steps_enqueued() % tc.log_every == 0) {
      const StepRecord r = tr.record(tr.steps_enqueued());  // the only sync: a log point
      ASSERT_EQ(r.step, tr.steps_enqueued());
      ++log_points;
    }
  }
  cuptiUnsubscribe(sub);
  std::printf("CUPTI over 200 steps: %ld runtime API calls, %ld graph launches, %ld memcpy (%ld device->host), "
              "%ld allocations, %ld synchronisations, %d log points\n",
              c.total, c.graph_launch, c.memcpy_any, c.memcpy_d2h, c.alloc, c.sync, log_points);
  EXPECT_EQ(c.memcpy_d2h, 0);
  EXPECT_EQ(c.memcpy_any, 0);
  EXPECT_EQ(c.alloc, 0);
  EXPECT_EQ(c.sync, log_points);
  EXPECT_EQ(c.graph_launch, 200);
  EXPECT_EQ(log_points, 4);
}

TEST(CuptiCounts, TwoHundredStepsNoCopiesNoMallocsSyncOnlyAtLogPoints) { count_two_hundred_steps(counted_config()); }

// Cross-sectional batches and the IC loss keep the step free of copies, allocations and syncs.
TEST(CuptiCounts, TimeBatchesWithIcLossToo) {
  TrainConfig tc = counted_config();
  tc.batch_mode = BatchMode::Time, tc.dates = 2, tc.instruments = 5, tc.loss = LossKind::IC;
  count_two_hundred_steps(tc);
}

// A population of five in one captured step: still no copies, no allocations, syncs only at log points.
TEST(CuptiCounts, PopulationOfFiveToo) { count_two_hundred_steps(counted_config(), 5); }

// bf16: the casts and the weight copy add kernels only, no copies, allocations or syncs; alone and as a population.
TEST(CuptiCounts, Bf16Too) {
  TrainConfig tc = counted_config();
  tc.precision = Precision::BF16;
  count_two_hundred_steps(tc);
  count_two_hundred_steps(tc, 3);
}

}  // namespace
}  // namespace mlalpha::test
