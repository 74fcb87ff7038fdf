// SSD forward on the GPU (DESIGN section 1; math and shapes: ssd.h; oracle: ssd_ref.cpp; layout:
// ssd_common.cuh). The state entering every chunk comes first (ssd_chunks.cu), so the chunks then run in
// parallel: grid (nchunks, H, B), each block all P rows of one (b, h) over the Q steps of its chunk:
//     s_t = a_t s_{t−1} + Δ_t x_t B_tᵀ,   y_t[p] = Σ_n s_t[p, n] C_t[n] + D x_t[p].
#include "ops/ssd/ssd_common.cuh"

namespace mlalpha::gpu {
namespace ssd_detail {
namespace {

template <int NPT, int RP>
__global__ void __launch_bounds__(kMaxWarps * 32) ssd_fwd_kernel(Args a) {
  extern __shared__ __align__(16) float smem[];
  const int c = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const StepTiles st = carve_tiles(a, smem, /*with_dy=*/false);
  const float *sB = st.B, *sC = st.C, *sx = st.x, *sdt = st.dt, *sa = st.a;
  float* sy = st.end;  // (TS, PT)
  const bool lead = (threadIdx.x & 31 & (a.NL - 1)) == 0;  // one lane of each group writes its rows' y
  const float A = -expf(a.A_log[h]), Dh = a.Dskip[h];

  float s[RP][NPT];
  load_state(a, state_at(a, a.states, b, h, c), s);

  const int cend = chunk_end(a, c);
  for (int t0 = chunk_begin(a, c); t0 < cend; t0 += a.TS) {
    const int ts = min(a.TS, cend - t0);
    stage_tiles(a, st, A, b, h, t0, ts);
    __syncthreads();
    for (int t = 0; t < ts; ++t) {
      const float dt = sdt[t], at = sa[t];
      float Bt[NPT], Ct[NPT];
      load_lane(a, sB + t * a.NS, Bt);
      load_lane(a, sC + t * a.NS, Ct);
#pragma unroll
      for (int j = 0; j < RP; ++j) {
        const int lr = local_row(a, j);
        const float xv = sx[t * a.PT + lr], u = dt * xv;
        float acc = 0.f;
#pragma unroll
        for (int k = 0; k < NPT; ++k) {
          s[j][k] = at * s[j][k] + u * Bt[k];
          acc += s[j][k] * Ct[k];
        }
        acc = sum_n_lanes(acc, a.NL);
        if (lead) sy[t * a.PT + lr] = acc + Dh * xv;
      }
    }
    __syncthreads();
    for (int t = threadIdx.x >> 5; t < ts; t += blockDim.x >> 5) {
      float* yrow = a.y + (row_of(a, b, t0 + t) * a.H + h) * a.P;
      for (int p = threadIdx.x & 31; p < a.P; p += 32) yrow[p] = sy[t * a.PT + p];
    }
    __syncthreads();  // sy and the staged inputs are rewritten next round
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
  const size_t per_step = (2 * a.NS + 2 * a.PT + 2) * sizeof(float);
  a.TS = pick_ts(per_step);
  const dim3 grid(a.nchunks, p.H, p.B);
  dispatch(a, [&](auto npt, auto rp) {
    ssd_fwd_kernel<decltype(npt)::value, decltype(rp)::value><<<grid, a.W * 32, a.TS * per_step, stream>>>(a);
  });
  MLALPHA_CHECK_LAUNCH();
}

}  // namespace mlalpha::gpu
