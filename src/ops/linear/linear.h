#pragma once
// Linear layer y = x · Wᵀ + b (input projection, head, Mamba2 in_proj / out_proj; DESIGN section 1).
// GPU: cuBLASLt (linear.cu). CPU: linear_ref.cpp (the oracle).
namespace mlalpha {

struct LinearParams {
  int M = 0;    // rows (B*L)
  int IN = 0;   // input features
  int OUT = 0;  // output features
};

namespace ref {
// y (M, OUT) = x (M, IN) · w (OUT, IN)ᵀ + b (OUT, may be null)
template <typename T>
void linear_fwd(const LinearParams& p, const T* x, const T* w, const T* b, T* y);
// dx (M, IN) = dy · w (written; skipped if null); dw (OUT, IN) += dyᵀ · x; db (OUT) += Σ_m dy (if non-null)
template <typename T>
void linear_bwd(const LinearParams& p, const T* x, const T* w, const T* dy, T* dx, T* dw, T* db);
}  // namespace ref

}  // namespace mlalpha
