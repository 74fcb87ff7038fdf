#pragma once
// A second stream for work that may overlap the main stream's (the model's weight-gradient GEMMs), ordered
// with it by events: fork() makes the side stream wait for everything issued on the main stream so far;
// done(i) marks the side stream's progress in slot i, and join(main, i) makes the main stream wait for it.
// Inside a CUDA-graph capture of the main stream the side stream joins the capture at fork() and the graph
// gets parallel branches; every fork must be joined before the capture ends. Move-only.
#include <cuda_runtime.h>

#include <array>
#include <utility>

#include "core/cuda_check.h"

namespace mlalpha {

class SideStream {
 public:
  static constexpr int kSlots = 2;

  SideStream() {
    MLALPHA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    for (cudaEvent_t& e : events_) MLALPHA_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  }
  ~SideStream() {
    for (cudaEvent_t e : events_)
      if (e) cudaEventDestroy(e);
    if (stream_) cudaStreamDestroy(stream_);
  }
  SideStream(SideStream&& o) noexcept : stream_(std::exchange(o.stream_, nullptr)), events_(o.events_) {
    o.events_.fill(nullptr);
  }
  SideStream& operator=(SideStream&&) = delete;
  SideStream(const SideStream&) = delete;
  SideStream& operator=(const SideStream&) = delete;

  cudaStream_t get() const { return stream_; }
  void fork(cudaStream_t main) {
    MLALPHA_CUDA_CHECK(cudaEventRecord(events_[0], main));
    MLALPHA_CUDA_CHECK(cudaStreamWaitEvent(stream_, events_[0], 0));
  }
  void done(int slot) { MLALPHA_CUDA_CHECK(cudaEventRecord(events_[1 + slot], stream_)); }
  void join(cudaStream_t main, int slot) { MLALPHA_CUDA_CHECK(cudaStreamWaitEvent(main, events_[1 + slot], 0)); }

 private:
  cudaStream_t stream_ = nullptr;
  std::array<cudaEvent_t, 1 + kSlots> events_{};
};

}  // namespace mlalpha
