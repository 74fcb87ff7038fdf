// ColsumBatch (ops/common/colsum.h): the deferred fixed-order column sums of a backward pass, added in
// one launch. Each job must get exactly the bits that its own colsum_add launch gives (the batch only
// moves where the sums run), on random jobs of every size class: D not a multiple of the 32-column tile,
// nb below, at and far above the 16 slices × 8 batched loads, more jobs than one launch's table (64);
// and an op given a batch (rmsnorm_bwd) leaves dw untouched until run(), then matches the immediate form.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../gpu_util.h"
#include "../test_util.h"
#include "../tolerances.h"
#include "ops/common/colsum.h"
#include "ops/rmsnorm/rmsnorm.h"

namespace mlalpha {
namespace {

using test::from_device;
using test::random_vec;
using test::to_device;

struct HostJob {
  int nb, D;
  std::vector<float> partial, dw0;  // (nb, D), (D)
};

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(ColsumGpu, BatchEqualsOneLaunchPerJobBitwise) {
  auto rng = test::make_rng(71);
  std::uniform_int_distribution<int> nb_d(1, 1300), D_d(1, 700);
  std::vector<HostJob> jobs;
  for (int j = 0; j < 150; ++j) {  // three launches of the batch kernel
    HostJob h{nb_d(rng), D_d(rng), {}, {}};
    if (j % 7 == 0) h.nb = 1 + j % 16;  // fewer rows than slices
    if (j % 11 == 0) h.D = 32 * (1 + j % 5);
    h.partial = random_vec<float>(size_t(h.nb) * h.D, rng);
    h.dw0 = random_vec<float>(size_t(h.D), rng);
    jobs.push_back(std::move(h));
  }
  std::vector<DeviceBuffer<float>> part, dw_one, dw_batch;
  gpu::ColsumBatch batch;
  for (const HostJob& h : jobs) {
    part.push_back(to_device(h.partial));
    dw_one.push_back(to_device(h.dw0));
    dw_batch.push_back(to_device(h.dw0));
    gpu::colsum_add(h.nb, h.D, part.back().data(), dw_one.back().data(), nullptr);
    batch.add({part.back().data(), dw_batch.back().data(), h.nb, h.D});
  }
  EXPECT_EQ(batch.pending(), jobs.size());
  batch.run(nullptr);
  EXPECT_EQ(batch.pending(), 0u);
  for (size_t j = 0; j < jobs.size(); ++j) {
    const HostJob& h = jobs[j];
    SCOPED_TRACE("job " + std::to_string(j) + " nb=" + std::to_string(h.nb) + " D=" + std::to_string(h.D));
    const std::vector<float> one = from_device(dw_one[j]), got = from_device(dw_batch[j]);
    EXPECT_TRUE(bitwise_equal(got, one)) << "the batched sum differs from colsum_add's";
    std::vector<double> want(h.D);
    for (int c = 0; c < h.D; ++c) {
      double s = 0;
      for (int b = 0; b < h.nb; ++b) s += h.partial[size_t(b) * h.D + c];
      want[size_t(c)] = h.dw0[size_t(c)] + s;
    }
    EXPECT_TRUE(test::all_close(got, want, 1e-5 * std::sqrt(double(h.nb)), 1e-5, "dw"));
  }
}

TEST(ColsumGpu, DeferredRmsNormMatchesImmediate) {
  const RmsNormParams p{1000, 96, 1e-5f};
  const size_t n = size_t(p.M) * p.D;
  auto rng = test::make_rng(72);
  const auto x = random_vec<float>(n, rng), w = random_vec<float>(p.D, rng, 0.5, 1.5);
  const auto dy = random_vec<float>(n, rng), rstd = random_vec<float>(p.M, rng, 0.5, 2.0);
  const auto dw0 = random_vec<float>(p.D, rng);
  auto x_g = to_device(x), w_g = to_device(w), dy_g = to_device(dy), rstd_g = to_device(rstd);
  auto dx_a = test::poisoned(n), dx_b = test::poisoned(n);
  auto dw_a = to_device(dw0), dw_b = to_device(dw0);
  auto ws_a = test::poisoned(gpu::rmsnorm_bwd_workspace_floats(p)), ws_b = test::poisoned(gpu::rmsnorm_bwd_workspace_floats(p));
  gpu::rmsnorm_bwd(p, {.x = x_g.data(), .w = w_g.data()}, rstd_g.data(), dy_g.data(), {.dx = dx_a.data(), .dw = dw_a.data()},
                   false, ws_a.data(), nullptr);
  gpu::ColsumBatch batch;
  gpu::rmsnorm_bwd(p, {.x = x_g.data(), .w = w_g.data()}, rstd_g.data(), dy_g.data(), {.dx = dx_b.data(), .dw = dw_b.data()},
                   false, ws_b.data(), nullptr, nullptr, &batch);
  EXPECT_EQ(batch.pending(), 1u);
  EXPECT_TRUE(bitwise_equal(from_device(dw_b), dw0)) << "dw changed before the batch ran";
  batch.run(nullptr);
  EXPECT_TRUE(bitwise_equal(from_device(dx_b), from_device(dx_a)));
  EXPECT_TRUE(bitwise_equal(from_device(dw_b), from_device(dw_a)));
}

}  // namespace
}  // namespace mlalpha
