#pragma once
// CudaGraph (a captured cudaGraph_t) and CudaGraphExec (its instantiation, what is replayed): each
// destroyed with its owner; move-only. capture_graph() records the work a function enqueues on a stream;
// if the function throws, the capture is ended and its partial graph destroyed before the error goes on,
// so the stream is usable again.
#include <cuda_runtime.h>

#include <utility>

#include "core/cuda_check.h"

namespace mlalpha {

class CudaGraph {
 public:
  CudaGraph() = default;
  // Takes ownership of `g`.
  explicit CudaGraph(cudaGraph_t g) : graph_(g) {}
  ~CudaGraph() { reset(); }
  CudaGraph(CudaGraph&& o) noexcept : graph_(std::exchange(o.graph_, nullptr)) {}
  CudaGraph& operator=(CudaGraph&& o) noexcept {
    if (this != &o) {
      reset();
      graph_ = std::exchange(o.graph_, nullptr);
    }
    return *this;
  }
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  cudaGraph_t get() const { return graph_; }
  explicit operator bool() const { return graph_ != nullptr; }

 private:
  // Destruction cannot report: a failing destroy means the context is already gone, and the graph with it.
  void reset() noexcept {
    if (graph_) (void)cudaGraphDestroy(graph_);
    graph_ = nullptr;
  }
  cudaGraph_t graph_ = nullptr;
};

class CudaGraphExec {
 public:
  CudaGraphExec() = default;
  explicit CudaGraphExec(const CudaGraph& g) {
    require(bool(g), "CudaGraphExec: cannot instantiate an empty graph");
    MLALPHA_CUDA_CHECK(cudaGraphInstantiate(&exec_, g.get(), 0));
  }
  ~CudaGraphExec() { reset(); }
  CudaGraphExec(CudaGraphExec&& o) noexcept : exec_(std::exchange(o.exec_, nullptr)) {}
  CudaGraphExec& operator=(CudaGraphExec&& o) noexcept {
    if (this != &o) {
      reset();
      exec_ = std::exchange(o.exec_, nullptr);
    }
    return *this;
  }
  CudaGraphExec(const CudaGraphExec&) = delete;
  CudaGraphExec& operator=(const CudaGraphExec&) = delete;

  cudaGraphExec_t get() const { return exec_; }
  explicit operator bool() const { return exec_ != nullptr; }
  void launch(cudaStream_t stream) const {
    require(exec_ != nullptr, "CudaGraphExec::launch: no graph instantiated");
    MLALPHA_CUDA_CHECK(cudaGraphLaunch(exec_, stream));
  }

 private:
  void reset() noexcept {
    if (exec_) (void)cudaGraphExecDestroy(exec_);
    exec_ = nullptr;
  }
  cudaGraphExec_t exec_ = nullptr;
};

// Captures what `enqueue()` issues on `stream` (thread-local mode: other threads' CUDA calls are not
// affected) into a graph.
template <class Fn>
CudaGraph capture_graph(cudaStream_t stream, Fn&& enqueue) {
  MLALPHA_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  try {
    enqueue();
  } catch (...) {
    cudaGraph_t partial = nullptr;
    (void)cudaStreamEndCapture(stream, &partial);  // the enqueue's error is the one to report
    CudaGraph discard(partial);
    throw;
  }
  cudaGraph_t g = nullptr;
  MLALPHA_CUDA_CHECK(cudaStreamEndCapture(stream, &g));
  return CudaGraph(g);
}

}  // namespace mlalpha
