#pragma once
// The GPU's arithmetic (train.precision; docs/config.md "Precision", docs/decisions.md "bf16"). The CPU path
// always computes in the precision of its template type and ignores it.
#include <string>

namespace mlalpha {

enum class Precision {
  FP32,  // fp32 accuracy: GEMMs and the SSD's chunk products in 3xTF32 (or CUDA-core fp32)
  TF32,  // GEMMs and chunk products single-pass tf32 on the tensor cores (~2^-11 relative per operand)
  BF16,  // bf16 GEMM operands and chunk products with fp32 accumulation; fp32 master weights, gradients,
         // moments, norms, decays and states
};

// "fp32" | "tf32" | "bf16"
std::string to_string(Precision p);
// Throws Error naming `what` (e.g. "train.precision") and the accepted values.
Precision parse_precision(const std::string& s, const std::string& what = "train.precision");

}  // namespace mlalpha
