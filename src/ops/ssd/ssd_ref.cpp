#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "ops/ssd/ssd.h"

namespace mlalpha::ref {

namespace {
// Index helpers for one (b, h): rows are b·L + t.
struct View {
  const SsdParams& p;
  int b, h, g;
  size_t row(int t) const { return (size_t(b) * p.L + t) * p.ld; }
  size_t xi(int t, int q) const { return row(t) + size_t(h) * p.P + q; }
  size_t bi(int t, int n) const { return row(t) + size_t(g) * p.N + n; }
  size_t yi(int t, int q) const { return ((size_t(b) * p.L + t) * p.H + h) * p.P + q; }
  size_t di(int t) const { return (size_t(b) * p.L + t) * p.H + h; }
};
int group_of(const SsdParams& p, int h) { return h * p.G / p.H; }
// A member-batched call (SsdParams::members): the offset of row b's member in A_log, Dskip, dA_log, dD.
size_t ref_member_offset(const SsdParams& p, int b) {
  return p.members > 1 ? size_t(b / (p.B / p.members)) * p.member_stride : 0;
}
// The carried state of (b, h) in a (B, H, P, N) tensor.
size_t state_at(const SsdParams& p, int b, int h) { return (size_t(b) * p.H + h) * p.P * p.N; }
// s ← h0 of (b, h), or zeros when no initial state is given (s_{−1}, ssd.h).
template <typename T>
void load_h0(const SsdParams& p, const SsdInputs<T>& in, int b, int h, std::vector<T>& s) {
  if (in.h0)
    std::copy(in.h0 + state_at(p, b, h), in.h0 + state_at(p, b, h) + s.size(), s.begin());
  else
    std::fill(s.begin(), s.end(), T(0));
}
template <typename T>
void store_h_last(const SsdParams& p, const SsdInputs<T>& in, int b, int h, const std::vector<T>& s) {
  if (in.h_last) std::copy(s.begin(), s.end(), in.h_last + state_at(p, b, h));
}
}  // namespace

template <typename T>
void ssd_fwd_recurrent(const SsdParams& p, const SsdInputs<T>& in, T* y) {
  const T *x = in.x, *delta = in.delta, *A_log = in.A_log, *Bm = in.Bm, *Cm = in.Cm, *Dskip = in.Dskip;
  std::vector<T> s(size_t(p.P) * p.N);
  for (int b = 0; b < p.B; ++b)
    for (int h = 0; h < p.H; ++h) {
      const View v{p, b, h, group_of(p, h)};
      const T A = -std::exp(A_log[ref_member_offset(p, b) + h]);
      load_h0(p, in, b, h, s);
      for (int t = 0; t < p.L; ++t) {
        const T dt = delta[v.di(t)], a = std::exp(dt * A);
        for (int q = 0; q < p.P; ++q) {
          const T dx = dt * x[v.xi(t, q)];
          T acc = 0;
          for (int n = 0; n < p.N; ++n) {
            T& sv = s[size_t(q) * p.N + n];
            sv = a * sv + dx * Bm[v.bi(t, n)];
            acc += sv * Cm[v.bi(t, n)];
          }
          y[v.yi(t, q)] = acc + Dskip[ref_member_offset(p, b) + h] * x[v.xi(t, q)];
        }
      }
      store_h_last(p, in, b, h, s);
    }
}

template <typename T>
void ssd_fwd_chunked(const SsdParams& p, const SsdInputs<T>& in, T* y) {
  const T *x = in.x, *delta = in.delta, *A_log = in.A_log, *Bm = in.Bm, *Cm = in.Cm, *Dskip = in.Dskip;
  std::vector<T> state(size_t(p.P) * p.N), chunk_state(size_t(p.P) * p.N), acum(p.Q);
  for (int b = 0; b < p.B; ++b)
    for (int h = 0; h < p.H; ++h) {
      const View v{p, b, h, group_of(p, h)};
      const T A = -std::exp(A_log[ref_member_offset(p, b) + h]);
      load_h0(p, in, b, h, state);  // state entering the chunk
      for (int c0 = 0; c0 < p.L; c0 += p.Q) {
        const int len = std::min(p.Q, p.L - c0);
        // chunk cumsum of ΔA
        T run = 0;
        for (int i = 0; i < len; ++i) acum[i] = run += delta[v.di(c0 + i)] * A;
        for (int i = 0; i < len; ++i) {
          const int t = c0 + i;
          // intra-chunk: Σ_{j≤i} (C_i·B_j) exp(acum_i − acum_j) Δ_j x_j
          for (int q = 0; q < p.P; ++q) y[v.yi(t, q)] = Dskip[ref_member_offset(p, b) + h] * x[v.xi(t, q)];
          for (int j = 0; j <= i; ++j) {
            T cb = 0;
            for (int n = 0; n < p.N; ++n) cb += Cm[v.bi(t, n)] * Bm[v.bi(c0 + j, n)];
            const T w = cb * std::exp(acum[i] - acum[j]) * delta[v.di(c0 + j)];
            for (int q = 0; q < p.P; ++q) y[v.yi(t, q)] += w * x[v.xi(c0 + j, q)];
          }
          // state → output: exp(acum_i) · (s_in C_i)
          const T decay_in = std::exp(acum[i]);
          for (int q = 0; q < p.P; ++q) {
            T acc = 0;
            for (int n = 0; n < p.N; ++n) acc += state[size_t(q) * p.N + n] * Cm[v.bi(t, n)];
            y[v.yi(t, q)] += decay_in * acc;
          }
        }
        // chunk state: Σ_j exp(acum_last − acum_j) Δ_j x_j B_jᵀ, then state passing
        std::fill(chunk_state.begin(), chunk_state.end(), T(0));
        for (int j = 0; j < len; ++j) {
          const T w = std::exp(acum[len - 1] - acum[j]) * delta[v.di(c0 + j)];
          for (int q = 0; q < p.P; ++q)
            for (int n = 0; n < p.N; ++n)
              chunk_state[size_t(q) * p.N + n] += w * x[v.xi(c0 + j, q)] * Bm[v.bi(c0 + j, n)];
        }
        const T decay_all = std::exp(acum[len - 1]);
        for (size_t k = 0; k < state.size(); ++k) state[k] = decay_all * state[k] + chunk_state[k];
      }
      store_h_last(p, in, b, h, state);
    }
}

template <typename T>
void ssd_bwd(const SsdParams& p, const SsdInputs<T>& in, const T* dy, const SsdGrads<T>& grads) {
  ssd_bwd<T>(p, in, dy, grads, nullptr);
}

template <typename T>
void ssd_bwd(const SsdParams& p, const SsdInputs<T>& in, const T* dy, const SsdGrads<T>& grads, T* dA_log_terms) {
  const T *x = in.x, *delta = in.delta, *A_log = in.A_log, *Bm = in.Bm, *Cm = in.Cm, *Dskip = in.Dskip;
  T *dx = grads.dx, *ddelta = grads.ddelta, *dA_log = grads.dA_log, *dB = grads.dB, *dC = grads.dC, *dD = grads.dD;
  const size_t PN = size_t(p.P) * p.N;
  const int nchunks = (p.L + p.Q - 1) / p.Q;
  // B and C are shared by the heads of a group: their gradients are sums, so start from zero.
  for (int r = 0; r < p.B * p.L; ++r)
    for (int k = 0; k < p.G * p.N; ++k) dB[size_t(r) * p.ld + k] = dC[size_t(r) * p.ld + k] = T(0);
  std::vector<T> starts(size_t(nchunks) * PN), buf(size_t(p.Q + 1) * PN), g(PN), vvec(p.P), s0(PN);
  for (int b = 0; b < p.B; ++b)
    for (int h = 0; h < p.H; ++h) {
      const View v{p, b, h, group_of(p, h)};
      const T A = -std::exp(A_log[ref_member_offset(p, b) + h]);
      // s_t for t = t0..t1−1 into buf[1..], buf[0] = state entering t0
      auto advance = [&](int t0, int t1) {
        for (int t = t0; t < t1; ++t) {
          const T dt = delta[v.di(t)], a = std::exp(dt * A);
          const T* prev = &buf[size_t(t - t0) * PN];
          T* cur = &buf[size_t(t - t0 + 1) * PN];
          for (int q = 0; q < p.P; ++q)
            for (int n = 0; n < p.N; ++n)
              cur[size_t(q) * p.N + n] = a * prev[size_t(q) * p.N + n] + dt * x[v.xi(t, q)] * Bm[v.bi(t, n)];
        }
      };
      // forward pass saving the state entering each chunk, from s_{−1} = h0
      load_h0(p, in, b, h, s0);
      std::copy(s0.begin(), s0.end(), buf.begin());
      for (int c = 0; c < nchunks; ++c) {
        const int t0 = c * p.Q, t1 = std::min(p.L, t0 + p.Q);
        std::copy(buf.begin(), buf.begin() + PN, starts.begin() + c * PN);
        advance(t0, t1);
        std::copy(buf.begin() + (t1 - t0) * PN, buf.begin() + (t1 - t0 + 1) * PN, buf.begin());
      }
      // reverse scan: g_t = dy_t C_tᵀ + a_{t+1} g_{t+1}
      std::fill(g.begin(), g.end(), T(0));
      T a_next = 0, dA = 0, dA_abs = 0, dDh = 0;
      for (int c = nchunks - 1; c >= 0; --c) {
        const int t0 = c * p.Q, t1 = std::min(p.L, t0 + p.Q);
        std::copy(starts.begin() + c * PN, starts.begin() + (c + 1) * PN, buf.begin());
        advance(t0, t1);
        for (int t = t1 - 1; t >= t0; --t) {
          const T dt = delta[v.di(t)], a = std::exp(dt * A);
          const T* s = &buf[size_t(t - t0 + 1) * PN];
          const T* sp = &buf[size_t(t - t0) * PN];
          T r = 0, dd = 0;
          for (int q = 0; q < p.P; ++q) {
            const T dyq = dy[v.yi(t, q)], xq = x[v.xi(t, q)];
            T vq = 0;
            for (int n = 0; n < p.N; ++n) {
              T& gv = g[size_t(q) * p.N + n];
              gv = a_next * gv + dyq * Cm[v.bi(t, n)];
              vq += gv * Bm[v.bi(t, n)];
              r += gv * sp[size_t(q) * p.N + n];
              dC[v.bi(t, n)] += s[size_t(q) * p.N + n] * dyq;
              dB[v.bi(t, n)] += gv * dt * xq;
            }
            dx[v.xi(t, q)] = dt * vq + Dskip[ref_member_offset(p, b) + h] * dyq;
            dd += xq * vq;
            dDh += dyq * xq;
          }
          ddelta[v.di(t)] = dd + A * a * r;
          dA += dt * a * r;
          dA_abs += std::abs(dt * a * r);
          a_next = a;
        }
      }
      dA_log[ref_member_offset(p, b) + h] += dA * A;  // A = −exp(A_log) ⇒ ∂A/∂A_log = A
      if (dA_log_terms) dA_log_terms[ref_member_offset(p, b) + h] += dA_abs * std::abs(A);
      dD[ref_member_offset(p, b) + h] += dDh;
      // s_0 = a_0 s_{−1} + …: the adjoint of h0 is a_0 g_0 (a_next and g now hold a_0 and g_0; 0 when L = 0)
      if (grads.dh0)
        for (size_t k = 0; k < PN; ++k) grads.dh0[state_at(p, b, h) + k] = a_next * g[k];
    }
}

#define MLALPHA_SSD_INSTANTIATE(T)                                           \
  template void ssd_fwd_recurrent<T>(const SsdParams&, const SsdInputs<T>&, T*); \
  template void ssd_fwd_chunked<T>(const SsdParams&, const SsdInputs<T>&, T*);   \
  template void ssd_bwd<T>(const SsdParams&, const SsdInputs<T>&, const T*, const SsdGrads<T>&);              \
  template void ssd_bwd<T>(const SsdParams&, const SsdInputs<T>&, const T*, const SsdGrads<T>&, T*);
MLALPHA_SSD_INSTANTIATE(float)
MLALPHA_SSD_INSTANTIATE(double)

}  // namespace mlalpha::ref
