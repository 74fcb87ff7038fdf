// SSD backward on the GPU: the recurrence's backward (DESIGN section 1, same formulas as ref::ssd_bwd in
// ssd_ref.cpp) from the forward's saved chunk states; layout and staging: ssd_common.cuh.
//
// (a) chunk_kernel   grid (nchunks, H, B): from the state entering the chunk, recompute s_t over the chunk;
//     write per-head dC_t[n] = Σ_p s_t[p,n] dy_t[p] and the scalar z_t = a_t Σ_p dy_t[p] (s_{t−1} C_t)[p].
// (a') chunk_adjoint_states (ssd_chunks.cu): the adjoint state g at the first step of every chunk ≥ 1.
// (b) scan_kernel    grid (nchunks, H, B): the reverse scan g_t = dy_t C_tᵀ + a_{t+1} g_{t+1} over one chunk,
//     started from the next chunk's g; v_t, dx_t, per-head dB_t, dd_t = Σ_p x_t[p] v_t[p]. The term
//     e_t = a_t r_t = a_t Σ g_t·s_{t−1} needs s_{t−1}, which is not at hand in a reverse scan. Expanding
//     g_t = dy_t C_tᵀ + a_{t+1} g_{t+1} and s_t = a_t s_{t−1} + u_t (u_t = Δ_t x_t B_tᵀ) in e_{t+1} gives a
//     reverse cumsum of per-step scalars
//         e_t = e_{t+1} + z_t − a_{t+1} Δ_t Σ_p x_t[p] (g_{t+1} B_t)[p],
//     whose increments are each O(a), so strong decays (e_t → 0) do not leave a difference of large terms.
//     It starts exactly at the chunk end, e_{(c+1)Q} = a_{(c+1)Q} Σ g_{(c+1)Q}·S_{c+1} (saved state, adjoint
//     from (a')), and is re-anchored at the chunk start with e = a_t Σ g_t·S_c. Rounding in the increments
//     would still add up coherently (e_t carries them back over the chunk, and dA sums e_t again: error
//     ~ Q^1.5·eps relative, 7e-5 in fp32 with Q = 256 and Δ ~ 1), so the recurrences s, g and the increments
//     run in double (Acc); inputs, saved states and outputs stay fp32. Then ddelta_t = dd_t + A e_t and
//     dA += Δ_t e_t (per-(b, h, chunk) partials).
// (c) group_sum_kernel: dB, dC = Σ over the heads of each group, in head order.
// (d) param_reduce_kernel: dA_log, dD += Σ over (b, chunk) of the partials, in order.
#include "ops/ssd/ssd_common.cuh"

namespace mlalpha::gpu {
namespace ssd_detail {
namespace {

// Resident blocks to ask the register allocator for, by the per-thread state size: ≤ 8 values fit in 64
// registers (4 blocks; S measured 80 registers, 3 blocks and 16% slower without), ≤ 16 in 128 (2 blocks; M
// measured 144 registers, 1 block and 1.8× slower without). Larger states keep one block (no spills).
constexpr int min_blocks(int npt, int rp) { return npt * rp <= 8 ? 4 : npt * rp <= 16 ? 2 : 1; }

// (a) Per chunk, recompute s_t (in Acc) from the saved chunk state; per-head dC_t and z_t.
template <int NPT, int RP>
__global__ void __launch_bounds__(kMaxWarps * 32, min_blocks(NPT, RP)) chunk_kernel(Args a) {
  extern __shared__ __align__(16) Acc smem_acc[];  // Acc arrays first: alignment
  const int c = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  Acc* sZ = smem_acc;  // (W, TS) per-warp z partials
  const StepTiles st = carve_tiles(a, reinterpret_cast<float*>(sZ + acc_slots(a.W * a.TS)), /*with_dy=*/true);
  const float *sB = st.B, *sC = st.C, *sx = st.x, *sdy = st.dy, *sdt = st.dt, *sa = st.a;
  float* sPart = st.end;  // (W, TS, NS) per-warp dC partials
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nl = lane & (a.NL - 1), pl = lane / a.NL;
  const float A = -expf(a.A_log[h]);

  Acc s[RP][NPT];
  load_state(a, state_at(a, a.states, b, h, c), s);

  const int cend = chunk_end(a, c);
  for (int t0 = chunk_begin(a, c); t0 < cend; t0 += a.TS) {
    const int ts = min(a.TS, cend - t0);
    stage_tiles(a, st, A, b, h, t0, ts);
    __syncthreads();
    for (int t = 0; t < ts; ++t) {
      const Acc at = sa[t];
      const float dt = sdt[t];
      float Bt[NPT], Ct[NPT];
      load_lane(a, sB + t * a.NS, Bt);
      load_lane(a, sC + t * a.NS, Ct);
      float dcp[NPT];
#pragma unroll
      for (int k = 0; k < NPT; ++k) dcp[k] = 0.f;
      Acc zp = 0;
#pragma unroll
      for (int j = 0; j < RP; ++j) {
        const int lr = local_row(a, j);
        const Acc u = dt * sx[t * a.PT + lr];
        const float dyv = sdy[t * a.PT + lr];
        Acc acc = 0;
#pragma unroll
        for (int k = 0; k < NPT; ++k) {
          acc += s[j][k] * Ct[k];  // (s_{t−1} C_t)[p]
          s[j][k] = at * s[j][k] + u * Bt[k];
          dcp[k] += float(s[j][k]) * dyv;  // dC_t[n] = Σ_p s_t[p,n] dy_t[p]
        }
        zp += dyv * sum_n_lanes(acc, a.NL);
      }
      zp = warp_sum(nl == 0 ? zp : Acc(0));  // every lane of a group holds the same row sums: count one
#pragma unroll
      for (int k = 0; k < NPT; ++k) dcp[k] = sum_p_lanes(dcp[k], a.NL);
      if (pl == 0) {
#pragma unroll
        for (int k = 0; k < NPT; ++k) sPart[(w * a.TS + t) * a.NS + lane_n<NPT>(a, k)] = dcp[k];
      }
      if (lane == 0) sZ[w * a.TS + t] = zp;
    }
    __syncthreads();
    for (int t = w; t < ts; t += a.W) {
      float* row = a.wsC + (row_of(a, b, t0 + t) * a.H + h) * a.N;
      for (int n = lane; n < a.N; n += 32) {
        float v = 0.f;
        for (int ww = 0; ww < a.W; ++ww) v += sPart[(ww * a.TS + t) * a.NS + n];
        row[n] = v;
      }
    }
    for (int t = threadIdx.x; t < ts; t += blockDim.x) {
      Acc v = 0;
      for (int ww = 0; ww < a.W; ++ww) v += sZ[ww * a.TS + t];
      a.wsZ[row_of(a, b, t0 + t) * a.H + h] = Acc(sa[t]) * v;  // z_t = a_t Σ_p dy_t[p] (s_{t−1} C_t)[p]
    }
    __syncthreads();
  }
}

// Σ over the block of g·S for the thread's own (p, n) elements (fixed order; every thread gets it).
template <int NPT, int RP>
__device__ Acc dot_state(const Args& a, const Acc (&gs)[RP][NPT], const float* S, Acc* red) {
  Acc v = 0;
#pragma unroll
  for (int j = 0; j < RP; ++j) {
    const int p = local_row(a, j);
#pragma unroll
    for (int k = 0; k < NPT; ++k) {
      const int n = lane_n<NPT>(a, k);
      if (p < a.P && n < a.N) v += gs[j][k] * Acc(S[size_t(p) * a.N + n]);
    }
  }
  return block_sum(v, red);
}

// (b) Reverse scan over one chunk of one (b, h), g in Acc, started from the next chunk's adjoint state.
template <int NPT, int RP>
__global__ void __launch_bounds__(kMaxWarps * 32, min_blocks(NPT, RP)) scan_kernel(Args a) {
  extern __shared__ __align__(16) Acc smem_acc[];  // Acc arrays first: alignment
  __shared__ Acc sRed[kMaxWarps];
  const int c = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  Acc* sz = smem_acc;                 // (TS) z_t
  Acc* sDD = sz + a.TS;               // (W, TS) per-warp dd_t partials
  Acc* sGU = sDD + a.W * a.TS;        // (W, TS) per-warp a_{t+1} Σ g_{t+1}·u_t partials
  const StepTiles st =
      carve_tiles(a, reinterpret_cast<float*>(smem_acc + acc_slots((1 + 2 * a.W) * a.TS)), /*with_dy=*/true);
  const float *sB = st.B, *sC = st.C, *sx = st.x, *sdy = st.dy, *sdt = st.dt, *sa = st.a;
  float* sdx = st.end;                 // (TS, PT)
  float* sPart = sdx + a.TS * a.PT;    // (W, TS, NS) per-warp dB partials
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nl = lane & (a.NL - 1), pl = lane / a.NL;
  const float A = -expf(a.A_log[h]), Dh = a.Dskip[h];
  const int cbeg = chunk_begin(a, c), cend = chunk_end(a, c);
  const bool last = c + 1 == a.nchunks;

  // g_{(c+1)Q} and a_{(c+1)Q} from the next chunk (zero after the sequence), and e_{(c+1)Q}.
  Acc gs[RP][NPT];
  load_state(a, last ? nullptr : state_at(a, a.wsG, b, h, c + 1), gs);
  Acc a_next = last ? Acc(0) : Acc(expf(a.delta[row_of(a, b, cend) * a.H + h] * A));
  Acc e = last ? Acc(0) : a_next * dot_state(a, gs, state_at(a, a.states, b, h, c + 1), sRed);
  Acc dDp = 0;  // this thread's Σ dy·x (lanes nl == 0)
  Acc dA = 0;   // thread 0: Σ Δ_t e_t

  for (int t1 = cend; t1 > cbeg; t1 -= a.TS) {
    const int t0 = max(cbeg, t1 - a.TS), ts = t1 - t0;
    stage_tiles(a, st, A, b, h, t0, ts);
    for (int t = threadIdx.x; t < ts; t += blockDim.x) sz[t] = a.wsZ[row_of(a, b, t0 + t) * a.H + h];
    __syncthreads();
    for (int t = ts - 1; t >= 0; --t) {
      const float dt = sdt[t];
      float Bt[NPT], Ct[NPT];
      load_lane(a, sB + t * a.NS, Bt);
      load_lane(a, sC + t * a.NS, Ct);
      float dbp[NPT];
#pragma unroll
      for (int k = 0; k < NPT; ++k) dbp[k] = 0.f;
      Acc ddp = 0, gup = 0;
#pragma unroll
      for (int j = 0; j < RP; ++j) {
        const int lr = local_row(a, j);
        const float xv = sx[t * a.PT + lr], dyv = sdy[t * a.PT + lr], u = dt * xv;
        float v = 0.f;
        Acc vn = 0;
#pragma unroll
        for (int k = 0; k < NPT; ++k) {
          vn += gs[j][k] * Bt[k];                           // (g_{t+1} B_t)[p]
          gs[j][k] = a_next * gs[j][k] + Acc(dyv) * Ct[k];  // g_t = dy_t C_tᵀ + a_{t+1} g_{t+1}
          const float gf = float(gs[j][k]);
          v += gf * Bt[k];                                  // v_t[p] = Σ_n g_t[p,n] B_t[n]
          dbp[k] += gf * u;                                 // dB_t[n] = Σ_p g_t[p,n] Δ_t x_t[p]
        }
        v = sum_n_lanes(v, a.NL);
        vn = sum_n_lanes(vn, a.NL);
        if (nl == 0) {
          gup += Acc(dt) * xv * vn;
          sdx[t * a.PT + lr] = dt * v + Dh * dyv;  // dx_t = Δ_t v_t + D dy_t
          ddp += Acc(xv * v);
          dDp += Acc(dyv) * xv;
        }
      }
      ddp = warp_sum(ddp);  // lanes nl ≠ 0 added nothing
      gup = warp_sum(gup);
#pragma unroll
      for (int k = 0; k < NPT; ++k) dbp[k] = sum_p_lanes(dbp[k], a.NL);
      if (pl == 0) {
#pragma unroll
        for (int k = 0; k < NPT; ++k) sPart[(w * a.TS + t) * a.NS + lane_n<NPT>(a, k)] = dbp[k];
      }
      if (lane == 0) {
        sDD[w * a.TS + t] = ddp;
        sGU[w * a.TS + t] = a_next * gup;  // a_{t+1} Σ g_{t+1}·u_t
      }
      a_next = sa[t];
    }
    __syncthreads();
    for (int t = w; t < ts; t += a.W) {
      float* dxrow = a.dx + row_of(a, b, t0 + t) * a.ld + size_t(h) * a.P;
      for (int p = lane; p < a.P; p += 32) dxrow[p] = sdx[t * a.PT + p];
      float* brow = a.wsB + (row_of(a, b, t0 + t) * a.H + h) * a.N;
      for (int n = lane; n < a.N; n += 32) {
        float v = 0.f;
        for (int ww = 0; ww < a.W; ++ww) v += sPart[(ww * a.TS + t) * a.NS + n];
        brow[n] = v;
      }
    }
    if (threadIdx.x == 0) {
      // e_t = e_{t+1} + z_t − a_{t+1} Σ g_{t+1}·u_t; the chunk's first step is re-anchored below.
      for (int t = ts - 1; t >= 0; --t) {
        const int tt = t0 + t;
        Acc dd = 0;
        for (int ww = 0; ww < a.W; ++ww) dd += sDD[ww * a.TS + t];
        if (tt != cbeg) {
          Acc gu = 0;
          for (int ww = 0; ww < a.W; ++ww) gu += sGU[ww * a.TS + t];
          e += sz[t] - gu;
          a.ddelta[row_of(a, b, tt) * a.H + h] = float(dd + Acc(A) * e);  // dd_t + A a_t r_t
          dA += Acc(sdt[t]) * e;                                           // Δ_t a_t r_t
        } else {
          sDD[0] = dd;  // finished after the loop: the anchor needs the whole block
        }
      }
    }
    __syncthreads();  // staged inputs and partials are rewritten next round
  }

  // The chunk's first step: e = a_t Σ g_t·S_c exactly, with S_c = s_{t−1} saved by the forward (gs is g_cbeg).
  const Acc rho = dot_state(a, gs, state_at(a, a.states, b, h, c), sRed);
  dDp = block_sum(dDp, sRed);
  if (threadIdx.x == 0) {
    const float dt0 = a.delta[row_of(a, b, cbeg) * a.H + h];
    e = Acc(expf(dt0 * A)) * rho;
    a.ddelta[row_of(a, b, cbeg) * a.H + h] = float(sDD[0] + Acc(A) * e);
    dA += Acc(dt0) * e;
    const size_t slot = (size_t(b) * a.H + h) * a.nchunks + c;
    a.wsA[slot] = float(dA * Acc(A));  // ∂A/∂A_log = A
    a.wsD[slot] = float(dDp);
  }
}

// (c) dB, dC of group g = Σ over its heads h ∈ [⌈gH/G⌉, ⌈(g+1)H/G⌉) of the per-head partials.
__global__ void group_sum_kernel(int rows, int H, int G, int N, int ld, const float* wsB, const float* wsC,
                                 float* dB, float* dC) {
  const size_t total = size_t(rows) * G * N;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += size_t(gridDim.x) * blockDim.x) {
    const int n = int(i % N), g = int((i / N) % G);
    const size_t row = i / (size_t(N) * G);
    const int h_lo = (g * H + G - 1) / G, h_hi = ((g + 1) * H + G - 1) / G;
    float sb = 0.f, sc = 0.f;
    for (int h = h_lo; h < h_hi; ++h) {
      sb += wsB[(row * H + h) * N + n];
      sc += wsC[(row * H + h) * N + n];
    }
    dB[row * ld + size_t(g) * N + n] = sb;
    dC[row * ld + size_t(g) * N + n] = sc;
  }
}

// (d) dA_log[h] += Σ_{b, c}, dD[h] += Σ_{b, c} of the per-(b, h, chunk) partials, in (b, c) order.
__global__ void param_reduce_kernel(int B, int H, int nchunks, const float* wsA, const float* wsD, float* dA_log,
                                    float* dD) {
  const int h = blockIdx.x * blockDim.x + threadIdx.x;
  if (h >= H) return;
  float sa = 0.f, sd = 0.f;
  for (int b = 0; b < B; ++b)
    for (int c = 0; c < nchunks; ++c) {
      sa += wsA[(size_t(b) * H + h) * nchunks + c];
      sd += wsD[(size_t(b) * H + h) * nchunks + c];
    }
  dA_log[h] += sa;
  dD[h] += sd;
}

}  // namespace
}  // namespace ssd_detail

void ssd_bwd(const SsdParams& p, const float* x, const float* delta, const float* A_log, const float* Bm,
             const float* Cm, const float* Dskip, const float* chunk_states, const float* dy, float* dx,
             float* ddelta, float* dA_log, float* dB, float* dC, float* dD, float* workspace, cudaStream_t stream) {
  using namespace ssd_detail;
  validate(p);
  if (p.B == 0 || p.L == 0) return;  // nothing is written, the accumulators get += 0
  Args a = make_layout(p);
  a.x = x, a.delta = delta, a.A_log = A_log, a.Bm = Bm, a.Cm = Cm, a.Dskip = Dskip, a.dy = dy;
  a.states = const_cast<float*>(chunk_states);  // read only in the backward
  a.dx = dx, a.ddelta = ddelta;
  require(reinterpret_cast<uintptr_t>(workspace) % alignof(Acc) == 0,
          "ssd_bwd: workspace must be " + std::to_string(alignof(Acc)) + "-byte aligned");
  const size_t rows = size_t(p.B) * p.L;
  a.wsZ = reinterpret_cast<Acc*>(workspace);
  a.wsG = a.wsZ + rows * p.H;
  a.wsB = reinterpret_cast<float*>(a.wsG + ssd_chunk_states_floats(p));
  a.wsC = a.wsB + rows * p.H * p.N;
  a.wsA = a.wsC + rows * p.H * p.N;
  a.wsD = a.wsA + size_t(p.B) * p.H * a.nchunks;
  const dim3 grid(a.nchunks, p.H, p.B);

  {  // (a) chunk-parallel recompute: dC partials, z
    const size_t per_step = (2 * a.NS + 2 * a.PT + 2 + a.W * a.NS) * sizeof(float) + a.W * sizeof(Acc);
    a.TS = pick_ts(per_step);
    const size_t smem = a.TS * per_step + kAccPadBytes;  // + the alignment slots (acc_slots)
    dispatch(a, [&](auto npt, auto rp) {
      chunk_kernel<decltype(npt)::value, decltype(rp)::value><<<grid, a.W * 32, smem, stream>>>(a);
    });
    MLALPHA_CHECK_LAUNCH();
  }
  chunk_adjoint_states(a, stream);  // (a')
  {  // (b) chunk-parallel reverse scan
    const size_t per_step = (2 * a.NS + 3 * a.PT + 2 + a.W * a.NS) * sizeof(float) + (1 + 2 * a.W) * sizeof(Acc);
    a.TS = pick_ts(per_step);
    const size_t smem = a.TS * per_step + kAccPadBytes;  // + the alignment slots (acc_slots)
    dispatch(a, [&](auto npt, auto rp) {
      scan_kernel<decltype(npt)::value, decltype(rp)::value><<<grid, a.W * 32, smem, stream>>>(a);
    });
    MLALPHA_CHECK_LAUNCH();
  }
  {  // (c) group sums of dB, dC; fixed grid from the shape
    const size_t total = rows * p.G * p.N;
    const int threads = 256;
    const int blocks = int(std::min<size_t>((total + threads - 1) / threads, 65535));
    group_sum_kernel<<<blocks, threads, 0, stream>>>(int(rows), p.H, p.G, p.N, p.ld, a.wsB, a.wsC, dB, dC);
    MLALPHA_CHECK_LAUNCH();
  }
  {  // (d) parameter gradients
    param_reduce_kernel<<<ceil_div(p.H, 128), 128, 0, stream>>>(p.B, p.H, a.nchunks, a.wsA, a.wsD, dA_log, dD);
    MLALPHA_CHECK_LAUNCH();
  }
}

}  // namespace mlalpha::gpu
