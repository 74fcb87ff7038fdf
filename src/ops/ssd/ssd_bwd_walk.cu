// SSD backward as a reverse chunk walk (ssd_walk.cuh; the formulas of ssd_bwd.cu's header): grid (H, B), one
// block per (b, h), chunks from the last to the first, the adjoint state G_{c+1} (the gradient at the first
// step of the chunk after c; 0 after the last) carried in fp32 registers. Per chunk c, with Gs = a_next G_{c+1}
// (a_next folded into dec_out_t = a_next e^{cs_last − cs_t} and into c0), the S_c the forward walk saved, and
// C·Bᵀ and the decays recomputed:
//     v_t  = (CBᵀ dy)_t + dec_out_t (G_{c+1} B_t)                  dx_t = Δ_t v_t + D dy_t
//     dB_t = Δ_t dec_out_t (x_tᵀ G_{c+1}) + ((DX diag Δ)ᵀ C)_t       dC_t = dec_in_t (dy_tᵀ S_c) + (DX diag Δ B)_t
//     dΔ_t = x_t·v_t + A e_t,  e_t = E_t + Σ_{i≥t} yoff_i + Σ_{j<t} sout_j + c0   (dA_log, dD: sums over t)
//     G_c  = e^{cs_last − cs_0 + A Δ_next} G_{c+1} + dyᵀ diag(e^{cs − cs_0}) C    (ssd_chunks.cu, reversed)
// One launch does what the adjoint chunk-state walk, bwd_kernel, the DX products and the per-head partials did:
// no adjoint state, DX tile or per-head dB, dC goes through global memory.
//
// dB and dC are sums over the heads of a group. The heads of a group run as one thread-block cluster of
// `cs` blocks (Args::cluster_heads: 8, 4 or 2 heads, the largest that divides the group); each block puts its
// head's (T, N) dB and dC tiles (fp32) in its shared memory, and after a cluster barrier block r adds rows
// [r T/cs, (r+1) T/cs) of all cs tiles through distributed shared memory, in rank order, and stores them: dB,
// dC themselves when the cluster is the whole group, else one partial per cluster that group_sum adds in
// order. Without clusters (cs = 1) a head's tiles go straight to dB, dC (one head a group) or to its partial.
// dA_log and dD: one partial per (b, h), summed over b in order by param_reduce.
//
// A block is 8 warps at every shape (two warp groups: 4 row blocks of 16 × 2 column blocks), 2 blocks an SM at
// ≤ 128 registers a thread (issue 38: S and M ran 4 warps a block, 3 an SM, and one (b, h) chain's step was
// a chain of ~3,900 instructions a warp; 8 warps halve each warp's share of a step).
// A chunk step (4 barriers, and 2 cluster barriers with cs > 1):
//   0  stage x, dy, B, C, S_c (zero-padded tiles); warp 0: the decays;                              barrier
//   1  Σ G·S_c (c0) and Σ dy·x (dD) shares; every warp: C·Bᵀ and dy·xᵀ over its 16 rows and one half of the
//      columns → CB (decayed), DX diag Δ into tiles, W = CB ∘ (dy·xᵀ) diag Δ (strictly lower) → E_t's column
//      sums;                                                                                           barrier
//   2  every warp: v → dx and x·v; dB, dC with the row sums sout, yoff of their state terms;          barrier
//   3  dB, dC out (cluster exchange); warp 0: the scans, dΔ_t and dA_log's share; G ← G_c;  barrier, G's tile.
#include "ops/ssd/ssd_walk.cuh"

namespace mlalpha::gpu {
namespace ssd_detail {
namespace walk {
namespace {

template <MmaMode kMode, int kP, int kN>
struct BwdShape {
  using E = Elem<kMode>;
  // Two warp groups at every shape: 4 row blocks of 16 × 2 column groups. The 64-row products of a step split
  // their columns over the groups (v: kP / 2, dB and dC: kN / 2 each), and C·Bᵀ, dy·xᵀ split by column half,
  // so one (b, h) chain runs on 8 warps where S and M had 4 (issue 38: a warp's share of a step halves).
  static constexpr int kGroups = 2, kWarps = 4 * kGroups, kThreads = 32 * kWarps;
  static constexpr int ldP = ld_of<E>(kP), ldN = ld_of<E>(kN), ldT = ld_of<E>(kRows);
  static constexpr int ldX = kN + 8;  // exchange tiles (fp32): ≡ 8 (mod 32), a half-warp's 8-byte stores hit 32 banks
  using State = StateLayout<kP, kN, kWarps>;
  // Shared memory (byte offsets, 16-byte aligned). Per-step scalars: cs (double); Δ; dec_in (then the suffix
  // sums of yoff); dec_out (then the prefix sums of sout); e^{cs_t − cs_0}; log2(e) cs_t; the row-sum partials of yoff,
  // sout and x·v (kGroups column blocks each); E's column sums (one slot a warp); the block-sum slots.
  static constexpr size_t oCs = 0, oDt = oCs + kRows * sizeof(double);
  static constexpr size_t oDin = oDt + kRows * 4, oDout = oDin + kRows * 4, oG0 = oDout + kRows * 4;
  static constexpr size_t oU = oG0 + kRows * 4;  // log2(e) cs_t (walk_decay, bf16 mode)
  static constexpr size_t oYoff = oU + kRows * 4, oSout = oYoff + kGroups * kRows * 4;
  static constexpr size_t oXv = oSout + kGroups * kRows * 4, oEp = oXv + kGroups * kRows * 4;
  static constexpr size_t oRed = oEp + kWarps * kRows * 4;
  // Tiles: dy and C live through the whole step (the adjoint update reads them last). x, G_{c+1} and CB are
  // dead once v and dB are formed, and dB's exchange tile reuses their bytes; B, S_c and DX once dC is, and
  // dC's exchange tile reuses theirs.
  static constexpr size_t oDY = oRed + 64;
  static constexpr size_t oC = oDY + size_t(kRows) * ldP * sizeof(E);
  static constexpr size_t oX = oC + size_t(kRows) * ldN * sizeof(E);
  static constexpr size_t oG = oX + size_t(kRows) * ldP * sizeof(E);
  static constexpr size_t oCB = oG + size_t(kP) * ldN * sizeof(E);
  static constexpr size_t oB = oCB + size_t(kRows) * ldT * sizeof(E);
  static constexpr size_t oSin = oB + size_t(kRows) * ldN * sizeof(E);
  static constexpr size_t oDX = oSin + size_t(kP) * ldN * sizeof(E);
  static constexpr size_t kBytes = oDX + size_t(kRows) * ldT * sizeof(E);
  static constexpr size_t kXchBytes = size_t(kRows) * ldX * 4;  // one (64, ldX) fp32 exchange tile
  static constexpr size_t oXdB = oX, oXdC = oB;
  static_assert(oXdB + kXchBytes <= oB && oXdC + kXchBytes <= kBytes, "the exchange tiles fit the dead tiles");
  static_assert((kWarps + 2) * 4 <= 64, "block-sum slots and the step's two scalars");
  static constexpr int kFit = int((228 * 1024) / (kBytes + 1024));
  static constexpr int kCap = 2;  // 2 × 8 warps: ≤ 128 registers
  static constexpr int kMinBlocks = kFit < 1 ? 1 : (kFit < kCap ? kFit : kCap);
};

// Row sums over a warp's tile of pairs: RowSums (ssd_common.cuh) fed one pair at a time.
template <int kW, class F>
__device__ __forceinline__ void row_sums(WarpTile<kW> w, float* dst, int slot, F pair_value) {
  RowSums rs;
  for_pairs_all(w, [&](int s, int hv, int t, int j) { rs.add(2 * hv, pair_value(s, hv, t, j)); });
  rs.end_tile();
  rs.write(dst, kRows, kRows, w, slot);
}

template <MmaMode kMode, int kP, int kN>
__global__ void __launch_bounds__(BwdShape<kMode, kP, kN>::kThreads, BwdShape<kMode, kP, kN>::kMinBlocks)
    bwd_walk_kernel(Args a) {
  using K = BwdShape<kMode, kP, kN>;
  using E = typename K::E;
  constexpr int ldP = K::ldP, ldN = K::ldN, ldT = K::ldT;
  extern __shared__ __align__(16) unsigned char smem[];
  double* scs = reinterpret_cast<double*>(smem + K::oCs);
  float* sdt = reinterpret_cast<float*>(smem + K::oDt);
  float* sdin = reinterpret_cast<float*>(smem + K::oDin);
  float* sdout = reinterpret_cast<float*>(smem + K::oDout);
  float* sg0 = reinterpret_cast<float*>(smem + K::oG0);
  float* su = reinterpret_cast<float*>(smem + K::oU);
  float* syoff = reinterpret_cast<float*>(smem + K::oYoff);  // (kGroups, 64)
  float* sout = reinterpret_cast<float*>(smem + K::oSout);   // (kGroups, 64)
  float* sxv = reinterpret_cast<float*>(smem + K::oXv);      // (kGroups, 64)
  float* sEp = reinterpret_cast<float*>(smem + K::oEp);      // (kWarps, 64)
  float* red = reinterpret_cast<float*>(smem + K::oRed);     // (kWarps)
  E* sDY = reinterpret_cast<E*>(smem + K::oDY);              // (64, ldP) dy
  E* sC = reinterpret_cast<E*>(smem + K::oC);                // (64, ldN)
  E* sX = reinterpret_cast<E*>(smem + K::oX);                // (64, ldP) x
  E* sB = reinterpret_cast<E*>(smem + K::oB);                // (64, ldN)
  E* sSin = reinterpret_cast<E*>(smem + K::oSin);            // (kP, ldN) S_c
  E* sG = reinterpret_cast<E*>(smem + K::oG);                // (kP, ldN) G_{c+1}
  E* sCB = reinterpret_cast<E*>(smem + K::oCB);              // (64, ldT) CB[i, j] = (C_i·B_j) e^{cs_i − cs_j}, j ≤ i
  E* sDX = reinterpret_cast<E*>(smem + K::oDX);              // (64, ldT) (dy_i·x_j) e^{cs_i − cs_j} Δ_j, j ≤ i
  float* xdB = reinterpret_cast<float*>(smem + K::oXdB);     // (64, ldX) this head's dB (on x, G, CB)
  float* xdC = reinterpret_cast<float*>(smem + K::oXdC);     // (64, ldX) this head's dC (on B, S_c, DX)

  const int h = blockIdx.x, b = blockIdx.y, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = h * a.G / a.H, cs = a.cluster_heads;
  // The cluster holds the whole group: its sums are dB, dC; else one partial per cluster (B, L, H / cs, N).
  const bool whole_group = a.H % a.G == 0 && a.H / a.G == cs;
  const int HK = a.H / cs;
  const float A = -expf(a.A_log[h]), Dh = a.Dskip[h];
  using TileV = WarpTile<kP / K::kGroups>;
  using TileN = WarpTile<kN / K::kGroups>;
  const TileV wv(warp & 3, warp >> 2);  // v, dx: rows 16 (w % 4), column block w / 4 of P
  const TileN wn(warp & 3, warp >> 2);  // dB, dC: rows 16 (w % 4), column block w / 4 of N
  const auto ws = K::State::tile(threadIdx.x);             // G
  typename K::State::Acc G;
  zero(G);
  const size_t PN = size_t(a.P) * a.N;
  const float* states = state_at(a, a.states, b, h, 0);
  float dt_next = 0.f;  // Δ at the first step of the chunk after this one
  float dD = 0.f;       // this thread's share of dD over the walk
  float dA = 0.f;       // warp 0: this lane's share of Σ_t Δ_t e_t over the walk

  for (int c = a.nchunks - 1; c >= 0; --c) {
    const int t0 = c * a.T, tc = min(a.T, a.L - t0);
    const size_t row0 = size_t(b) * a.L + t0;
    const bool last = c == a.nchunks - 1;  // G_{c+1} = 0
    const float a_next = last ? 0.f : expf(dt_next * A);

    // ---- 0: tiles and decays ----
    LaneDeltas d;
    if (warp == 0) d = load_deltas(a, b, h, t0, tc);
    stage_tile<kRows, kP, K::kThreads>(sDY, ldP, a.dy + (row0 * a.H + h) * a.P, size_t(a.H) * a.P, tc, a.P, a.vec4);
    stage_tile<kRows, kN, K::kThreads>(sC, ldN, a.Cm + row0 * a.ld + size_t(g) * a.N, a.ld, tc, a.N, a.vec4);
    stage_tile<kRows, kP, K::kThreads>(sX, ldP, a.x + row0 * a.ld + size_t(h) * a.P, a.ld, tc, a.P, a.vec4);
    stage_tile<kRows, kN, K::kThreads>(sB, ldN, a.Bm + row0 * a.ld + size_t(g) * a.N, a.ld, tc, a.N, a.vec4);
    stage_tile<kP, kN, K::kThreads>(sSin, ldN, states + size_t(c) * PN, a.N, a.P, a.N, a.vec4);
    if (warp == 0) {
      const double cs_last = walk_cumsum(d, A, sdt, scs, su);
      __syncwarp();  // cs_0, from lane 0
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        const int t = 2 * lane + u;
        sdin[t] = walk_exp<kMode>(scs[t]);
        sdout[t] = a_next * walk_exp<kMode>(cs_last - scs[t]);
        sg0[t] = walk_decay<kMode>(scs, su, t, 0);
      }
      if (lane == 0) {  // the step's two scalars, once: c0 = a_next e^{cs_last} Σ G_{c+1}·S_c, and G's decay
        red[K::kWarps] = a_next * walk_exp<kMode>(cs_last);
        red[K::kWarps + 1] = walk_exp<kMode>(cs_last - scs[0] + double(A) * double(dt_next));
      }
    }
    __syncthreads();
    const float dt_first = sdt[0];
    const float c0_scale = red[K::kWarps], decG = red[K::kWarps + 1];

    // ---- 1: shares of c0 and dD; CB, DX diag Δ, E ----
    {
      float c0 = 0.f;
      if (!last)
        for_pairs_all(ws, [&](int s, int hv, int p, int n) {
          const float2 v = ld2(sSin + p * ldN + n);
          c0 += G[s][2 * hv] * v.x + G[s][2 * hv + 1] * v.y;
        });
      put_warp_sum(c0, red);
      for (int it = threadIdx.x; it < kRows * kP / 2; it += K::kThreads) {
        const int t = it / (kP / 2), p = 2 * (it % (kP / 2));
        const float2 dy2 = ld2(sDY + t * ldP + p), x2 = ld2(sX + t * ldP + p);
        dD += dy2.x * x2.x + dy2.y * x2.y;
      }
    }
    {
      // C·Bᵀ and dy·xᵀ over warp (r, half)'s 16 rows r = w % 4 and 32 columns half = w / 4 (registers): CB and
      // DX diag Δ to their tiles, and W[i, j] = CB[i, j] (dy_i·x_j) Δ_j (j < i). Then E_t = Σ_{i≥t} Σ_{j<t} W[i, j]
      // = Σ_{i≥t} R_i(t) with the row prefix sums R_i(t) = Σ_{j<t} W[i, j]. A warp takes R over its own half
      // (the pair, a scan over the quad, subtiles in order), masked to t ≤ i and summed over its rows into
      // sEp[w][t] for its columns; R_i(t) for t in the upper half also holds the lower half's row total W_i, so
      // the lower-half warp adds Σ_{i≥t} W_i over its rows into sEp[w][t] for the upper columns. E_t is then
      // the sum of the 8 slots in order (zeros where a warp has nothing). Warps (0, 1) and (1, 1) hold only
      // zeros (rows < 32 ≤ columns: above the diagonal).
      const int q = lane & 3, r = warp & 3, half = warp >> 2;
      const WarpTile<kRows / 2> wt(r, half);
      constexpr int kS = WarpTile<kRows / 2>::kS;
      const int other = (1 - half) * (kRows / 2);  // the first column of the half this warp does not compute
      if (half == 1 && r < 2) {
        for_pairs_all(wt, [&](int, int, int i, int j) {
          st2(sCB + i * ldT + j, 0.f, 0.f);
          st2(sDX + i * ldT + j, 0.f, 0.f);
        });
        for (int t = lane; t < kRows; t += 32) sEp[warp * kRows + t] = 0.f;
      } else {
        typename WarpTile<kRows / 2>::Acc cbv, dxv;
        zero(cbv);
        zero(dxv);
        wmm<kMode, false, true>(cbv, sC, ldN, sB, ldN, kN, wt);   // C_i·B_j
        wmm<kMode, false, true>(dxv, sDY, ldP, sX, ldP, kP, wt);  // dy_i·x_j
        for_pairs_all(wt, [&](int s, int hv, int i, int j) {
          float cbo[2], dxo[2];
#pragma unroll
          for (int u = 0; u < 2; ++u) {
            const int jj = j + u;
            const bool in = jj <= i;
            const float ldec = in ? walk_decay<kMode>(scs, su, i, jj) : 0.f;
            const float cb = in ? cbv[s][2 * hv + u] * ldec : 0.f;
            const float w = dxv[s][2 * hv + u] * sdt[jj];
            cbo[u] = cb;
            dxo[u] = in ? w * ldec : 0.f;
            cbv[s][2 * hv + u] = jj < i ? cb * w : 0.f;  // W
          }
          st2(sCB + i * ldT + j, cbo[0], cbo[1]);
          st2(sDX + i * ldT + j, dxo[0], dxo[1]);
        });
        float base[2] = {0.f, 0.f};  // per row: Σ W over this half's columns before the current subtile
        float colp[kS][2];  // this half's columns
#pragma unroll
        for (int s = 0; s < kS; ++s) colp[s][0] = colp[s][1] = 0.f;
#pragma unroll
        for (int hv = 0; hv < 2; ++hv) {
          const int i = wt.row(0, 2 * hv);
#pragma unroll
          for (int s = 0; s < kS; ++s) {
            const float w0 = cbv[s][2 * hv], w1 = cbv[s][2 * hv + 1], pair = w0 + w1;
            float incl = pair;
            float up = __shfl_up_sync(kWarpMask, incl, 1, 4);
            if (q >= 1) incl += up;
            up = __shfl_up_sync(kWarpMask, incl, 2, 4);
            if (q >= 2) incl += up;
            float excl = __shfl_up_sync(kWarpMask, incl, 1, 4);
            if (q == 0) excl = 0.f;
            const float total = __shfl_sync(kWarpMask, incl, 3, 4);
            const int j = wt.col(0, s, 0);
            const float r0 = base[hv] + excl, r1 = r0 + w0;  // R_i(j), R_i(j + 1) within this half
            if (j <= i) colp[s][0] += r0;
            if (j + 1 <= i) colp[s][1] += r1;
            base[hv] += total;
          }
        }
#pragma unroll
        for (int s = 0; s < kS; ++s)
#pragma unroll
          for (int u = 0; u < 2; ++u) {
            // the other half's column t: the lower half's row totals reach every upper column t ≤ i
            const int t = other + 8 * s + 2 * q + u;
            float v = colp[s][u], vo = 0.f;
            if (half == 0) {
              if (t <= wt.row(0, 0)) vo += base[0];
              if (t <= wt.row(0, 2)) vo += base[1];
            }
            v += __shfl_xor_sync(kWarpMask, v, 4);
            v += __shfl_xor_sync(kWarpMask, v, 8);
            v += __shfl_xor_sync(kWarpMask, v, 16);
            vo += __shfl_xor_sync(kWarpMask, vo, 4);
            vo += __shfl_xor_sync(kWarpMask, vo, 8);
            vo += __shfl_xor_sync(kWarpMask, vo, 16);
            if (lane < 4) {
              sEp[warp * kRows + wt.col(0, s, u)] = v;
              sEp[warp * kRows + t] = vo;  // zeros in upper-half warps
            }
          }
      }
    }
    __syncthreads();

    // ---- 2: v, dx; dB, dC ----
    {
      typename TileV::Acc v;
      zero(v);
      if (!last) {
        wmm<kMode, false, true>(v, sB, ldN, sG, ldN, kN, wv);  // (G_{c+1} B_t)[p]
        for_pairs_all(wv, [&](int s, int hv, int t, int) {
          const float f = sdout[t];
          v[s][2 * hv] *= f, v[s][2 * hv + 1] *= f;
        });
      }
      wmm<kMode, true, false>(v, sCB, ldT, sDY, ldP, kRows, wv);  // + Σ_i CB[i, t] dy_i[p]
      for_pairs_all(wv, [&](int s, int hv, int t, int p) {
        if (t < tc && p < a.P) {
          const float2 dy2 = ld2(sDY + t * ldP + p);
          store_pair(a.dx + (row0 + t) * a.ld + size_t(h) * a.P + p, sdt[t] * v[s][2 * hv] + Dh * dy2.x,
                     sdt[t] * v[s][2 * hv + 1] + Dh * dy2.y, p + 1 < a.P);
        }
      });
      row_sums(wv, sxv, warp >> 2, [&](int s, int hv, int t, int p) {
        const float2 x2 = ld2(sX + t * ldP + p);
        return x2.x * v[s][2 * hv] + x2.y * v[s][2 * hv + 1];
      });
    }
    // Where this head's rows of dB, dC go: the group's gradient, or this cluster's (this head's) partial.
    auto out_row = [&](float* full, float* part, int t) {
      return whole_group ? full + (row0 + t) * a.ld + size_t(g) * a.N : part + ((row0 + t) * HK + h / cs) * a.N;
    };
    // One (64, kN) tile of this warp's: to the exchange tile (cs > 1) or to its rows of dB or dC.
    auto put = [&](const typename TileN::Acc& acc, float* xtile, float* full, float* part) {
      for_pairs_all(wn, [&](int s, int hv, int t, int n) {
        if (cs > 1) {
          *reinterpret_cast<float2*>(xtile + t * K::ldX + n) = make_float2(acc[s][2 * hv], acc[s][2 * hv + 1]);
        } else if (t < tc && n < a.N) {
          store_pair(out_row(full, part, t) + n, acc[s][2 * hv], acc[s][2 * hv + 1], n + 1 < a.N);
        }
      });
    };
    {
      typename TileN::Acc db;
      zero(db);
      if (!last) {
        wmm<kMode, false, false>(db, sX, ldP, sG, ldN, kP, wn);  // (x_tᵀ G_{c+1})[n]
        for_pairs_all(wn, [&](int s, int hv, int t, int) {
          const float f = sdt[t] * sdout[t];
          db[s][2 * hv] *= f, db[s][2 * hv + 1] *= f;
        });
      }
      row_sums(wn, sout, warp >> 2, [&](int s, int hv, int t, int n) {  // sout_t = (dB's state term)·B_t
        const float2 b2 = ld2(sB + t * ldN + n);
        return db[s][2 * hv] * b2.x + db[s][2 * hv + 1] * b2.y;
      });
      wmm<kMode, true, false>(db, sDX, ldT, sC, ldN, kRows, wn);  // + Σ_i DX[i, t] Δ_t C_i
      if (cs > 1) __syncthreads();  // x, G_{c+1}, CB are read: dB's exchange tile takes their place
      put(db, xdB, a.dB, a.wsB);
    }
    {
      typename TileN::Acc dc;
      zero(dc);
      wmm<kMode, false, false>(dc, sDY, ldP, sSin, ldN, kP, wn);  // (dy_tᵀ S_c)[n]
      for_pairs_all(wn, [&](int s, int hv, int t, int) {
        const float f = sdin[t];
        dc[s][2 * hv] *= f, dc[s][2 * hv + 1] *= f;
      });
      row_sums(wn, syoff, warp >> 2, [&](int s, int hv, int t, int n) {  // yoff_t = (dC's state term)·C_t
        const float2 c2 = ld2(sC + t * ldN + n);
        return dc[s][2 * hv] * c2.x + dc[s][2 * hv + 1] * c2.y;
      });
      wmm<kMode, false, false>(dc, sDX, ldT, sB, ldN, kRows, wn);  // + Σ_j DX[t, j] Δ_j B_j
      __syncthreads();  // B, S_c, DX are read (dC's exchange tile takes their place); the row sums are in
      put(dc, xdC, a.dC, a.wsC);
    }

    // ---- 3: the cluster's sums of dB, dC; dΔ; G_c ----
    if (cs > 1) {
      __cluster_barrier_arrive();  // release: this block's exchange tiles are written
      __cluster_barrier_wait();    // acquire: every block's are
      // Rows [rank R, rank R + R) of the sums over the cluster's heads, in rank order (rank = h % cs: a cluster
      // spans consecutive heads); up to 4 remote loads in flight.
      const int rank = int(__clusterRelativeBlockRank()), R = kRows / cs;
      constexpr int kQ = kN / 4;
#pragma unroll 1
      for (int it = threadIdx.x; it < 2 * R * kQ; it += K::kThreads) {
        const int m = it / (R * kQ), rem = it % (R * kQ), t = rank * R + rem / kQ, n = 4 * (rem % kQ);
        float* src = (m == 0 ? xdB : xdC) + t * K::ldX + n;
        float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
        for (int k0 = 0; k0 < cs; k0 += 4) {
          float4 v[4];
#pragma unroll
          for (int u = 0; u < 4; ++u)
            if (k0 + u < cs) v[u] = *reinterpret_cast<const float4*>(__cluster_map_shared_rank(src, k0 + u));
#pragma unroll
          for (int u = 0; u < 4; ++u)
            if (k0 + u < cs) sum.x += v[u].x, sum.y += v[u].y, sum.z += v[u].z, sum.w += v[u].w;
        }
        if (t < tc && n < a.N) {
          float* dst = out_row(m == 0 ? a.dB : a.dC, m == 0 ? a.wsB : a.wsC, t) + n;
          if (a.vec4) {
            *reinterpret_cast<float4*>(dst) = sum;
          } else {
            const float e4[4] = {sum.x, sum.y, sum.z, sum.w};
            for (int e = 0; e < 4 && n + e < a.N; ++e) dst[e] = e4[e];
          }
        }
      }
      __cluster_barrier_arrive();  // this block is done reading the others' tiles
    }
    if (warp == 0) {
      // c0, then Σ_{i≥t} yoff_i into sdin and Σ_{j<t} sout_j into sdout (both free now; warp 0 only reads
      // them): lane l takes steps 63 − 2l, 62 − 2l of the suffix and 2l, 2l + 1 of the prefix.
      const float c0 = sum_slots<K::kWarps>(red) * c0_scale;
      const int sa = kRows - 1 - 2 * lane, pa = 2 * lane;
      const float y0 = partial_sum<K::kGroups>(syoff, kRows, sa), y1 = partial_sum<K::kGroups>(syoff, kRows, sa - 1);
      const float o0 = partial_sum<K::kGroups>(sout, kRows, pa), o1 = partial_sum<K::kGroups>(sout, kRows, pa + 1);
      const float yi = warp_inclusive_scan(y0 + y1), oi = warp_inclusive_scan(o0 + o1);
      float ye = __shfl_up_sync(kWarpMask, yi, 1), oe = __shfl_up_sync(kWarpMask, oi, 1);
      if (lane == 0) ye = 0.f, oe = 0.f;
      sdin[sa] = ye + y0, sdin[sa - 1] = yi;
      sdout[pa] = oe, sdout[pa + 1] = oe + o0;
      __syncwarp();
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        const int t = pa + u;
        const float Et = partial_sum<K::kWarps>(sEp, kRows, t);  // the 8 warps' slots in order
        const float e = c0 + Et + sdin[t] + sdout[t];
        if (t < tc) {
          a.ddelta[(row0 + t) * a.H + h] = partial_sum<K::kGroups>(sxv, kRows, t) + A * e;
          dA += sdt[t] * e;
        }
      }
    }
    // G_c = e^{cs_last − cs_0 + A Δ_next} G_{c+1} + dyᵀ diag(e^{cs − cs_0}) C
#pragma unroll
    for (int s = 0; s < K::State::Tile::kS; ++s)
#pragma unroll
      for (int e = 0; e < 4; ++e) G[s][e] *= decG;
    wmm<kMode, true, false>(G, sDY, ldP, sC, ldN, kRows, ws, KScale{sg0});
    // Every warp of this block is done with this step's tiles and scalars (the adjoint update above read dy, C
    // and e^{cs − cs_0}, which the next step's staging overwrites: the cluster barrier's arrive came before
    // it), and with clusters every block is done with this block's exchange tiles.
    __syncthreads();
    if (cs > 1) __cluster_barrier_wait();
    for_pairs_all(ws, [&](int s, int hv, int p, int n) { st2(sG + p * ldN + n, G[s][2 * hv], G[s][2 * hv + 1]); });
    dt_next = dt_first;
  }

  // This (b, h)'s dA_log and dD partials (param_reduce adds them over b): ∂A/∂A_log = A.
  dA = warp_sum(dA);  // warp 0 holds the lanes' shares; the other warps' are 0
  dD = gpu::block_sum<K::kWarps>(dD, red);
  if (threadIdx.x == 0) {
    a.wsA[size_t(b) * a.H + h] = dA * A;
    a.wsD[size_t(b) * a.H + h] = dD;
  }
}

}  // namespace

void ssd_bwd_walk(const SsdParams& p, const SsdInputs<float>& in, const float* saved, const float* dy,
                  const SsdGrads<float>& g, float* workspace, cudaStream_t stream) {
  Args a = make_layout(p);
  set_inputs(a, in);
  a.dy = dy, a.states = const_cast<float*>(saved);  // read only here
  a.dx = g.dx, a.ddelta = g.ddelta, a.dB = g.dB, a.dC = g.dC;
  a.cluster_heads = cluster_heads(p.H, p.G);
  const Workspace w = walk::workspace(p);
  a.wsA = workspace + w.a, a.wsD = workspace + w.d;
  a.wsB = w.partials ? workspace + w.b : nullptr, a.wsC = w.partials ? workspace + w.c : nullptr;
  a.vec4 = vec4_ok(p, {in.x, in.Bm, in.Cm, dy, saved, g.dB, g.dC, workspace});
  with_walk_dims(a.P, a.N, [&](auto kp, auto kn) {
    constexpr int kP = decltype(kp)::value, kN = decltype(kn)::value;
    const size_t smem = a.mode == MmaMode::kBF16 ? BwdShape<MmaMode::kBF16, kP, kN>::kBytes
                                                 : BwdShape<MmaMode::k3xTF32, kP, kN>::kBytes;
    auto pick = [](auto mode) { return bwd_walk_kernel<decltype(mode)::value, kP, kN>; };
    launch_kernel(a, pick, dim3(a.H, a.B), BwdShape<MmaMode::kBF16, kP, kN>::kThreads, smem, stream,
                  dim3(a.cluster_heads, 1, 1));
  });
  const int rows = p.B * p.L;
  if (w.partials) group_sum(rows, p.H / a.cluster_heads, p.G, p.N, p.ld, a.wsB, a.wsC, g.dB, g.dC, stream);
  param_reduce(p.B, p.H, 1, a.wsA, a.wsD, g.dA_log, g.dD, stream);
}

}  // namespace walk
}  // namespace ssd_detail
}  // namespace mlalpha::gpu
