// SSD forward on the GPU (DESIGN section 1; math and shapes: ssd.h; oracle: ssd_ref.cpp; the matmul form
// and the block product: ssd_common.cuh). The state entering every chunk comes first (ssd_chunks.cu), then
// grid (nchunks, H, B) computes each chunk's T outputs of one (b, h) from it:
//     y = diag(e^{cs}) (C S_inᵀ) + (C Bᵀ ∘ Ldec) diag(Δ) X + D X,   Ldec[i, j] = e^{cs_i − cs_j}, j ≤ i.
#include "ops/ssd/ssd_common.cuh"

namespace mlalpha::gpu {
namespace ssd_detail {
namespace {

// B and S_in share one region: B is read only by C·Bᵀ, so S_in is staged there after it, and the block
// needs less shared memory (two blocks per SM for the 'L' layer instead of one; three for 'S'). The copy of
// S_in overlaps the first tile's M X product.
template <bool kExact, int kN, int kP>
__global__ void __launch_bounds__(kThreads) ssd_fwd_kernel(Args args) {
  extern __shared__ __align__(16) double smem_d[];
  const Args a = fixed_dims<kN, kP>(args);
  const int c = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int t0 = chunk_begin(a, c), tc = chunk_end(a, c) - t0;
  double* scs = smem_d;                               // (T) cs_t
  float* sdt = reinterpret_cast<float*>(scs + a.Ts);  // (T) Δ_t
  float* sdec = sdt + a.Ts;                           // (T) e^{cs_t}
  float* sC = sdec + a.Ts;                            // (T, ldN)
  float* sX = sC + a.T * a.ldN;                       // (T, ldP)
  float* sM = sX + a.T * a.ldP;                       // (T, ldT) (C Bᵀ ∘ Ldec) diag(Δ)
  float* sB = sM + a.T * a.ldT;                       // (T, ldN) B, then
  float* sS = sB;                                     // (P, ldN) S_in
  const float A = -expf(a.A_log[h]), Dh = a.Dskip[h];

  stage(bc_rows(a, a.Cm, b, h, t0), a.ld, tc, a.N, sC, a.ldN);
  stage(bc_rows(a, a.Bm, b, h, t0), a.ld, tc, a.N, sB, a.ldN);
  stage(x_rows(a, b, h, t0), a.ld, tc, a.P, sX, a.ldP);
  chunk_decay(a, A, b, h, t0, tc, sdt, scs);  // while the copies are in flight
  for (int t = threadIdx.x; t < tc; t += kThreads) sdec[t] = float(exp(scs[t]));
  stage_wait();
  __syncthreads();

  // M[i, j] = (C_i·B_j) e^{cs_i − cs_j} Δ_j
  causal_cb<kExact>(a, sC, sB, scs, tc, sM, [&](int j) { return sdt[j]; });
  __syncthreads();  // B is consumed
  stage(state_at(a, a.states, b, h, c), a.N, a.P, a.N, sS, a.ldN);

  for (int p0 = 0; p0 < a.P; p0 += kTile) {
    Acc mx, cs;
    zero(mx);
    zero(cs);
    // Σ_{j≤t} M[t, j] x_j[p]
    mm<kExact, false, false>(mx, sM, a.ldT, sX, a.ldP, 0, tc, p0, a.P, tc);
    if (p0 == 0) {  // S_in is in place
      stage_wait();
      __syncthreads();
    }
    // (S_in C_t)[p], times e^{cs_t} below
    mm<kExact, false, true>(cs, sC, a.ldN, sS, a.ldN, 0, tc, p0, a.P, a.N);
    for_out(0, tc, p0, a.P, [&](int r, int cc, int t, int p) {
      a.y[(row_of(a, b, t0 + t) * a.H + h) * a.P + p] = sdec[t] * cs[r][cc] + mx[r][cc] + Dh * sX[t * a.ldP + p];
    });
  }
}

}  // namespace
}  // namespace ssd_detail

void ssd_fwd(const SsdParams& p, const float* x, const float* delta, const float* A_log, const float* Bm,
             const float* Cm, const float* Dskip, float* y, float* chunk_states, cudaStream_t stream) {
  using namespace ssd_detail;
  validate(p);
  if (p.B == 0 || p.L == 0) return;
  require(chunk_states != nullptr, "ssd_fwd: chunk_states is required (the chunks run in parallel from it)");
  Args a = make_layout(p);
  a.x = x, a.delta = delta, a.A_log = A_log, a.Bm = Bm, a.Cm = Cm, a.Dskip = Dskip, a.y = y, a.states = chunk_states;
  chunk_entry_states(a, stream);
  with_dims(a, [&](auto n, auto pp) {
    launch_kernel(
        a, [](auto exact) { return ssd_fwd_kernel<decltype(exact)::value, decltype(n)::value, decltype(pp)::value>; },
        dim3(a.nchunks, p.H, p.B), kThreads, fwd_smem_bytes(a), stream);
  });
}

}  // namespace mlalpha::gpu
