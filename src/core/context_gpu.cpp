// The GPU context (context.h): the device, its stream, the cuBLASLt handle and workspace.
#include "core/context.h"

#include <utility>

#include "core/device.h"

namespace mlalpha {

Context::Context(int device) : device_(device) {
  const int n = cuda_device_count();
  require(n > 0, "no CUDA device is available (cudaGetDeviceCount found none)");
  require(device >= 0 && device < n,
          "CUDA device " + std::to_string(device) + " does not exist (found " + std::to_string(n) + ")");
  MLALPHA_CUDA_CHECK(cudaSetDevice(device_));
  MLALPHA_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, device_));
  // A blocking stream: setup copies on the legacy default stream (DeviceBuffer::upload/download) are
  // ordered with the step's work without extra synchronisation.
  MLALPHA_CUDA_CHECK(cudaStreamCreate(&stream_));
  MLALPHA_CUBLAS_CHECK(cublasLtCreate(&blas_));
  workspace_ = DeviceBuffer<unsigned char>(kWorkspaceBytes);
}

Context::Context(Context&& o) noexcept
    : device_(o.device_),
      sm_count_(o.sm_count_),
      stream_(std::exchange(o.stream_, nullptr)),
      blas_(std::exchange(o.blas_, nullptr)),
      workspace_(std::move(o.workspace_)) {}

Context::~Context() {
  if (blas_) cublasLtDestroy(blas_);
  if (stream_) cudaStreamDestroy(stream_);
}

}  // namespace mlalpha
