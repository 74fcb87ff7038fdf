// The 3xTF32 GEMM (gemm_3xtf32.h). A block computes a BM × BN tile of C with WR × WC warps (2 × 4 or 2 × 2),
// each warp a (BM/WR) × (BN/WC) piece as m16n8k8 subtiles. K advances 32 at a time through a 3-stage
// cp.async pipeline: while the tensor cores work on one k-tile, the next two are in flight.
//
// Shared-memory tiles keep the operand's own layout (no transpose on the way in), with row strides chosen
// so that a fragment's 32 loads hit 32 different banks: a K-major tile (rows of 32 k) has stride 36 ≡ 4
// (mod 32), and lane (g, q) = (lane / 4, lane % 4) reads row g, column q: bank 4g + q; an M- or N-major tile
// (rows of BM or BN) has stride BM + 8 ≡ 8, and lane (g, q) reads row q, column g: bank 8q + g.
//
// Split of K (the weight gradients: C is OUT × IN, K = B·L tokens, too few tiles to fill the GPU): slice z
// of K writes its partial C into the workspace and reduce_kernel adds the slices in order 0, 1, …, then
// the bias and R, so the sum's order is fixed by the configuration alone.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "core/cuda_check.h"
#include "core/error.h"
#include "ops/linear/gemm_3xtf32.h"
#include "ops/linear/gemm_tiles.cuh"
#include "ops/linear/gemm_wgmma.h"

namespace mlalpha::gpu {

namespace {

using namespace gemm_detail;

constexpr int kStages = 3;

template <int BM, int BN, bool kAKMajor, bool kBKMajor>
constexpr size_t smem_bytes() {
  return size_t(kStages) * (tile_floats(kAKMajor, BM) + tile_floats(kBKMajor, BN)) * sizeof(float);
}

// C tile (BM, BN) at (blockIdx.y·BM, blockIdx.x·BN) over K slice blockIdx.z. With one slice it writes
// C = acc + bias + R; with several, the slice's acc into partial (splits, M, N).
// Blocks of WR × WC warps, each warp a (BM / WR) × (BN / WC) piece; two blocks an SM where a thread's
// accumulators fit in half the registers.
template <int BM, int BN, int WR, int WC>
constexpr int kMinBlocks = BM * BN / (32 * WR * WC) <= 64 ? 2 : 1;
template <int BM, int BN, int WR, int WC, bool kAKMajor, bool kBKMajor>
__global__ void __launch_bounds__(32 * WR * WC, (kMinBlocks<BM, BN, WR, WC>))
    gemm3_kernel(const Gemm3Params p, int k_per_split, float* __restrict__ partial) {
  constexpr int kThreads = 32 * WR * WC;
  constexpr int kWM = BM / WR, kWN = BN / WC, kMT = kWM / 16, kNT = kWN / 8;
  constexpr int kSA = tile_ld(kAKMajor, BM), kSB = tile_ld(kBKMajor, BN);
  constexpr int kAFloats = tile_floats(kAKMajor, BM), kStage = kAFloats + tile_floats(kBKMajor, BN);
  extern __shared__ float4 smem4[];
  float* smem = reinterpret_cast<float*>(smem4);

  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int k_begin = blockIdx.z * k_per_split, k_end = min(p.K, k_begin + k_per_split);
  const int nk = (k_end - k_begin + kTileK - 1) / kTileK;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, q = lane & 3;
  const int wm = (warp / WC) * kWM, wn = (warp % WC) * kWN;

  auto load_stage = [&](int kt) {
    float* sa = smem + (kt % kStages) * kStage;
    const int k0 = k_begin + kt * kTileK;
    load_tile<kAKMajor, BM, kThreads>(sa, p.A, p.lda, m0, p.M, k0, k_end, threadIdx.x);
    load_tile<kBKMajor, BN, kThreads>(sa + kAFloats, p.B, p.ldb, n0, p.N, k0, k_end, threadIdx.x);
  };
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < nk) load_stage(s);
    asm volatile("cp.async.commit_group;" ::: "memory");
  }

  float acc[kMT][kNT][4] = {};
  for (int kt = 0; kt < nk; ++kt) {
    asm volatile("cp.async.wait_group %0;" ::"n"(kStages - 2) : "memory");
    __syncthreads();  // k-tile kt is in; every warp is done with kt − 1, whose stage the prefetch reuses
    if (kt + kStages - 1 < nk) load_stage(kt + kStages - 1);
    asm volatile("cp.async.commit_group;" ::: "memory");  // (possibly empty: keeps the group count)

    const float* sa = smem + (kt % kStages) * kStage;
    const float* sb = sa + kAFloats;
#pragma unroll
    for (int kk = 0; kk < kTileK; kk += 8) {
      // B fragments (rows q, q + 4 of k; column g of each n8 subtile), split once, used kMT times; then A
      // one m16 subtile at a time (fewer live registers than the other way round: kNT·4 < kMT·8)
      uint32_t bh[kNT][2], bl[kNT][2];
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
        const int c = wn + 8 * nt + g;
        float v0, v1;
        if constexpr (kBKMajor) {
          const float* b = sb + c * kSB + kk + q;
          v0 = b[0], v1 = b[4];
        } else {
          const float* b = sb + (kk + q) * kSB + c;
          v0 = b[0], v1 = b[4 * kSB];
        }
        split_tf32(v0, bh[nt][0], bl[nt][0]);
        split_tf32(v1, bh[nt][1], bl[nt][1]);
      }
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        uint32_t ah[4], al[4];
        a_fragment<kAKMajor, kSA>(sa, wm + 16 * mt + g, kk, q, ah, al);
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) {  // small terms first, then hi·hi (as in the SSD's products)
          mma_tf32(acc[mt][nt], al, bh[nt]);
          mma_tf32(acc[mt][nt], ah, bl[nt]);
          mma_tf32(acc[mt][nt], ah, bh[nt]);
        }
      }
    }
  }

  // Accumulator (mt, nt, e): row wm + 16·mt + g + 8·(e / 2), column wn + 8·nt + 2q + (e % 2).
  float* const out = gridDim.z > 1 ? partial : nullptr;
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        store_pair(p, out, blockIdx.z, m0 + wm + 16 * mt + g + 8 * h, n0 + wn + 8 * nt + 2 * q,
                   make_float2(acc[mt][nt][2 * h], acc[mt][nt][2 * h + 1]));
}

// C = Σ_z partial[z] (z ascending) + bias + R, four columns per thread (N is a multiple of 4). The slices'
// loads are independent of the running sum, so unrolling issues several at once; the adds stay in order.
__global__ void reduce_kernel(const Gemm3Params p, int splits, const float* __restrict__ partial) {
  const int n4 = p.N / 4;
  const size_t total = size_t(p.M) * n4, slice = size_t(p.M) * p.N;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total; i += size_t(gridDim.x) * blockDim.x) {
    const int row = int(i / n4), col = int(i % n4) * 4;
    const float* src = partial + size_t(row) * p.N + col;
    float4 s = *reinterpret_cast<const float4*>(src);
#pragma unroll 8
    for (int z = 1; z < splits; ++z) {
      const float4 t = __ldcs(reinterpret_cast<const float4*>(src + z * slice));  // read once: streaming
      s.x += t.x, s.y += t.y, s.z += t.z, s.w += t.w;
    }
    if (p.bias) s.x += p.bias[col], s.y += p.bias[col + 1], s.z += p.bias[col + 2], s.w += p.bias[col + 3];
    if (p.R) {
      const float4 r = *reinterpret_cast<const float4*>(p.R + row * p.ldc + col);
      s.x += r.x, s.y += r.y, s.z += r.z, s.w += r.w;
    }
    *reinterpret_cast<float4*>(p.C + row * p.ldc + col) = s;
  }
}

using KernelFn = void (*)(Gemm3Params, int, float*);

template <int BM, int BN, int WR, int WC>
KernelFn kernel_for(const Gemm3Params& p, size_t* smem) {
  auto pick = [&](auto kernel, size_t bytes) {
    *smem = bytes;
    return static_cast<KernelFn>(kernel);
  };
  if (p.a_kmajor && p.b_kmajor)
    return pick(gemm3_kernel<BM, BN, WR, WC, true, true>, smem_bytes<BM, BN, true, true>());
  if (p.a_kmajor) return pick(gemm3_kernel<BM, BN, WR, WC, true, false>, smem_bytes<BM, BN, true, false>());
  if (p.b_kmajor) return pick(gemm3_kernel<BM, BN, WR, WC, false, true>, smem_bytes<BM, BN, false, true>());
  return pick(gemm3_kernel<BM, BN, WR, WC, false, false>, smem_bytes<BM, BN, false, false>());
}

// The tiles the kernel has: block tile, warps along M and N, and for gemm3_config's cost model the rate of
// the tile's products relative to the first (fewer warps with larger pieces load and split less per mma)
// and its fixed cost per wave (prologue and epilogue; a 4-warp block has fewer threads to issue its copies
// and stores) in units of the first's. Fitted to ml-alpha-gemm-sweep --compare on the H200.
struct TileShape {
  int m, n, wr, wc;
  double efficiency, fixed_cost;
};
constexpr TileShape kTiles[] = {{128, 128, 2, 4, 1.0, 1.0}, {64, 128, 2, 4, 0.89, 1.0}, {128, 128, 2, 2, 1.03, 1.5}};

const TileShape& tile_of(const Gemm3Config& c) {
  for (const TileShape& t : kTiles)
    if (!c.wgmma && c.tile_m == t.m && c.tile_n == t.n && c.warps_m == t.wr && c.warps_n == t.wc) return t;
  throw Error("gemm3: no kernel for a " + std::to_string(c.tile_m) + "x" + std::to_string(c.tile_n) + " tile of " +
              std::to_string(c.warps_m) + "x" + std::to_string(c.warps_n) + " warps");
}

// The kernel for c's tile and p's operand orders, its shared-memory limit raised to the *smem bytes it uses
// (as gemm_wgmma_sm90a.cu's kernel_for: a launch over the default limit fails, unchecked in a release build).
KernelFn kernel_for(const Gemm3Params& p, const Gemm3Config& c, size_t* smem) {
  const TileShape& t = tile_of(c);
  const KernelFn k = t.m == 64    ? kernel_for<64, 128, 2, 4>(p, smem)
                     : t.wc == 4 ? kernel_for<128, 128, 2, 4>(p, smem)
                                 : kernel_for<128, 128, 2, 2>(p, smem);
  MLALPHA_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(*smem)));
  return k;
}

// Blocks per SM of a kernel from kernel_for.
int prepare(KernelFn kernel, int threads, size_t smem) {
  int blocks = 0;
  MLALPHA_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, threads, smem));
  require(blocks >= 1, "gemm3: the kernel does not fit on an SM (" + std::to_string(smem) + " bytes of tiles)");
  return blocks;
}

int cdiv(int64_t a, int64_t b) { return int((a + b - 1) / b); }

int sm_count() {
  int dev = 0, sms = 0;
  MLALPHA_CUDA_CHECK(cudaGetDevice(&dev));
  MLALPHA_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  return sms;
}

}  // namespace

size_t Gemm3Config::workspace_floats(const Gemm3Params& p) const {
  return splits > 1 ? size_t(splits) * size_t(p.M) * size_t(p.N) : 0;
}

std::string Gemm3Config::describe() const {
  return "3xTF32 kernel, tile " + std::to_string(tile_m) + "x" + std::to_string(tile_n) +
         (wgmma ? " (wgmma)" : warps_m * warps_n != 8 ? " (" + std::to_string(warps_m * warps_n) + " warps)" : "") +
         (splits > 1 ? ", K split " + std::to_string(splits) + " x " + std::to_string(k_per_split) : "");
}

Gemm3Params gemm3_from_column_major(bool trans_a, bool trans_b, int m, int n, int k, const float* A, int64_t lda,
                                    const float* B, int64_t ldb, float* D, const float* Cadd, const float* bias) {
  Gemm3Params q;
  q.M = n, q.N = m, q.K = k;
  q.A = B, q.a_kmajor = !trans_b, q.lda = ldb;
  q.B = A, q.b_kmajor = trans_a, q.ldb = lda;
  q.C = D, q.ldc = m;
  q.bias = bias;
  q.R = Cadd;
  return q;
}

bool gemm3_supported(const Gemm3Params& p) {
  auto aligned = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
  return p.M > 0 && p.N > 0 && p.K > 0 && (p.M | p.N | p.K) % 4 == 0 && p.lda % 4 == 0 && p.ldb % 4 == 0 &&
         p.ldc % 4 == 0 && p.A && p.B && p.C && aligned(p.A) && aligned(p.B) && aligned(p.C) && aligned(p.R) &&
         p.lda >= (p.a_kmajor ? p.K : p.M) && p.ldb >= (p.b_kmajor ? p.K : p.N) && p.ldc >= p.N;
}

// Per candidate tile (the wgmma kernel's first, where the device runs it): as many K slices as fill the GPU's
// block slots once (only when the tiles alone leave most SMs idle and K is long), within the workspace.
std::vector<Gemm3Config> gemm3_candidates(const Gemm3Params& p, size_t workspace_floats) {
  require(gemm3_supported(p), "gemm3: operands not supported (sizes, strides and pointers must be multiples of 4 "
                              "floats / 16 bytes)");
  const int sms = sm_count();
  std::vector<Gemm3Config> out;
  auto add = [&](Gemm3Config c, int blocks_per_sm) {
    c.slots = sms * blocks_per_sm;
    const int tiles = cdiv(p.M, c.tile_m) * cdiv(p.N, c.tile_n);
    int splits = 1;
    if (tiles * 2 <= sms && p.K >= 1024) {
      splits = std::max(1, std::min(c.slots / tiles, p.K / 256));
      const size_t fit = workspace_floats / (size_t(p.M) * size_t(p.N));
      splits = int(std::min<size_t>(size_t(splits), fit));
      if (splits < 2) splits = 1;
    }
    c.k_per_split = cdiv(cdiv(p.K, splits), kTileK) * kTileK;
    c.splits = cdiv(p.K, c.k_per_split);
    out.push_back(c);
  };
  if (gemm3w_available()) {
    Gemm3Config c;
    c.tile_m = c.tile_n = 128, c.warps_m = 3, c.warps_n = 4, c.wgmma = true;  // 3 warpgroups
    add(c, gemm3w_prepare(p));
  }
  for (const TileShape& t : kTiles) {
    Gemm3Config c;
    c.tile_m = t.m, c.tile_n = t.n, c.warps_m = t.wr, c.warps_n = t.wc;
    size_t smem = 0;
    add(c, prepare(kernel_for(p, c, &smem), 32 * t.wr * t.wc, smem));
  }
  return out;
}

// The cost of a candidate, in tile area × k: its waves (the blocks in rounds of every SM's resident
// blocks), each as long as a fixed latency (the pipeline's prologue and the epilogue, ~6 µs on the H200 for
// the 8-warp tiles: kFixedCost, scaled per tile) plus the work of the blocks that share an SM, at the
// tile's efficiency (kTiles). On the H200 (docs/benchmarks.md): 64×128 tiles deliver 0.89 of the 8-warp
// 128×128 tile's rate on long GEMMs (more loads per product), the 4-warp 128×128 tile 1.03 (its warps'
// 64×64 pieces split fewer fragments per mma) but a longer prologue, so it wins on long GEMMs only;
// 128×64 and 64×64 tiles (0.89 and 0.76) never beat the better of the others by more than 1% on the model's
// shapes, and 128×256 and 256×128 (one block an SM) by at most 4% on L's, so they are not offered.
// Where the device runs the wgmma kernel it is taken without weighing: on the H200 it beat every other tile
// on all 18 fp32 GEMMs of S, M and L, by 5-60%.
Gemm3Config gemm3_config(const Gemm3Params& p, size_t workspace_floats) {
  constexpr double kFixedCost = 128.0 * 128.0 * 100.0;
  const int sms = sm_count();
  const std::vector<Gemm3Config> candidates = gemm3_candidates(p, workspace_floats);
  if (candidates.front().wgmma) return candidates.front();
  Gemm3Config best;
  double best_cost = 0;
  for (const Gemm3Config& c : candidates) {
    const TileShape& t = tile_of(c);
    const int64_t blocks = int64_t(cdiv(p.M, c.tile_m)) * cdiv(p.N, c.tile_n) * c.splits;
    const int64_t per_sm = std::min<int64_t>(c.slots / sms, (blocks + sms - 1) / sms);
    const double wave =
        kFixedCost * t.fixed_cost + double(per_sm) * c.tile_m * c.tile_n * c.k_per_split / t.efficiency;
    const double cost = double((blocks + c.slots - 1) / c.slots) * wave;
    if (best.tile_m == 0 || cost < best_cost) best = c, best_cost = cost;
  }
  return best;
}

void gemm3_run(const Gemm3Params& p, const Gemm3Config& c, float* workspace, cudaStream_t stream) {
  require(gemm3_supported(p), "gemm3: operands not supported");
  require(c.splits == 1 || workspace != nullptr, "gemm3: a K split needs a workspace");
  if (c.wgmma) {
    gemm3w_launch(p, c.k_per_split, c.splits, workspace, stream);
  } else {
    size_t smem = 0;
    const KernelFn kernel = kernel_for(p, c, &smem);
    const dim3 grid(cdiv(p.N, c.tile_n), cdiv(p.M, c.tile_m), c.splits);
    require(grid.y <= 65535 && grid.z <= 65535, "gemm3: too many rows (" + std::to_string(p.M) + ")");
    kernel<<<grid, 32 * c.warps_m * c.warps_n, smem, stream>>>(p, c.k_per_split, workspace);
    MLALPHA_CHECK_LAUNCH(stream);
  }
  if (c.splits > 1) {
    // One float4 a thread, 64-thread blocks: the weight gradients have few elements (S: 83K), so small
    // blocks spread them over every SM.
    const size_t work = size_t(p.M) * (p.N / 4);
    const int blocks = int(std::min<size_t>((work + 63) / 64, 65535));
    reduce_kernel<<<blocks, 64, 0, stream>>>(p, c.splits, workspace);
    MLALPHA_CHECK_LAUNCH(stream);
  }
}

#if !MLALPHA_HAVE_SM90A
// A build without sm_90a code (CMAKE_CUDA_ARCHITECTURES without 90): no wgmma kernel.
bool gemm3w_available() { return false; }
int gemm3w_prepare(const Gemm3Params&) { throw Error("gemm3: this build has no wgmma kernel (no sm_90a code)"); }
void gemm3w_launch(const Gemm3Params&, int, int, float*, cudaStream_t) {
  throw Error("gemm3: this build has no wgmma kernel (no sm_90a code)");
}
#endif

}  // namespace mlalpha::gpu
