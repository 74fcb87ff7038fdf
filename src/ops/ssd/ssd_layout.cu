// Host side shared by the SSD kernels: shape validation, the chunk length, shared-memory sizes and the
// buffer sizes.
#include "ops/ssd/ssd_common.cuh"
#include "ops/ssd/ssd_walk.cuh"

namespace mlalpha::gpu {
namespace ssd_detail {
namespace {

// Tiles of T steps (row strides tile_ld), a (P, N) state tile, `scalars` per-step float arrays and the
// per-step cs_t in double (placed first: alignment).
size_t tiles_bytes(int T, int N, int P, int n_rows_N, int n_rows_P, int n_TT, int states, int scalars, int warps) {
  const size_t Ts = size_t(scalar_stride(T));
  const size_t floats = size_t(n_rows_N) * T * tile_ld(N) + size_t(n_rows_P) * T * tile_ld(P) +
                        size_t(n_TT) * T * tile_ld(T) + size_t(states) * P * tile_ld(N) +
                        size_t(scalars) * Ts + warps;  // + one block-sum slot per warp
  return Ts * sizeof(double) + floats * sizeof(float);
}
// Per-step scalars: Δ, dec_in, dec_out, the row-sum partials of yoff, sout and x·v (one per column warp),
// Σ_{i≥t} Σ_{j<t} W[i, j]. One (P, N) state tile, or two when S_in has its own (Args::sin_own).
size_t bwd_bytes(int T, int N, int P, bool sin_own = false) {
  const int col_warps = kBwdWarps / kRowWarps;
  return tiles_bytes(T, N, P, 2, 2, 2, sin_own ? 2 : 1, 4 + 3 * col_warps, kBwdWarps);
}
// Backward blocks that fit an SM's shared memory (sm_90: 228 KiB, 1 KiB of it reserved per block), at
// most the two of the kernel's launch bounds. A constant of the target, not a query: the layout, and with
// it the results, depend on the shape only.
int bwd_blocks_per_sm(size_t bytes) {
  if (bytes > size_t(kSmemLimitBytes)) return 0;
  return std::min(2, int((228 * 1024) / (bytes + 1024)));
}

}  // namespace

void validate(const SsdParams& p) {
  require(p.B >= 0 && p.L >= 0, "ssd: B and L must be >= 0, got B=" + std::to_string(p.B) + " L=" + std::to_string(p.L));
  require(p.H >= 1 && p.P >= 1 && p.G >= 1 && p.N >= 1 && p.Q >= 1,
          "ssd: H, P, G, N, Q must be >= 1, got H=" + std::to_string(p.H) + " P=" + std::to_string(p.P) +
              " G=" + std::to_string(p.G) + " N=" + std::to_string(p.N) + " Q=" + std::to_string(p.Q));
  require(p.ld >= p.H * p.P && p.ld >= p.G * p.N,
          "ssd: ld=" + std::to_string(p.ld) + " must be >= H*P=" + std::to_string(p.H * p.P) +
              " and >= G*N=" + std::to_string(p.G * p.N));
  require(p.B <= 65535 && p.H <= 65535, "ssd (gpu): B and H must be <= 65535 (grid dimensions)");
  if (p.members < 1 || p.members > 65535 || p.B % p.members != 0)
    throw Error("ssd (gpu): members must be in [1, 65535] and divide B (each member's windows), got members=" +
                std::to_string(p.members) + " B=" + std::to_string(p.B));
  if (p.members > 1 && p.member_stride < size_t(p.H))
    throw Error("ssd (gpu): member_stride=" + std::to_string(p.member_stride) + " must be >= H=" +
                std::to_string(p.H) + " (the members' A_log, Dskip, dA_log, dD would overlap)");
  const int T = std::min(p.Q, kMinChunk);
  require(bwd_bytes(T, p.N, p.P) <= size_t(kSmemLimitBytes),
          "ssd (gpu): P=" + std::to_string(p.P) + " with N=" + std::to_string(p.N) +
              " is unsupported: the backward keeps a head's P x N state and chunk tiles in shared memory (" +
              std::to_string(bwd_bytes(T, p.N, p.P) / 1024) + " KiB at the shortest chunk, the limit is " +
              std::to_string(kSmemLimitBytes / 1024) + " KiB); P*N up to about 48K fits");
}

Args make_layout(const SsdParams& p) {
  Args a{};
  a.B = p.B, a.L = p.L, a.H = p.H, a.P = p.P, a.G = p.G, a.N = p.N, a.ld = p.ld;
  a.member_B = p.members > 1 ? p.B / p.members : std::max(p.B, 1);
  a.member_stride = p.members > 1 ? p.member_stride : 0;
  int T = std::min(p.Q, kMaxChunk);
  while (T > kMinChunk && bwd_bytes(T, p.N, p.P) > size_t(kSmemLimitBytes)) T = (T + 1) / 2;
  a.T = T;
  a.Ts = scalar_stride(T);
  a.mode = p.precision == Precision::TF32   ? MmaMode::kTF32
           : p.precision == Precision::BF16 ? MmaMode::kBF16
                                            : MmaMode::k3xTF32;
  a.nchunks = ceil_div(p.L, T);
  a.ldN = tile_ld(p.N), a.ldP = tile_ld(p.P), a.ldT = tile_ld(T);
  // S_in's own tile lets its copy overlap the first half of the backward (and Σ G·S_in come from shared
  // memory), unless the extra tile would cost a block per SM (the 'S' shape: two blocks fit only without it).
  a.sin_own = bwd_blocks_per_sm(bwd_bytes(T, p.N, p.P, true)) == bwd_blocks_per_sm(bwd_bytes(T, p.N, p.P));
  a.cluster_heads = 1;
  // The chunk-state walks are sequential over chunks: one (b, h) walks nchunks − 1 steps one after the
  // other. Long sequences split the walk into segments of kSegSteps that run side by side (ssd_chunks.cu);
  // the rule depends on the shape only, so the results do too. Below kSegFrom chunks a single walk is
  // short enough (and the model's S, M, L shapes keep their bits).
  constexpr int kSegFrom = 64, kSegSteps = 32;
  const int steps = a.nchunks - 1;
  a.seg_steps = a.nchunks > kSegFrom ? kSegSteps : std::max(steps, 1);
  a.nseg = std::max(1, ceil_div(steps, a.seg_steps));
  require(int64_t(a.B) * a.nseg <= 65535,
          "ssd (gpu): B · ceil((L/Q − 1) / 32) must be <= 65535 (the grid of the chunk-state walks), got B=" +
              std::to_string(a.B) + " with " + std::to_string(a.nseg) + " segments of L=" + std::to_string(a.L));
  return a;
}

// C, X, the (T, T) tile and S_in (ssd_fwd.cu). The forward and ssd_chunks.cu run the default 8-warp
// blocks, as kThreads is here; the backward kBwdWarps.
size_t fwd_smem_bytes(const Args& a) { return tiles_bytes(a.T, a.N, a.P, 1, 1, 1, 1, 2, kThreads / 32); }
size_t bwd_smem_bytes(const Args& a) { return bwd_bytes(a.T, a.N, a.P, a.sin_own); }
// Two buffers (this chunk and the next one's prefetch) of a (T, ≤ 64) slice of x or dy and a
// (T, ≤ kStateCols) slice of B or C (ssd_chunks.cu).
size_t states_smem_bytes(const Args& a) {
  const int np = std::min(kTile, a.P), nn = std::min(kStateCols, a.N);
  return tiles_bytes(a.T, nn, np, 0, 0, 0, 0, 2, 0) +
         2 * size_t(a.T) * (tile_ld_kn(np) + tile_ld_kn(nn)) * sizeof(float);
}

namespace {
size_t round4(size_t n) { return (n + 3) / 4 * 4; }  // regions start 16-byte aligned (quad loads)
}  // namespace

size_t saved_cb_offset(const Args& a) {
  return round4(size_t(a.B) * a.H * a.nchunks * a.P * a.N);
}
size_t saved_e_offset(const Args& a) { return saved_cb_offset(a) + round4(size_t(a.B) * a.nchunks * a.G * a.T * a.T); }
size_t walk_exponent_floats(const Args& a) {
  return a.nseg > 1 ? size_t(a.B) * a.H * size_t(a.nchunks - 1) : 0;
}

// The backward's scratch (ssd_bwd.cu): per-head DX diag(Δ) tiles (B, nchunks, H, T, T), G (B, H, nchunks,
// P, N), per-head (per-pair) dB, dC partials (B, L, H, N) each, the per-(b, h, chunk) partials of dA_log
// and dD, and the segmented adjoint walk's exponents (wsE).
BwdWorkspace bwd_workspace(const Args& a) {
  const size_t rows = size_t(a.B) * a.L, blocks = size_t(a.B) * a.H * a.nchunks;
  BwdWorkspace w{};
  w.dx = 0;
  w.g = w.dx + round4(blocks * a.T * a.T);
  w.b = w.g + round4(blocks * a.P * a.N);
  w.c = w.b + round4(rows * a.H * a.N);
  w.a = w.c + round4(rows * a.H * a.N);
  w.d = w.a + round4(blocks);
  w.e = w.d + round4(blocks);
  w.total = w.e + walk_exponent_floats(a);
  return w;
}

namespace walk {

bool walk_shape(const SsdParams& p, int T) { return p.P <= 64 && p.N <= 128 && ceil_div(p.L, T) <= kMaxWalkChunks; }

int cluster_heads(int H, int G) {
  if (H % G != 0) return 1;
  for (const int cs : {8, 4, 2})
    if ((H / G) % cs == 0) return cs;
  return 1;
}

Workspace workspace(const SsdParams& p) {
  Workspace w{};
  const size_t bh = size_t(p.B) * p.H;
  // The smallest cluster the walk may take at run time (ssd_bwd_walk: 2 heads where the largest do not fit in
  // one round), so the size depends on the shape alone.
  const bool pairs = kPairsWhereLargerTakeTwoRounds || forced_cluster_heads() == 2;
  const int cs = pairs && cluster_heads(p.H, p.G) > 2 ? 2 : cluster_heads(p.H, p.G);
  w.partials = !whole_groups(p.H, p.G, cs);
  w.a = 0;
  w.d = w.a + round4(bh);
  w.b = w.d + round4(bh);
  const size_t part = w.partials ? round4(size_t(p.B) * p.L * (p.H / cs) * p.N) : 0;
  w.c = w.b + part;
  w.total = w.c + part;
  return w;
}

bool vec4_ok_xbc16(const SsdParams& p, std::initializer_list<const void*> rows) {
  return vec4_ok(p, rows) && p.ld % 8 == 0 && p.P % 8 == 0 && p.N % 8 == 0;
}

bool vec4_ok(const SsdParams& p, std::initializer_list<const void*> rows) {
  bool ok = p.ld % 4 == 0 && p.P % 4 == 0 && p.N % 4 == 0;
  for (const void* r : rows) ok = ok && (reinterpret_cast<uintptr_t>(r) & 15) == 0;
  return ok;
}

}  // namespace walk

// kAuto: the walks in bf16 mode only. In fp32 and tf32 mode their fp32 tiles take twice the shared memory (one
// block an SM for the 'S' and 'M' reverse walks) and the chunk-parallel kernels were faster (H200, 2026-12-02,
// ml-alpha-ssd-bench: S fp32 backward 246 µs chunk-parallel against 543 walking; docs/benchmarks.md).
void require_xbc16(const SsdParams& p, const SsdInputs<float>& in, const SsdXbcBf16& xbc, const char* op) {
  require(uses_walk(p), std::string(op) + ": bf16 x, B, C are read by the walks only (gpu::ssd_uses_walk)");
  require(xbc.x && xbc.Bm && xbc.Cm, std::string(op) + ": a bf16 x, B or C pointer is null");
  require(!in.x && !in.Bm && !in.Cm, std::string(op) + ": fp32 x, B, C given beside the bf16 ones");
}

bool uses_walk(const SsdParams& p) {
  validate(p);
  if (p.algo == SsdAlgo::kChunked) return false;
  const bool fits = walk::walk_shape(p, make_layout(p).T);
  require(fits || p.algo != SsdAlgo::kWalk,
          "ssd (gpu): the chunk walks (SsdAlgo::kWalk) take P <= 64, N <= 128 and at most " +
              std::to_string(walk::kMaxWalkChunks) + " chunks, got P=" + std::to_string(p.P) +
              " N=" + std::to_string(p.N) + " L=" + std::to_string(p.L));
  return fits && (p.algo == SsdAlgo::kWalk || p.precision == Precision::BF16);
}

}  // namespace ssd_detail

bool ssd_uses_walk(const SsdParams& p) { return ssd_detail::uses_walk(p); }

int ssd_chunk_len(const SsdParams& p) {
  ssd_detail::validate(p);
  return ssd_detail::make_layout(p).T;
}

size_t ssd_chunk_states_floats(const SsdParams& p) {
  const size_t nchunks = size_t(ssd_detail::ceil_div(p.L, ssd_chunk_len(p)));
  return size_t(p.B) * p.H * nchunks * p.P * p.N;
}

size_t ssd_saved_floats(const SsdParams& p) {
  if (ssd_detail::uses_walk(p)) return ssd_chunk_states_floats(p);  // validates
  const ssd_detail::Args a = ssd_detail::make_layout(p);
  return ssd_detail::saved_e_offset(a) + ssd_detail::walk_exponent_floats(a);
}

size_t ssd_bwd_workspace_floats(const SsdParams& p) {
  if (ssd_detail::uses_walk(p)) return ssd_detail::walk::workspace(p).total;  // validates
  return ssd_detail::bwd_workspace(ssd_detail::make_layout(p)).total;
}

}  // namespace mlalpha::gpu
