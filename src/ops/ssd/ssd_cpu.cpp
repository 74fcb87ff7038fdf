// The chunked SSD on the CPU (ssd_cpu.h). Per chunk of T ≤ Q steps and head, with a = acum (inclusive
// cumsum of Δ·A), Xs = Δ ⊙ x (T, P), E_ij = e^{a_i − a_j} for j ≤ i else 0, Lm = (C·Bᵀ) ⊙ E:
//   Y = Lm·Xs + diag(e^{a})·C·S_inᵀ + D·x,     S_out = e^{a_T}·S_in + Xdᵀ·B,  Xd = diag(e^{a_T − a})·Xs
// and, given dY and dS_out (the adjoint of the state leaving the chunk), the backward:
//   dXs  = Lmᵀ·dY + diag(e^{a_T − a})·R,          R = B·dS_outᵀ (T, P)
//   dLm  = dY·Xsᵀ;  d(C·Bᵀ) = dLm ⊙ E  (summed over the group's heads; then dC += d(CBᵀ)·B and
//                                       dB += d(CBᵀ)ᵀ·C)
//   dC  += diag(e^{a})·dY·S_in;  dB += Xd·dS_out;  dS_in = e^{a_T}·dS_out + (diag(e^{a})·dY)ᵀ·C
//   da_i += Σ_j dLm_ij Lm_ij − Σ_j dLm_ji Lm_ji + e^{a_i} Σ_n (dY·S_in)_in C_in − w_i,
//   da_T += e^{a_T} ⟨dS_out, S_in⟩ + Σ_j w_j,      w_j = e^{a_T − a_j} Σ_p Xs_jp R_jp
//   then through a = cumsum(Δ·A): dΔ_i = Σ_p x_ip dXs_ip + A·Σ_{k≥i} da_k,  dA = Σ_i Δ_i Σ_{k≥i} da_k,
//   dx = Δ ⊙ dXs + D·dY,  dD = Σ dY ⊙ x,  dA_log = A·dA.
// An initial state h0 (ssd.h) is chunk 0's S_in, so chunk 0 takes the S_in terms like every later chunk, and
// its dS_in is dh0; without one, chunk 0 has no S_in and skips them (the bits of the op without a state).
#include "ops/ssd/ssd_cpu.h"

#include <algorithm>
#include <cmath>

#include "cpu/blas.h"
#include "cpu/simd.h"
#include "cpu/thread_pool.h"
#include "mlalpha/error.h"

MLALPHA_CPU_KERNELS_BEGIN
#include "cpu/vmath.h"

namespace mlalpha::cpu {

namespace {

// One worker's scratch, carved from a flat float buffer.
struct Scratch {
  float *CB, *E, *Lm, *dLm, *dCB;      // (Q, Q)
  float *acum, *da, *eT, *ea;          // (Q)
  float *Xs, *Xd, *dXs, *R, *dYs;      // (Q, P)
  float *Cs, *G1;                      // (Q, N)
  float *S, *dS;                       // (H, P, N): inference state / adjoint state per head
  // Rounded up to 64 bytes, so every worker's scratch has the same alignment: the same call on another
  // worker then sees the same addresses modulo the cache line (OpenBLAS's paths cannot differ by worker).
  static size_t floats(const SsdParams& p) {
    const size_t Q = p.Q, QQ = Q * Q;
    const size_t n = 5 * QQ + 4 * Q + 5 * Q * p.P + 2 * Q * p.N + 2 * size_t(p.H) * p.P * p.N;
    return (n + 15) / 16 * 16;
  }
  Scratch(const SsdParams& p, float* f) {
    const size_t Q = p.Q, QQ = Q * Q, QP = Q * p.P, QN = Q * p.N, HPN = size_t(p.H) * p.P * p.N;
    for (float** m : {&CB, &E, &Lm, &dLm, &dCB}) *m = f, f += QQ;
    for (float** m : {&acum, &da, &eT, &ea}) *m = f, f += Q;
    for (float** m : {&Xs, &Xd, &dXs, &R, &dYs}) *m = f, f += QP;
    for (float** m : {&Cs, &G1}) *m = f, f += QN;
    S = f, f += HPN;
    dS = f;
  }
};

// What one (batch, head, chunk) needs from the inputs.
struct ChunkView {
  const SsdParams& p;
  const SsdInputs<float>& in;
  int b, h, g, t0, T;
  size_t row(int i) const { return size_t(b) * p.L + t0 + i; }
  const float* x(int i) const { return in.x + row(i) * p.ld + size_t(h) * p.P; }
  float delta(int i) const { return in.delta[row(i) * p.H + h]; }
};

bool in_group(const SsdParams& p, int h, int g) { return h * p.G / p.H == g; }

// acum (T) = inclusive cumsum of Δ·A; Xs (T, P) = Δ ⊙ x; E (T, T, ld Q) = e^{a_i − a_j} (j ≤ i), 0 above;
// Lm = CB ⊙ E. Returns a_T = acum[T − 1].
float chunk_setup(const ChunkView& v, float A, const Scratch& s, int Q) {
  const int T = v.T, P = v.p.P;
  float run = 0.0f;
  for (int i = 0; i < T; ++i) s.acum[i] = run += v.delta(i) * A;
  for (int i = 0; i < T; ++i) {
    const float d = v.delta(i);
    const float* xi = v.x(i);
    float* xs = s.Xs + size_t(i) * P;
#pragma omp simd
    for (int q = 0; q < P; ++q) xs[q] = d * xi[q];
  }
  for (int i = 0; i < T; ++i) {
    float* e = s.E + size_t(i) * Q;
    float* lm = s.Lm + size_t(i) * Q;
    const float* cb = s.CB + size_t(i) * Q;
    const float ai = s.acum[i];
#pragma omp simd
    for (int j = 0; j <= i; ++j) {
      e[j] = vexp(ai - s.acum[j]);
      lm[j] = cb[j] * e[j];
    }
    for (int j = i + 1; j < T; ++j) e[j] = lm[j] = 0.0f;
  }
  return s.acum[T - 1];
}

}  // namespace

size_t ssd_scratch_floats(const SsdParams& p) { return Scratch::floats(p); }

size_t ssd_states_floats(const SsdParams& p) {
  const size_t nch = (p.L + p.Q - 1) / p.Q;
  return size_t(p.B) * p.H * nch * p.P * p.N;
}

void ssd_forward(ThreadPool& pool, const SsdParams& p, const SsdInputs<float>& in, float* y, float* states,
                 float* scratch) {
  // Checked without building the message unless it fails: the CPU step allocates nothing (test_model_cpu).
  if (p.members != 1) throw Error("ssd (cpu): a member-batched call (SsdParams::members > 1) is a GPU op");
  const int Q = p.Q, P = p.P, N = p.N, ld = p.ld, ldy = p.H * p.P, nch = (p.L + Q - 1) / Q;
  const size_t PN = size_t(P) * N;
  pool.run(p.B * p.G, [&](int task, int worker) {
    const int b = task / p.G, g = task % p.G;
    const Scratch s(p, scratch + size_t(worker) * Scratch::floats(p));
    if (nch == 0 && in.h_last)  // no step: the final state is the initial one
      for (int h = 0; h < p.H; ++h)
        if (in_group(p, h, g)) {
          float* dst = in.h_last + (size_t(b) * p.H + h) * PN;
          if (in.h0) {
            const float* src = in.h0 + (size_t(b) * p.H + h) * PN;
            if (src != dst) std::copy(src, src + PN, dst);
          } else
            std::fill(dst, dst + PN, 0.0f);
        }
    for (int c = 0; c < nch; ++c) {
      const int t0 = c * Q, T = std::min(Q, p.L - t0);
      const size_t r0 = size_t(b) * p.L + t0;
      const float* Bc = in.Bm + r0 * ld + size_t(g) * N;
      const float* Cc = in.Cm + r0 * ld + size_t(g) * N;
      sgemm(Op::N, Op::T, T, T, N, 1.0f, Cc, ld, Bc, ld, 0.0f, s.CB, Q);  // CB_ij = C_i · B_j
      for (int h = 0; h < p.H; ++h) {
        if (!in_group(p, h, g)) continue;
        const ChunkView v{p, in, b, h, g, t0, T};
        const float A = -std::exp(in.A_log[h]), Dh = in.Dskip[h];
        const size_t hb = size_t(b) * p.H + h;  // the (b, h) slot of h0 and h_last (B, H, P, N)
        float* S_in = states ? states + (hb * nch + c) * PN : s.S + size_t(h) * PN;
        // With an initial state, chunk 0 is entered with S_in = h0 and takes the state terms like any other.
        const bool has_in = c > 0 || in.h0;
        if (c == 0 && in.h0) std::copy(in.h0 + hb * PN, in.h0 + (hb + 1) * PN, S_in);
        const float aT = chunk_setup(v, A, s, Q);
        float* yh = y + r0 * ldy + size_t(h) * P;
        sgemm(Op::N, Op::N, T, P, T, 1.0f, s.Lm, Q, s.Xs, P, 0.0f, yh, ldy);  // intra-chunk
        if (has_in) {                                                          // state → output
          for (int i = 0; i < T; ++i) {
            const float ea = vexp(s.acum[i]);
            const float* ci = Cc + size_t(i) * ld;
            float* cs = s.Cs + size_t(i) * N;
#pragma omp simd
            for (int n = 0; n < N; ++n) cs[n] = ea * ci[n];
          }
          sgemm(Op::N, Op::T, T, P, N, 1.0f, s.Cs, N, S_in, N, 1.0f, yh, ldy);
        }
        for (int i = 0; i < T; ++i) {
          const float* xi = v.x(i);
          float* yi = yh + size_t(i) * ldy;
#pragma omp simd
          for (int q = 0; q < P; ++q) yi[q] += Dh * xi[q];
        }
        const bool final_chunk = c + 1 == nch;
        if (final_chunk && !in.h_last) continue;  // the state after the last chunk is not needed
        for (int j = 0; j < T; ++j) {
          const float e = vexp(aT - s.acum[j]);
          const float* xs = s.Xs + size_t(j) * P;
          float* xd = s.Xd + size_t(j) * P;
#pragma omp simd
          for (int q = 0; q < P; ++q) xd[q] = e * xs[q];
        }
        // slot c + 1, or the running state in place; after the last chunk, the final state s_{L−1}
        float* S_next = final_chunk ? in.h_last + hb * PN : states ? S_in + PN : S_in;
        if (!has_in) {
          sgemm(Op::T, Op::N, P, N, T, 1.0f, s.Xd, P, Bc, ld, 0.0f, S_next, N);
        } else {
          const float decay = vexp(aT);
#pragma omp simd
          for (size_t k = 0; k < PN; ++k) S_next[k] = decay * S_in[k];
          sgemm(Op::T, Op::N, P, N, T, 1.0f, s.Xd, P, Bc, ld, 1.0f, S_next, N);
        }
      }
    }
  });
}

void ssd_backward(ThreadPool& pool, const SsdParams& p, const SsdInputs<float>& in, const float* states,
                  const float* dy, const SsdGrads<float>& gr, float* dA_log_part, float* dD_part, float* scratch) {
  // Checked without building the message unless it fails: the CPU step allocates nothing (test_model_cpu).
  if (p.members != 1) throw Error("ssd (cpu): a member-batched call (SsdParams::members > 1) is a GPU op");
  const int Q = p.Q, P = p.P, N = p.N, ld = p.ld, ldy = p.H * p.P, nch = (p.L + Q - 1) / Q;
  const size_t PN = size_t(P) * N;
  pool.run(p.B * p.G, [&](int task, int worker) {
    const int b = task / p.G, g = task % p.G;
    const Scratch s(p, scratch + size_t(worker) * Scratch::floats(p));
    for (int t = 0; t < p.L; ++t) {
      const size_t r = size_t(b) * p.L + t;
      std::fill(gr.dB + r * ld + size_t(g) * N, gr.dB + r * ld + size_t(g + 1) * N, 0.0f);
      std::fill(gr.dC + r * ld + size_t(g) * N, gr.dC + r * ld + size_t(g + 1) * N, 0.0f);
    }
    for (int h = 0; h < p.H; ++h)
      if (in_group(p, h, g)) {
        std::fill(s.dS + size_t(h) * PN, s.dS + size_t(h + 1) * PN, 0.0f);
        dA_log_part[size_t(b) * p.H + h] = 0.0f;
        dD_part[size_t(b) * p.H + h] = 0.0f;
        if (gr.dh0 && nch == 0)  // no step: h0 reaches nothing
          std::fill(gr.dh0 + (size_t(b) * p.H + h) * PN, gr.dh0 + (size_t(b) * p.H + h + 1) * PN, 0.0f);
      }
    for (int c = nch - 1; c >= 0; --c) {
      const int t0 = c * Q, T = std::min(Q, p.L - t0);
      const bool last = c + 1 == nch;
      const size_t r0 = size_t(b) * p.L + t0;
      const float* Bc = in.Bm + r0 * ld + size_t(g) * N;
      const float* Cc = in.Cm + r0 * ld + size_t(g) * N;
      float* dBc = gr.dB + r0 * ld + size_t(g) * N;
      float* dCc = gr.dC + r0 * ld + size_t(g) * N;
      sgemm(Op::N, Op::T, T, T, N, 1.0f, Cc, ld, Bc, ld, 0.0f, s.CB, Q);
      std::fill(s.dCB, s.dCB + size_t(Q) * Q, 0.0f);
      for (int h = 0; h < p.H; ++h) {
        if (!in_group(p, h, g)) continue;
        const ChunkView v{p, in, b, h, g, t0, T};
        const float A = -std::exp(in.A_log[h]), Dh = in.Dskip[h];
        // The state entering chunk c (chunk 0: h0, which ssd_forward saved in slot 0; none when it is zero).
        const float* S_in = c > 0 || in.h0 ? states + ((size_t(b) * p.H + h) * nch + c) * PN : nullptr;
        // Whether the adjoint of that state is needed: for chunk c − 1, or as dh0.
        const bool pass_back = c > 0 || gr.dh0;
        float* dSo = s.dS + size_t(h) * PN;  // adjoint of the state leaving chunk c
        const float aT = chunk_setup(v, A, s, Q);
        const float* dYh = dy + r0 * ldy + size_t(h) * P;
        std::fill(s.da, s.da + T, 0.0f);
        sgemm(Op::T, Op::N, T, P, T, 1.0f, s.Lm, Q, dYh, ldy, 0.0f, s.dXs, P);  // dXs = Lmᵀ·dY
        if (!last) {
          sgemm(Op::N, Op::T, T, P, N, 1.0f, Bc, ld, dSo, N, 0.0f, s.R, P);  // R = B·dS_outᵀ
          float wsum = 0.0f;
          for (int j = 0; j < T; ++j) {
            const float e = vexp(aT - s.acum[j]);
            const float *xs = s.Xs + size_t(j) * P, *rj = s.R + size_t(j) * P;
            float *dxs = s.dXs + size_t(j) * P, *xd = s.Xd + size_t(j) * P;
            float w = 0.0f;
#pragma omp simd reduction(+ : w)
            for (int q = 0; q < P; ++q) {
              dxs[q] += e * rj[q];
              xd[q] = e * xs[q];
              w += xs[q] * rj[q];
            }
            w *= e;
            s.da[j] -= w;
            wsum += w;
          }
          sgemm(Op::N, Op::N, T, N, P, 1.0f, s.Xd, P, dSo, N, 1.0f, dBc, ld);  // dB += Xd·dS_out
          float dot = 0.0f;
          if (S_in) {
#pragma omp simd reduction(+ : dot)
            for (size_t k = 0; k < PN; ++k) dot += dSo[k] * S_in[k];
          }
          s.da[T - 1] += wsum + vexp(aT) * dot;
        }
        sgemm(Op::N, Op::T, T, T, P, 1.0f, dYh, ldy, s.Xs, P, 0.0f, s.dLm, Q);  // dLm = dY·Xsᵀ
        for (int i = 0; i < T; ++i) {
          const float *dl = s.dLm + size_t(i) * Q, *lm = s.Lm + size_t(i) * Q, *e = s.E + size_t(i) * Q;
          float* dcb = s.dCB + size_t(i) * Q;
          float row = 0.0f;
          for (int j = 0; j <= i; ++j) {  // the column sums make this loop a scatter: left scalar
            const float t = dl[j] * lm[j];
            row += t;
            s.da[j] -= t;
            dcb[j] += dl[j] * e[j];
          }
          s.da[i] += row;
        }
        if (S_in) sgemm(Op::N, Op::N, T, N, P, 1.0f, dYh, ldy, S_in, N, 0.0f, s.G1, N);  // G1 = dY·S_in
        if (S_in || pass_back)
          for (int i = 0; i < T; ++i) {
            const float ea = vexp(s.acum[i]);
            if (S_in) {
              const float* g1 = s.G1 + size_t(i) * N;
              const float* ci = Cc + size_t(i) * ld;
              float* dci = dCc + size_t(i) * ld;
              float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
              for (int n = 0; n < N; ++n) {
                dot += g1[n] * ci[n];
                dci[n] += ea * g1[n];
              }
              s.da[i] += ea * dot;
            }
            if (pass_back) {
              const float* dyi = dYh + size_t(i) * ldy;
              float* dys = s.dYs + size_t(i) * P;
#pragma omp simd
              for (int q = 0; q < P; ++q) dys[q] = ea * dyi[q];
            }
          }
        if (pass_back) {
          const float decay = vexp(aT);
#pragma omp simd
          for (size_t k = 0; k < PN; ++k) dSo[k] *= decay;
          sgemm(Op::T, Op::N, P, N, T, 1.0f, s.dYs, P, Cc, ld, 1.0f, dSo, N);  // now dS_in, for chunk c − 1
          if (c == 0 && gr.dh0) std::copy(dSo, dSo + PN, gr.dh0 + (size_t(b) * p.H + h) * PN);  // dS_in = dh0
        }
        // through Xs = Δ ⊙ x, a = cumsum(Δ·A), and the skip D·x
        float run = 0.0f, dA = 0.0f, dD = 0.0f;
        for (int i = T - 1; i >= 0; --i) {
          run += s.da[i];
          const float d = v.delta(i);
          const float *xi = v.x(i), *dyi = dYh + size_t(i) * ldy, *dxs = s.dXs + size_t(i) * P;
          float* dxi = gr.dx + v.row(i) * ld + size_t(h) * P;
          float dd = 0.0f, ddD = 0.0f;
#pragma omp simd reduction(+ : dd, ddD)
          for (int q = 0; q < P; ++q) {
            dxi[q] = d * dxs[q] + Dh * dyi[q];
            dd += xi[q] * dxs[q];
            ddD += dyi[q] * xi[q];
          }
          gr.ddelta[v.row(i) * p.H + h] = dd + A * run;
          dA += d * run;
          dD += ddD;
        }
        dA_log_part[size_t(b) * p.H + h] += dA * A;
        dD_part[size_t(b) * p.H + h] += dD;
      }
      sgemm(Op::N, Op::N, T, N, T, 1.0f, s.dCB, Q, Bc, ld, 1.0f, dCc, ld);  // dC += d(CBᵀ)·B
      sgemm(Op::T, Op::N, T, N, T, 1.0f, s.dCB, Q, Cc, ld, 1.0f, dBc, ld);  // dB += d(CBᵀ)ᵀ·C
    }
  });
}

}  // namespace mlalpha::cpu
MLALPHA_CPU_KERNELS_END
