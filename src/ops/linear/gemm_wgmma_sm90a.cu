// The 3xTF32 GEMM on wgmma (gemm_wgmma.h). A block of 384 threads computes a 128 × 128 tile of C:
//   - warpgroup 0 (the producer) copies each k-tile of A and B (32 k) into shared memory with cp.async, then
//     splits B into tf32 hi and lo tiles in the layout wgmma reads B from ("core matrices" of 8 n × 4 k,
//     128 contiguous bytes; K-major, the only order wgmma takes tf32 in), whatever B's order in memory;
//   - warpgroups 1 and 2 (the consumers) each multiply 64 rows: per k-step of 8, A's fragment is loaded
//     from the raw tile and split in registers, and three m64n128k8 wgmma add lo·hi, hi·lo, hi·hi (the
//     dropped lo·lo is ~2^-22 relative, as in gemm_3xtf32.cu).
// Shared memory (208 KB): 4 slots of raw A and B tiles, 2 buffers of split B. Barriers: full[s] (the
// producer's 128 threads arrive when slot s is in and its B split), empty[s] (the consumers' 256 threads
// arrive when their products of slot s are done). While the consumers multiply k-tile i, the producer
// splits i + 1 with the copies of i + 2 and i + 3 in flight; the two consumer warpgroups take turns on the
// tensor cores.
//
// B hi / lo tile of a k-tile: element (n, k) at (k / 8)·1024 + (n / 8)·64 + ((k % 8) / 4)·32 + (n % 8)·4 +
// k % 4 floats: per k-step a 128 n × 8 k block, core matrices 128 bytes apart along k (the descriptor's
// leading byte offset) and 256 bytes apart along n (its stride byte offset), no swizzle.
#include <string>

#include "core/cuda_check.h"
#include "core/error.h"
#include "ops/linear/gemm_tiles.cuh"
#include "ops/linear/gemm_wgmma.h"

namespace mlalpha::gpu {

namespace {

using namespace gemm_detail;

constexpr int kBM = 128, kBN = 128;
// Positions of the block's stream of k-tiles: position it's raw A and B tiles are in slot it % kSlots, its
// split B in buffer it % kSplits. At the producer's iteration it the consumers multiply it − 1, the producer
// splits it, and the copies of it + 1 … it + kAhead are in flight.
constexpr int kAhead = 2;
constexpr int kSlots = kAhead + 2;
constexpr int kSplits = 2;
constexpr int kThreads = 384;     // producer warpgroup + two consumer warpgroups
constexpr int kSplitFloats = kBN * kTileK;  // one split B tile (hi or lo)

template <bool kAKMajor, bool kBKMajor>
constexpr size_t smem_bytes() {
  return (size_t(kSplits) * 2 * kSplitFloats +
          size_t(kSlots) * (tile_floats(kAKMajor, kBM) + tile_floats(kBKMajor, kBN))) * sizeof(float) +
         2 * kSlots * sizeof(uint64_t);
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
__device__ __forceinline__ uint32_t smem_addr(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ void mbar_init(uint64_t* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, int parity) {
  asm volatile(
      "{\n.reg .pred p;\nWAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      "@!p bra WAIT;\n}\n" ::"r"(smem_addr(bar)),
      "r"(parity)
      : "memory");
}

// Shared-memory matrix descriptor of a split B block (see the top): start address, leading byte offset 128,
// stride byte offset 256, no swizzle (all in 16-byte units).
__device__ __forceinline__ uint64_t b_desc(const float* tile) {
  return uint64_t((smem_addr(tile) & 0x3FFFF) >> 4) | (uint64_t(128 >> 4) << 16) | (uint64_t(256 >> 4) << 32);
}

#define MLA_WG_D8(i)                                                                                       \
  "+f"(d[i + 0]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), \
      "+f"(d[i + 7])
// d (64 rows × 128 columns over the warpgroup) = A (64 × 8, registers) · B (8 × 128, descriptor) +
// (accumulate ? d : 0), fp32 accumulation of tf32 inputs.
__device__ __forceinline__ void wgmma_128(float (&d)[64], const uint32_t (&a)[4], uint64_t desc, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "{%64, %65, %66, %67}, %68, p, 1, 1;\n}\n"
      : MLA_WG_D8(0), MLA_WG_D8(8), MLA_WG_D8(16), MLA_WG_D8(24), MLA_WG_D8(32), MLA_WG_D8(40), MLA_WG_D8(48),
        MLA_WG_D8(56)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(accumulate));
}
#undef MLA_WG_D8
#endif

template <bool kAKMajor, bool kBKMajor>
__global__ void __launch_bounds__(kThreads, 1)
    gemm3w_kernel(const Gemm3Params p, int k_per_split, float* __restrict__ partial) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kAFloats = tile_floats(kAKMajor, kBM), kBFloats = tile_floats(kBKMajor, kBN);
  constexpr int kSA = tile_ld(kAKMajor, kBM), kSB = tile_ld(kBKMajor, kBN);
  extern __shared__ float4 smem4[];
  float* split = reinterpret_cast<float*>(smem4);   // (kSplits, hi / lo, kSplitFloats)
  float* raw_a = split + kSplits * 2 * kSplitFloats;  // (kSlots, kAFloats)
  float* raw_b = raw_a + kSlots * kAFloats;          // (kSlots, kBFloats)
  uint64_t* full = reinterpret_cast<uint64_t*>(raw_b + kSlots * kBFloats);  // (kSlots)
  uint64_t* empty = full + kSlots;                                          // (kSlots)

  const int m0 = blockIdx.y * kBM, n0 = blockIdx.x * kBN;
  const int k_begin = blockIdx.z * k_per_split, k_end = min(p.K, k_begin + k_per_split);
  const int nk = (k_end - k_begin + kTileK - 1) / kTileK;
  const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kSlots; ++s) mbar_init(full + s, 128), mbar_init(empty + s, 256);
  }
  __syncthreads();

  if (wg == 0) {  // producer: k-tile it in slot it % kSlots, its split B in buffer it % kSplits
    auto issue = [&](int it) {
      if (it < nk) {
        const int k0 = k_begin + it * kTileK;
        load_tile<kAKMajor, kBM, 128>(raw_a + (it % kSlots) * kAFloats, p.A, p.lda, m0, p.M, k0, k_end, t);
        load_tile<kBKMajor, kBN, 128>(raw_b + (it % kSlots) * kBFloats, p.B, p.ldb, n0, p.N, k0, k_end, t);
      }
      asm volatile("cp.async.commit_group;" ::: "memory");  // (possibly empty: keeps the group count)
    };
    for (int i = 0; i < kAhead; ++i) issue(i);
    for (int it = 0; it < nk; ++it) {
      // The consumers are done with it − 2: that frees split buffer it % kSplits and the slot of it + kAhead
      // (whose raw B was last split at it − 2, before the producer barrier of it − 1). They are on it − 1
      // by now, so this does not wait in the steady state.
      static_assert(kSplits == 2 && kSlots == kAhead + 2, "the wait below frees both");
      if (it >= 2) mbar_wait(empty + (it - 2) % kSlots, ((it - 2) / kSlots) & 1);
      issue(it + kAhead);
      asm volatile("cp.async.wait_group %0;" ::"n"(kAhead) : "memory");  // this thread's copies of it are in
      asm volatile("bar.sync 1, 128;" ::: "memory");        // and every producer thread's
      const float* sb = raw_b + (it % kSlots) * kBFloats;
      float* hi = split + (it % kSplits) * 2 * kSplitFloats;
      float* lo = hi + kSplitFloats;
#pragma unroll
      for (int i = 0; i < 8; ++i) {  // 128 n × 8 quads of k: consecutive threads along n
        const int u = i * 128 + t, n = u & 127, j = u >> 7;  // j: quad of k (0..7)
        float v[4];
        if constexpr (kBKMajor) {
          const float4 x = *reinterpret_cast<const float4*>(sb + n * kSB + 4 * j);
          v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w;
        } else {
#pragma unroll
          for (int e = 0; e < 4; ++e) v[e] = sb[(4 * j + e) * kSB + n];
        }
        uint32_t h[4], l[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) split_tf32(v[e], h[e], l[e]);
        const int off = (j >> 1) * 1024 + (n >> 3) * 64 + (j & 1) * 32 + (n & 7) * 4;
        *reinterpret_cast<uint4*>(hi + off) = make_uint4(h[0], h[1], h[2], h[3]);
        *reinterpret_cast<uint4*>(lo + off) = make_uint4(l[0], l[1], l[2], l[3]);
      }
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // the split tiles → wgmma's reads
      mbar_arrive(full + it % kSlots);
    }
    asm volatile("cp.async.wait_group 0;" ::: "memory");
    return;
  }

  // consumers: warpgroup wg − 1 takes rows 64·(wg − 1) … + 63; warp w of it rows 16w … + 15
  const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  const int r0 = 64 * (wg - 1) + 16 * ((threadIdx.x >> 5) & 3) + g;
  float* const out = gridDim.z > 1 ? partial : nullptr;  // a split of K: partial products
  float acc[64];
#pragma unroll
  for (int e = 0; e < 64; ++e) acc[e] = 0.f;
  for (int it = 0; it < nk; ++it) {
    const int s = it % kSlots;
    mbar_wait(full + s, (it / kSlots) & 1);
    const float* sa = raw_a + s * kAFloats;
    uint32_t ah[4][4], al[4][4];
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) a_fragment<kAKMajor, kSA>(sa, r0, 8 * ks, q, ah[ks], al[ks]);
    const float* hi = split + (it % kSplits) * 2 * kSplitFloats;
    const float* lo = hi + kSplitFloats;
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {  // small terms first, then hi·hi
      wgmma_128(acc, al[ks], b_desc(hi + ks * 1024), 1);
      wgmma_128(acc, ah[ks], b_desc(lo + ks * 1024), 1);
      wgmma_128(acc, ah[ks], b_desc(hi + ks * 1024), 1);
    }
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    mbar_arrive(empty + s);
  }
  // acc[4j + e]: row r0 + 8·(e / 2), column 8j + 2q + (e % 2)
#pragma unroll
  for (int j = 0; j < 16; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      store_pair(p, out, blockIdx.z, m0 + r0 + 8 * h, n0 + 8 * j + 2 * q,
                 make_float2(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]));
#else
  __trap();  // (never launched: gemm3w_available() is false where this code runs)
#endif
}

using KernelFn = void (*)(Gemm3Params, int, float*);

// The kernel for p's operand orders, its shared-memory limit raised to the *smem bytes it uses (a launch
// over the default limit fails, and a release build does not check launches).
KernelFn kernel_for(const Gemm3Params& p, size_t* smem) {
  auto pick = [&](KernelFn k, size_t bytes) {
    *smem = bytes;
    MLALPHA_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
    return k;
  };
  if (p.a_kmajor && p.b_kmajor) return pick(gemm3w_kernel<true, true>, smem_bytes<true, true>());
  if (p.a_kmajor) return pick(gemm3w_kernel<true, false>, smem_bytes<true, false>());
  if (p.b_kmajor) return pick(gemm3w_kernel<false, true>, smem_bytes<false, true>());
  return pick(gemm3w_kernel<false, false>, smem_bytes<false, false>());
}

}  // namespace

bool gemm3w_available() {
  cudaFuncAttributes attr{};
  const cudaError_t e = cudaFuncGetAttributes(&attr, gemm3w_kernel<true, true>);
  if (e == cudaSuccess) return true;
  (void)cudaGetLastError();  // no sm_90a code for this device: not an error, the kernel is just not offered
  return false;
}

int gemm3w_prepare(const Gemm3Params& p) {
  size_t smem = 0;
  const KernelFn k = kernel_for(p, &smem);
  int blocks = 0;
  MLALPHA_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, k, kThreads, smem));
  require(blocks >= 1, "gemm3 (wgmma): the kernel does not fit on an SM (" + std::to_string(smem) + " bytes)");
  return blocks;
}

void gemm3w_launch(const Gemm3Params& p, int k_per_split, int splits, float* partial, cudaStream_t stream) {
  size_t smem = 0;
  const KernelFn k = kernel_for(p, &smem);
  const dim3 grid((p.N + kBN - 1) / kBN, (p.M + kBM - 1) / kBM, splits);
  require(grid.y <= 65535 && grid.z <= 65535, "gemm3 (wgmma): too many rows (" + std::to_string(p.M) + ")");
  k<<<grid, kThreads, smem, stream>>>(p, k_per_split, partial);
  MLALPHA_CHECK_LAUNCH(stream);
}

}  // namespace mlalpha::gpu
