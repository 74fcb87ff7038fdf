#pragma once
// CUDA / cuBLASLt error checks: a failure throws mlalpha::Error naming file, line, the call and the
// library's own message. Every kernel launch is followed by MLALPHA_CHECK_LAUNCH(stream): it reads the
// launch error (bad configuration, too much shared memory), which costs no synchronisation, so it is legal
// inside graph capture and on the hot path. A kernel's own faults (illegal address, trap) are asynchronous
// and would surface at some later call, naming the wrong place; debug builds (MLALPHA_CHECK_LAUNCHES=1, set
// by CMake for CMAKE_BUILD_TYPE=Debug) therefore also synchronise the launch's stream, when it is not being
// captured into a graph, and report a fault with the launch's file:line.
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

#ifndef MLALPHA_CHECK_LAUNCHES
#define MLALPHA_CHECK_LAUNCHES 0
#endif

namespace mlalpha::detail {

// The stream a launch went to; LaunchSite{} when the caller does not name it (then only the launch error
// is read, in every build: the device cannot be synchronised safely while some stream may be capturing).
struct LaunchSite {
  LaunchSite() = default;
  LaunchSite(cudaStream_t s) : stream(s), known(true) {}  // NOLINT: implicit, from the macro's argument
  cudaStream_t stream = nullptr;
  bool known = false;
};

inline void check_launch(LaunchSite site, const char* file, int line) {
  const cudaError_t launch = cudaGetLastError();
  if (launch != cudaSuccess) throw_cuda(launch, "kernel launch", file, line);
  if (MLALPHA_CHECK_LAUNCHES && site.known) {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    const cudaError_t q = cudaStreamIsCapturing(site.stream, &capture);
    if (q != cudaSuccess) throw_cuda(q, "cudaStreamIsCapturing (debug launch check)", file, line);
    if (capture == cudaStreamCaptureStatusNone) {
      const cudaError_t run = cudaStreamSynchronize(site.stream);
      if (run != cudaSuccess) throw_cuda(run, "the kernel launched here (debug launch check, after synchronising)", file, line);
    }
  }
}

}  // namespace mlalpha::detail

// After every kernel launch: MLALPHA_CHECK_LAUNCH(stream). The form without a stream reads the launch
// error only, also in debug builds.
#define MLALPHA_CHECK_LAUNCH(...) \
  ::mlalpha::detail::check_launch(::mlalpha::detail::LaunchSite{__VA_ARGS__}, __FILE__, __LINE__)
