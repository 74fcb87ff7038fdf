#pragma once
// Resolved compute settings for the tests (mlalpha/compute.h): each goes through resolve(), as a run's do.
#include <string>

#include "mlalpha/compute.h"

namespace mlalpha::test {

// The CPU's fast kernels on `threads` threads (0: every CPU).
inline Compute on_cpu(int threads = 0) {
  ComputeRequest r;
  r.device = "cpu", r.threads = threads;
  return resolve(r);
}
// The CPU's reference kernels.
inline Compute on_cpu_reference(int threads = 0) {
  ComputeRequest r;
  r.device = "cpu", r.threads = threads, r.kernels = "reference";
  return resolve(r);
}
// The GPU in `precision` (an Error without one; the GPU suites skip first).
inline Compute on_gpu(Precision precision = Precision::FP32) {
  ComputeRequest r;
  r.device = "gpu", r.precision = to_string(precision);
  return resolve(r);
}

}  // namespace mlalpha::test
