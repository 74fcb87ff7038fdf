#pragma once
// CUDA / cuBLASLt error checks: a failure throws mlalpha::Error naming file, line, the call and the
// library's own message. Launches are followed by MLALPHA_CHECK_LAUNCH(), which reads the last error
// (no synchronisation, so it is legal inside graph capture and on the hot path).
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <string>

#include "core/error.h"

namespace mlalpha::detail {

[[noreturn]] inline void throw_cuda(cudaError_t e, const char* call, const char* file, int line) {
  throw Error(std::string(file) + ":" + std::to_string(line) + ": " + call + " failed: " +
              cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}
[[noreturn]] inline void throw_cublas(cublasStatus_t s, const char* call, const char* file, int line) {
  throw Error(std::string(file) + ":" + std::to_string(line) + ": " + call + " failed: cuBLAS status " +
              std::to_string(static_cast<int>(s)) + " (" + cublasLtGetStatusString(s) + ")");
}

}  // namespace mlalpha::detail

#define MLALPHA_CUDA_CHECK(call)                                                          \
  do {                                                                                    \
    cudaError_t mlalpha_err_ = (call);                                                    \
    if (mlalpha_err_ != cudaSuccess)                                                      \
      ::mlalpha::detail::throw_cuda(mlalpha_err_, #call, __FILE__, __LINE__);             \
  } while (0)

#define MLALPHA_CUBLAS_CHECK(call)                                                        \
  do {                                                                                    \
    cublasStatus_t mlalpha_st_ = (call);                                                  \
    if (mlalpha_st_ != CUBLAS_STATUS_SUCCESS)                                             \
      ::mlalpha::detail::throw_cublas(mlalpha_st_, #call, __FILE__, __LINE__);            \
  } while (0)

// After every kernel launch. Reading the sticky launch error costs no sync; debug builds
// (MLALPHA_CHECK_LAUNCHES) also catch asynchronous faults early by peeking again after the launch.
#define MLALPHA_CHECK_LAUNCH() MLALPHA_CUDA_CHECK(cudaGetLastError())
