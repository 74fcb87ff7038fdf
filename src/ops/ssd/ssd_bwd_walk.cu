// SSD backward as a reverse chunk walk (ssd_walk.cuh; the formulas of ssd_bwd.cu's header): grid (H, B), one
// block per (b, h), chunks from the last to the first, the adjoint state G_{c+1} (the gradient at the first
// step of the chunk after c; 0 after the last) carried in fp32 registers. Per chunk c, with Gs = a_next G_{c+1}
// (a_next folded into dec_out_t = a_next e^{cs_last − cs_t} and into c0), the S_c the forward walk saved, and
// C·Bᵀ and the decays recomputed:
//     v_t  = (CBᵀ dy)_t + dec_out_t (G_{c+1} B_t)                  dx_t = Δ_t v_t + D dy_t
//     dB_t = Δ_t dec_out_t (x_tᵀ G_{c+1}) + ((DX diag Δ)ᵀ C)_t       dC_t = dec_in_t (dy_tᵀ S_c) + (DX diag Δ B)_t
//     dΔ_t = x_t·v_t + A e_t,  e_t = E_t + Σ_{i≥t} yoff_i + Σ_{j<t} sout_j + c0   (dA_log, dD: sums over t)
//     G_c  = e^{cs_last − cs_0 + A Δ_next} G_{c+1} + dyᵀ diag(e^{cs − cs_0}) C    (ssd_chunks.cu, reversed)
// A carried state h0 is the S_0 the forward walk saved: chunk 0 takes its S_c terms like every chunk. After chunk 0
// G's tile holds G_0 = g_0, and dh0 = a_0 g_0 = e^{A Δ_0} G_0 is read from it after the walk: G_0 exactly in fp32
// and tf32 mode, rounded to bf16 in bf16 mode (the tile's type: 2^-9 relative, as the operands of that mode), so
// that the walk itself is the same code with or without dh0 (one more value held across the chunk loop spilled
// the 'L' bf16 reverse walk at its 128-register bound).
// One launch does what the adjoint chunk-state walk, bwd_kernel, the DX products and the per-head partials did:
// no adjoint state, DX tile or per-head dB, dC goes through global memory.
//
// dB and dC are sums over the heads of a group. The heads of a group run as one thread-block cluster of
// `cs` blocks (Args::cluster_heads: the largest of 8, 4, 2 that divides the group, or 2: below); each block puts
// its head's (T, N) dB and dC tiles (fp32) in its shared memory, and after a cluster barrier block r adds rows
// [r T/cs, (r+1) T/cs) of all cs tiles through distributed shared memory (pairs of heads first, cluster_sums),
// and stores them: dB, dC themselves when the cluster is the whole group, else one partial per cluster that
// group_sum adds in order. Without clusters (cs = 1) a head's tiles go straight to dB, dC (one head a group) or
// to its partial. dA_log and dD: one partial per (b, h), summed over b in order by param_reduce.
// The largest cluster (cluster_heads) unless it takes two rounds and clusters of 2 take one (bwd_cluster_heads,
// from cudaOccupancyMaxActiveClusters at run time; the sums keep one order, so the bits do not depend on it): a
// cluster must fit in one GPC, and the H100 holds 62 of the packed 'S' block's 64 clusters of 8 at once (30 of
// M's and L's 32) and 124 of its 128 clusters of 4 (still two rounds: 177.8 / 173.8 µs against 153.2 / 156.1
// with 8), but 264 of its 256 clusters of 2 (132 / 128 on M, L). Reverse walk in bf16, clusters of 8 → 2 (4
// partials a group of 8, group_sum): S 148.2 / 146.4 → 130.2 / 130.6 µs, M 228 → 165, L 1,173 → 854
// (docs/benchmarks.md, "clusters of 2").
//
// A block is one or two warp groups of 4 warps (4 row blocks of 16 × the groups' column blocks), chosen per tile
// shape and mode from measured times (kBwdGroups below): the 'S' head (P 32, N 64) in bf16 mode 4 warps in the
// packed layout, 4 blocks an SM at ≤ 128 registers; every other instance 8 warps, 2 blocks an SM at ≤ 128 (or 1
// where the fp32 tiles fill the SM). Issue 38: one (b, h) chain's step is ~3,900 instructions a warp on 4 warps;
// 8 warps halve each warp's share, which pays where it costs no resident blocks.
// The 'M' head with bf16 x, B, C (kX16) is pipelined (kPipe, BwdShape::kPipeFits): chunk c−1's x, B, C are copied
// asynchronously (cp.async) into second buffers right after chunk c's staging barrier, so their DRAM latency
// overlaps chunk c's products, and moved into the tiles at c−1's staging. The second buffers (27 KiB) fit its 2
// blocks an SM; the 'S' head's 4 blocks leave 896 bytes an SM and the 'L' head's 2 leave 7.4 KiB, so neither has
// room for them (docs/benchmarks.md, "dy in bf16 for the reverse walk").
// A chunk step (4 barriers, and 2 cluster barriers with cs > 1), one phase function each:
//   0  stage x, dy, B, C, S_c (zero-padded tiles); warp 0: the decays;                              barrier
//   1  Σ G·S_c (c0) and Σ dy·x (dD) shares; C·Bᵀ and dy·xᵀ over 16 rows and a column half a warp (two
//      groups) or both halves (one group) → CB (decayed), DX diag Δ into tiles, W = CB ∘ (dy·xᵀ) diag Δ
//      (strictly lower) → E_t's column sums;                                                          barrier
//   2  every warp: v → dx and x·v; dB, dC with the row sums sout, yoff of their state terms;          barrier
//   3  dB, dC out (cluster exchange); warp 0: the scans, dΔ_t and dA_log's share; G ← G_c;  barrier, G's tile.
#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "ops/common/colsum.h"
#include "ops/ssd/ssd_walk.cuh"

namespace mlalpha::gpu {
namespace ssd_detail {
namespace walk {
namespace {

// Warp groups of a reverse-walk block per tile instance (kP, kN) and mode: measured, not derived. Reverse walk
// alone, µs a layer, NVIDIA H100 80GB HBM3, 2026-12-06, `ml-alpha-ssd-bench --shapes S,M,L --precision bf16|fp32`,
// two rounds in one call (docs/benchmarks.md, "The SSD reverse walk by phase, its block per shape"):
//   (32, 64)  'S' bf16: 2 groups (8 warps, 2 blocks an SM) 163.8 / 162.8; 1 group at 3 blocks an SM (168
//             registers) 156.7 / 157.7; 1 group at 4 (128 registers, the packed layout) 153.5 / 155.3 → 1.
//             fp32: 2 groups 376.0, 1 group 548.5 → 2 (the fp32 tiles allow 1 block of 4 warps an SM).
//   (64, 64)  'M': 2 groups 237.0–238.8 (1 group, the session before: 273.7 against 238.4) → 2.
//   (64, 128) 'L': 2 groups 1,167.6 / 1,171.1 (8 warps with phase 1 on 4, e64060d: 1,304.5) → 2.
struct BwdGroups {
  int P, N;
  int bf16, fp32;  // groups in bf16 mode, and in fp32 and tf32 mode
};
constexpr BwdGroups kBwdGroups[] = {{32, 64, 1, 2}, {64, 64, 2, 2}, {64, 128, 2, 2}};
constexpr int bwd_groups(MmaMode mode, int P, int N) {
  for (const BwdGroups& e : kBwdGroups)
    if (e.P == P && e.N == N) return mode == MmaMode::kBF16 ? e.bf16 : e.fp32;
  return 2;
}

template <MmaMode Mode, int P, int N, int Groups>
struct BwdShape {
  static constexpr MmaMode kMode = Mode;
  static constexpr int kP = P, kN = N;
  using E = Elem<kMode>;
  // kGroups warp groups of 4 row blocks of 16: the 64-row products of a step split their columns over the
  // groups (v: kP / kGroups, dB and dC: kN / kGroups each). With two groups C·Bᵀ and dy·xᵀ split by column half
  // too (one chain on 8 warps; issue 38); with one, its 4 warps take both halves.
  static constexpr int kGroups = Groups, kWarps = 4 * kGroups, kThreads = 32 * kWarps;
  static_assert(kGroups == 2 || (kGroups == 1 && kN <= 64), "dB, dC: at most 64 columns a warp");
  // The packed layout: one group in bf16 mode ('S'), sized to fit 4 blocks an SM. CB and DX are then swz64
  // tiles (unpadded: 2 KiB less a block), else padded tiles like the others.
  static constexpr bool kPacked = kMode == MmaMode::kBF16 && kGroups == 1;
  static constexpr int ldP = ld_of<E>(kP), ldN = ld_of<E>(kN), ldT = kPacked ? kRows : ld_of<E>(kRows);
  using State = StateLayout<kP, kN, kWarps>;
  using TileV = WarpTile<kP / kGroups>;  // v, dx: rows 16 (w % 4), column block w / 4 of P
  using TileN = WarpTile<kN / kGroups>;  // dB, dC: rows 16 (w % 4), column block w / 4 of N
  // Shared memory (byte offsets, 16-byte aligned). Per-step scalars: cs (double); Δ; dec_in (then the suffix
  // sums of yoff); dec_out (then the prefix sums of sout); e^{cs_t − cs_0}; log2(e) cs_t; the row-sum partials
  // of yoff, sout and x·v (kGroups column blocks each); E's column sums (one slot a warp); the block-sum slots.
  // The packed layout gives cs and e^{cs_t − cs_0} no bytes of their own: cs is read in phase 0 only and lies
  // over E's slots (written from phase 1 on), and e^{cs_t − cs_0} = 2^{u_t − u_0} is taken from u where the
  // adjoint update needs it (KDecayFrom0): with the swizzled tiles, 2.8 KiB less, so that 'S' fits 4 an SM.
  static constexpr size_t kScal = kRows * 4;
  static constexpr size_t oDt = kPacked ? 0 : kRows * sizeof(double);
  static constexpr size_t oDin = oDt + kScal, oDout = oDin + kScal;
  static constexpr size_t oG0 = oDout + kScal;  // not in the packed layout
  static constexpr size_t oU = oG0 + (kPacked ? 0 : kScal);
  static constexpr size_t oYoff = oU + kScal, oSout = oYoff + kGroups * kScal;
  static constexpr size_t oXv = oSout + kGroups * kScal, oEp = oXv + kGroups * kScal;
  static constexpr size_t oCs = kPacked ? oEp : 0;
  static_assert(!kPacked || kRows * sizeof(double) <= kWarps * kScal, "cs fits over E's slots");
  static constexpr size_t oRed = oEp + kWarps * kScal;
  // the block-sum slots and the step's two scalars: 16-byte rounded in the packed layout
  static constexpr size_t kRedBytes = kPacked ? ((kWarps + 2) * 4 + 15) / 16 * 16 : 64;
  static_assert((kWarps + 2) * 4 <= kRedBytes, "block-sum slots and the step's two scalars");
  // Tiles: dy and C live through the whole step (the adjoint update reads them last). x, G_{c+1} and CB are
  // dead once v and dB are formed, and dB's exchange tile reuses their bytes; B, S_c and DX once dC is, and
  // dC's exchange tile reuses theirs.
  static constexpr size_t oDY = oRed + kRedBytes;
  static constexpr size_t oC = oDY + size_t(kRows) * ldP * sizeof(E);
  static constexpr size_t oX = oC + size_t(kRows) * ldN * sizeof(E);
  static constexpr size_t oG = oX + size_t(kRows) * ldP * sizeof(E);
  static constexpr size_t oCB = oG + size_t(kP) * ldN * sizeof(E);
  static constexpr size_t oB = oCB + size_t(kRows) * ldT * sizeof(E);
  static constexpr size_t oSin = oB + size_t(kRows) * ldN * sizeof(E);
  static constexpr size_t oDX = oSin + size_t(kP) * ldN * sizeof(E);
  static constexpr size_t kBytes = oDX + size_t(kRows) * ldT * sizeof(E);
  // Exchange tiles (fp32), row stride ldX: kN + 8 (≡ 8 mod 32: a half-warp's 8-byte stores hit 32 banks) where
  // it fits the dead tiles, else kN + 4 (2-way conflicts on the stores; the packed 'S', whose x, G and CB tiles
  // are 17.5 KiB).
  static constexpr int ldX = size_t(kRows) * (kN + 8) * 4 <= oB - oX ? kN + 8 : kN + 4;
  static constexpr size_t kXchBytes = size_t(kRows) * ldX * 4;  // one (64, ldX) fp32 exchange tile
  static constexpr size_t oXdB = oX, oXdC = oB;
  static_assert(oXdB + kXchBytes <= oB && oXdC + kXchBytes <= kBytes, "the exchange tiles fit the dead tiles");
  // Blocks an SM's 228 KiB hold (1 KiB reserved each), capped where the registers would be too few: one group
  // 4 (4 warps at ≤ 128 registers: the packed 'S', 57.1 KiB) or 3 (≤ 168) where 4 do not fit; two groups 2.
  static constexpr int kFit = int((228 * 1024) / (kBytes + 1024));
  static constexpr int kCap = kGroups == 1 ? 4 : 2;
  static constexpr int kMinBlocks = kFit < 1 ? 1 : (kFit < kCap ? kFit : kCap);
  // The pipelined walk (bf16 x, B, C in memory, kX16): chunk c−1's x, B, C copied (cp.async) into second buffers
  // while chunk c computes, and moved into the tiles at c−1's staging; where the buffers fit at kMinBlocks.
  static constexpr size_t kAltBytes = size_t(kRows) * (ldP + 2 * ldN) * sizeof(E);
  static constexpr size_t oX2 = kBytes, oB2 = oX2 + size_t(kRows) * ldP * sizeof(E);
  static constexpr size_t oC2 = oB2 + size_t(kRows) * ldN * sizeof(E);
  static constexpr bool kPipeFits =
      kMode == MmaMode::kBF16 && int((228 * 1024) / (kBytes + kAltBytes + 1024)) >= kMinBlocks;
  static constexpr size_t kPipeBytes = kBytes + kAltBytes;
  // Element (i, j) of CB or DX.
  __device__ static int tix(int i, int j) {
    if constexpr (kPacked) return swz64(i, j);
    else return i * ldT + j;
  }
};

// ----- the reverse walk, phase by phase -----
// Each phase function names the terms of the header's formulas it computes; the kernel calls them in order and
// places the barriers between them. Every thread does the same arithmetic in the same order as the one-function
// kernel this replaced (issue 39; compared in PTX: the same floating-point instructions on the same operands,
// only independent ones reordered).

// The block's shared memory (BwdShape's offsets).
template <class K>
struct BwdTiles {
  using E = typename K::E;
  double* scs;   // (64) cs_t
  float* sdt;    // (64) Δ_t
  float* sdin;   // (64) dec_in_t, then the suffix sums of yoff
  float* sdout;  // (64) dec_out_t, then the prefix sums of sout
  float* sg0;    // (64) e^{cs_t − cs_0} (null in the packed layout)
  float* su;     // (64) log2(e) cs_t
  float* syoff;  // (kGroups, 64) row-sum partials of yoff
  float* sout;   // (kGroups, 64) of sout
  float* sxv;    // (kGroups, 64) of x·v
  float* sEp;    // (kWarps, 64) E's column sums, one slot a warp
  float* red;    // (kWarps + 2) block-sum slots, then c0's scale and G's decay
  E* sDY;        // (64, ldP) dy
  E* sC;         // (64, ldN)
  E* sX;         // (64, ldP) x
  E* sB;         // (64, ldN)
  E* sSin;       // (kP, ldN) S_c
  E* sG;         // (kP, ldN) G_{c+1}
  E* sCB;        // (64, ldT) CB[i, j] = (C_i·B_j) e^{cs_i − cs_j}, j ≤ i
  E* sDX;        // (64, ldT) (dy_i·x_j) e^{cs_i − cs_j} Δ_j, j ≤ i
  float* xdB;    // (64, ldX) this head's dB (on x, G, CB)
  float* xdC;    // (64, ldX) this head's dC (on B, S_c, DX)
  __device__ explicit BwdTiles(unsigned char* smem)
      : scs(reinterpret_cast<double*>(smem + K::oCs)),
        sdt(reinterpret_cast<float*>(smem + K::oDt)),
        sdin(reinterpret_cast<float*>(smem + K::oDin)),
        sdout(reinterpret_cast<float*>(smem + K::oDout)),
        sg0(K::kPacked ? nullptr : reinterpret_cast<float*>(smem + K::oG0)),
        su(reinterpret_cast<float*>(smem + K::oU)),
        syoff(reinterpret_cast<float*>(smem + K::oYoff)),
        sout(reinterpret_cast<float*>(smem + K::oSout)),
        sxv(reinterpret_cast<float*>(smem + K::oXv)),
        sEp(reinterpret_cast<float*>(smem + K::oEp)),
        red(reinterpret_cast<float*>(smem + K::oRed)),
        sDY(reinterpret_cast<E*>(smem + K::oDY)),
        sC(reinterpret_cast<E*>(smem + K::oC)),
        sX(reinterpret_cast<E*>(smem + K::oX)),
        sB(reinterpret_cast<E*>(smem + K::oB)),
        sSin(reinterpret_cast<E*>(smem + K::oSin)),
        sG(reinterpret_cast<E*>(smem + K::oG)),
        sCB(reinterpret_cast<E*>(smem + K::oCB)),
        sDX(reinterpret_cast<E*>(smem + K::oDX)),
        xdB(reinterpret_cast<float*>(smem + K::oXdB)),
        xdC(reinterpret_cast<float*>(smem + K::oXdC)) {}
};

// Where the block is and the per-head scalars every phase reads.
struct BwdBlock {
  int b, h, g, warp, lane;
  int cs;            // heads a cluster (Args::cluster_heads)
  int HK;            // clusters a batch row: H / cs
  bool whole_group;  // the cluster is the whole group: its sums are dB, dC; else one partial per cluster
  float A, Dh;       // −e^{A_log[h]}, D[h]
};
__device__ __forceinline__ BwdBlock bwd_block(const Args& a) {
  BwdBlock k;
  k.h = blockIdx.x, k.b = blockIdx.y, k.warp = threadIdx.x >> 5, k.lane = threadIdx.x & 31;
  k.g = k.h * a.G / a.H, k.cs = a.cluster_heads;
  k.whole_group = a.H % a.G == 0 && a.H / a.G == k.cs;
  k.HK = a.H / k.cs;
  const size_t mo = member_offset(a, k.b);
  k.A = -expf(a.A_log[mo + k.h]), k.Dh = a.Dskip[mo + k.h];
  return k;
}

// The chunk of a step: steps t0 … t0 + tc − 1, rows row0 … of the (B·L)-row tensors.
struct BwdChunk {
  int t0, tc;
  size_t row0;
  bool last;     // the last chunk: G_{c+1} = 0
  float a_next;  // e^{A Δ} at the first step of the chunk after this one (0 after the last)
};
__device__ __forceinline__ BwdChunk bwd_chunk(const Args& a, const BwdBlock& k, int c, float dt_next) {
  BwdChunk ch;
  ch.t0 = c * a.T, ch.tc = min(a.T, a.L - ch.t0);
  ch.row0 = size_t(k.b) * a.L + ch.t0;
  ch.last = c == a.nchunks - 1;
  ch.a_next = ch.last ? 0.f : expf(dt_next * k.A);
  return ch;
}

// The pipelined walk's copies of chunk c's x, B, C (bf16, vec4) into the second buffers, one group.
template <class K>
__device__ __forceinline__ void copy_xbc_async(const Args& a, const BwdBlock& k, int c, unsigned char* smem) {
  using E = typename K::E;
  const int t0 = c * a.T, tc = min(a.T, a.L - t0);
  const size_t row0 = size_t(k.b) * a.L + t0;
  stage_tile_async<kRows, K::kN, K::kThreads>(reinterpret_cast<E*>(smem + K::oC2), K::ldN,
                                              a.C16 + row0 * a.ld + size_t(k.g) * a.N, a.ld, tc, a.N);
  stage_tile_async<kRows, K::kP, K::kThreads>(reinterpret_cast<E*>(smem + K::oX2), K::ldP,
                                              a.x16 + row0 * a.ld + size_t(k.h) * a.P, a.ld, tc, a.P);
  stage_tile_async<kRows, K::kN, K::kThreads>(reinterpret_cast<E*>(smem + K::oB2), K::ldN,
                                              a.B16 + row0 * a.ld + size_t(k.g) * a.N, a.ld, tc, a.N);
  stage_commit();
}
// This thread's 16-byte pieces of a second buffer (the ones its stage_tile_async copied) into the tile: no barrier
// between, since a thread reads only its own completed copies.
template <int kR, int kC, int kTh, typename E>
__device__ __forceinline__ void move_own_pieces(E* dst, const E* src, int ld) {
  int tid = threadIdx.x;
  asm volatile("" : "+r"(tid));
  constexpr int kQ = kC / 8, kPer = kR * kQ / kTh;
#pragma unroll
  for (int u = 0; u < kPer; ++u) {
    const int it = tid + u * kTh, o = (it / kQ) * ld + 8 * (it % kQ);
    *reinterpret_cast<uint4*>(dst + o) = *reinterpret_cast<const uint4*>(src + o);
  }
}

// Phase 0: x, dy, B, C and S_c (the state the forward walk saved for this chunk) staged as zero-padded tiles;
// warp 0: Δ_t, cs_t, dec_in_t = e^{cs_t}, dec_out_t = a_next e^{cs_last − cs_t}, e^{cs_t − cs_0}, and the step's
// two scalars: c0's scale a_next e^{cs_last} and G's decay e^{cs_last − cs_0 + A Δ_next}. A barrier follows.
// kX16: x, B, C, dy from a.x16, B16, C16 and dy_bf16(a) (bf16), the bits the fp32 ones round to in the tiles.
// kPipe: x, B, C are already in the second buffers (copy_xbc_async, issued a step earlier): each thread waits for
// its copies and moves its own pieces into the tiles, the same bytes stage_tile would have written.
template <class K, bool kX16, bool kPipe = false>
__device__ __forceinline__ void stage_and_decay(const Args& a, const BwdBlock& k, const BwdChunk& ch, float dt_next,
                                                const float* S_c, const BwdTiles<K>& s,
                                                const unsigned char* smem = nullptr) {
  constexpr int ldP = K::ldP, ldN = K::ldN;
  using E = typename K::E;
  LaneDeltas d;
  if (k.warp == 0) d = load_deltas(a, k.b, k.h, ch.t0, ch.tc);
  // kX16 stages dy after x, B, C (one barrier follows, so the order changes no value): in dy's place first, the bf16
  // instances (bf16 dy too) spill 12 / 12 ('S') and 24 / 24 ('M') bytes of stores / loads instead of 8 / 8 and 4 / 4
  // (after S_c: the same as here).
  if constexpr (!kX16)
    stage_tile<kRows, K::kP, K::kThreads>(s.sDY, ldP, a.dy + (ch.row0 * a.H + k.h) * a.P, size_t(a.H) * a.P, ch.tc,
                                          a.P, a.vec4);
  if constexpr (!kPipe) {
    // x, B, C: (B, L, ld)→(H, P), (G, N), (G, N); each source pointer formed at its call, as before kX16 (formed
    // together at the top, the 'L' instance held them across the first staging and spilled 96 bytes more)
    stage_tile<kRows, K::kN, K::kThreads>(s.sC, ldN, in_cols<kX16>(a.Cm, a.C16) + ch.row0 * a.ld + size_t(k.g) * a.N,
                                          a.ld, ch.tc, a.N, a.vec4);
    stage_tile<kRows, K::kP, K::kThreads>(s.sX, ldP, in_cols<kX16>(a.x, a.x16) + ch.row0 * a.ld + size_t(k.h) * a.P,
                                          a.ld, ch.tc, a.P, a.vec4);
    stage_tile<kRows, K::kN, K::kThreads>(s.sB, ldN, in_cols<kX16>(a.Bm, a.B16) + ch.row0 * a.ld + size_t(k.g) * a.N,
                                          a.ld, ch.tc, a.N, a.vec4);
  }
  if constexpr (kX16)  // dy: (B, L, H, P)
    stage_tile<kRows, K::kP, K::kThreads>(s.sDY, ldP, dy_bf16(a) + (ch.row0 * a.H + k.h) * a.P, size_t(a.H) * a.P,
                                          ch.tc, a.P, a.vec4);
  stage_tile<K::kP, K::kN, K::kThreads>(s.sSin, ldN, S_c, a.N, a.P, a.N, a.vec4);
  if constexpr (kPipe) {  // this chunk's x, B, C, copied during the previous step (or before the walk)
    stage_wait();
    move_own_pieces<kRows, K::kN, K::kThreads>(s.sC, reinterpret_cast<const E*>(smem + K::oC2), ldN);
    move_own_pieces<kRows, K::kP, K::kThreads>(s.sX, reinterpret_cast<const E*>(smem + K::oX2), ldP);
    move_own_pieces<kRows, K::kN, K::kThreads>(s.sB, reinterpret_cast<const E*>(smem + K::oB2), ldN);
  }
  if (k.warp == 0) {
    const double cs_last = walk_cumsum(d, k.A, s.sdt, s.scs, s.su);
    __syncwarp();  // cs_0, from lane 0
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int t = 2 * k.lane + u;
      s.sdin[t] = walk_exp<K::kMode>(s.scs[t]);
      s.sdout[t] = ch.a_next * walk_exp<K::kMode>(cs_last - s.scs[t]);
      if constexpr (!K::kPacked) s.sg0[t] = walk_decay<K::kMode>(s.scs, s.su, t, 0);
    }
    if (k.lane == 0) {  // the step's two scalars, once: c0 = a_next e^{cs_last} Σ G_{c+1}·S_c, and G's decay
      s.red[K::kWarps] = ch.a_next * walk_exp<K::kMode>(cs_last);
      s.red[K::kWarps + 1] = walk_exp<K::kMode>(cs_last - s.scs[0] + double(k.A) * double(dt_next));
    }
  }
}

// Phase 1a: this warp's share of Σ G_{c+1}·S_c (c0, into red[warp]) and this thread's of Σ dy·x (dD).
template <class K>
__device__ __forceinline__ void c0_and_dD_shares(const typename K::State::Acc& G, typename K::State::Tile ws,
                                                 bool last, const BwdTiles<K>& s, float& dD) {
  constexpr int ldP = K::ldP, ldN = K::ldN;
  float c0 = 0.f;
  if (!last)
    for_pairs_all(ws, [&](int s_, int hv, int p, int n) {
      const float2 v = ld2(s.sSin + p * ldN + n);
      c0 += G[s_][2 * hv] * v.x + G[s_][2 * hv + 1] * v.y;
    });
  put_warp_sum(c0, s.red);
  for (int it = threadIdx.x; it < kRows * K::kP / 2; it += K::kThreads) {
    const int t = it / (K::kP / 2), p = 2 * (it % (K::kP / 2));
    const float2 dy2 = ld2(s.sDY + t * ldP + p), x2 = ld2(s.sX + t * ldP + p);
    dD += dy2.x * x2.x + dy2.y * x2.y;
  }
}

// Phase 1b, one warp tile wt of C·Bᵀ and dy·xᵀ (16 rows, 32 columns, registers): CB and DX diag Δ to their
// tiles, and W[i, j] = CB[i, j] (dy_i·x_j) Δ_j (j < i, else 0) left in w.
template <class K>
__device__ __forceinline__ void cb_dx_tile(typename WarpTile<kRows / 2>::Acc& w, WarpTile<kRows / 2> wt,
                                           const BwdTiles<K>& s) {
  constexpr int ldP = K::ldP, ldN = K::ldN;
  typename WarpTile<kRows / 2>::Acc dxv;
  zero(w);
  zero(dxv);
  wmm<K::kMode, false, true>(w, s.sC, ldN, s.sB, ldN, K::kN, wt);     // C_i·B_j
  wmm<K::kMode, false, true>(dxv, s.sDY, ldP, s.sX, ldP, K::kP, wt);  // dy_i·x_j
  for_pairs_all(wt, [&](int s_, int hv, int i, int j) {
    float cbo[2], dxo[2];
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int jj = j + u;
      const bool in = jj <= i;
      const float ldec = in ? walk_decay<K::kMode>(s.scs, s.su, i, jj) : 0.f;
      const float cb = in ? w[s_][2 * hv + u] * ldec : 0.f;
      const float wd = dxv[s_][2 * hv + u] * s.sdt[jj];
      cbo[u] = cb;
      dxo[u] = in ? wd * ldec : 0.f;
      w[s_][2 * hv + u] = jj < i ? cb * wd : 0.f;  // W
    }
    st2(s.sCB + K::tix(i, j), cbo[0], cbo[1]);
    st2(s.sDX + K::tix(i, j), dxo[0], dxo[1]);
  });
}

// E_t = Σ_{i≥t} Σ_{j<t} W[i, j] = Σ_{i≥t} R_i(t) with the row prefix sums R_i(t) = Σ_{j<t} W[i, j]. Over one
// warp tile of W: R along each of the thread's two rows (the pair, a scan over the quad, subtiles in order;
// base[] carries Σ W over the columns before the tile in and out), masked to t ≤ i and summed over the
// thread's rows into colp[s][u], column wt.col(0, s, u).
__device__ __forceinline__ void row_prefix_columns(const typename WarpTile<kRows / 2>::Acc& w, WarpTile<kRows / 2> wt,
                                                   int q, float (&base)[2], float (&colp)[kRows / 16][2]) {
  constexpr int kS = WarpTile<kRows / 2>::kS;
#pragma unroll
  for (int s = 0; s < kS; ++s) colp[s][0] = colp[s][1] = 0.f;
#pragma unroll
  for (int hv = 0; hv < 2; ++hv) {
    const int i = wt.row(0, 2 * hv);
#pragma unroll
    for (int s = 0; s < kS; ++s) {
      const float w0 = w[s][2 * hv], w1 = w[s][2 * hv + 1], pair = w0 + w1;
      float incl = pair;
      float up = __shfl_up_sync(kWarpMask, incl, 1, 4);
      if (q >= 1) incl += up;
      up = __shfl_up_sync(kWarpMask, incl, 2, 4);
      if (q >= 2) incl += up;
      float excl = __shfl_up_sync(kWarpMask, incl, 1, 4);
      if (q == 0) excl = 0.f;
      const float total = __shfl_sync(kWarpMask, incl, 3, 4);
      const int j = wt.col(0, s, 0);
      const float r0 = base[hv] + excl, r1 = r0 + w0;  // R_i(j), R_i(j + 1) from the base's first column
      if (j <= i) colp[s][0] += r0;
      if (j + 1 <= i) colp[s][1] += r1;
      base[hv] += total;
    }
  }
}

// Phase 1b on two warp groups: warp (r, half) takes rows 16 r and columns 32 half of C·Bᵀ and dy·xᵀ. Its R
// runs over its own half only, so for the other half's column t the lower-half warp also adds Σ_{i≥t} W_i over
// its rows (W_i its rows' totals, which every upper column t ≤ i sees) into its slot sEp[w][t]. E_t is then the
// sum of the 8 slots in order (zeros where a warp has nothing). Warps (0, 1) and (1, 1) hold only zeros (rows
// < 32 ≤ columns: above the diagonal).
template <class K>
__device__ __forceinline__ void cb_dx_e_two_groups(const BwdBlock& k, const BwdTiles<K>& s) {
  constexpr int kS = WarpTile<kRows / 2>::kS;
  const int q = k.lane & 3, r = k.warp & 3, half = k.warp >> 2;
  const WarpTile<kRows / 2> wt(r, half);
  const int other = (1 - half) * (kRows / 2);  // the first column of the half this warp does not compute
  if (half == 1 && r < 2) {
    for_pairs_all(wt, [&](int, int, int i, int j) {
      st2(s.sCB + K::tix(i, j), 0.f, 0.f);
      st2(s.sDX + K::tix(i, j), 0.f, 0.f);
    });
    for (int t = k.lane; t < kRows; t += 32) s.sEp[k.warp * kRows + t] = 0.f;
    return;
  }
  typename WarpTile<kRows / 2>::Acc w;
  cb_dx_tile<K>(w, wt, s);
  float base[2] = {0.f, 0.f};  // per row: Σ W over this half's columns before the current subtile
  float colp[kS][2];           // this half's columns
  row_prefix_columns(w, wt, q, base, colp);
#pragma unroll
  for (int s_ = 0; s_ < kS; ++s_)
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      // the other half's column t: the lower half's row totals reach every upper column t ≤ i
      const int t = other + 8 * s_ + 2 * q + u;
      float v = colp[s_][u], vo = 0.f;
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
      if (k.lane < 4) {
        s.sEp[k.warp * kRows + wt.col(0, s_, u)] = v;
        s.sEp[k.warp * kRows + t] = vo;  // zeros in upper-half warps
      }
    }
}

// Phase 1b on one warp group: warp r takes rows 16 r in two halves of 32 columns, R carried from the first half
// into the second (base), every column's sum in its own slot sEp[w][t]; E_t is the sum of the 4 slots in order.
template <class K>
__device__ __forceinline__ void cb_dx_e_one_group(const BwdBlock& k, const BwdTiles<K>& s) {
  constexpr int kS = WarpTile<kRows / 2>::kS;
  const int q = k.lane & 3;
  float base[2] = {0.f, 0.f};  // per row: Σ W over the columns before the current subtile
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const WarpTile<kRows / 2> wt(k.warp, half);
    typename WarpTile<kRows / 2>::Acc w;
    cb_dx_tile<K>(w, wt, s);
    float colp[kS][2];
    row_prefix_columns(w, wt, q, base, colp);
#pragma unroll
    for (int s_ = 0; s_ < kS; ++s_)
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        float v = colp[s_][u];
        v += __shfl_xor_sync(kWarpMask, v, 4);
        v += __shfl_xor_sync(kWarpMask, v, 8);
        v += __shfl_xor_sync(kWarpMask, v, 16);
        if (k.lane < 4) s.sEp[k.warp * kRows + wt.col(0, s_, u)] = v;
      }
  }
}

// Row sums over a warp's tile of pairs: RowSums (ssd_common.cuh) fed one pair at a time.
template <int kW, class F>
__device__ __forceinline__ void row_sums(WarpTile<kW> w, float* dst, int slot, F pair_value) {
  RowSums rs;
  for_pairs_all(w, [&](int s, int hv, int t, int j) { rs.add(2 * hv, pair_value(s, hv, t, j)); });
  rs.end_tile();
  rs.write(dst, kRows, kRows, w, slot);
}

// Phase 2a: v_t = dec_out_t (G_{c+1} B_t) + (CBᵀ dy)_t over this warp's rows and column block of P;
// dx_t = Δ_t v_t + D dy_t out; x_t·v_t's row partials into sxv.
template <class K>
__device__ __forceinline__ void v_and_dx(const Args& a, const BwdBlock& k, const BwdChunk& ch, const BwdTiles<K>& s) {
  constexpr int ldP = K::ldP, ldN = K::ldN, ldT = K::ldT;
  const typename K::TileV wv(k.warp & 3, k.warp >> 2);
  typename K::TileV::Acc v;
  zero(v);
  if (!ch.last) {
    wmm<K::kMode, false, true>(v, s.sB, ldN, s.sG, ldN, K::kN, wv);  // (G_{c+1} B_t)[p]
    for_pairs_all(wv, [&](int s_, int hv, int t, int) {
      const float f = s.sdout[t];
      v[s_][2 * hv] *= f, v[s_][2 * hv + 1] *= f;
    });
  }
  // + Σ_i CB[i, t] dy_i[p]
  wmm<K::kMode, true, false, K::TileV::kWidth, NoKScale, K::kPacked>(v, s.sCB, ldT, s.sDY, ldP, kRows, wv);
  for_pairs_all(wv, [&](int s_, int hv, int t, int p) {
    if (t < ch.tc && p < a.P) {
      const float2 dy2 = ld2(s.sDY + t * ldP + p);
      store_pair(a.dx + (ch.row0 + t) * a.ld + size_t(k.h) * a.P + p, s.sdt[t] * v[s_][2 * hv] + k.Dh * dy2.x,
                 s.sdt[t] * v[s_][2 * hv + 1] + k.Dh * dy2.y, p + 1 < a.P);
    }
  });
  row_sums(wv, s.sxv, k.warp >> 2, [&](int s_, int hv, int t, int p) {
    const float2 x2 = ld2(s.sX + t * ldP + p);
    return x2.x * v[s_][2 * hv] + x2.y * v[s_][2 * hv + 1];
  });
}

// Phase 2b: dB_t = Δ_t dec_out_t (x_tᵀ G_{c+1}) + ((DX diag Δ)ᵀ C)_t over this warp's rows and column block of
// N; the state term's row partials sout_t = (its dB)·B_t into sout.
template <class K>
__device__ __forceinline__ void db_tile(typename K::TileN::Acc& db, const BwdBlock& k, const BwdChunk& ch,
                                        const BwdTiles<K>& s) {
  constexpr int ldP = K::ldP, ldN = K::ldN, ldT = K::ldT;
  const typename K::TileN wn(k.warp & 3, k.warp >> 2);
  zero(db);
  if (!ch.last) {
    wmm<K::kMode, false, false>(db, s.sX, ldP, s.sG, ldN, K::kP, wn);  // (x_tᵀ G_{c+1})[n]
    for_pairs_all(wn, [&](int s_, int hv, int t, int) {
      const float f = s.sdt[t] * s.sdout[t];
      db[s_][2 * hv] *= f, db[s_][2 * hv + 1] *= f;
    });
  }
  row_sums(wn, s.sout, k.warp >> 2, [&](int s_, int hv, int t, int n) {  // sout_t = (dB's state term)·B_t
    const float2 b2 = ld2(s.sB + t * ldN + n);
    return db[s_][2 * hv] * b2.x + db[s_][2 * hv + 1] * b2.y;
  });
  wmm<K::kMode, true, false, K::TileN::kWidth, NoKScale, K::kPacked>(db, s.sDX, ldT, s.sC, ldN, kRows,
                                                                   wn);  // + Σ_i DX[i, t] Δ_t C_i
}

// Phase 2c: dC_t = dec_in_t (dy_tᵀ S_c) + (DX diag Δ B)_t; the state term's row partials yoff_t = (its dC)·C_t
// into syoff.
template <class K>
__device__ __forceinline__ void dc_tile(typename K::TileN::Acc& dc, const BwdBlock& k, const BwdTiles<K>& s) {
  constexpr int ldP = K::ldP, ldN = K::ldN, ldT = K::ldT;
  const typename K::TileN wn(k.warp & 3, k.warp >> 2);
  zero(dc);
  wmm<K::kMode, false, false>(dc, s.sDY, ldP, s.sSin, ldN, K::kP, wn);  // (dy_tᵀ S_c)[n]
  for_pairs_all(wn, [&](int s_, int hv, int t, int) {
    const float f = s.sdin[t];
    dc[s_][2 * hv] *= f, dc[s_][2 * hv + 1] *= f;
  });
  row_sums(wn, s.syoff, k.warp >> 2, [&](int s_, int hv, int t, int n) {  // yoff_t = (dC's state term)·C_t
    const float2 c2 = ld2(s.sC + t * ldN + n);
    return dc[s_][2 * hv] * c2.x + dc[s_][2 * hv + 1] * c2.y;
  });
  wmm<K::kMode, false, false, K::TileN::kWidth, NoKScale, K::kPacked>(dc, s.sDX, ldT, s.sB, ldN, kRows,
                                                                    wn);  // + Σ_j DX[t, j] Δ_j B_j
}

// Where this head's row t of dB or dC goes: the group's gradient, or this cluster's (this head's) partial.
__device__ __forceinline__ float* out_row(const Args& a, const BwdBlock& k, const BwdChunk& ch, float* full,
                                          float* part, int t) {
  return k.whole_group ? full + (ch.row0 + t) * a.ld + size_t(k.g) * a.N
                       : part + ((ch.row0 + t) * k.HK + k.h / k.cs) * a.N;
}

// A warp's (64, kN) tile of dB or dC: to the exchange tile (cs > 1) or to its rows of dB or dC.
template <class K>
__device__ __forceinline__ void put_tile(const Args& a, const BwdBlock& k, const BwdChunk& ch,
                                         const typename K::TileN::Acc& acc, float* xtile, float* full, float* part) {
  const typename K::TileN wn(k.warp & 3, k.warp >> 2);
  for_pairs_all(wn, [&](int s_, int hv, int t, int n) {
    if (k.cs > 1) {
      *reinterpret_cast<float2*>(xtile + t * K::ldX + n) = make_float2(acc[s_][2 * hv], acc[s_][2 * hv + 1]);
    } else if (t < ch.tc && n < a.N) {
      store_pair(out_row(a, k, ch, full, part, t) + n, acc[s_][2 * hv], acc[s_][2 * hv + 1], n + 1 < a.N);
    }
  });
}

// Phase 3a (cs > 1): rows [rank R, rank R + R) of the sums of dB and dC over the cluster's heads, out to dB, dC or
// the cluster's partial, up to 4 remote loads in flight. The order is one that does not depend on cs (so that
// the run-time choice of 2-head clusters in ssd_bwd_walk changes no bit): each pair of heads (2j, 2j + 1) added
// first, then the pairs into a sum from 0 in rank order (rank = h % cs: a cluster spans consecutive heads);
// with cs = 2 that is one pair, and group_sum adds the pairs in runs of the larger cluster's cs / 2. Opens with the cluster barrier (this block's exchange tiles written, every block's
// visible) and ends with an arrive (this block is done reading the others'); the kernel waits on it later.
template <class K>
__device__ __forceinline__ void cluster_sums(const Args& a, const BwdBlock& k, const BwdChunk& ch,
                                             const BwdTiles<K>& s) {
  __cluster_barrier_arrive();  // release: this block's exchange tiles are written
  __cluster_barrier_wait();    // acquire: every block's are
  const int rank = int(__clusterRelativeBlockRank()), R = kRows / k.cs;
  constexpr int kQ = K::kN / 4;
#pragma unroll 1
  for (int it = threadIdx.x; it < 2 * R * kQ; it += K::kThreads) {
    const int m = it / (R * kQ), rem = it % (R * kQ), t = rank * R + rem / kQ, n = 4 * (rem % kQ);
    float* src = (m == 0 ? s.xdB : s.xdC) + t * K::ldX + n;
    float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int k0 = 0; k0 < k.cs; k0 += 4) {
      float4 v[4];
#pragma unroll
      for (int u = 0; u < 4; ++u)
        if (k0 + u < k.cs) v[u] = *reinterpret_cast<const float4*>(__cluster_map_shared_rank(src, k0 + u));
#pragma unroll
      for (int u = 0; u < 4; u += 2)  // cs is even: the pair first, then into the sum
        if (k0 + u < k.cs) {
          sum.x += v[u].x + v[u + 1].x, sum.y += v[u].y + v[u + 1].y;
          sum.z += v[u].z + v[u + 1].z, sum.w += v[u].w + v[u + 1].w;
        }
    }
    if (t < ch.tc && n < a.N) {
      float* dst = out_row(a, k, ch, m == 0 ? a.dB : a.dC, m == 0 ? a.wsB : a.wsC, t) + n;
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

// Phase 3b, warp 0: c0 (the slots of phase 1a, scaled), then Σ_{i≥t} yoff_i into sdin and Σ_{j<t} sout_j into
// sdout (both free now; warp 0 only reads them): lane l takes steps 63 − 2l, 62 − 2l of the suffix and 2l,
// 2l + 1 of the prefix. Then e_t = c0 + E_t + Σ_{i≥t} yoff_i + Σ_{j<t} sout_j, dΔ_t = x_t·v_t + A e_t out, and
// this lane's share of dA_log's Σ_t Δ_t e_t.
template <class K>
__device__ __forceinline__ void ddelta_and_dA(const Args& a, const BwdBlock& k, const BwdChunk& ch, float c0_scale,
                                              const BwdTiles<K>& s, float& dA) {
  const int lane = k.lane;
  const float c0 = sum_slots<K::kWarps>(s.red) * c0_scale;
  const int sa = kRows - 1 - 2 * lane, pa = 2 * lane;
  const float y0 = partial_sum<K::kGroups>(s.syoff, kRows, sa), y1 = partial_sum<K::kGroups>(s.syoff, kRows, sa - 1);
  const float o0 = partial_sum<K::kGroups>(s.sout, kRows, pa), o1 = partial_sum<K::kGroups>(s.sout, kRows, pa + 1);
  const float yi = warp_inclusive_scan(y0 + y1), oi = warp_inclusive_scan(o0 + o1);
  float ye = __shfl_up_sync(kWarpMask, yi, 1), oe = __shfl_up_sync(kWarpMask, oi, 1);
  if (lane == 0) ye = 0.f, oe = 0.f;
  s.sdin[sa] = ye + y0, s.sdin[sa - 1] = yi;
  s.sdout[pa] = oe, s.sdout[pa + 1] = oe + o0;
  __syncwarp();
#pragma unroll
  for (int u = 0; u < 2; ++u) {
    const int t = pa + u;
    const float Et = partial_sum<K::kWarps>(s.sEp, kRows, t);  // the warps' slots in order
    const float e = c0 + Et + s.sdin[t] + s.sdout[t];
    if (t < ch.tc) {
      a.ddelta[(ch.row0 + t) * a.H + k.h] = partial_sum<K::kGroups>(s.sxv, kRows, t) + k.A * e;
      dA += s.sdt[t] * e;
    }
  }
}

// e^{cs_k − cs_0} in bf16 mode as mm16's column scale: 2^{u_k − u_0}, walk_decay's value for (k, 0), taken where
// the product reads it instead of from a tile of its own.
struct KDecayFrom0 {
  static constexpr bool kOn = true;
  const float* su;  // (64) log2(e) cs_t
  float u0;
  __device__ float operator()(int k) const { return ex2_approx(su[k] - u0); }
};

// Phase 3c: G_c = e^{cs_last − cs_0 + A Δ_next} G_{c+1} + dyᵀ diag(e^{cs − cs_0}) C, in registers.
template <class K>
__device__ __forceinline__ void adjoint_update(typename K::State::Acc& G, typename K::State::Tile ws, float decG,
                                               const BwdTiles<K>& s) {
#pragma unroll
  for (int s_ = 0; s_ < K::State::Tile::kS; ++s_)
#pragma unroll
    for (int e = 0; e < 4; ++e) G[s_][e] *= decG;
  if constexpr (K::kPacked)
    wmm<K::kMode, true, false>(G, s.sDY, K::ldP, s.sC, K::ldN, kRows, ws, KDecayFrom0{s.su, s.su[0]});
  else
    wmm<K::kMode, true, false>(G, s.sDY, K::ldP, s.sC, K::ldN, kRows, ws, KScale{s.sg0});
}

// kX16: x, B, C read in bf16 (SsdXbcBf16; bf16 mode only), as the forward walk's, and dy too (dy_bf16). kPipe
// (kX16, K::kPipeFits, Args::vec4): chunk c−1's x, B, C copied asynchronously while chunk c computes.
template <MmaMode kMode, int kP, int kN, int kGroups, bool kX16 = false, bool kPipe = false>
__global__ void __launch_bounds__(BwdShape<kMode, kP, kN, kGroups>::kThreads,
                                  BwdShape<kMode, kP, kN, kGroups>::kMinBlocks) bwd_walk_kernel(Args a) {
  static_assert(!kX16 || kMode == MmaMode::kBF16, "bf16 x, B, C in bf16 mode only");
  using K = BwdShape<kMode, kP, kN, kGroups>;
  static_assert(!kPipe || (kX16 && K::kPipeFits), "the pipelined walk: bf16 x, B, C and room for two buffers");
  extern __shared__ __align__(16) unsigned char smem[];
  const BwdBlock k = bwd_block(a);
  const auto ws = K::State::tile(threadIdx.x);  // G
  typename K::State::Acc G;
  zero(G);
  const size_t PN = size_t(a.P) * a.N;
  const float* states = state_at(a, a.states, k.b, k.h, 0);
  float dt_next = 0.f;  // Δ at the first step of the chunk after this one
  float dD = 0.f;       // this thread's share of dD over the walk
  float dA = 0.f;       // warp 0: this lane's share of Σ_t Δ_t e_t over the walk

  const BwdTiles<K> s(smem);
  if constexpr (kPipe) copy_xbc_async<K>(a, k, a.nchunks - 1, smem);
  for (int c = a.nchunks - 1; c >= 0; --c) {
    const BwdChunk ch = bwd_chunk(a, k, c, dt_next);
    stage_and_decay<K, kX16, kPipe>(a, k, ch, dt_next, states + size_t(c) * PN, s, smem);
    __syncthreads();
    // the second buffers were moved into the tiles (each thread its own pieces) before the barrier above
    if constexpr (kPipe)
      if (c > 0) copy_xbc_async<K>(a, k, c - 1, smem);
    const float dt_first = s.sdt[0];
    const float c0_scale = s.red[K::kWarps], decG = s.red[K::kWarps + 1];

    c0_and_dD_shares<K>(G, ws, ch.last, s, dD);
    if constexpr (kGroups == 2) cb_dx_e_two_groups<K>(k, s);
    else cb_dx_e_one_group<K>(k, s);
    __syncthreads();

    v_and_dx<K>(a, k, ch, s);
    {
      typename K::TileN::Acc db;
      db_tile<K>(db, k, ch, s);
      if (k.cs > 1) __syncthreads();  // x, G_{c+1}, CB are read: dB's exchange tile takes their place
      put_tile<K>(a, k, ch, db, s.xdB, a.dB, a.wsB);
    }
    {
      typename K::TileN::Acc dc;
      dc_tile<K>(dc, k, s);
      __syncthreads();  // B, S_c, DX are read (dC's exchange tile takes their place); the row sums are in
      put_tile<K>(a, k, ch, dc, s.xdC, a.dC, a.wsC);
    }

    if (k.cs > 1) cluster_sums<K>(a, k, ch, s);
    if (k.warp == 0) ddelta_and_dA<K>(a, k, ch, c0_scale, s, dA);
    adjoint_update<K>(G, ws, decG, s);
    // Every warp of this block is done with this step's tiles and scalars (the adjoint update above read dy, C
    // and e^{cs − cs_0}, which the next step's staging overwrites: the cluster barrier's arrive came before
    // it), and with clusters every block is done with this block's exchange tiles.
    __syncthreads();
    if (k.cs > 1) __cluster_barrier_wait();
    for_pairs_all(ws, [&](int s_, int hv, int p, int n) {
      st2(s.sG + p * K::ldN + n, G[s_][2 * hv], G[s_][2 * hv + 1]);
    });
    dt_next = dt_first;
  }
  if (a.dh0) {  // dh0 = a_0 G_0 from G's tile (dt_next is Δ_0 now); the registers' G is dead, so no pressure
    __syncthreads();
    const float a0 = expf(dt_next * k.A);
    float* out = a.dh0 + (size_t(k.b) * a.H + k.h) * PN;
    for (int i = threadIdx.x; i < a.P * a.N; i += K::kThreads)
      out[i] = a0 * ld1(s.sG + (i / a.N) * K::ldN + i % a.N);
  }

  // This (b, h)'s dA_log and dD partials (param_reduce adds them over b): ∂A/∂A_log = A.
  dA = warp_sum(dA);  // warp 0 holds the lanes' shares; the other warps' are 0
  dD = gpu::block_sum<K::kWarps>(dD, s.red);
  if (threadIdx.x == 0) {
    a.wsA[size_t(k.b) * a.H + k.h] = dA * k.A;
    a.wsD[size_t(k.b) * a.H + k.h] = dD;
  }
}

}  // namespace

// Heads a cluster for p on the current device: cluster_heads(H, G), or 2 where the GPU holds fewer than the
// launch's clusters of that size at once (a second round on a part-idle GPU: a cluster must fit in one GPC,
// and the H100's 132 SMs hold 62 of the 'S' walk's 64 clusters of 8, 30 of M's and L's 32) and all of its
// clusters of 2. The query is cached per device and shape (cudaOccupancyMaxActiveClusters costs a few µs).
int bwd_walk_max_clusters(const SsdParams& p, int cs);  // below

namespace {
std::atomic<int> g_forced_cluster_heads{0};
}  // namespace
int forced_cluster_heads() { return g_forced_cluster_heads.load(); }

static int bwd_cluster_heads(const SsdParams& p) {
  const int cs = cluster_heads(p.H, p.G), forced = forced_cluster_heads();
  if (forced != 0) {
    require(forced == cs || (forced == 2 && cs % 2 == 0),
            "ssd: a forced cluster size of the reverse walk must be the shape's (" + std::to_string(cs) +
                " heads) or 2 where that is even; got " + std::to_string(forced));
    return forced;
  }
  if (!kPairsWhereLargerTakeTwoRounds || cs <= 2) return cs;
  int dev = 0;
  MLALPHA_CUDA_CHECK(cudaGetDevice(&dev));
  const auto key = std::make_tuple(dev, int(make_layout(p).mode), p.B, p.H, p.G, p.P, p.N);
  static std::mutex mu;
  static std::map<decltype(key), int> chosen;
  const std::lock_guard<std::mutex> lock(mu);
  if (const auto it = chosen.find(key); it != chosen.end()) return it->second;
  const int clusters = p.B * (p.H / cs), pairs = p.B * (p.H / 2);
  const bool pair = bwd_walk_max_clusters(p, cs) < clusters && bwd_walk_max_clusters(p, 2) >= pairs;
  return chosen[key] = pair ? 2 : cs;
}

void ssd_bwd_walk(const SsdParams& p, const SsdInputs<float>& in, const SsdXbcBf16* xbc16, const float* saved,
                  const float* dy, const __nv_bfloat16* dy16, const SsdGrads<float>& g, float* workspace,
                  cudaStream_t stream, const SsdParamDefer* defer) {
  Args a = make_layout(p);
  set_inputs(a, in);
  require(!xbc16 || a.mode == MmaMode::kBF16, "ssd_bwd: bf16 x, B, C in bf16 precision only");
  require(!xbc16 == !dy16 && !(dy && dy16), "ssd_bwd: bf16 x, B, C come with bf16 dy alone (kX16: both or none)");
  if (xbc16) a.x16 = xbc16->x, a.B16 = xbc16->Bm, a.C16 = xbc16->Cm;
  a.h_last = nullptr, a.dh0 = g.dh0;  // h0 is read through the saved S_0
  // dy: the bf16 one's address where x, B, C are bf16 (Args::dy; the kX16 kernel reads it through dy_bf16)
  a.dy = xbc16 ? reinterpret_cast<const float*>(dy16) : dy;
  a.states = const_cast<float*>(saved);  // read only here
  a.dx = g.dx, a.ddelta = g.ddelta, a.dB = g.dB, a.dC = g.dC;
  a.cluster_heads = bwd_cluster_heads(p);
  // group_sum adds the pairs' partials in runs of the larger cluster's pairs, the order cluster_sums keeps.
  const int run = cluster_heads(p.H, p.G) / a.cluster_heads;
  const bool partials = !whole_groups(p.H, p.G, a.cluster_heads);
  const Workspace w = walk::workspace(p);
  require(!partials || w.partials, "ssd_bwd_walk: the scratch has no room for the clusters' partials");
  const bool deferred = defer && defer->batch;
  require(!deferred || defer->partials, "ssd_bwd: a deferred sum of dA_log, dD needs its partials region");
  const size_t bh = size_t(p.B) * p.H;
  // (B, H) each: the scratch's, or the caller's region that stays untouched until its batch runs
  a.wsA = deferred ? defer->partials : workspace + w.a, a.wsD = deferred ? defer->partials + bh : workspace + w.d;
  a.wsB = partials ? workspace + w.b : nullptr, a.wsC = partials ? workspace + w.c : nullptr;
  a.vec4 = xbc16 ? vec4_ok_xbc16(p, {a.x16, a.B16, a.C16, dy16, saved, g.dB, g.dC, workspace})
                 : vec4_ok(p, {in.x, in.Bm, in.Cm, dy, saved, g.dB, g.dC, workspace});
  with_walk_dims(a.P, a.N, [&](auto kp, auto kn) {
    constexpr int kP = decltype(kp)::value, kN = decltype(kn)::value;
    constexpr int kG16 = bwd_groups(MmaMode::kBF16, kP, kN), kG32 = bwd_groups(MmaMode::k3xTF32, kP, kN);
    using K16 = BwdShape<MmaMode::kBF16, kP, kN, kG16>;
    using K32 = BwdShape<MmaMode::k3xTF32, kP, kN, kG32>;  // tf32 mode: the same tiles and block
    const bool bf = a.mode == MmaMode::kBF16;
    // the pipelined walk where its second buffers fit (K16::kPipeFits: the 'M' head) and the copies are 16-byte
    const bool pipe = K16::kPipeFits && a.x16 && a.vec4;
    auto pick = [&](auto mode) {
      constexpr MmaMode m = decltype(mode)::value;
      if constexpr (m == MmaMode::kBF16) {
        if constexpr (K16::kPipeFits)
          if (pipe) return bwd_walk_kernel<m, kP, kN, bwd_groups(m, kP, kN), true, true>;
        if (a.x16) return bwd_walk_kernel<m, kP, kN, bwd_groups(m, kP, kN), true>;
      }
      return bwd_walk_kernel<m, kP, kN, bwd_groups(m, kP, kN)>;
    };
    const size_t bytes = bf ? (pipe ? K16::kPipeBytes : K16::kBytes) : K32::kBytes;
    launch_kernel(a, pick, dim3(a.H, a.B), bf ? K16::kThreads : K32::kThreads, bytes, stream,
                  dim3(a.cluster_heads, 1, 1));
  });
  const int rows = p.B * p.L;
  if (partials) group_sum(rows, p.H / a.cluster_heads, p.G, p.N, p.ld, run, a.wsB, a.wsC, g.dB, g.dC, stream);
  if (!deferred) return param_reduce(p.B, p.H, 1, a.wsA, a.wsD, g.dA_log, g.dD, stream, p.members, p.member_stride);
  // member m: its Bm = B / members rows of (B, H), summed into its dA_log, dD at m·member_stride
  const int Bm = p.B / p.members;
  for (int m = 0; m < p.members; ++m) {
    const size_t rows = size_t(m) * Bm * p.H, dw = size_t(m) * p.member_stride;
    defer->batch->add({a.wsA + rows, g.dA_log + dw, Bm, p.H, 0, ColsumOrder::kBlock512});
    defer->batch->add({a.wsD + rows, g.dD + dw, Bm, p.H, 0, ColsumOrder::kBlock512});
  }
}

int bwd_walk_max_clusters(const SsdParams& p, int cs) {
  const Args a = make_layout(p);
  int n = 0;
  with_walk_dims(a.P, a.N, [&](auto kp, auto kn) {
    constexpr int kP = decltype(kp)::value, kN = decltype(kn)::value;
    auto query = [&](auto mode) {
      constexpr MmaMode m = decltype(mode)::value;
      using K = BwdShape<m, kP, kN, bwd_groups(m, kP, kN)>;
      const auto kernel = bwd_walk_kernel<m, kP, kN, bwd_groups(m, kP, kN)>;
      MLALPHA_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(K::kBytes)));
      cudaLaunchConfig_t cfg{};
      cfg.gridDim = dim3(a.H, a.B), cfg.blockDim = dim3(K::kThreads), cfg.dynamicSmemBytes = K::kBytes;
      cudaLaunchAttribute attr{};
      attr.id = cudaLaunchAttributeClusterDimension;
      attr.val.clusterDim.x = unsigned(cs), attr.val.clusterDim.y = 1, attr.val.clusterDim.z = 1;
      cfg.attrs = &attr, cfg.numAttrs = 1;
      MLALPHA_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&n, reinterpret_cast<const void*>(kernel), &cfg));
    };
    switch (a.mode) {
      case MmaMode::k3xTF32: query(std::integral_constant<MmaMode, MmaMode::k3xTF32>{}); break;
      case MmaMode::kTF32: query(std::integral_constant<MmaMode, MmaMode::kTF32>{}); break;
      case MmaMode::kBF16: query(std::integral_constant<MmaMode, MmaMode::kBF16>{}); break;
    }
  });
  return n;
}

}  // namespace walk
}  // namespace ssd_detail
}  // namespace mlalpha::gpu

namespace mlalpha::gpu {
int ssd_walk_bwd_cluster_heads(const SsdParams& p) {
  require(ssd_detail::uses_walk(p), "ssd: the reverse walk's cluster size for a shape that does not run the walks");
  return ssd_detail::walk::bwd_cluster_heads(p);
}
void ssd_walk_bwd_force_cluster_heads(int cluster_heads) {
  require(cluster_heads == 0 || cluster_heads == 2 || cluster_heads == 4 || cluster_heads == 8,
          "ssd: the reverse walk's forced cluster size must be 0 (the run-time choice), 2, 4 or 8");
  ssd_detail::walk::g_forced_cluster_heads.store(cluster_heads);
}
int ssd_walk_bwd_max_active_clusters(const SsdParams& p, int cluster_heads) {
  require(ssd_detail::uses_walk(p), "ssd: the reverse walk's cluster query for a shape that does not run the walks");
  return ssd_detail::walk::bwd_walk_max_clusters(p, cluster_heads);
}
}  // namespace mlalpha::gpu
