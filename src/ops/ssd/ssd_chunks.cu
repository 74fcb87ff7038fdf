// The states at chunk boundaries that make the SSD chunks independent (ssd_common.cuh).
//
// Forward. s_t = a_t s_{t−1} + Δ_t x_t B_tᵀ is linear, so the state entering chunk c+1 is
//     S_{c+1} = e^{A Σ_{t∈c} Δ_t} S_c + Σ_{j∈c} e^{cs_last − cs_j} Δ_j x_j B_jᵀ,
// the second term being chunk c's own contribution, a (P, T)·(T, N) product.
// Backward. The adjoint state g_t = dy_t C_tᵀ + a_{t+1} g_{t+1} runs backwards; at the first step of chunk c,
//     G_c = e^{A Σ_{t=cT+1}^{(c+1)T} Δ_t} G_{c+1} + Σ_{i∈c} e^{cs_i − cs_0} dy_i C_iᵀ,
// the same recurrence with time reversed. G_c is needed for c ≥ 1 only (the backward of chunk c−1 reads it).
//
// One kernel does both the per-chunk products and the pass: a block owns one 64×64 tile of the (P, N)
// state of one (b, h), holds it in registers and walks the chunks in order, adding each chunk's product to
// the decayed carried state and storing the result. The next chunk's slices of x (dy) and B (C) are copied
// into a second buffer while the current one is worked on. So each state is written once and never read
// back (the separate per-chunk kernel and pass wrote, read and rewrote every state: ~0.8 GB per layer and
// direction for the 'L' configuration), and the pass costs no kernel of its own. Fixed order throughout.
//
// Long sequences (Args::nseg > 1, from 65 chunks): the walk of one (b, h) is a chain of nchunks − 1
// dependent steps, and with few (b, h) the GPU idles (one window of 65,536: 8 chains of 1,023 steps,
// 3.5 ms a walk). The recurrence is linear, so it splits like a scan: with O_k the state a walk step k
// writes and dec_k its decay, O_k = dec_k O_{k−1} + X_k, a segment [k0, k1) walked from a zero state gives
// local states O'_k, and
//     O_k = O'_k + (Π_{k0 ≤ j ≤ k} dec_j) · O_{k0−1}.
// So the segments walk side by side (states_kernel, grid × nseg; each also writes E_k = Σ_{k0 ≤ j ≤ k} log
// dec_j), then carry_kernel walks the segments in order, one thread per state element: it adds
// e^{E_k} · O_{k0−1} to each step's state, O_{k0−1} being the previous segment's last state once corrected.
// The products stay as they are; the carry pass reads and writes every state once more (elementwise, far
// cheaper than a step of the walk). Every order is fixed by the shape.
//
// A carried state (ssd.h; Args::h0, h_last, dh0). The forward walk starts from h0 instead of 0 and saves it as
// states[0]; ssd_fwd_kernel and the backward then take chunk 0's state terms from it as from any S_in. The final
// state and dh0 are one more step of the walk: forward, chunk nchunks − 1's step into h_last; backward, chunk
// 0's step into dh0 = a_0 G_0 (g_{−1}'s recurrence: weights e^{cs_i} and decay e^{cs_last + A Δ_next}, the
// chunk's decays from the step before it). Unsegmented, the walk takes that step last; segmented, a one-step
// launch (Args::tail) takes it after the carries, from the corrected states[nchunks − 1] or wsG[1].
#include "ops/ssd/ssd_common.cuh"

namespace mlalpha::gpu::ssd_detail {
namespace {

// kReverse = false: chunks c = 0 … nchunks−2 → states[c+1]; also states[0] = h0 or 0; with h_last, c = nchunks−1
//                   → h_last.
// kReverse = true:  chunks c = nchunks−1 … 1 → wsG[c]; with dh0, c = 0 → dh0.
// Grid (tiles of the (P, N) state, H, B). A tile is 64 rows of P by kTilesN · 64 columns of N: with N > 64,
// two 64×64 products share a chunk step's x (dy) slice, decays and barriers (the 'L' state, 64 × 128, is
// one tile: 256 blocks, one wave at two blocks per SM); with N ≤ 64 one, and three blocks per SM fit. Each
// chunk step is a chain of short dependent phases, which the other blocks on the SM overlap.
// Grid z: B · nseg, (b, segment); the segment's steps k ∈ [seg · seg_steps, min(nchunks − 1, …)).
template <bool kReverse, MmaMode kMode, int kTilesN, int kN, int kP, bool kFullChunks>
__global__ void __launch_bounds__(kThreads, kTilesN == 1 ? 3 : 2) states_kernel(Args args) {
  extern __shared__ __align__(16) double smem_d[];
  const Args a = fixed_dims<kN, kP>(args);
  constexpr int kCols = kTilesN * kTile;
  static_assert(kCols <= kStateCols, "states_smem_bytes sizes the slices of B and C for kStateCols");
  const int tiles_n = ceil_div(a.N, kCols);
  const int p0 = (blockIdx.x / tiles_n) * kTile, n0 = (blockIdx.x % tiles_n) * kCols;
  const int h = blockIdx.y, b = blockIdx.z / a.nseg, seg = blockIdx.z % a.nseg;
  const int np = min(kTile, a.P - p0), nn = min(kCols, a.N - n0);  // this tile's rows and columns
  const int ldV = tile_ld_kn(min(kTile, a.P)), ldR = tile_ld_kn(min(kCols, a.N));  // both read as (k, j)
  double* scs = smem_d;                               // (T) cs_t
  float* sdt = reinterpret_cast<float*>(scs + a.Ts);  // (T) Δ_t
  float* sw = sdt + a.Ts;                             // (T) step weights w_t of the product (KScale)
  float* buf = sw + a.Ts;                             // 2 × [(T, ldR) R = B or C slice, (T, ldV) V = x or dy slice]
  const int buf_floats = a.T * (ldR + ldV);
  const float A = -expf(a.A_log[member_offset(a, b) + h]);
  float* out = state_at(a, kReverse ? a.wsG : a.states, b, h, 0) + size_t(p0) * a.N + n0;  // tile of state 0
  const size_t PN = size_t(a.P) * a.N;

  const int steps = a.nchunks - 1;
  // The final step (k = steps: h_last forward, dh0 backward), when asked for: the tail launch's only step, or
  // the single walk's last.
  int k_begin = seg * a.seg_steps, k_end = min(steps, k_begin + a.seg_steps);
  if (a.tail) k_begin = steps, k_end = steps + 1;
  else if ((kReverse ? a.dh0 : a.h_last) && a.nseg == 1) k_end = steps + 1;

  Acc S[kTilesN];  // the carried state's tile, 64 columns each, in the mma accumulator layout
#pragma unroll
  for (int u = 0; u < kTilesN; ++u) zero(S[u]);
  // The walk's starting state: the tail's, the state before its step (corrected by the carries); forward
  // segment 0's, h0 (saved as states[0]) or 0.
  const float* seed = a.tail            ? out + size_t(kReverse ? 1 : steps) * PN
                      : !kReverse && a.h0 ? a.h0 + (size_t(b) * a.H + h) * PN + size_t(p0) * a.N + n0
                                          : nullptr;
  if (seed && (a.tail || seg == 0)) {  // (a.h0's tile is read here only: h_last may be h0)
#pragma unroll
    for (int u = 0; u < kTilesN; ++u) {
      if (u * kTile >= nn) break;
      for_out(0, np, u * kTile, nn, [&](int r, int e, int i, int j) { S[u][r][e] = seed[size_t(i) * a.N + j]; });
    }
  }
  if (!kReverse && !a.tail && seg == 0) {
    if (a.h0) {
#pragma unroll
      for (int u = 0; u < kTilesN; ++u) {
        if (u * kTile >= nn) break;
        for_out(0, np, u * kTile, nn, [&](int r, int e, int i, int j) { out[size_t(i) * a.N + j] = S[u][r][e]; });
      }
    } else {
      for (int j0 = 0; j0 < nn; j0 += kTile)
        for_out(0, np, j0, nn, [&](int, int, int i, int j) { out[size_t(i) * a.N + j] = 0.f; });
    }
  }

  // Segments after the first write their steps' summed decay exponents for carry_kernel (one block of the
  // (b, h): they are the same in every tile).
  float* E = seg > 0 && blockIdx.x == 0 && threadIdx.x == 0 ? a.wsE + (size_t(b) * a.H + h) * steps : nullptr;
  double e_sum = 0.0;
  auto chunk_of = [&](int k) { return kReverse ? a.nchunks - 1 - k : k; };
  LaneDeltas next;  // warp 0: the Δ of the chunk prefetched last
  auto prefetch = [&](int k) {  // chunk k's slices into buffer k % 2, as one copy group; its Δ into `next`
    const int c = chunk_of(k), t0 = chunk_begin(a, c), tc = chunk_steps<kFullChunks>(a, c, t0);
    if (threadIdx.x < 32) next = load_deltas(a, b, h, t0, tc);
    float* sR = buf + (k & 1) * buf_floats;
    float* sV = sR + a.T * ldR;
    if (kReverse) {
      stage(bc_rows(a, a.Cm, b, h, t0) + n0, a.ld, tc, nn, sR, ldR);
      stage(dy_rows(a, b, h, t0) + p0, size_t(a.H) * a.P, tc, np, sV, ldV);
    } else {
      stage(bc_rows(a, a.Bm, b, h, t0) + n0, a.ld, tc, nn, sR, ldR);
      stage(x_rows(a, b, h, t0) + p0, a.ld, tc, np, sV, ldV);
    }
    stage_commit();
  };
  if (k_begin < k_end) prefetch(k_begin);
  // reverse: Δ at the first step of chunk c + 1 (the chunk before in the walk); a later segment reads the
  // one before its first step
  float dt_next = kReverse && k_begin > 0 ? a.delta[row_of(a, b, chunk_begin(a, chunk_of(k_begin - 1))) * a.H + h] : 0.f;
  for (int k = k_begin; k < k_end; ++k) {
    const int c = chunk_of(k), t0 = chunk_begin(a, c), tc = chunk_steps<kFullChunks>(a, c, t0);
    const LaneDeltas cur = next;
    if (k + 1 < k_end) prefetch(k + 1);  // buffer (k + 1) % 2 was freed by the barrier ending step k − 1
    else stage_commit();                 // an empty group, so that "all but the newest" means chunk k
    chunk_decay_of(cur, A, tc, sdt, scs);
    // Backward decays are from the chunk's first step, cs_0, or into dh0 = a_0 G_0 (chunk 0's step k = steps) from
    // the step before it: cs_{−1} = 0.
    const double cs_from = kReverse && k < steps ? scs[0] : 0.0;
    for (int t = threadIdx.x; t < tc; t += kThreads)  // e^{cs_i − cs_from}, or Δ_j e^{cs_last − cs_j}
      sw[t] = kReverse ? expf(float(scs[t] - cs_from)) : sdt[t] * decay(scs, tc - 1, t);
    // The carried state's decay: e^{A Σ_{t∈c} Δ_t} forward; backward e^{A Σ_{t=cT+1}^{(c+1)T} Δ_t} (from
    // t = cT into dh0), and the last chunk's state is its own contribution.
    const double log_dec = kReverse ? scs[tc - 1] - cs_from + double(A) * double(dt_next) : scs[tc - 1];
    const float dec = kReverse && k == 0 ? 0.f : float(exp(log_dec));
    if (kReverse) dt_next = sdt[0];
    if (E) E[k] = float(e_sum += log_dec);  // k > 0 here: segment 0 writes none
    stage_wait_but_one();
    __syncthreads();
    const float* sR = buf + (k & 1) * buf_floats;
    const float* sV = sR + a.T * ldR;
    float* dst = k < steps ? out + size_t(kReverse ? c : c + 1) * PN
                           : (kReverse ? a.dh0 : a.h_last) + (size_t(b) * a.H + h) * PN + size_t(p0) * a.N + n0;
    // S ← dec·S + Vᵀ diag(w) R: the decayed state is the product's starting accumulator (no second
    // accumulator and pass to add them), and the row weights scale V's fragments as they are loaded (a
    // scaling pass over R in shared memory, with its barrier, was 18% of the 'L' walk's stall samples).
    // (Tried for N > 64: one 64 × 128 product with 16 × 64 warp tiles instead of two 64 × 64 ones; the 'L'
    // reverse walk was 6% slower.)
#pragma unroll
    for (int u = 0; u < kTilesN; ++u) {
      if (u * kTile >= nn) break;
#pragma unroll
      for (int s = 0; s < kSub; ++s)
#pragma unroll
        for (int e = 0; e < 4; ++e) S[u][s][e] *= dec;
      mm<kMode, true, false>(S[u], sV, ldV, sR, ldR, 0, np, u * kTile, nn, tc, WarpTile<>(), KScale{sw});
      for_pairs(0, np, u * kTile, nn, [&](int r, int hh, int i, int j, bool two) {
        store_pair(dst + size_t(i) * a.N + j, S[u][r][2 * hh], S[u][r][2 * hh + 1], two);
      });
    }
    __syncthreads();  // buffer k % 2, Δ and cs are free for the next step
  }
}

// The segments' carries (top of the file): one thread per element of a (b, h)'s (P, N) state, segments in
// order; within a segment every step adds the same carry, so a thread's loads are independent and kUnroll
// of them are in flight. Grid (⌈P·N / kThreads⌉, H, B).
template <bool kReverse>
__global__ void __launch_bounds__(kThreads) carry_kernel(Args a) {
  constexpr int kUnroll = 8;
  const size_t PN = size_t(a.P) * a.N, i = size_t(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= PN) return;
  const int h = blockIdx.y, b = blockIdx.z, steps = a.nchunks - 1;
  float* base = state_at(a, kReverse ? a.wsG : a.states, b, h, 0) + i;
  const float* E = a.wsE + (size_t(b) * a.H + h) * steps;
  auto at = [&](int k) { return base + size_t(kReverse ? a.nchunks - 1 - k : k + 1) * PN; };  // step k's state
  float carry = *at(a.seg_steps - 1);  // the first segment's last state: already the true one
  for (int seg = 1; seg < a.nseg; ++seg) {
    const int k_begin = seg * a.seg_steps, k_end = min(steps, k_begin + a.seg_steps);
    float last = carry;
    for (int k0 = k_begin; k0 < k_end; k0 += kUnroll) {
      float v[kUnroll], e[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (k0 + u < k_end) v[u] = *at(k0 + u), e[u] = E[k0 + u];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (k0 + u < k_end) *at(k0 + u) = last = v[u] + expf(e[u]) * carry;
    }
    carry = last;
  }
}

template <bool kReverse>
void launch_walk(const Args& a, cudaStream_t stream) {
  with_dims(a, [&](auto n, auto p, auto full) {
    constexpr int kN = decltype(n)::value;
    auto go = [&](auto tiles_n) {
      constexpr int kTilesN = decltype(tiles_n)::value;
      const dim3 grid(ceil_div(a.P, kTile) * ceil_div(a.N, kTilesN * kTile), a.H, a.B * a.nseg);
      auto pick = [](auto mode) {
        return states_kernel<kReverse, decltype(mode)::value, kTilesN, kN, decltype(p)::value, decltype(full)::value>;
      };
      launch_kernel(a, pick, grid, kThreads, states_smem_bytes(a), stream);
    };
    if constexpr (kN == 0) {
      if (a.N > kTile) go(std::integral_constant<int, 2>{});
      else go(std::integral_constant<int, 1>{});
    } else {
      go(std::integral_constant<int, (kN > kTile ? 2 : 1)>{});
    }
  });
}

template <bool kReverse>
void launch(const Args& a, cudaStream_t stream) {
  if (a.B == 0 || a.L == 0) return;
  const bool fin = kReverse ? a.dh0 != nullptr : a.h_last != nullptr;
  if (kReverse && a.nchunks < 2 && !fin) return;  // no chunk c ≥ 1, no dh0
  launch_walk<kReverse>(a, stream);
  if (a.nseg > 1) {
    carry_kernel<kReverse><<<dim3(unsigned(ceil_div(a.P * a.N, kThreads)), a.H, a.B), kThreads, 0, stream>>>(a);
    MLALPHA_CHECK_LAUNCH(stream);
    if (fin) {  // the final step, from the corrected state before it
      Args t = a;
      t.tail = true, t.nseg = 1;
      launch_walk<kReverse>(t, stream);
    }
  }
}

}  // namespace

void chunk_entry_states(const Args& a, cudaStream_t stream) { launch<false>(a, stream); }
void chunk_adjoint_states(const Args& a, cudaStream_t stream) { launch<true>(a, stream); }

}  // namespace mlalpha::gpu::ssd_detail
