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

#include "data/panel.h"
#include "mlalpha/compute.h"
#include "mlalpha/config_types.h"
#include "model/layout.h"
#include "predict/window_plan.h"

namespace mlalpha {

namespace cpu {
class CpuModel;
}

// Throws unless a panel of F features and K targets fits the model.
void check_panel(const ModelLayout& layout, int F, int K);

// The plan on the CPU: params (table.total()) on the host, `p` the (prepared) panel the plan reads; one model
// for the whole plan: the fast CPU model on compute.threads() threads, or the reference model (compute.reference()).
std::vector<float> predict_cpu(const ModelLayout& layout, const std::vector<float>& params, const Panel& p,
                               const WindowPlan& plan, int B, const Compute& compute = {});
// The same through `model` (the caller's: its threads and its inference buffers, kept from call to call).
std::vector<float> predict_cpu(cpu::CpuModel& model, const std::vector<float>& params, const Panel& p,
                               const WindowPlan& plan, int B);

// The plan on the GPU 0 (GPU code, predict_gpu.cpp; its other forms are in predict_gpu.h): a model of B windows,
// the panel's features uploaded once; params (table.total()) on the host.
std::vector<float> predict_gpu(const ModelLayout& layout, const std::vector<float>& params, const Panel& p,
                               const WindowPlan& plan, int B, Precision precision);

// predict_cpu or predict_gpu (in compute.precision()) as `compute` says, for eval / predict.
std::vector<float> predict_with(const Compute& compute, const ModelLayout& layout, const std::vector<float>& params,
                                const Panel& p, const WindowPlan& plan, int B);

// Windows per tile of a prediction outside training by windows of L rows: the training batch, or more where
// that leaves a tile under kPredictTileRows rows (a forward of a few thousand rows leaves a GPU idle). A function
// of the settings, N and L only, never of the panel's length, so a window's bits do not depend on where the
// input starts (the tile's shape picks the GEMM algorithms).
constexpr int kPredictTileRows = 32768;
int prediction_tile(const TrainConfig& tc, int N, int L);
// Windows per tile of mode carry, whose windows are as long as the instrument with the most present rows (a long
// panel: thousands): as many as fit in carry_tile_rows(tc, N) rows, at least one, so the model of a carry
// prediction is never larger than the training batch's (or a kPredictTileRows tile) however long the panel.
double carry_tile_rows(const TrainConfig& tc, int N);
int carry_prediction_tile(const TrainConfig& tc, int N, int L);

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
