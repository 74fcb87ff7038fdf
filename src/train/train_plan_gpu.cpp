// The GPU trainer's memory (train_plan.h): its estimate, from the GPU ops' own sizes, and the device's free memory.
#include <cuda_runtime.h>

#include <algorithm>

#include "core/context.h"
#include "core/cuda_check.h"
#include "model/layer_shapes.h"
#include "model/layout.h"
#include "predict/predict.h"
#include "train/optim.h"
#include "train/train_plan.h"

namespace mlalpha {

namespace {

constexpr double kFloat = sizeof(float);

// GpuModel's rule for xbc and dy in bf16 (model_gpu.h, xbc16_): bf16 precision, the SSD on the walks for the shape.
bool xbc16(const LayerShapes& s, Precision precision) {
  SsdParams p = s.ssd;
  p.precision = precision;
  return precision == Precision::BF16 && gpu::ssd_uses_walk(p);
}

}  // namespace

MemoryEstimate estimate_gpu_training(const ModelConfig& mc, const TrainConfig& tc, int N, int T, int ring_slots) {
  const ModelLayout layout(mc);
  const double total = double(layout.table.total());
  const int B = tc.windows_per_step(N);
  const double M = double(B) * tc.L;
  MemoryEstimate e;
  e.params = total * (4 * kFloat + 1 + (tc.precision == Precision::BF16 ? 2 : 0));  // + the bf16 weight copy
  const LayerShapes s(mc, B, tc.L);
  e.activations = (M * activation_floats_per_row(mc, tc.precision, xbc16(s, tc.precision)) + 1 +
                   mc.NL * double(gpu::ssd_saved_floats(s.ssd))) * kFloat;
  const size_t ws = gpu_scratch_floats(s, B, tc.L, mc.K) + GradPartials(s, mc.NL, tc.precision).total;
  e.workspaces = double(ws) * kFloat + double(Context::kWorkspaceBytes);
  e.dataset = double(N) * T * (mc.F + mc.K) * kFloat;
  e.batch = M * (mc.F + mc.K) * kFloat;
  e.other = double(gpu::grad_norm_blocks(layout.table.total())) * kFloat + sizeof(DeviceStepState) +
            double(ring_slots) * sizeof(StepRecord);
  if (tc.state == StateMode::Carry) {
    // The lanes' states and the model's copy of the conv windows; the two epoch tables (an int4 a window of the
    // epoch, at most N·T / L of them, + B padding slots; their pinned staging is host memory), the present rows.
    const double states = double(mc.NL) * double(carry_conv_floats(mc, B) * 2 + carry_ssm_floats(mc, B)) * kFloat;
    const double slots = double(N) * T / tc.L + B;
    e.other += states + 2 * slots * 4 * sizeof(int) + (double(N) * T + N + 1) * sizeof(int);
    // Time batches: each lane's row map ((B) counts + (B, L) dates) and the model's date-ordered out and dout.
    if (tc.batch_mode == BatchMode::Time) e.other += (B + M) * sizeof(int) + 2 * M * mc.K * kFloat;
  }
  const double windows = double(N) * (double(T) / std::max(1, tc.L - tc.burn_in) + 1);
  e.prediction = double(N) * T * mc.K * kFloat + windows * 4 * sizeof(int) +
                 total * (kFloat + (tc.precision == Precision::BF16 ? 2 : 0));
  if (tc.state == StateMode::Carry) {
    // Validation and test in mode carry (GpuEngine::predict_carry): a forward model beside the trainer's, of a
    // tile of at most carry_tile_rows rows, or one window of the longest instrument's present rows (≤ T); built
    // for forward passes (ModelUse::kForward): no backward partials (GradPartials).
    const int rows = int(std::max(carry_tile_rows(tc, N), double(T)));
    const LayerShapes sp(mc, 1, rows);
    e.prediction += (double(rows) * activation_floats_per_row(mc, tc.precision, xbc16(sp, tc.precision)) +
                     double(mc.NL) * double(gpu::ssd_saved_floats(sp.ssd)) +
                     double(gpu_scratch_floats(sp, 1, rows, mc.K))) * kFloat +
                    double(Context::kWorkspaceBytes);
  }
  return e;
}

double gpu_free_bytes() {
  size_t free_b = 0, total_b = 0;
  MLALPHA_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  return double(free_b);
}

}  // namespace mlalpha
