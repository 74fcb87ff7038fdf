// --precision and its alias --tf32 (commands.h).
#include "commands.h"
#include "mlalpha/error.h"

namespace mlalpha {

const char* const kPrecisionHelp =
    "GPU arithmetic: fp32 (the default; fp32 accuracy, GEMMs and SSD chunk products in 3xTF32), tf32 (GEMMs "
    "and SSD chunk products single-pass tf32 on the tensor cores), bf16 (bf16 GEMM operands and SSD chunk "
    "products with fp32 accumulation; fp32 master weights, gradients and optimizer moments). The CPU "
    "computes fp32 whatever it says";

std::optional<Precision> precision_flag(const std::string& precision, bool tf32) {
  if (precision.empty()) return tf32 ? std::optional<Precision>(Precision::TF32) : std::nullopt;
  const Precision p = parse_precision(precision, "--precision");
  if (tf32 && p != Precision::TF32)
    throw Error("--tf32 (the older spelling of --precision tf32) contradicts --precision " + precision +
                ": give only --precision");
  return p;
}

}  // namespace mlalpha
