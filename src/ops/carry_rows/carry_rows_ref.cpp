#include <algorithm>
#include <cstddef>

#include "ops/carry_rows/carry_rows.h"

namespace mlalpha::ref {

template <typename T>
void mask_rows(const RowMap& m, int C, int ld, T* a) {
  for (int b = 0; b < m.B; ++b)
    for (int r = m.rows[b]; r < m.L; ++r) std::fill_n(a + (size_t(b) * m.L + r) * ld, C, T(0));
}

template <typename T>
void window_tail(const Conv1dParams& p, const RowMap& m, const T* x, const T* window0, T* window_last) {
  const int W1 = p.W - 1;
  for (int b = 0; b < p.B; ++b)
    for (int j = 0; j < W1; ++j) {
      const int t = m.rows[b] - W1 + j;  // the input row that lands in window slot j
      T* o = window_last + (size_t(b) * W1 + j) * p.C;
      if (t >= 0) std::copy_n(x + (size_t(b) * p.L + t) * p.ld_x, p.C, o);
      else if (window0) std::copy_n(window0 + (size_t(b) * W1 + W1 + t) * p.C, p.C, o);
      else std::fill_n(o, p.C, T(0));
    }
}

template <typename T>
void rows_to_dates(const RowMap& m, int K, const T* out, T* outd) {
  std::fill_n(outd, size_t(m.B) * m.L * K, T(0));
  for (int b = 0; b < m.B; ++b)
    for (int r = 0; r < m.rows[b]; ++r)
      std::copy_n(out + (size_t(b) * m.L + r) * K, K, outd + (size_t(b) * m.L + m.dates[size_t(b) * m.L + r]) * K);
}

template <typename T>
void dates_to_rows(const RowMap& m, int K, const T* doutd, T* dout) {
  for (int b = 0; b < m.B; ++b)
    for (int r = 0; r < m.L; ++r) {
      T* o = dout + (size_t(b) * m.L + r) * K;
      if (r < m.rows[b]) std::copy_n(doutd + (size_t(b) * m.L + m.dates[size_t(b) * m.L + r]) * K, K, o);
      else std::fill_n(o, K, T(0));
    }
}

#define MLALPHA_CARRY_ROWS(T)                                                                     \
  template void mask_rows<T>(const RowMap&, int, int, T*);                                        \
  template void window_tail<T>(const Conv1dParams&, const RowMap&, const T*, const T*, T*);       \
  template void rows_to_dates<T>(const RowMap&, int, const T*, T*);                               \
  template void dates_to_rows<T>(const RowMap&, int, const T*, T*);
MLALPHA_CARRY_ROWS(float)
MLALPHA_CARRY_ROWS(double)
#undef MLALPHA_CARRY_ROWS

}  // namespace mlalpha::ref
