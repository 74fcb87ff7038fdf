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
#include "core/cuda_event.h"

namespace mlalpha {

class SideStream {
 public:
  static constexpr int kSlots = 2;

  SideStream() { MLALPHA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  ~SideStream() {
    if (stream_) (void)cudaStreamDestroy(stream_);  // no throw from a destructor
  }
  SideStream(SideStream&& o) noexcept : stream_(std::exchange(o.stream_, nullptr)), events_(std::move(o.events_)) {}
  SideStream& operator=(SideStream&&) = delete;
  SideStream(const SideStream&) = delete;
  SideStream& operator=(const SideStream&) = delete;

  cudaStream_t get() const { return stream_; }
  void fork(cudaStream_t main) {
    events_[0].record(main);
    events_[0].wait_on(stream_);
  }
  void done(int slot) { events_[1 + slot].record(stream_); }
  void join(cudaStream_t main, int slot) { events_[1 + slot].wait_on(main); }

 private:
  cudaStream_t stream_ = nullptr;
  // Ordering only: no timing, so recording costs less.
  std::array<CudaEvent, 1 + kSlots> events_{CudaEvent(cudaEventDisableTiming), CudaEvent(cudaEventDisableTiming),
                                            CudaEvent(cudaEventDisableTiming)};
};

}  // namespace mlalpha
