// ColsumBatch (ops/common/colsum.h): the deferred fixed-order column sums of a backward pass, added in
// one launch. Each job must get exactly the bits that its own colsum_add launch gives (the batch only
// moves where the sums run), on random jobs of every size class: D not a multiple of the 32-column tile,
// nb below, at and far above the 16 slices × 8 batched loads, more jobs than one launch's table (64); jobs
// of at most 16 rows with a row stride (the wide path: a weight gradient's K-split partials), bitwise equal to
// colsum_add and to the host's sum in row order; and an op given a batch (rmsnorm_bwd) leaves dw untouched
// until run(), then matches the immediate form. Jobs in ColsumOrder::kBlock512 (the SSD's dA_log, dD) match
// the host's replay of param_reduce's order bitwise.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../gpu_util.h"
#include "../test_util.h"
#include "../tolerances.h"
#include "ops/common/colsum.h"
#include "core/error.h"
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
    batch.add({part.back().data(), dw_batch.back().data(), h.nb, h.D, 0});
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

// Jobs of at most 16 rows (a weight gradient's K-split partials) run on the batch's wide path: rows of
// ld > D floats (the padded slices), D of S's in_proj dW (648 × 128) and odd widths, pointers off the
// 16-byte grid (the scalar form). Each must equal colsum_add on the same rows packed to ld = D bitwise, and
// the host's fp32 sum in the documented order (0 + p_0 + … + p_{nb−1}, then dw + that) bitwise.
TEST(ColsumGpu, FewRowJobsWithRowStride) {
  auto rng = test::make_rng(73);
  struct Wide {
    int nb, D;
    size_t ld;
    int off;  // floats the partial and dw start past an aligned allocation
  };
  const Wide cases[] = {{16, 82944, 82944, 0}, {16, 32768, 32768 + 64, 0}, {4, 297 * 1000 + 1, 298048, 0},
                        {2, 1003, 1024, 1}, {16, 128, 128, 0},              {1, 4100, 4160, 0},
                        {7, 2049, 2112, 0}, {16, 640, 704, 3}};
  std::vector<DeviceBuffer<float>> part, packed, dw_one, dw_batch;
  std::vector<std::vector<float>> want;
  gpu::ColsumBatch batch;
  for (const Wide& w : cases) {
    const auto p = random_vec<float>(size_t(w.nb) * w.ld, rng);
    const auto dw0 = random_vec<float>(size_t(w.D), rng);
    std::vector<float> pk(size_t(w.nb) * w.D), host(dw0);
    for (int b = 0; b < w.nb; ++b)
      for (int c = 0; c < w.D; ++c) pk[size_t(b) * w.D + c] = p[size_t(b) * w.ld + c];
    for (int c = 0; c < w.D; ++c) {
      float s = 0.f;
      for (int b = 0; b < w.nb; ++b) s += p[size_t(b) * w.ld + c];
      host[size_t(c)] = dw0[size_t(c)] + s;
    }
    want.push_back(host);
    std::vector<float> pad_p(size_t(w.off), 0.f), pad_d(size_t(w.off), 0.f);
    pad_p.insert(pad_p.end(), p.begin(), p.end());
    pad_d.insert(pad_d.end(), dw0.begin(), dw0.end());
    part.push_back(to_device(pad_p));
    packed.push_back(to_device(pk));
    dw_one.push_back(to_device(dw0));
    dw_batch.push_back(to_device(pad_d));
    gpu::colsum_add(w.nb, w.D, packed.back().data(), dw_one.back().data(), nullptr);
    batch.add({part.back().data() + w.off, dw_batch.back().data() + w.off, w.nb, w.D, w.ld});
  }
  batch.run(nullptr);
  for (size_t j = 0; j < std::size(cases); ++j) {
    const Wide& w = cases[j];
    SCOPED_TRACE("nb=" + std::to_string(w.nb) + " D=" + std::to_string(w.D) + " ld=" + std::to_string(w.ld) +
                 " off=" + std::to_string(w.off));
    const auto all = from_device(dw_batch[j]);
    const std::vector<float> got(all.begin() + w.off, all.end());
    EXPECT_TRUE(bitwise_equal(got, from_device(dw_one[j]))) << "differs from colsum_add's bits";
    EXPECT_TRUE(bitwise_equal(got, want[j])) << "differs from the host's sum in row order";
  }
  EXPECT_THROW(batch.add({part[0].data(), dw_batch[0].data(), 2, 100, 99}), Error);  // ld below D
}

// ColsumOrder::kBlock512 (the SSD's param_reduce order, colsum.h): thread t of 512 adds rows t, t + 512, … from
// 0, each warp's 32 sums by the xor butterfly (offsets 16, 8, 4, 2, 1), then the 16 warp sums in order from 0,
// onto dw. The host replays that arithmetic in fp32; the batch must match it bitwise, on rows below, at and above
// 512 (several a thread), with a row stride, mixed in one launch with jobs of the other forms.
float block512_sum_host(const std::vector<float>& p, int nb, size_t ld, int c) {
  float lane[512];
  for (int t = 0; t < 512; ++t) {
    float s = 0.f;
    for (int b = t; b < nb; b += 512) s += p[size_t(b) * ld + size_t(c)];
    lane[t] = s;
  }
  float total = 0.f;
  for (int w = 0; w < 16; ++w) {
    float v[32];
    std::copy(lane + 32 * w, lane + 32 * w + 32, v);
    for (int o = 16; o > 0; o >>= 1) {
      float u[32];
      for (int l = 0; l < 32; ++l) u[l] = v[l] + v[l ^ o];
      std::copy(u, u + 32, v);
    }
    total += v[0];
  }
  return total;
}

TEST(ColsumGpu, Block512JobsKeepParamReduceOrder) {
  auto rng = test::make_rng(74);
  struct Case {
    int nb, D;
    size_t ld;
  };
  const Case cases[] = {{64, 8, 8}, {1, 3, 3}, {511, 5, 7}, {512, 16, 16}, {513, 2, 2}, {1100, 8, 8}, {5000, 3, 4}};
  std::vector<DeviceBuffer<float>> part, dw, other_part, other_dw;
  std::vector<std::vector<float>> want;
  gpu::ColsumBatch batch;
  for (const Case& k : cases) {
    const auto p = random_vec<float>(size_t(k.nb) * k.ld, rng);
    const auto dw0 = random_vec<float>(size_t(k.D), rng);
    std::vector<float> host(dw0);
    for (int c = 0; c < k.D; ++c) host[size_t(c)] = dw0[size_t(c)] + block512_sum_host(p, k.nb, k.ld, c);
    want.push_back(host);
    part.push_back(to_device(p));
    dw.push_back(to_device(dw0));
    batch.add({part.back().data(), dw.back().data(), k.nb, k.D, k.ld, gpu::ColsumOrder::kBlock512});
    // a column-tile job between them (another form in the same launch)
    other_part.push_back(to_device(random_vec<float>(size_t(100) * 40, rng)));
    other_dw.push_back(to_device(random_vec<float>(40, rng)));
    batch.add({other_part.back().data(), other_dw.back().data(), 100, 40, 0});
  }
  batch.run(nullptr);
  for (size_t j = 0; j < std::size(cases); ++j) {
    SCOPED_TRACE("nb=" + std::to_string(cases[j].nb) + " D=" + std::to_string(cases[j].D));
    EXPECT_TRUE(bitwise_equal(from_device(dw[j]), want[j])) << "differs from param_reduce's order";
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
