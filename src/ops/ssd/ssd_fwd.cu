// SSD forward on the GPU (DESIGN section 1; math and shapes: ssd.h; oracle: ssd_ref.cpp; the matmul form
// and the block product: ssd_common.cuh). Each chunk's C·Bᵀ per group (ssd_group.cu) and the state entering
// every chunk (ssd_chunks.cu) come first, then grid (nchunks, H, B) computes each chunk's T outputs of one
// (b, h) from them:
//     y = diag(e^{cs}) (C S_inᵀ) + (C Bᵀ ∘ Ldec) diag(Δ) X + D X,   Ldec[i, j] = e^{cs_i − cs_j}, j ≤ i.
// Chunk 0's S_in is states[0]: the carried state h0 when one is given (ssd_chunks.cu), else 0.
#include "ops/ssd/ssd_common.cuh"
#include "ops/ssd/ssd_walk.cuh"

namespace mlalpha::gpu {
namespace ssd_detail {
namespace {

// The chunk's C·Bᵀ comes from chunk_cb (ssd_group.cu, once per group), so the block stages it, x, C and S_in
// and needs no B: C·Bᵀ and x first (the M X product starts on them), C and S_in while it runs.
template <MmaMode kMode, int kN, int kP, bool kFullChunks>
__global__ void __launch_bounds__(kThreads) ssd_fwd_kernel(Args args) {
  extern __shared__ __align__(16) double smem_d[];
  const Args a = fixed_dims<kN, kP>(args);
  const int c = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int t0 = chunk_begin(a, c), tc = chunk_steps<kFullChunks>(a, c, t0);
  double* scs = smem_d;                               // (T) cs_t
  float* sdt = reinterpret_cast<float*>(scs + a.Ts);  // (T) Δ_t
  float* sdec = sdt + a.Ts;                           // (T) e^{cs_t}
  float* sC = sdec + a.Ts;                            // (T, ldN)
  float* sX = sC + a.T * a.ldN;                       // (T, ldP)
  float* sM = sX + a.T * a.ldP;                       // (T, ldT) C·Bᵀ, then (C Bᵀ ∘ Ldec) diag(Δ)
  float* sS = sM + a.T * a.ldT;                       // (P, ldN) S_in
  const size_t mo = member_offset(a, b);
  const float A = -expf(a.A_log[mo + h]), Dh = a.Dskip[mo + h];

  stage(cb_at(a, b, c, h * a.G / a.H), a.T, tc, tc, sM, a.ldT);
  stage(x_rows(a, b, h, t0), a.ld, tc, a.P, sX, a.ldP);
  stage_commit();
  stage(bc_rows(a, a.Cm, b, h, t0), a.ld, tc, a.N, sC, a.ldN);
  stage(state_at(a, a.states, b, h, c), a.N, a.P, a.N, sS, a.ldN);
  stage_commit();
  chunk_decay(a, A, b, h, t0, tc, sdt, scs);  // while the copies are in flight
  for (int t = threadIdx.x; t < tc; t += kThreads) sdec[t] = float(exp(scs[t]));
  stage_wait_pending<1>();  // C·Bᵀ, x
  __syncthreads();
  // M[i, j] = (C_i·B_j) e^{cs_i − cs_j} Δ_j for j ≤ i, 0 above, in place (each element read and written by
  // the same thread)
  for (int i = threadIdx.x >> 5; i < tc; i += kThreads / 32)
    for (int j = threadIdx.x & 31; j < tc; j += 32)
      sM[i * a.ldT + j] = j <= i ? sM[i * a.ldT + j] * decay(scs, i, j) * sdt[j] : 0.f;
  __syncthreads();

  for (int p0 = 0; p0 < a.P; p0 += kTile) {
    Acc mx, cs;
    zero(mx);
    zero(cs);
    // Σ_{j≤t} M[t, j] x_j[p]
    mm<kMode, false, false>(mx, sM, a.ldT, sX, a.ldP, 0, tc, p0, a.P, tc);
    if (p0 == 0) {  // C and S_in are in place
      stage_wait();
      __syncthreads();
    }
    // (S_in C_t)[p], times e^{cs_t} below
    mm<kMode, false, true>(cs, sC, a.ldN, sS, a.ldN, 0, tc, p0, a.P, a.N);
    for_out(0, tc, p0, a.P, [&](int r, int cc, int t, int p) {
      const size_t o = (row_of(a, b, t0 + t) * a.H + h) * a.P + p;
      const float v = sdec[t] * cs[r][cc] + mx[r][cc] + Dh * sX[t * a.ldP + p];
      if (a.y16) a.y16[o] = __float2bfloat16_rn(v);
      else a.y[o] = v;
    });
  }
}

}  // namespace
}  // namespace ssd_detail

namespace {
// xbc16 non-null: x, B, C in bf16 (the walks only, checked by the caller).
void fwd(const SsdParams& p, const SsdInputs<float>& in, const SsdXbcBf16* xbc16, float* y, __nv_bfloat16* y16,
         float* saved, cudaStream_t stream) {
  using namespace ssd_detail;
  validate(p);
  if (p.B == 0) return;
  if (p.L == 0) {  // no step: the final state is the initial one
    if (in.h_last) {
      const size_t bytes = size_t(p.B) * p.H * p.P * p.N * sizeof(float);
      if (!in.h0) MLALPHA_CUDA_CHECK(cudaMemsetAsync(in.h_last, 0, bytes, stream));
      else if (in.h0 != in.h_last)
        MLALPHA_CUDA_CHECK(cudaMemcpyAsync(in.h_last, in.h0, bytes, cudaMemcpyDeviceToDevice, stream));
    }
    return;
  }
  require(saved != nullptr, "ssd_fwd: saved is required (the chunk states, which ssd_bwd reads)");
  if (uses_walk(p)) return walk::ssd_fwd_walk(p, in, xbc16, y, y16, saved, stream);
  require(xbc16 == nullptr, "ssd_fwd_bf16: bf16 x, B, C on the chunk-parallel path");
  Args a = make_layout(p);
  set_inputs(a, in);
  a.y = y, a.y16 = y16;
  a.states = saved, a.cb = saved + saved_cb_offset(a), a.wsE = saved + saved_e_offset(a);
  chunk_cb(a, stream);
  chunk_entry_states(a, stream);
  with_dims(a, [&](auto n, auto pp, auto full) {
    auto pick = [](auto mode) {
      return ssd_fwd_kernel<decltype(mode)::value, decltype(n)::value, decltype(pp)::value, decltype(full)::value>;
    };
    launch_kernel(a, pick, dim3(a.nchunks, p.H, p.B), kThreads, fwd_smem_bytes(a), stream);
  });
}

}  // namespace

void ssd_fwd(const SsdParams& p, const SsdInputs<float>& in, float* y, float* saved, cudaStream_t stream) {
  fwd(p, in, nullptr, y, nullptr, saved, stream);
}

void ssd_fwd_bf16(const SsdParams& p, const SsdInputs<float>& in, __nv_bfloat16* y16, float* saved,
                  cudaStream_t stream) {
  require(y16 != nullptr, "ssd_fwd_bf16: y16 is null");
  fwd(p, in, nullptr, nullptr, y16, saved, stream);
}

void ssd_fwd_bf16(const SsdParams& p, const SsdInputs<float>& in, const SsdXbcBf16& xbc, __nv_bfloat16* y16,
                  float* saved, cudaStream_t stream) {
  require(y16 != nullptr, "ssd_fwd_bf16: y16 is null");
  ssd_detail::require_xbc16(p, in, xbc, "ssd_fwd_bf16");
  fwd(p, in, &xbc, nullptr, y16, saved, stream);
}

}  // namespace mlalpha::gpu
