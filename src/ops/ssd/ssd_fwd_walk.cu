// SSD forward as a chunk walk (ssd_walk.cuh): grid (H, B), one block per (b, h), chunks in order, the state
// entering the chunk, S_c, in fp32 registers. Per chunk c (steps t0 = cT …, tc of them), with cs_t and Δ_t of
// the chunk (ssd_common.cuh):
//     y       = diag(e^{cs}) (C S_cᵀ) + (C Bᵀ ∘ Ldec) diag(Δ) X + D X,        Ldec[i, j] = e^{cs_i − cs_j}, j ≤ i
//     S_{c+1} = e^{cs_last} S_c + Xᵀ diag(w) B,   w_j = Δ_j e^{cs_last − cs_j}  (ssd_chunks.cu)
// and S_c goes to the saved buffer (fp32), which the reverse walk (ssd_bwd_walk.cu) reads. A carried state
// (ssd.h) is S_0 = h0 instead of 0, saved as states[0] like every S_c (the reverse walk reads it as chunk 0's);
// the S_nchunks the last chunk step leaves in the registers is h_last. One launch does
// what chunk_cb, the forward chunk-state walk and ssd_fwd_kernel did; C·Bᵀ is recomputed per head instead of
// being saved per group.
//
// A chunk step: stage x, B, C (zero-padded tiles) while warp 0 forms the decays; S_c to its tile and to the
// saved buffer; barrier; C·Bᵀ → M = (C·Bᵀ ∘ Ldec) diag(Δ) into its tile and, independently, the state update in
// registers; M's rows complete (the warp's own with one column block, else a barrier); M·X and C·S_cᵀ → y;
// barrier (the tiles are free for the next chunk). Two or three barriers a chunk, no global round trip.
#include "ops/ssd/ssd_walk.cuh"

namespace mlalpha::gpu {
namespace ssd_detail {
namespace walk {
namespace {

template <MmaMode kMode, int kP, int kN>
struct FwdShape {
  using E = Elem<kMode>;
  // Column blocks of the 64-row products: 2 (8 warps) for N = 128 and for P = 64 (issue 38: the 'M' head's
  // 256 walks ran 4 warps at 2 blocks an SM, half the SM's warps idle), 1 (4 warps, 4 blocks an SM) for the
  // 'S' head, whose 512 walks fill the SMs at 4 warps a block.
  static constexpr int kSplit = kN / 64 == 2 || kP == 64 ? 2 : 1, kWarps = 4 * kSplit, kThreads = 32 * kWarps;
  static constexpr int ldP = ld_of<E>(kP), ldN = ld_of<E>(kN), ldT = ld_of<E>(kRows);
  using State = StateLayout<kP, kN, kWarps>;
  // Shared memory (byte offsets, 16-byte aligned): cs (double), Δ, e^{cs_t}, w_t, log2(e) cs_t, then the tiles x (T, kP),
  // B and C (T, kN), M (T, T) and S_c (kP, kN).
  static constexpr size_t oCs = 0, oDt = oCs + kRows * sizeof(double), oDin = oDt + kRows * 4, oW = oDin + kRows * 4;
  static constexpr size_t oU = oW + kRows * 4;  // log2(e) cs_t (walk_decay, bf16 mode)
  static constexpr size_t oDec = oU + kRows * 4;  // e^{cs_last} (16 bytes)
  static constexpr size_t oX = oDec + 16;
  static constexpr size_t oB = oX + size_t(kRows) * ldP * sizeof(E);
  static constexpr size_t oC = oB + size_t(kRows) * ldN * sizeof(E);
  static constexpr size_t oM = oC + size_t(kRows) * ldN * sizeof(E);
  static constexpr size_t oS = oM + size_t(kRows) * ldT * sizeof(E);
  static constexpr size_t kBytes = oS + size_t(kP) * ldN * sizeof(E);
  // Blocks an SM's 228 KiB hold (1 KiB reserved each), capped where the registers would spill: 4 (128
  // registers a thread) for P ≤ 32 (the 'S' head: 512 walks fill 132 SMs at 4), else 2; the launch bound caps
  // the registers to match.
  static constexpr int kFit = int((228 * 1024) / (kBytes + 1024));
  static constexpr int kCap = kSplit == 1 && kP == 32 ? 4 : 2;
  static constexpr int kMinBlocks = kFit < 1 ? 1 : (kFit < kCap ? kFit : kCap);
};

// kY16: y written in bf16 (a.y16; bf16 precision), a compile-time choice: a run-time branch in the output loop
// cost the 'L' instance 12 bytes of spill. kX16: x, B, C read in bf16 (a.x16, B16, C16; SsdXbcBf16, bf16 mode),
// staged into the tiles bit for bit as the fp32 ones are rounded.
template <MmaMode kMode, int kP, int kN, bool kY16 = false, bool kX16 = false>
__global__ void __launch_bounds__(FwdShape<kMode, kP, kN>::kThreads, FwdShape<kMode, kP, kN>::kMinBlocks)
    fwd_walk_kernel(Args a) {
  using K = FwdShape<kMode, kP, kN>;
  using E = typename K::E;
  extern __shared__ __align__(16) unsigned char smem[];
  double* scs = reinterpret_cast<double*>(smem + K::oCs);  // (64) cs_t
  float* sdt = reinterpret_cast<float*>(smem + K::oDt);     // (64) Δ_t
  float* sdin = reinterpret_cast<float*>(smem + K::oDin);   // (64) e^{cs_t}
  float* sw = reinterpret_cast<float*>(smem + K::oW);       // (64) w_t = Δ_t e^{cs_last − cs_t}
  float* su = reinterpret_cast<float*>(smem + K::oU);       // (64) log2(e) cs_t
  float* sdec = reinterpret_cast<float*>(smem + K::oDec);   // (1) e^{cs_last}
  E* sX = reinterpret_cast<E*>(smem + K::oX);               // (64, ldP) x
  E* sB = reinterpret_cast<E*>(smem + K::oB);               // (64, ldN)
  E* sC = reinterpret_cast<E*>(smem + K::oC);               // (64, ldN)
  E* sM = reinterpret_cast<E*>(smem + K::oM);               // (64, ldT) M = (C·Bᵀ ∘ Ldec) diag(Δ)
  E* sS = reinterpret_cast<E*>(smem + K::oS);               // (kP, ldN) S_c

  const int h = blockIdx.x, b = blockIdx.y;
  const int g = h * a.G / a.H;
  const size_t mo = member_offset(a, b);
  const float A = -expf(a.A_log[mo + h]), Dh = a.Dskip[mo + h];
  typename K::State::Acc S;
  zero(S);
  const size_t PN = size_t(a.P) * a.N;
  if (a.h0) {  // S_0 = h0 (fp32), zeros in the padding
    const float* h0 = a.h0 + (size_t(b) * a.H + h) * PN;
    for_pairs_all(K::State::tile(threadIdx.x), [&](int s, int hv, int p, int n) {
      if (p < a.P && n < a.N) S[s][2 * hv] = h0[size_t(p) * a.N + n];
      if (p < a.P && n + 1 < a.N) S[s][2 * hv + 1] = h0[size_t(p) * a.N + n + 1];
    });
  }
  float* states = state_at(a, a.states, b, h, 0);  // (nchunks, P, N) of this (b, h)

  // A chunk's x, B, C (16-byte rows: every load of the three tiles in flight at once, through registers;
  // else element by element) and Δ (warp 0). (Issued a step early instead, the tiles' registers spilled: they
  // do not fit beside the products' in 128.)
  static_assert(!kX16 || kMode == MmaMode::kBF16, "bf16 x, B, C in bf16 mode only");
  using In = InElem<kX16>;
  const In* xs = in_cols<kX16>(a.x, a.x16);   // (B, L, ld)→(H, P)
  const In* bs = in_cols<kX16>(a.Bm, a.B16);  // (B, L, ld)→(G, N)
  const In* cs = in_cols<kX16>(a.Cm, a.C16);  // (B, L, ld)→(G, N)
  TileLoad<kRows, kP, K::kThreads, In> lx;
  TileLoad<kRows, kN, K::kThreads, In> lb, lc;
  LaneDeltas d;
  auto rows_of = [&](const In* m, int c, int col0) { return m + (size_t(b) * a.L + size_t(c) * a.T) * a.ld + col0; };
  auto issue = [&](int c) {
    const int tc = min(a.T, a.L - c * a.T);
    if (threadIdx.x < 32) d = load_deltas(a, b, h, c * a.T, tc);
    if (a.vec4) {
      lx.load(rows_of(xs, c, h * a.P), a.ld, tc, a.P);
      lb.load(rows_of(bs, c, g * a.N), a.ld, tc, a.N);
      lc.load(rows_of(cs, c, g * a.N), a.ld, tc, a.N);
    }
  };
  for (int c = 0; c < a.nchunks; ++c) {
    const int t0 = c * a.T, tc = min(a.T, a.L - t0);
    const size_t row0 = size_t(b) * a.L + t0;
    const int tid = opaque_tid(), warp = tid >> 5, lane = tid & 31;
    const LaneTile<kRows / K::kSplit> wm(warp & 3, warp >> 2, lane);  // C·Bᵀ, M: rows 16 (w % 4), a column block
    const LaneTile<kP / K::kSplit> wy(warp & 3, warp >> 2, lane);     // y
    const auto ws = K::State::tile(tid);                              // the state
    issue(c);
    if (a.vec4) {
      lx.store(sX, K::ldP);
      lb.store(sB, K::ldN);
      lc.store(sC, K::ldN);
    } else {
      stage_tile<kRows, kP, K::kThreads>(sX, K::ldP, rows_of(xs, c, h * a.P), a.ld, tc, a.P, false);
      stage_tile<kRows, kN, K::kThreads>(sB, K::ldN, rows_of(bs, c, g * a.N), a.ld, tc, a.N, false);
      stage_tile<kRows, kN, K::kThreads>(sC, K::ldN, rows_of(cs, c, g * a.N), a.ld, tc, a.N, false);
    }
    if (warp == 0) {
      const double cs_last = walk_cumsum(d, A, sdt, scs, su);
#pragma unroll
      for (int u = 0; u < 2; ++u) {  // this lane's steps (walk_cumsum wrote them)
        const int t = 2 * lane + u;
        sdin[t] = walk_exp<kMode>(scs[t]);
        sw[t] = sdt[t] * walk_exp<kMode>(cs_last - scs[t]);
      }
      if (threadIdx.x == 0) sdec[0] = walk_exp<kMode>(cs_last);  // the state's decay e^{cs_last}
    }
    // S_c: to the saved buffer (fp32) and to its tile (the mode's type) for C·S_cᵀ
    float* out = states + size_t(c) * PN;
    for_pairs_all(ws, [&](int s, int hv, int p, int n) {
      const float v0 = S[s][2 * hv], v1 = S[s][2 * hv + 1];
      st2(sS + p * K::ldN + n, v0, v1);
      if (p < a.P && n < a.N) store_pair(out + size_t(p) * a.N + n, v0, v1, n + 1 < a.N);
    });
    __syncthreads();  // the tiles, the decays and S_c are in place

    {  // M = (C·Bᵀ ∘ Ldec) diag(Δ): this warp's rows and column block
      typename WarpTile<kRows / K::kSplit>::Acc cb;
      zero(cb);
      wmm<kMode, false, true>(cb, sC, K::ldN, sB, K::ldN, kN, wm);
      for_pairs_all(wm, [&](int s, int hv, int i, int j) {
        const float m0 = j <= i ? cb[s][2 * hv] * walk_decay<kMode>(scs, su, i, j) * sdt[j] : 0.f;
        const float m1 = j + 1 <= i ? cb[s][2 * hv + 1] * walk_decay<kMode>(scs, su, i, j + 1) * sdt[j + 1] : 0.f;
        st2(sM + i * K::ldT + j, m0, m1);
      });
    }
    // S_{c+1} = e^{cs_last} S_c + Xᵀ diag(w) B, meanwhile: it reads only x, B and w
    const float dec = sdec[0];
#pragma unroll
    for (int s = 0; s < K::State::Tile::kS; ++s)
#pragma unroll
      for (int e = 0; e < 4; ++e) S[s][e] *= dec;
    wmm<kMode, true, false>(S, sX, K::ldP, sB, K::ldN, kRows, ws, KScale{sw});
    if constexpr (K::kSplit == 1) __syncwarp();  // M's rows are this warp's own
    else __syncthreads();                        // the other column block's half of M's rows

    {  // y = diag(e^{cs}) (C S_cᵀ) + M X + D x
      typename WarpTile<kP / K::kSplit>::Acc yv, zv;
      zero(yv);
      zero(zv);
      wmm<kMode, false, false>(yv, sM, K::ldT, sX, K::ldP, kRows, wy);
      wmm<kMode, false, true>(zv, sC, K::ldN, sS, K::ldN, kN, wy);
      for_pairs_all(wy, [&](int s, int hv, int t, int p) {
        if (t < tc && p < a.P) {
          const float2 x2 = ld2(sX + t * K::ldP + p);
          const float din = sdin[t];
          const size_t o = ((row0 + t) * a.H + h) * a.P + p;
          const float v0 = din * zv[s][2 * hv] + yv[s][2 * hv] + Dh * x2.x;
          const float v1 = din * zv[s][2 * hv + 1] + yv[s][2 * hv + 1] + Dh * x2.y;
          if constexpr (kY16) store_pair(a.y16 + o, v0, v1, p + 1 < a.P);
          else store_pair(a.y + o, v0, v1, p + 1 < a.P);
        }
      });
    }
    __syncthreads();  // every read of this chunk's tiles is done: the next chunk may stage
  }
  if (a.h_last) {  // S after the last chunk; this thread's elements, read from h0 above by this thread only
    float* out = a.h_last + (size_t(b) * a.H + h) * PN;
    for_pairs_all(K::State::tile(threadIdx.x), [&](int s, int hv, int p, int n) {
      if (p < a.P && n < a.N) store_pair(out + size_t(p) * a.N + n, S[s][2 * hv], S[s][2 * hv + 1], n + 1 < a.N);
    });
  }
}

}  // namespace

void ssd_fwd_walk(const SsdParams& p, const SsdInputs<float>& in, const SsdXbcBf16* xbc16, float* y,
                  __nv_bfloat16* y16, float* saved, cudaStream_t stream) {
  Args a = make_layout(p);
  set_inputs(a, in);
  require(!y16 || a.mode == MmaMode::kBF16, "ssd_fwd_bf16: the walks write y in bf16 in bf16 precision only");
  require(!xbc16 || (y16 && a.mode == MmaMode::kBF16), "ssd_fwd_bf16: bf16 x, B, C in bf16 precision with y16 only");
  if (xbc16) a.x16 = xbc16->x, a.B16 = xbc16->Bm, a.C16 = xbc16->Cm;
  a.y = y, a.y16 = y16, a.states = saved;
  a.vec4 = xbc16 ? vec4_ok_xbc16(p, {a.x16, a.B16, a.C16, saved}) : vec4_ok(p, {in.x, in.Bm, in.Cm, saved});
  with_walk_dims(a.P, a.N, [&](auto kp, auto kn) {
    constexpr int kP = decltype(kp)::value, kN = decltype(kn)::value;
    const size_t smem = a.mode == MmaMode::kBF16 ? FwdShape<MmaMode::kBF16, kP, kN>::kBytes
                                                 : FwdShape<MmaMode::k3xTF32, kP, kN>::kBytes;
    auto pick = [&](auto mode) {
      constexpr MmaMode m = decltype(mode)::value;
      if constexpr (m == MmaMode::kBF16) {
        if (a.x16) return fwd_walk_kernel<m, kP, kN, true, true>;  // xbc16 comes with y16 (required above)
        return a.y16 ? fwd_walk_kernel<m, kP, kN, true> : fwd_walk_kernel<m, kP, kN>;
      } else {
        return fwd_walk_kernel<m, kP, kN>;
      }
    };
    launch_kernel(a, pick, dim3(a.H, a.B), FwdShape<MmaMode::kBF16, kP, kN>::kThreads, smem, stream);
  });
}

}  // namespace walk
}  // namespace ssd_detail
}  // namespace mlalpha::gpu
