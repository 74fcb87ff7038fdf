// The SSD GPU kernels' shape rules (GPU code that runs without a device: a CPU suite of the CUDA build,
// tests/CMakeLists.txt): chunk length, saved-buffer and workspace sizes, which shapes take the chunk walks, and the
// shapes refused.
#include <gtest/gtest.h>

#include "core/error.h"
#include "ops/ssd/ssd.h"
#include "test_util.h"

namespace mlalpha::test {
namespace {

// The GPU kernels' shape rules are host code (ssd_layout.cu): checked here, without a GPU. The shapes are
// rejected before any CUDA call, so ssd_fwd can be given null pointers.
// The GPU chunk length: min(Q, 64), halved while the backward's tiles exceed shared memory.
TEST(SsdGpuShapes, ChunkLength) {
  EXPECT_EQ(gpu::ssd_chunk_len({4, 256, 8, 32, 1, 64, 64, 384}), 64);     // S
  EXPECT_EQ(gpu::ssd_chunk_len({8, 2048, 32, 64, 1, 128, 256, 2304}), 64);  // L: Q = 256 capped
  EXPECT_EQ(gpu::ssd_chunk_len({1, 33, 2, 5, 1, 1, 1, 12}), 1);           // Q = 1 kept
  EXPECT_EQ(gpu::ssd_chunk_len({1, 140, 2, 128, 1, 128, 64, 512}), 32);   // shared memory
}

// The forward's saved buffer: the chunk states; on the chunk-parallel path then each chunk's C·Bᵀ per group
// (T × T), 16-byte aligned.
TEST(SsdGpuShapes, SavedBufferSize) {
  SsdParams l{8, 2048, 32, 64, 1, 128, 256, 2304};  // L: 32 chunks of 64
  EXPECT_EQ(gpu::ssd_chunk_states_floats(l), size_t(8) * 32 * 32 * 64 * 128);
  EXPECT_EQ(gpu::ssd_saved_floats(l), gpu::ssd_chunk_states_floats(l) + size_t(8) * 32 * 1 * 64 * 64);
  l.precision = Precision::BF16;  // the walks
  EXPECT_EQ(gpu::ssd_saved_floats(l), gpu::ssd_chunk_states_floats(l));
  SsdParams odd{3, 70, 3, 7, 2, 3, 32, 40};  // 3·3·3·7·3 = 567 state floats, padded to 568
  EXPECT_EQ(gpu::ssd_chunk_states_floats(odd), size_t(567));
  EXPECT_EQ(gpu::ssd_saved_floats(odd), size_t(568) + size_t(3) * 3 * 2 * 32 * 32);
  odd.algo = SsdAlgo::kWalk;
  EXPECT_EQ(gpu::ssd_saved_floats(odd), size_t(567));
}

// Which path SsdAlgo::kAuto takes: the chunk walks in bf16 mode for P <= 64, N <= 128 and at most 64 chunks (the
// model's S, M, L layers), the chunk-parallel kernels otherwise; kWalk on a shape the walks do not take is
// rejected.
TEST(SsdGpuShapes, WalkRule) {
  auto bf16 = [](SsdParams p) {
    p.precision = Precision::BF16;
    return p;
  };
  EXPECT_TRUE(gpu::ssd_uses_walk(bf16({64, 256, 8, 32, 1, 64, 64, 384})));       // S
  EXPECT_TRUE(gpu::ssd_uses_walk(bf16({32, 512, 8, 64, 1, 64, 128, 640})));      // M
  EXPECT_TRUE(gpu::ssd_uses_walk(bf16({8, 2048, 32, 64, 1, 128, 256, 2304})));   // L
  EXPECT_TRUE(gpu::ssd_uses_walk(bf16({1, 64 * 64, 8, 32, 1, 64, 64, 384})));    // 64 chunks
  EXPECT_FALSE(gpu::ssd_uses_walk(bf16({1, 64 * 64 + 1, 8, 32, 1, 64, 64, 384})));  // 65: the segmented walks
  EXPECT_FALSE(gpu::ssd_uses_walk(bf16({1, 100, 2, 128, 1, 16, 16, 288})));      // P = 128
  EXPECT_FALSE(gpu::ssd_uses_walk(bf16({1, 100, 1, 64, 1, 256, 64, 576})));      // N = 256
  EXPECT_FALSE(gpu::ssd_uses_walk({64, 256, 8, 32, 1, 64, 64, 384}));            // fp32
  SsdParams s = bf16({64, 256, 8, 32, 1, 64, 64, 384});
  s.algo = SsdAlgo::kChunked;
  EXPECT_FALSE(gpu::ssd_uses_walk(s));
  s = SsdParams{64, 256, 8, 32, 1, 64, 64, 384};
  s.algo = SsdAlgo::kWalk;  // fp32 on request
  EXPECT_TRUE(gpu::ssd_uses_walk(s));
  SsdParams big{1, 100, 1, 64, 1, 256, 64, 576};
  big.algo = SsdAlgo::kWalk;
  EXPECT_THROW(gpu::ssd_uses_walk(big), Error);
  // The reverse walk's scratch: dA_log and dD partials per (b, h), and per-cluster dB, dC partials sized for
  // clusters of 2 wherever the largest cluster dividing a group has more heads (the walk may take 2 at run
  // time: ssd_walk_bwd_cluster_heads), so the size depends on the shape alone.
  EXPECT_EQ(gpu::ssd_bwd_workspace_floats(bf16({64, 256, 8, 32, 1, 64, 64, 384})),
            size_t(2) * 64 * 8 + size_t(2) * 64 * 256 * 4 * 64);
  EXPECT_EQ(gpu::ssd_bwd_workspace_floats(bf16({8, 2048, 32, 64, 1, 128, 256, 2304})),
            size_t(2) * 8 * 32 + size_t(2) * 8 * 2048 * 16 * 128);
  // 2 heads a group: clusters of 2 hold whole groups, no partials.
  EXPECT_EQ(gpu::ssd_bwd_workspace_floats(bf16({4, 64, 4, 16, 2, 16, 64, 4 * 16 + 2 * 2 * 16})),
            size_t(2) * 4 * 4);
}

TEST(SsdGpuShapes, RejectsUnsupportedShapes) {
  SsdParams p{1, 8, 1, 256, 1, 256, 4, 256 + 512};  // the (P, N) state alone exceeds shared memory
  EXPECT_THROW(gpu::ssd_fwd(p, SsdInputs<float>{}, nullptr, nullptr, nullptr), Error);
  p = SsdParams{1, 8, 1, 4, 1, 8, 4, 2};  // ld < H·P
  EXPECT_THROW(gpu::ssd_fwd(p, SsdInputs<float>{}, nullptr, nullptr, nullptr), Error);
  EXPECT_THROW(gpu::ssd_saved_floats(p), Error);
  EXPECT_THROW(gpu::ssd_bwd_workspace_floats(p), Error);
}

}  // namespace
}  // namespace mlalpha::test
