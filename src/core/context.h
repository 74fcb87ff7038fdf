#pragma once
// Context: everything a GPU run shares — the device, one stream (the whole step is stream-ordered on
// it), the cuBLASLt handle and its workspace. Created once per run; move-only.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <string>

#include "core/device.h"  // cuda_device_count, for the files that include only this
#include "core/device_buffer.h"

namespace mlalpha {

class Context {
 public:
  static constexpr size_t kWorkspaceBytes = 32u << 20;  // cuBLASLt workspace (Hopper wants >= 32 MiB)

  explicit Context(int device = 0);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  Context(Context&& o) noexcept;
  Context& operator=(Context&&) = delete;

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  cublasLtHandle_t blas() const { return blas_; }
  void* workspace() { return workspace_.data(); }
  size_t workspace_bytes() const { return workspace_.bytes(); }
  int sm_count() const { return sm_count_; }
  void synchronize() const { MLALPHA_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

 private:
  int device_ = 0;
  int sm_count_ = 0;
  cudaStream_t stream_ = nullptr;
  cublasLtHandle_t blas_ = nullptr;
  DeviceBuffer<unsigned char> workspace_;
};

}  // namespace mlalpha
