// The device sampler picks the same windows as the CPU gather (both read window_offsets()), reading the
// step number from device memory: bitwise equal batches, for windows within one gather slice and for
// windows of several slices (L·F > 2048 floats), B = 1, and F ≠ K; and time batches (dates × G windows, all
// instruments or a cap), including one of more than 65535 windows. The bf16 copy of x written by the gather
// is cast_bf16's bitwise.
#include <cuda_bf16.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <tuple>

#include "data/sampler.h"
#include "ops/cast/cast.h"
#include "data/synthetic.h"
#include "gpu_util.h"

namespace mlalpha::test {
namespace {

TEST(SamplerGpu, MatchesCpuGather) {
  // (N, T, F, K, B, L): small windows; one window; windows spanning two and more gather slices.
  for (auto [N, T, F, K, B, L] : {std::tuple{5, 97, 3, 2, 7, 13}, std::tuple{1, 40, 1, 1, 1, 40},
                                  std::tuple{4, 700, 9, 3, 5, 300}, std::tuple{3, 2100, 2, 1, 3, 2048}}) {
    const Panel panel = make_synthetic({N, T, F, K, 0.1f, 9});
    const auto dx = to_device(panel.x), dy = to_device(panel.y);
    for (long long step : {0LL, 1LL, 12345LL}) {
      DeviceBuffer<long long> dstep(1);
      dstep.upload(&step, 1);
      auto xb = poisoned(size_t(B) * L * F), yb = poisoned(size_t(B) * L * K);
      gpu::gather_batch({N, T, F, K, B, L, 42}, dx.data(), dy.data(), dstep.data(), xb.data(), yb.data(), nullptr);
      std::vector<float> hx(xb.size()), hy(yb.size());
      gather_batch(panel, 42, step, B, L, hx.data(), hy.data());
      const std::string where = "N=" + std::to_string(N) + " L=" + std::to_string(L) + " step " + std::to_string(step);
      EXPECT_EQ(from_device(xb), hx) << where;
      EXPECT_EQ(from_device(yb), hy) << where;
      // With the bf16 copy: the same xb, yb, and xb16 bitwise cast_bf16(xb)
      auto xb2 = poisoned(xb.size()), yb2 = poisoned(yb.size());
      DeviceBuffer<__nv_bfloat16> x16(xb.size()), cast16(xb.size());
      x16.fill_bytes(0xFF);
      gpu::gather_batch({N, T, F, K, B, L, 42}, dx.data(), dy.data(), dstep.data(), xb2.data(), yb2.data(), nullptr,
                        x16.data());
      EXPECT_EQ(from_device(xb2), hx) << where;
      EXPECT_EQ(from_device(yb2), hy) << where;
      gpu::cast_bf16(xb2.data(), cast16.data(), xb2.size(), nullptr);
      const auto a = x16.download(), c = cast16.download();
      EXPECT_EQ(0, std::memcmp(a.data(), c.data(), a.size() * sizeof(__nv_bfloat16)))
          << where << ": xb16 is not cast_bf16(xb)";
    }
  }
}

TEST(SamplerGpu, TimeBatchMatchesCpuGather) {
  // (N, T, F, K, L, dates, G): every instrument; a cap; G = 1; a batch of 70000 windows (beyond grid.y).
  for (auto [N, T, F, K, L, dates, G] :
       {std::tuple{6, 120, 3, 2, 16, 4, 6}, std::tuple{13, 90, 2, 1, 30, 5, 7}, std::tuple{9, 50, 1, 3, 8, 3, 1},
        std::tuple{1000, 12, 2, 1, 4, 70, 1000}}) {
    const Panel panel = make_synthetic({N, T, F, K, 0.1f, 9});
    const auto dx = to_device(panel.x), dy = to_device(panel.y);
    const int B = dates * G;
    const GatherParams g{N, T, F, K, B, L, 42, dates, G};
    for (long long step : {0LL, 7LL, 99999LL}) {
      DeviceBuffer<long long> dstep(1);
      dstep.upload(&step, 1);
      auto xb = poisoned(size_t(B) * L * F), yb = poisoned(size_t(B) * L * K);
      gpu::gather_batch(g, dx.data(), dy.data(), dstep.data(), xb.data(), yb.data(), nullptr);
      std::vector<float> hx(xb.size()), hy(yb.size());
      gather_batch(g, panel.x.data(), panel.y.data(), step, hx.data(), hy.data());
      const std::string where = "N=" + std::to_string(N) + " G=" + std::to_string(G) + " step " + std::to_string(step);
      EXPECT_EQ(from_device(xb), hx) << where;
      EXPECT_EQ(from_device(yb), hy) << where;
    }
  }
}

}  // namespace
}  // namespace mlalpha::test
