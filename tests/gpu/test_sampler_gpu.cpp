// The device sampler picks the same windows as the CPU trainer's gather_batch, reading the step number
// from device memory.
#include <gtest/gtest.h>

#include "data/sampler.h"
#include "data/synthetic.h"
#include "gpu_util.h"

namespace mlalpha::test {
namespace {

TEST(SamplerGpu, MatchesCpuGather) {
  const Panel panel = make_synthetic({5, 97, 3, 2, 0.1f, 9});
  const auto dx = to_device(panel.x), dy = to_device(panel.y);
  const int B = 7, L = 13;
  for (long long step : {0LL, 1LL, 12345LL}) {
    DeviceBuffer<long long> dstep(1);
    dstep.upload(&step, 1);
    auto xb = poisoned(size_t(B) * L * panel.F), yb = poisoned(size_t(B) * L * panel.K);
    gpu::gather_batch({panel.N, panel.T, panel.F, panel.K, B, L, 42}, dx.data(), dy.data(), dstep.data(), xb.data(),
                      yb.data(), nullptr);
    std::vector<float> hx(xb.size()), hy(yb.size());
    gather_batch(panel, 42, step, B, L, hx.data(), hy.data());
    EXPECT_EQ(from_device(xb), hx) << "step " << step;
    EXPECT_EQ(from_device(yb), hy) << "step " << step;
  }
}

}  // namespace
}  // namespace mlalpha::test
