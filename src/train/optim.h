#pragma once
// Global-norm clipping and AdamW (DESIGN section 2, steps 5 and 6).
//   scale = min(1, max_norm / ‖g‖) ; a non-finite ‖g‖ gives scale 0 and skip = 1 (nothing is updated).
//   AdamW (PyTorch's, decoupled decay): with g ← scale·g, t = step (1-based),
//     m ← β1 m + (1−β1) g ;  v ← β2 v + (1−β2) g²
//     p ← p·(1 − lr·wd·decay) − lr · (m / (1−β1ᵗ)) / (sqrt(v / (1−β2ᵗ)) + eps)
#include <cstddef>
#include <cstdint>

#include "core/cuda_fwd.h"

#include "core/hd.h"
#include "train/schedule.h"

namespace mlalpha {

struct AdamWParams {
  float lr = 1e-3f;
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
  float weight_decay = 0.0f;
  int64_t step = 1;  // 1-based count of updates including this one
};

struct ClipResult {
  float scale;  // multiply gradients by this
  int skip;     // 1 when the norm is not finite: the step is skipped
};

// max_norm <= 0 disables clipping (scale 1 unless the norm is not finite).
MLALPHA_HD ClipResult clip_scale(double norm_sq, float max_norm) {
  const bool finite = norm_sq == norm_sq && norm_sq <= 1.7976931348623157e308;  // rejects NaN and +inf
  if (!finite) return {0.0f, 1};
  const double norm = sqrt(norm_sq);
  if (max_norm <= 0.0f || norm <= double(max_norm)) return {1.0f, 0};
  return {float(double(max_norm) / norm), 0};
}

// One element of AdamW; shared by the CPU loop and the CUDA kernel.
MLALPHA_HD void adamw_update(float& p, float& m, float& v, float g, bool decay, const AdamWParams& a, float bc1,
                             float bc2_sqrt) {
  m = a.beta1 * m + (1.0f - a.beta1) * g;
  v = a.beta2 * v + (1.0f - a.beta2) * g * g;
  if (decay) p *= 1.0f - a.lr * a.weight_decay;
  p -= a.lr * (m / bc1) / (sqrtf(v) / bc2_sqrt + a.eps);
}

// Device-resident state of the training step: written and read only by kernels, so the step needs no
// host round trip. The host reads it (or the ring below) only when it logs or checkpoints.
struct DeviceStepState {
  double norm_sq;           // Σ g² of this step (grad_norm_sq_phase2)
  float clip_scale;         // min(1, max_norm/‖g‖), 0 when skipped
  float lr;                 // this step's learning rate (schedule at `step`)
  float bc1, bc2_sqrt;      // AdamW bias corrections 1 − β1ᵗ and sqrt(1 − β2ᵗ) for this update
  int skip;                 // 1: non-finite norm, nothing is updated
  int pad_;
  long long step;           // steps taken before this one (drives the schedule)
  long long adam_step;      // updates applied (drives the bias corrections)
  long long skipped_total;  // steps skipped so far
};

// One slot of the mapped-pinned ring buffer the host reads when it logs (DESIGN section 2, step 7).
struct StepRecord {
  long long step;  // 1-based number of the step this record describes
  float loss, grad_norm, clip_scale, lr;
  int skipped;
  int pad_;
};

namespace ref {
// Σ g² in double, in index order.
double grad_norm_sq(const float* g, size_t n);
// AdamW over a flat arena; decay (n) is the weight-decay mask; grads are multiplied by `scale` first.
void adamw(float* params, const float* grads, float* m, float* v, const unsigned char* decay, size_t n,
           const AdamWParams& a, float scale);
}  // namespace ref

namespace gpu {
// Every function below works on a population of `members` models at once (DESIGN section 7): arenas are
// (members, n), member m's slice at m·n; the step state, settings, losses and flags have one entry per
// member. Each member's arithmetic is exactly that of a population of one, in the same order, so a member's
// result does not depend on the others (a single model is members = 1).

// Phase 1 of the global norm: each of a fixed number of blocks per member (a function of n only, so the sum
// order is the same on every GPU and in every population) reduces x² over a grid-strided range of its
// member's slice into partials[m · blocks + block]. No atomics.
int grad_norm_blocks(size_t n);
// g (members, n), n a multiple of 4 and g 16-byte aligned; partials (members, grad_norm_blocks(n)).
void grad_norm_sq_phase1(const float* g, size_t n, int members, float* partials, cudaStream_t stream);
// Phase 2: one block per member sums its partials in a fixed order, in double, into state[m].norm_sq.
void grad_norm_sq_phase2(const float* partials, int blocks, int members, DeviceStepState* state, cudaStream_t stream);

// x (n) *= s in place: the data-parallel mean, Σ over ranks / world (exact for a power-of-two world).
void scale_inplace(float* x, size_t n, float s, cudaStream_t stream);

struct ClipParams {
  float max_norm = 1.0f;  // <= 0: no clipping
  float beta1 = 0.9f, beta2 = 0.999f;
  ScheduleParams schedule;
};
struct AdamWConfig {
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.0f;
};
// One member's settings of the update, kept in device memory by the trainer.
struct MemberOptim {
  ClipParams clip;
  AdamWConfig adam;
};

// One thread per member: scale and skip flag from norm_sq; the lr from the member's schedule at its
// state.step; the bias corrections for the next AdamW update; advances the counters; writes the step's record
// (the member's loss read from device memory) into ring[m · ring_size + (step − 1) % ring_size] (mapped
// pinned memory). A member whose frozen flag is set is left as it is and marked skip (no update, no record).
// opt, state, loss, frozen (members); loss and frozen may be null; ring (members, ring_size) or null.
void grad_clip_scale(const MemberOptim* opt, int members, DeviceStepState* state, const float* loss, const int* frozen,
                     StepRecord* ring, int ring_size, cudaStream_t stream);
// grad_norm_sq_phase2 then grad_clip_scale in one launch (the trainer's step): block m sums member m's partials,
// then its thread 0 runs member m's clip; the same bits and records as the two launches.
void grad_norm_sq_phase2_clip(const float* partials, int blocks, const MemberOptim* opt, int members,
                              DeviceStepState* state, const float* loss, const int* frozen, StepRecord* ring,
                              int ring_size, cudaStream_t stream);

// AdamW over the flat arenas, one launch; each member reads its lr, clip scale, skip flag and bias
// corrections from state[m] and its betas, eps and weight decay from opt[m] (adamw_step_devscale of DESIGN
// section 2). params, grads, m, v (members, n); decay (n) bytes, shared (one architecture). params16
// (members, n), when non-null (bf16 mode), receives the updated weights rounded to bf16 in the same pass;
// a skipped member's stays as it was, like its params.
void adamw_step_devscale(float* params, const float* grads, float* m, float* v, const unsigned char* decay, size_t n,
                         int members, const MemberOptim* opt, const DeviceStepState* state, cudaStream_t stream,
                         __nv_bfloat16* params16 = nullptr);
}  // namespace gpu

}  // namespace mlalpha
