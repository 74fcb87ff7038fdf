#include "ops/linear/linear.h"

#include <cstddef>

namespace mlalpha::ref {

template <typename T>
void linear_fwd(const LinearParams& p, const LinearInputs<T>& in, T* y) {
  const T *x = in.x, *w = in.w, *b = in.b;
  for (int m = 0; m < p.M; ++m)
    for (int o = 0; o < p.OUT; ++o) {
      T acc = b ? b[o] : T(0);
      const T* xr = x + size_t(m) * p.IN;
      const T* wr = w + size_t(o) * p.IN;
      for (int i = 0; i < p.IN; ++i) acc += xr[i] * wr[i];
      y[size_t(m) * p.OUT + o] = acc;
    }
}

template <typename T>
void linear_fwd_add(const LinearParams& p, const LinearInputs<T>& in, const T* r, T* y) {
  const T *x = in.x, *w = in.w, *b = in.b;
  for (int m = 0; m < p.M; ++m)
    for (int o = 0; o < p.OUT; ++o) {
      T acc = b ? b[o] : T(0);
      const T* xr = x + size_t(m) * p.IN;
      const T* wr = w + size_t(o) * p.IN;
      for (int i = 0; i < p.IN; ++i) acc += xr[i] * wr[i];
      const size_t k = size_t(m) * p.OUT + o;
      y[k] = r[k] + acc;  // reads r[k] before writing y[k]: r == y is fine
    }
}

template <typename T>
void linear_bwd(const LinearParams& p, const LinearInputs<T>& in, const T* dy, const LinearGrads<T>& g) {
  const T *x = in.x, *w = in.w;
  T *dx = g.dx, *dw = g.dw, *db = g.db;
  for (int m = 0; m < p.M; ++m) {
    const T* dyr = dy + size_t(m) * p.OUT;
    const T* xr = x + size_t(m) * p.IN;
    if (dx) {
      T* dxr = dx + size_t(m) * p.IN;
      for (int i = 0; i < p.IN; ++i) dxr[i] = T(0);
      for (int o = 0; o < p.OUT; ++o)
        for (int i = 0; i < p.IN; ++i) dxr[i] += dyr[o] * w[size_t(o) * p.IN + i];
    }
    for (int o = 0; o < p.OUT; ++o) {
      if (db) db[o] += dyr[o];
      for (int i = 0; i < p.IN; ++i) dw[size_t(o) * p.IN + i] += dyr[o] * xr[i];
    }
  }
}

template void linear_fwd<float>(const LinearParams&, const LinearInputs<float>&, float*);
template void linear_fwd<double>(const LinearParams&, const LinearInputs<double>&, double*);
template void linear_fwd_add<float>(const LinearParams&, const LinearInputs<float>&, const float*, float*);
template void linear_fwd_add<double>(const LinearParams&, const LinearInputs<double>&, const double*, double*);
template void linear_bwd<float>(const LinearParams&, const LinearInputs<float>&, const float*,
                                const LinearGrads<float>&);
template void linear_bwd<double>(const LinearParams&, const LinearInputs<double>&, const double*,
                                 const LinearGrads<double>&);

}  // namespace mlalpha::ref
