// The stream bench's GPU part (bench_stream.h): the device's copy bandwidth, and GpuStepper's bar timed as a
// captured graph, from the host, launched eagerly, without programmatic dependent launch, and with the fused layers
// (one kernel a layer).
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>

#include "cli/bench_stream.h"
#include "core/context.h"
#include "core/cuda_event.h"
#include "core/device_buffer.h"
#include "model/model_step.h"
#include "model/model_step_gpu.h"

namespace mlalpha {

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Bytes read + written per second of a large device-to-device copy.
double copy_bandwidth(Context& ctx) {
  const size_t n = size_t(1) << 28;  // 1 GiB of floats each way
  DeviceBuffer<float> a(n), b(n);
  a.fill_bytes(0x3F, ctx.stream());
  CudaEvent e0, e1;
  std::vector<double> gbs;
  for (int rep = 0; rep < 6; ++rep) {
    e0.record(ctx.stream());
    MLALPHA_CUDA_CHECK(cudaMemcpyAsync(b.data(), a.data(), a.bytes(), cudaMemcpyDeviceToDevice, ctx.stream()));
    e1.record(ctx.stream());
    e1.synchronize();
    if (rep > 0) gbs.push_back(2.0 * double(a.bytes()) / (elapsed_ms(e0, e1) * 1e-3) / 1e9);
  }
  return median(gbs);
}

// Device microseconds per bar: `bars` launches back to back between two events, 5 times, the median.
double device_us_per_bar(Context& ctx, GpuStepper& st, int bars) {
  for (int i = 0; i < 20; ++i) st.launch();
  st.wait();
  CudaEvent e0, e1;
  std::vector<double> us;
  for (int rep = 0; rep < 5; ++rep) {
    e0.record(ctx.stream());
    for (int i = 0; i < bars; ++i) st.launch();
    e1.record(ctx.stream());
    e1.synchronize();
    us.push_back(elapsed_ms(e0, e1) * 1e3 / bars);
  }
  return median(us);
}

}  // namespace

std::shared_ptr<Context> open_stream_bench_gpu(StreamBenchResult& res) {
  auto ctx = std::make_shared<Context>(0);
  res.device = cuda_device_summary(0);
  res.copy_gb_s = copy_bandwidth(*ctx);
  return ctx;
}

void time_gpu_stream(Context& ctx, const ModelLayout& lay, const std::vector<float>& params, const std::vector<float>& x,
                     const StreamBenchOptions& o, double copy_gb_s, StreamBenchRow& row, std::vector<float>& out) {
  const ModelConfig& c = lay.cfg;
  const int I = row.instruments;
  const StepDims d = step_dims(c, I);
  const double bytes = double(c.NL) * I * double(d.ssm_floats() + d.conv_floats()) * sizeof(float);
  std::vector<float> ref(out.size());
  row.floor_us = 2.0 * bytes / (copy_gb_s * 1e9) * 1e6;
  GpuStepper st(ctx, lay, params, I);
  row.kernels = st.kernels_per_bar();
  st.step(x.data(), nullptr, out.data());  // the first bar from the zero state, for the check below
  std::copy(x.begin(), x.end(), st.x_in());
  const int bars = I >= 1000 ? std::max(20, o.gpu_bars / 4) : o.gpu_bars;
  row.gpu_graph_us = device_us_per_bar(ctx, st, bars);
  std::vector<double> wall;
  for (int i = 0; i < bars; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    st.step(x.data(), nullptr, ref.data());
    wall.push_back(seconds_since(t0) * 1e6);
  }
  row.gpu_step_us = median(wall);
  const GpuStepperOptions variants[] = {{.graph = false}, {.pdl = false}, {.fused = true}};
  double* times[] = {&row.gpu_eager_us, &row.gpu_nopdl_us, &row.gpu_fused_us};
  for (int v = 0; v < 3; ++v) {
    GpuStepper other(ctx, lay, params, I, variants[v]);
    if (v == 2) row.fused_kernels = other.kernels_per_bar();
    std::copy(x.begin(), x.end(), other.x_in());
    std::fill_n(other.mask_in(), I, uint8_t(1));
    *times[v] = device_us_per_bar(ctx, other, bars);
  }
}

}  // namespace mlalpha
