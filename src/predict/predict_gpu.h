#pragma once
// Predictions by a window plan on the GPU (GPU code; predict.h has the CPU's and the choice): from a panel already
// in device memory, the windows gathered on the device, each tile one forward, the kept rows scattered into a
// device buffer, and the host waiting once, for the one download at the end.
#include <cuda_bf16.h>

#include <vector>

#include "core/context.h"
#include "core/device_buffer.h"
#include "model/model_gpu.h"
#include "predict/predict.h"

namespace mlalpha {

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
// The same for one call on ctx: a model of B windows, the panel's features uploaded once; params (table.total())
// on the host.
std::vector<float> predict_gpu(Context& ctx, const ModelLayout& layout, const std::vector<float>& params,
                               const Panel& p, const WindowPlan& plan, int B, Precision precision);

}  // namespace mlalpha
