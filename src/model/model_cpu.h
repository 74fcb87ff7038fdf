#pragma once
// The fast CPU perception model (DESIGN section 1), float32 on all cores: the same interface and the same
// function as RefModel<float> (src/model/model_ref.h), which stays the oracle. GEMMs run on OpenBLAS
// (blas.h), the SSD in its chunked matrix form on those GEMMs (ssd_cpu.h), the elementwise ops in fused,
// vectorised loops (ops/*/*_cpu.h), all over one ThreadPool with fixed work partitions.
//   forward() caches what backward() needs; loss() computes the loss and ∂loss/∂out; backward()
//   accumulates (+=) the parameter gradients into the flat arena with the layout's offsets. infer() runs the
//   forward alone, caching nothing (prediction).
// Buffers are sized by reserve() (or by the first forward of a larger batch); a step whose batch fits
// allocates nothing. Bit-reproducible: the same inputs give the same bits for any thread count on one
// machine (every task has a fixed shape and every reduction a fixed order; docs/decisions.md).
#include <memory>
#include <vector>

#include "model/layer_shapes.h"
#include "model/layout.h"
#include "ops/loss/loss.h"

namespace mlalpha::cpu {

class ThreadPool;

// Most threads a model runs: Debian's OpenBLAS is built for 64 (MAX_THREADS; 128 preallocated work buffers,
// one per concurrent call, beyond which it allocates more), and more than 64 is untested. Enough for these
// model sizes.
constexpr int kMaxCpuThreads = 64;

// `threads` itself, or for 0 every CPU this process may use (available_cpus), at most kMaxCpuThreads. Throws
// mlalpha::Error for a count outside [0, kMaxCpuThreads].
int resolve_threads(int threads);

struct CpuOptions {
  // Worker threads including the caller, 1 to kMaxCpuThreads; 0 = every CPU this process may use
  // (available_cpus), at most kMaxCpuThreads.
  int threads = 0;
  // A pool shared with other models that run in turn, never at once (ThreadPool::run takes one caller at a
  // time): a population's members on the CPU. It must outlive the model; `threads` is then not used.
  ThreadPool* pool = nullptr;
};

class CpuModel {
 public:
  // Throws mlalpha::Error when the CPU lacks what the kernels are built for (AVX2, FMA on x86-64).
  explicit CpuModel(const ModelLayout& layout, CpuOptions opt = {});
  ~CpuModel();
  CpuModel(const CpuModel&) = delete;
  CpuModel& operator=(const CpuModel&) = delete;

  // Sizes every buffer for batches of up to B windows of length L (of at most B·L rows and B·⌈L/Q⌉ chunks):
  // for training (forward's cache and backward's buffers) or, training = false, for infer() alone (one
  // layer's forward buffers, reused by every layer). forward() and infer() call it for a larger batch.
  void reserve(int B, int L, bool training = true);
  // Floats of every buffer such a model holds for that batch (the memory estimate; threads 0 = all cores).
  static size_t floats_needed(const ModelConfig& c, int B, int L, int threads, bool training);

  // params (table.total()), x (B, L, F). Returns out (B, L, K), valid until the next forward. carry, when
  // non-null: the windows start from its in states (null: zeros) and its out states are written (stateful
  // training; layer_shapes.h). The in states are copied for backward(), which stops the gradient at them.
  const std::vector<float>& forward(const float* params, const float* x, int B, int L,
                                    const CarryState<float>* carry = nullptr);
  // y (B, L, K) targets (NaN = masked). Uses the last forward's output; keeps ∂loss/∂out for backward.
  ref::LossResult<float> loss(const float* y, const LossParams& lp);
  // grads (table.total()) += ∂loss/∂params; dx (B, L, F) = ∂loss/∂x when non-null.
  void backward(const float* params, float* grads, float* dx);
  // Inference: out (B, L, K) written; nothing cached (backward() may not follow).
  void infer(const float* params, const float* x, int B, int L, float* out);

  int threads() const;
  ThreadPool& pool() { return *pool_; }
  const ModelLayout& layout() const { return lay_; }

 private:
  struct LayerActs {
    std::vector<float> h_in, hn, rstd, zx, xbc, delta, y, gout, grstd, states, convT;
  };
  struct Plan;
  struct Caps {
    int rows = 0, chunks = 0, batch = 0;  // what the buffers hold: rows B·L, chunks B·⌈L/Q⌉, windows B
  };
  void ensure(int B, int L, bool training);
  void run_forward(const float* params, const float* x, bool cache, float* out, const CarryState<float>* carry);

  const ModelLayout& lay_;
  std::unique_ptr<ThreadPool> own_pool_;  // null when the options gave a shared pool
  ThreadPool* pool_ = nullptr;
  int B_ = 0, L_ = 0;              // the current batch
  Caps train_cap_, infer_cap_;
  bool have_grad_ = false;
  std::vector<float> x_, h_, hfn_, rstdf_, out_, dout_;
  std::vector<float> conv_in_, ssm_in_;  // the last training forward's carried in states, layer-major
  bool carried_ = false;                 // whether that forward had them (else zeros: today's ops)
  std::vector<int> rows_, dates_;        // its present rows (CarryState::rows, dates; empty: every lane full)
  std::vector<float> outd_, doutd_;      // out and its gradient in date order (with rows_)
  std::vector<LayerActs> acts_;
  // backward
  std::vector<float> dh_, dhfn_, dg_, dy_, dzx_, dxbc_, dpre_, ddelta_, dhn_;
  std::vector<float> part_, wtmp_, dw_scratch_, ssd_scratch_, ssd_dA_, ssd_dD_;
  std::vector<float> gemm_pad_;  // gemm_rows's padded last row block
  float* pad_ = nullptr;         // into gemm_pad_, 64-byte aligned
};

}  // namespace mlalpha::cpu
