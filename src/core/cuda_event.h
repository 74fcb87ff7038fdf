#pragma once
// CudaEvent: one cudaEvent_t, destroyed with its owner; move-only. Timing events (the default) measure
// GPU time between two records on a stream (benchmarks); cudaEventDisableTiming events only order streams.
#include <cuda_runtime.h>

#include <utility>

#include "core/cuda_check.h"

namespace mlalpha {

class CudaEvent {
 public:
  explicit CudaEvent(unsigned flags = cudaEventDefault) { MLALPHA_CUDA_CHECK(cudaEventCreateWithFlags(&event_, flags)); }
  ~CudaEvent() { reset(); }
  CudaEvent(CudaEvent&& o) noexcept : event_(std::exchange(o.event_, nullptr)) {}
  CudaEvent& operator=(CudaEvent&& o) noexcept {
    if (this != &o) {
      reset();
      event_ = std::exchange(o.event_, nullptr);
    }
    return *this;
  }
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  cudaEvent_t get() const { return event_; }
  void record(cudaStream_t stream) { MLALPHA_CUDA_CHECK(cudaEventRecord(event_, stream)); }
  // Blocks the host until the work recorded before this event is done (never inside the training step).
  void synchronize() const { MLALPHA_CUDA_CHECK(cudaEventSynchronize(event_)); }
  // Makes `stream` wait for this event's work (no host synchronisation).
  void wait_on(cudaStream_t stream) const { MLALPHA_CUDA_CHECK(cudaStreamWaitEvent(stream, event_, 0)); }

 private:
  // Destruction cannot report: a failing destroy means the context is already gone, and the event with it.
  void reset() noexcept {
    if (event_) (void)cudaEventDestroy(event_);
    event_ = nullptr;
  }
  cudaEvent_t event_ = nullptr;
};

// GPU milliseconds between two completed timing events.
inline float elapsed_ms(const CudaEvent& start, const CudaEvent& stop) {
  float ms = 0.0f;
  MLALPHA_CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), stop.get()));
  return ms;
}

}  // namespace mlalpha
