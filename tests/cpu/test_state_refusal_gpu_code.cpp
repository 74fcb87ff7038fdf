// The GPU SSD and conv do not take a carried state yet (ssd.h: SsdInputs::h0, h_last, SsdGrads::dh0; conv1d.h:
// Conv1dInputs::window0, window_last, Conv1dGrads::dwindow0): their entry points refuse one before any CUDA call,
// rather than run the zero-state op in its place (GPU code that runs without a device: a CPU suite of the CUDA
// build, tests/CMakeLists.txt).
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "core/error.h"
#include "ops/conv1d/conv1d.h"
#include "ops/ssd/ssd.h"
#include "test_util.h"

namespace mlalpha::test {
namespace {

::testing::AssertionResult refused(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& e) {
    if (std::string(e.what()).find("initial states are not implemented on the GPU yet") != std::string::npos)
      return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "refused for another reason: " << e.what();
  }
  return ::testing::AssertionFailure() << "not refused";
}

TEST(GpuCarriedState, SsdRefusesAnInitialState) {
  const SsdParams p{1, 8, 1, 4, 1, 8, 4, 4 + 16};  // a shape the GPU takes: only the state is refused
  float state[32] = {};                            // (B, H, P, N) = (1, 1, 4, 8); never read
  EXPECT_TRUE(refused([&] { gpu::ssd_fwd(p, {.h0 = state}, nullptr, nullptr, nullptr); }));
  EXPECT_TRUE(refused([&] { gpu::ssd_fwd(p, {.h_last = state}, nullptr, nullptr, nullptr); }));
  EXPECT_TRUE(refused([&] { gpu::ssd_bwd(p, {.h0 = state}, nullptr, nullptr, {}, nullptr, nullptr); }));
  EXPECT_TRUE(refused([&] { gpu::ssd_bwd(p, {}, nullptr, nullptr, {.dh0 = state}, nullptr, nullptr); }));
}

TEST(GpuCarriedState, ConvRefusesAnInitialWindow) {
  const Conv1dParams p{1, 8, 4, 4, 4};
  float window[12] = {};  // (B, W−1, C) = (1, 3, 4); never read
  EXPECT_TRUE(refused([&] { gpu::conv1d_silu_fwd(p, {.window0 = window}, nullptr, nullptr); }));
  EXPECT_TRUE(refused([&] { gpu::conv1d_silu_fwd(p, {.window_last = window}, nullptr, nullptr); }));
  EXPECT_TRUE(refused([&] { gpu::conv1d_silu_bwd(p, {.window0 = window}, nullptr, {}, nullptr, nullptr); }));
  EXPECT_TRUE(refused([&] { gpu::conv1d_silu_bwd(p, {}, nullptr, {.dwindow0 = window}, nullptr, nullptr); }));
}

}  // namespace
}  // namespace mlalpha::test
