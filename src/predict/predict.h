#pragma once
// Predictions (N, T, K) of a model's weights by a window plan (window_plan.h), aligned with (instrument, time):
// NaN where the plan keeps no row. The windows go through the model B at a time (the model's batch); on the GPU
// a short last tile repeats its last window (the model's shape is fixed), on the CPU it runs its windows only.
// On the CPU through the fast CPU model's inference (src/cpu, one model for the whole plan) or the reference
// model; on the GPU from a panel already in device memory: the windows are gathered on the device, each tile is
// one forward, the kept rows are scattered into a device buffer, and the host waits once, for the one download
// at the end.
#include <cstdint>
#include <string>
#include <vector>

#include <cuda_bf16.h>

#include "core/context.h"
#include "core/device_buffer.h"
#include "data/panel.h"
#include "mlalpha/compute.h"
#include "model/layout.h"
#include "model/model_gpu.h"
#include "predict/window_plan.h"

namespace mlalpha {

namespace cpu {
class CpuModel;
}

// The plan on the CPU: params (table.total()) on the host, `p` the (prepared) panel the plan reads; one model
// for the whole plan: the fast CPU model on compute.threads() threads, or the reference model (compute.reference()).
std::vector<float> predict_cpu(const ModelLayout& layout, const std::vector<float>& params, const Panel& p,
                               const WindowPlan& plan, int B, const Compute& compute = {});
// The same through `model` (the caller's: its threads and its inference buffers, kept from call to call).
std::vector<float> predict_cpu(cpu::CpuModel& model, const std::vector<float>& params, const Panel& p,
                               const WindowPlan& plan, int B);

// Device memory a GPU prediction reuses from call to call (grown when a plan needs more).
struct PlanBuffers {
  DeviceBuffer<int4> windows;  // (windows): instrument, start, keep_from, keep_to
  DeviceBuffer<float> pred;    // (N, t1 − t0, K): the kept rows
};

// The panel's features in device memory: x (N, T, F).
struct DeviceFeatures {
  const float* x = nullptr;
  int N = 0, T = 0, F = 0;
};

// The plan on the GPU with `model` (of `layout`; its batch B windows of plan.L rows) on model's context ctx: xb (B, L, F) is a
// device buffer the windows are gathered into; params (table.total()) and, for a bf16 model, params16 in device
// memory. Nothing but the last download waits for the device.
std::vector<float> predict_gpu(Context& ctx, const ModelLayout& layout, GpuModel& model, float* xb, const float* params,
                               const __nv_bfloat16* params16, const DeviceFeatures& x, const WindowPlan& plan,
                               PlanBuffers& buffers);
// The same for one call: a model of B windows, the panel's features uploaded once; params (table.total()) on the
// host.
std::vector<float> predict_gpu(Context& ctx, const ModelLayout& layout, const std::vector<float>& params,
                               const Panel& p, const WindowPlan& plan, int B, Precision precision);

// predict_cpu or predict_gpu (in compute.precision()) as `compute` says, for eval / predict.
std::vector<float> predict_with(const Compute& compute, const ModelLayout& layout, const std::vector<float>& params,
                                const Panel& p, const WindowPlan& plan, int B);

// Windows per tile of a prediction outside training by windows of L rows: the training batch, or more where
// that leaves a tile under kPredictTileRows rows (a forward of a few thousand rows leaves a GPU idle). A function
// of the settings, N and L only, never of the panel's length, so a window's bits do not depend on where the
// input starts (the tile's shape picks the GEMM algorithms).
constexpr int kPredictTileRows = 32768;
int prediction_tile(const TrainConfig& tc, int N, int L);

// Mode `carry` (docs/data.md, "What a date's prediction is"): (N, T, K), NaN outside [t0, t1) and at rows the
// instrument did not have. Each instrument's state is carried from its first present row over its present rows
// only (input_row(p, i, t) & kRowFeatures: a raw row with a finite feature; a panel that does not record its
// input rows has every row present), as the stream steps it. Computed as one forward per instrument over its
// present rows moved to the start of a window of the longest instrument's count (the model is causal, so the
// rows after an instrument's last present one do not reach its outputs), in tiles of windows of that length.
// predict_carry's two halves, for a caller that runs several weight sets on one panel (predict_session.h): the
// compacted panel with its plan (no windows: nothing to predict), and the predictions put back on p's time axis.
struct CarryInput {
  Panel compact;                        // (N, longest, F): instrument i's present rows up to t1 at [0, n_i)
  WindowPlan plan;                      // one window per instrument with a row in [t0, t1)
  std::vector<std::vector<int>> rows;   // (N): instrument i's present time steps, < t1
};
CarryInput carry_input(const Panel& p, int t0, int t1);
// `got` (N, longest, K): predictions of in.compact by in.plan; returns (N, p.T, K), NaN elsewhere.
std::vector<float> carry_output(const CarryInput& in, const std::vector<float>& got, const Panel& p);

std::vector<float> predict_carry(const Compute& compute, const ModelLayout& layout, const std::vector<float>& params,
                                 const Panel& p, int t0, int t1, const TrainConfig& tc);

}  // namespace mlalpha
