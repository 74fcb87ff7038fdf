// Data-parallel stateful training without a GPU (data/carry_sampler_gpu.h): the ranks' lanes of a world's sampler
// and the packing that gathers their carried states into one `last` with a float sum over the ranks (what NCCL's
// all-reduce computes), bit for bit, −0, NaN payloads and subnormals included; and each rank's share back out.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/error.h"
#include "data/carry_sampler.h"
#include "data/carry_sampler_gpu.h"
#include "data/synthetic.h"
#include "test_util.h"

namespace mlalpha {
namespace {

// Rank r's states: values of every kind, distinct per rank, layer and position.
std::vector<float> states_of(int rank, int NL, size_t per_layer) {
  std::vector<float> v(size_t(NL) * per_layer);
  const float odd[] = {-0.0f, 0.0f, std::numeric_limits<float>::denorm_min(), -std::numeric_limits<float>::max(),
                       std::numeric_limits<float>::infinity()};
  for (size_t i = 0; i < v.size(); ++i) v[i] = i % 7 < 5 ? odd[i % 7] : float(rank * 1000 + int(i)) * -0.37f;
  uint32_t nan_bits = 0x7fc01234u + uint32_t(rank);  // a NaN with a payload
  std::memcpy(&v[1], &nan_bits, 4);
  return v;
}

TEST(CarryLanes, GatheredStatesAreEveryRanksLanesBitForBit) {
  for (int world : {1, 2, 3}) {
    const int NL = 2;
    const size_t per_layer = 11;  // one rank's lanes of one layer
    // The float sum over the ranks, in either order (as an all-reduce may add them).
    std::vector<float> sum, rsum;
    for (int r = 0; r < world; ++r) {
      const std::vector<float> p = pack_rank_lanes(states_of(r, NL, per_layer), NL, world, r);
      if (sum.empty()) sum.assign(p.size(), 0.0f), rsum.assign(p.size(), 0.0f);
      for (size_t i = 0; i < p.size(); ++i) sum[i] += p[i];
    }
    for (int r = world - 1; r >= 0; --r) {
      const std::vector<float> p = pack_rank_lanes(states_of(r, NL, per_layer), NL, world, r);
      for (size_t i = 0; i < p.size(); ++i) rsum[i] = p[i] + rsum[i];
    }
    const std::vector<float> all = unpack_rank_lanes(sum);
    ASSERT_EQ(all.size(), size_t(NL) * per_layer * world);
    EXPECT_TRUE(test::same_bits(all, unpack_rank_lanes(rsum))) << "world " << world;
    // Layer-major with the ranks' lanes in rank order: one trainer of world · B lanes' layout.
    for (int r = 0; r < world; ++r) {
      const std::vector<float> own = states_of(r, NL, per_layer);
      for (int l = 0; l < NL; ++l)
        EXPECT_EQ(std::memcmp(all.data() + (size_t(l) * world + r) * per_layer, own.data() + size_t(l) * per_layer,
                              per_layer * sizeof(float)),
                  0)
            << "world " << world << " rank " << r << " layer " << l;
      EXPECT_TRUE(test::same_bits(rank_lanes(all, NL, world, r), own)) << "world " << world << " rank " << r;
    }
  }
}

TEST(CarryLanes, MismatchedShapesAreRefused) {
  EXPECT_THROW(pack_rank_lanes(std::vector<float>(5), 2, 2, 0), Error);  // not whole layers
  EXPECT_THROW(pack_rank_lanes(std::vector<float>(4), 2, 2, 2), Error);  // no rank 2 of 2
  EXPECT_THROW(rank_lanes(std::vector<float>(6), 2, 4, 0), Error);       // not every rank's lanes
  EXPECT_THROW(unpack_rank_lanes(std::vector<float>(3)), Error);
}

// The ranks' shares of a world's sampler: rank r's lane b is lane r·B + b of the sampler of world · B lanes, so
// the ranks together visit every window of an epoch once, each rank's lanes walking its own instruments' windows.
TEST(CarryLanes, TheRanksShareOneEpoch) {
  const Panel p = make_synthetic({5, 120, 2, 1, 0.1f, 3});
  const int B = 2, world = 3, L = 10;
  const CarrySampler s(p, 0, 120, world * B, L, 7);
  std::vector<int> seen(size_t(p.N) * 120, 0);
  for (int64_t step = 0; step < s.epoch_steps(); ++step)
    for (int r = 0; r < world; ++r)
      for (int b = 0; b < B; ++b) {
        const CarryWindow w = s.window(step, r * B + b);
        if (w.instrument < 0) continue;
        for (int t = 0; t < L; ++t) ++seen[size_t(w.instrument) * 120 + size_t(s.rows(w.instrument)[size_t(w.first + t)])];
      }
  int64_t visited = 0;
  for (int v : seen) {
    EXPECT_LE(v, 1);
    visited += v;
  }
  EXPECT_EQ(visited, s.windows_per_epoch() * L);
}

}  // namespace
}  // namespace mlalpha
