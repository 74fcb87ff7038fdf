// Host side shared by the SSD kernels: shape validation, the thread layout and the buffer sizes.
#include "ops/ssd/ssd_common.cuh"

namespace mlalpha::gpu {
namespace ssd_detail {
namespace {
int pow2_ceil(int v) {
  int r = 1;
  while (r < v) r <<= 1;
  return r;
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
  require(p.N <= kMaxN, "ssd (gpu): N=" + std::to_string(p.N) + " is unsupported (N <= 256: the state lives in "
                        "registers, N/32 values per lane)");
}

Args make_layout(const SsdParams& p) {
  Args a{};
  a.B = p.B, a.L = p.L, a.H = p.H, a.P = p.P, a.G = p.G, a.N = p.N, a.Q = p.Q, a.ld = p.ld;
  a.nchunks = ceil_div(p.L, p.Q);
  // ~8 n values a lane: fewer shuffle levels per row reduction than one n a lane (shuffles dominate).
  a.NL = std::min(32, pow2_ceil(ceil_div(p.N, 8)));
  const int npt = pow2_ceil(ceil_div(p.N, a.NL));
  a.NS = a.NL * npt;
  a.PL = 32 / a.NL;
  int rp = 1;
  while (rp <= kMaxRp && ceil_div(p.P, a.PL * rp) > kMaxWarps) rp <<= 1;
  require(rp <= kMaxRp, "ssd (gpu): P=" + std::to_string(p.P) + " with N=" + std::to_string(p.N) +
                            " is unsupported (P <= " + std::to_string(kMaxWarps * kMaxRp * a.PL) +
                            ": one block holds a head's P x N state in registers)");
  a.W = ceil_div(p.P, a.PL * rp);
  a.PT = a.W * a.PL * rp;
  return a;
}
}  // namespace ssd_detail

size_t ssd_chunk_states_floats(const SsdParams& p) {
  const size_t nchunks = p.Q > 0 ? size_t((p.L + p.Q - 1) / p.Q) : 0;
  return size_t(p.B) * p.H * nchunks * p.P * p.N;
}

// Workspace layout (ssd_bwd.cu): z (B, L, H) and G (B, H, nchunks, P, N) in Acc first (8-byte aligned), then
// per-head dB, dC (B, L, H, N) each, then the per-(b, h, chunk) partials of dA_log and dD.
size_t ssd_bwd_workspace_floats(const SsdParams& p) {
  using ssd_detail::Acc;
  const size_t rows = size_t(p.B) * p.L, per_acc = sizeof(Acc) / sizeof(float);
  const size_t nchunks = p.Q > 0 ? size_t((p.L + p.Q - 1) / p.Q) : 0;
  return rows * p.H * per_acc + ssd_chunk_states_floats(p) * per_acc + 2 * rows * p.H * p.N +
         2 * size_t(p.B) * p.H * nchunks;
}

}  // namespace mlalpha::gpu
