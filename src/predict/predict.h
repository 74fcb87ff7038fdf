#pragma once
// Predictions (N, T, K) of a model's weights by a window plan (window_plan.h), aligned with (instrument, time):
// NaN where the plan keeps no row. The windows go through the model B at a time (the model's batch), a short
// last tile repeating its last window. On the CPU through the fast CPU model's inference (src/cpu, one model
// for the whole plan) or the reference model; on the GPU from a panel already in device memory: the windows
// are gathered on the device, each tile is one forward, the kept rows are scattered into a device buffer, and
// the host waits once, for the one download at the end.
#include <cstdint>
#include <string>
#include <vector>

#include <cuda_bf16.h>

#include "core/context.h"
#include "core/device_buffer.h"
#include "data/panel.h"
#include "mlalpha/device.h"
#include "model/layout.h"
#include "model/model_gpu.h"
#include "predict/window_plan.h"

namespace mlalpha {

namespace cpu {
class CpuModel;
}

// The plan on the CPU: params (table.total()) on the host, `p` the (prepared) panel the plan reads; one model
// for the whole plan: the fast CPU model on cpu.threads threads, or the reference model (cpu.reference).
std::vector<float> predict_cpu(const ModelLayout& layout, const std::vector<float>& params, const Panel& p,
                               const WindowPlan& plan, int B, const CpuSettings& cpu = {});
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

// predict_cpu (with `cpu`) or predict_gpu as `device` (auto | cpu | gpu) says, for eval / predict.
std::vector<float> predict_with(const std::string& device, Precision precision, const ModelLayout& layout,
                                const std::vector<float>& params, const Panel& p, const WindowPlan& plan, int B,
                                const CpuSettings& cpu = {});

}  // namespace mlalpha
