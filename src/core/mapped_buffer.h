#pragma once
// MappedBuffer<T>: pinned host memory mapped into the device address space. Kernels write it, the host
// reads it after an event says the writing step is done. This is the only host<->device channel on
// the training hot path (DESIGN section 2, step 7): no cudaMemcpy, no per-step sync.
#include <cstddef>
#include <utility>

#include "core/cuda_check.h"

namespace mlalpha {

template <typename T>
class MappedBuffer {
 public:
  MappedBuffer() = default;
  explicit MappedBuffer(size_t count) : count_(count) {
    if (count_ == 0) return;
    MLALPHA_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&host_), count_ * sizeof(T), cudaHostAllocMapped));
    MLALPHA_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&dev_), host_, 0));
  }
  ~MappedBuffer() {
    if (host_) cudaFreeHost(host_);
  }
  MappedBuffer(const MappedBuffer&) = delete;
  MappedBuffer& operator=(const MappedBuffer&) = delete;
  MappedBuffer(MappedBuffer&& o) noexcept
      : host_(std::exchange(o.host_, nullptr)), dev_(std::exchange(o.dev_, nullptr)), count_(std::exchange(o.count_, 0)) {}
  MappedBuffer& operator=(MappedBuffer&& o) noexcept {
    if (this != &o) {
      if (host_) cudaFreeHost(host_);
      host_ = std::exchange(o.host_, nullptr);
      dev_ = std::exchange(o.dev_, nullptr);
      count_ = std::exchange(o.count_, 0);
    }
    return *this;
  }

  // Host view: read only after the producing work is known complete (event or stream sync).
  volatile T* host() { return host_; }
  const volatile T* host() const { return host_; }
  T* device() { return dev_; }  // pass to kernels
  size_t size() const { return count_; }

 private:
  T* host_ = nullptr;
  T* dev_ = nullptr;
  size_t count_ = 0;
};

}  // namespace mlalpha
