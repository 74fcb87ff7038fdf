#pragma once
// DeviceBuffer<T>: one cudaMalloc'd array, freed on destruction; move-only so ownership is never
// shared by accident. All buffers of a run are created once, from the config, before the first step.
#include <cstddef>
#include <utility>
#include <vector>

#include "core/cuda_check.h"

namespace mlalpha {

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t count) : count_(count) {
    if (count_ > 0) MLALPHA_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&ptr_), count_ * sizeof(T)));
  }
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), count_(std::exchange(o.count_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      ptr_ = std::exchange(o.ptr_, nullptr);
      count_ = std::exchange(o.count_, 0);
    }
    return *this;
  }

  T* data() { return ptr_; }
  const T* data() const { return ptr_; }
  size_t size() const { return count_; }
  size_t bytes() const { return count_ * sizeof(T); }

  // Host <-> device copies for setup, tests and checkpoints; never on the training hot path.
  void upload(const T* host, size_t count, size_t offset = 0) {
    require(offset + count <= count_, "DeviceBuffer::upload: range past the end of the buffer");
    MLALPHA_CUDA_CHECK(cudaMemcpy(ptr_ + offset, host, count * sizeof(T), cudaMemcpyHostToDevice));
  }
  void upload(const std::vector<T>& host) { upload(host.data(), host.size()); }
  std::vector<T> download() const {
    std::vector<T> out(count_);
    if (count_ > 0) MLALPHA_CUDA_CHECK(cudaMemcpy(out.data(), ptr_, bytes(), cudaMemcpyDeviceToHost));
    return out;
  }
  // Elements [offset, offset + count).
  std::vector<T> download(size_t offset, size_t count) const {
    require(offset + count <= count_, "DeviceBuffer::download: range past the end of the buffer");
    std::vector<T> out(count);
    if (count > 0) MLALPHA_CUDA_CHECK(cudaMemcpy(out.data(), ptr_ + offset, count * sizeof(T), cudaMemcpyDeviceToHost));
    return out;
  }
  // Fill every byte with `byte` (tests poison outputs with 0xFF = NaN before a run).
  void fill_bytes(int byte, cudaStream_t stream = nullptr) {
    if (count_ > 0) MLALPHA_CUDA_CHECK(cudaMemsetAsync(ptr_, byte, bytes(), stream));
  }

 private:
  void reset() noexcept {
    if (ptr_) cudaFree(ptr_);  // no throw from a destructor; a failing free means the context is gone
    ptr_ = nullptr;
    count_ = 0;
  }
  T* ptr_ = nullptr;
  size_t count_ = 0;
};

}  // namespace mlalpha
