// The chunk products that the heads of a group share (ssd_common.cuh), computed once per (b, chunk, group)
// instead of once per head. With the model's default of one group, all H heads read the same B and C:
// - chunk_cb: C·Bᵀ of each chunk (the causal part, C_i·B_j for j ≤ i). The forward and the backward only
//   scale it by each head's decays, where each head's block used to form it itself: two of the
//   forward's five and of the backward's fourteen 64×64×64 products per block.
// - group_dx_products: the backward's dB_t ∋ Δ_t Σ_i DX[i, t] C_i and dC_i ∋ Σ_j DX[i, j] Δ_j B_j (ssd_bwd.cu)
//   are linear in DX, and B and C are the group's, so Σ_h of them is one product of the summed
//   D = Σ_h DX_h diag(Δ_h): dB += Dᵀ C, dC += D B. Four of the backward's fourteen products per head become
//   four per group, at the price of each head writing its (T, T) DX diag(Δ) and this kernel reading them.
// Both: grid (nchunks, G, B), 8 warps, fixed order throughout (the heads are summed in index order).
#include "ops/ssd/ssd_common.cuh"

namespace mlalpha::gpu {
namespace ssd_detail {
namespace {

template <MmaMode kMode, int kN, int kP, bool kFullChunks>
__global__ void __launch_bounds__(kThreads) cb_kernel(Args args) {
  extern __shared__ __align__(16) double smem_d[];
  const Args a = fixed_dims<kN, kP>(args);
  const int c = blockIdx.x, g = blockIdx.y, b = blockIdx.z;
  const int t0 = chunk_begin(a, c), tc = chunk_steps<kFullChunks>(a, c, t0);
  float* sC = reinterpret_cast<float*>(smem_d);  // (T, ldN)
  float* sB = sC + a.T * a.ldN;                  // (T, ldN)
  stage(group_rows(a, a.Cm, b, g, t0), a.ld, tc, a.N, sC, a.ldN);
  stage(group_rows(a, a.Bm, b, g, t0), a.ld, tc, a.N, sB, a.ldN);
  stage_wait();
  __syncthreads();
  Acc acc;
  zero(acc);
  mm<kMode, false, true>(acc, sC, a.ldN, sB, a.ldN, 0, tc, 0, tc, a.N);
  float* out = cb_at(a, b, c, g);  // (T, T)
  for_out(0, tc, 0, tc, [&](int r, int cc, int i, int j) { out[i * a.T + j] = j <= i ? acc[r][cc] : 0.f; });
}

// D = Σ_{h ∈ group g} DX_h diag(Δ_h) of chunk c (rows and columns < tc), into sD (T, ldT): each thread
// owns fixed elements and adds the heads in order, several loads in flight.
__device__ void sum_heads(const Args& a, int b, int c, int g, int tc, float* sD) {
  const int h_lo = group_head_lo(g, a.H, a.G), h_hi = group_head_lo(g + 1, a.H, a.G);
  if (tc % 4 == 0 && a.T % 4 == 0) {  // quads (the model's shapes)
    const int q4 = tc / 4, total = tc * q4;
    constexpr int kPer = 4;
    for (int k0 = threadIdx.x; k0 < total; k0 += kPer * kThreads) {
      float4 s[kPer];
      int off[kPer];
#pragma unroll
      for (int u = 0; u < kPer; ++u) {
        const int k = min(k0 + u * kThreads, total - 1);
        off[u] = (k / q4) * a.T + 4 * (k % q4);
        s[u] = make_float4(0.f, 0.f, 0.f, 0.f);
      }
      for (int h = h_lo; h < h_hi; ++h) {
        const float* dx = dx_at(a, b, c, h);
        float4 v[kPer];
#pragma unroll
        for (int u = 0; u < kPer; ++u) v[u] = *reinterpret_cast<const float4*>(dx + off[u]);
#pragma unroll
        for (int u = 0; u < kPer; ++u) s[u].x += v[u].x, s[u].y += v[u].y, s[u].z += v[u].z, s[u].w += v[u].w;
      }
#pragma unroll
      for (int u = 0; u < kPer; ++u) {
        const int k = k0 + u * kThreads;
        if (k < total) *reinterpret_cast<float4*>(sD + (k / q4) * a.ldT + 4 * (k % q4)) = s[u];
      }
    }
  } else {
    for (int k = threadIdx.x; k < tc * tc; k += kThreads) {
      const int i = k / tc, j = k % tc;
      float s = 0.f;
      for (int h = h_lo; h < h_hi; ++h) s += dx_at(a, b, c, h)[i * a.T + j];
      sD[i * a.ldT + j] = s;
    }
  }
}

template <MmaMode kMode, int kN, int kP, bool kFullChunks>
__global__ void __launch_bounds__(kThreads) dx_group_kernel(Args args) {
  extern __shared__ __align__(16) double smem_d[];
  const Args a = fixed_dims<kN, kP>(args);
  const int c = blockIdx.x, g = blockIdx.y, b = blockIdx.z;
  const int t0 = chunk_begin(a, c), tc = chunk_steps<kFullChunks>(a, c, t0);
  float* sD = reinterpret_cast<float*>(smem_d);  // (T, ldT) Σ_h DX_h diag(Δ_h)
  float* sC = sD + a.T * a.ldT;                  // (T, ldN)
  float* sB = sC + a.T * a.ldN;                  // (T, ldN)
  stage(group_rows(a, a.Cm, b, g, t0), a.ld, tc, a.N, sC, a.ldN);
  stage(group_rows(a, a.Bm, b, g, t0), a.ld, tc, a.N, sB, a.ldN);
  sum_heads(a, b, c, g, tc, sD);  // while the copies are in flight
  stage_wait();
  __syncthreads();
  for (int n0 = 0; n0 < a.N; n0 += kTile) {
    Acc db, dc;
    zero(db);
    zero(dc);
    mm<kMode, true, false>(db, sD, a.ldT, sC, a.ldN, 0, tc, n0, a.N, tc);   // (Dᵀ C)_t
    mm<kMode, false, false>(dc, sD, a.ldT, sB, a.ldN, 0, tc, n0, a.N, tc);  // (D B)_i
    for_out(0, tc, n0, a.N, [&](int r, int cc, int t, int n) {
      const size_t o = row_of(a, b, t0 + t) * a.ld + size_t(g) * a.N + n;
      a.dB[o] += db[r][cc];
      a.dC[o] += dc[r][cc];
    });
  }
}

}  // namespace

void chunk_cb(const Args& a, cudaStream_t stream) {
  if (a.B == 0 || a.L == 0) return;
  const size_t smem = 2 * size_t(a.T) * a.ldN * sizeof(float);
  with_dims(a, [&](auto n, auto pp, auto full) {
    auto pick = [](auto mode) {
      return cb_kernel<decltype(mode)::value, decltype(n)::value, decltype(pp)::value, decltype(full)::value>;
    };
    launch_kernel(a, pick, dim3(a.nchunks, a.G, a.B), kThreads, smem, stream);
  });
}

void group_dx_products(const Args& a, cudaStream_t stream) {
  if (a.B == 0 || a.L == 0) return;
  const size_t smem = (size_t(a.T) * a.ldT + 2 * size_t(a.T) * a.ldN) * sizeof(float);
  with_dims(a, [&](auto n, auto pp, auto full) {
    auto pick = [](auto mode) {
      return dx_group_kernel<decltype(mode)::value, decltype(n)::value, decltype(pp)::value,
                             decltype(full)::value>;
    };
    launch_kernel(a, pick, dim3(a.nchunks, a.G, a.B), kThreads, smem, stream);
  });
}

}  // namespace ssd_detail
}  // namespace mlalpha::gpu
