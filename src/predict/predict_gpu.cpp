// Predictions by a window plan on the GPU (predict_gpu.h).
#include "predict/predict_gpu.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <limits>

#include "core/cuda_check.h"
#include "core/error.h"
#include "data/sampler.h"
#include "ops/cast/cast.h"
#include "predict/plan_kernels.h"

namespace mlalpha {

std::vector<float> predict_gpu(Context& ctx, const ModelLayout& layout, GpuModel& model, float* xb, const float* params,
                               const __nv_bfloat16* params16, const DeviceFeatures& x, const WindowPlan& plan,
                               PlanBuffers& buf) {
  const ModelLayout& lay = layout;
  const int K = lay.cfg.K, B = model.B(), L = plan.L;
  check_panel(lay, x.F, K);
  check_plan(plan);
  require(plan.N == x.N && plan.T == x.T, "predict: the plan reads a panel of " + std::to_string(plan.N) + " × " +
                                              std::to_string(plan.T) + ", the device holds " + std::to_string(x.N) +
                                              " × " + std::to_string(x.T));
  require(L == model.L(), "predict: the plan's windows have " + std::to_string(L) + " rows, the model takes " +
                              std::to_string(model.L()));
  std::vector<float> pred(size_t(plan.N) * plan.T * K, std::numeric_limits<float>::quiet_NaN());
  const size_t count = plan.windows.size(), span = size_t(plan.t1 - plan.t0);
  if (count == 0 || span == 0) return pred;
  cudaStream_t st = ctx.stream();
  if (buf.windows.size() < count) buf.windows = DeviceBuffer<int4>(count);
  if (buf.pred.size() < size_t(plan.N) * span * K) buf.pred = DeviceBuffer<float>(size_t(plan.N) * span * K);
  std::vector<int4> table(count);
  for (size_t i = 0; i < count; ++i) {
    const PlanWindow& w = plan.windows[i];
    table[i] = make_int4(w.instrument, w.start, w.keep_from, w.keep_to);
  }
  MLALPHA_CUDA_CHECK(cudaMemcpyAsync(buf.windows.data(), table.data(), count * sizeof(int4), cudaMemcpyHostToDevice, st));
  gpu::fill_nan(buf.pred.data(), size_t(plan.N) * span * K, st);
  for (size_t w0 = 0; w0 < count; w0 += size_t(B)) {
    const int nb = int(std::min(count - w0, size_t(B)));
    gpu::gather_windows(buf.windows.data(), int(w0), nb, B, L, x.x, x.T, x.F, xb, st);
    model.forward(params, xb, params16);
    gpu::scatter_kept_rows(buf.windows.data(), int(w0), nb, L, K, plan.t0, plan.t1, model.out(), buf.pred.data(), st);
  }
  std::vector<float> kept(size_t(plan.N) * span * K);
  MLALPHA_CUDA_CHECK(cudaMemcpyAsync(kept.data(), buf.pred.data(), kept.size() * sizeof(float), cudaMemcpyDeviceToHost, st));
  ctx.synchronize();  // the table and the kept rows stay valid until here
  for (int i = 0; i < plan.N; ++i)
    std::copy_n(kept.begin() + ptrdiff_t(size_t(i) * span * K), span * K,
                pred.begin() + ptrdiff_t((size_t(i) * plan.T + plan.t0) * K));
  return pred;
}

std::vector<float> predict_gpu(Context& ctx, const ModelLayout& lay, const std::vector<float>& params, const Panel& p,
                               const WindowPlan& plan, int B, Precision precision) {
  check_panel(lay, p.F, p.K);
  require(params.size() == lay.table.total(), "predict: parameter arena has the wrong size");
  GpuModel model(ctx, lay, B, plan.L, precision, ModelUse::kForward);
  DeviceBuffer<float> dparams(params.size()), x(p.x.size()), xb(size_t(B) * plan.L * p.F);
  dparams.upload(params);
  x.upload(p.x.data(), p.x.size());
  // BF16: the weights' bf16 copy the model's GEMMs read, made once.
  DeviceBuffer<__nv_bfloat16> params16(precision == Precision::BF16 ? params.size() : 0);
  if (params16.size()) gpu::cast_bf16(dparams.data(), params16.data(), params16.size(), ctx.stream());
  PlanBuffers buf;
  return predict_gpu(ctx, lay, model, xb.data(), dparams.data(), params16.size() ? params16.data() : nullptr,
                     {x.data(), p.N, p.T, p.F}, plan, buf);
}

std::vector<float> predict_gpu(const ModelLayout& layout, const std::vector<float>& params, const Panel& p,
                               const WindowPlan& plan, int B, Precision precision) {
  Context ctx(0);
  return predict_gpu(ctx, layout, params, p, plan, B, precision);
}

}  // namespace mlalpha
