#include "model/model_step_gpu.h"

#include <cstring>
#include <string>

#include "core/cuda_check.h"
#include "core/error.h"

namespace mlalpha {

GpuStepper::GpuStepper(Context& ctx, const ModelLayout& layout, std::span<const float> params, int instruments,
                       GpuStepperOptions options)
    : ctx_(ctx), lay_(layout), opt_(options) {
  require(params.size() == lay_.table.total(), "GpuStepper: the weights hold " + std::to_string(params.size()) +
                                                   " floats, the model's arena " +
                                                   std::to_string(lay_.table.total()));
  require(instruments >= 1, "a stream needs at least one instrument, got " + std::to_string(instruments));
  int major = 0;
  MLALPHA_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, ctx_.device()));
  pdl_ = opt_.pdl && major >= 9;
  const ModelConfig& c = lay_.cfg;
  const StepDims d = step_dims(c, instruments);
  if (opt_.fused) {
    fused_refusal_ = gpu::fused_step_unsupported(d, ctx_.device());
    fused_ = fused_refusal_.empty();
  }
  params_ = DeviceBuffer<float>(params.size());
  params_.upload(params.data(), params.size());
  std::vector<float> wT(size_t(c.F) * c.D);  // input_proj.weight (D, F) → (F, D): coalesced in the input kernel
  for (int d = 0; d < c.D; ++d)
    for (int f = 0; f < c.F; ++f) wT[size_t(f) * c.D + d] = params[lay_.in_w + size_t(d) * c.F + f];
  w_inT_ = DeviceBuffer<float>(wT.size());
  w_inT_.upload(wT);
  const size_t fin = gpu::fused_in_proj_floats(d), fout = gpu::fused_out_proj_floats(d);
  if (fused_) {  // each layer's in_proj and out_proj in the fused kernel's per-head layout
    std::vector<float> packed(c.NL * (fin + fout));
    for (int l = 0; l < c.NL; ++l)
      gpu::pack_fused_weights(d, params.data() + lay_.layers[l].in_proj_w, params.data() + lay_.layers[l].out_proj_w,
                              packed.data() + l * (fin + fout), packed.data() + l * (fin + fout) + fin);
    fused_w_ = DeviceBuffer<float>(packed.size());
    fused_w_.upload(packed);
  }
  const float* P = params_.data();
  for (size_t l = 0; l < lay_.layers.size(); ++l) {
    const LayerOffsets& o = lay_.layers[l];
    const float* packed = fused_ ? fused_w_.data() + l * (fin + fout) : nullptr;
    layer_w_.push_back({.norm_w = P + o.norm_w,
                        .in_proj_w = P + o.in_proj_w,
                        .conv_w = P + o.conv_w,
                        .conv_b = P + o.conv_b,
                        .dt_bias = P + o.dt_bias,
                        .A_log = P + o.A_log,
                        .Dskip = P + o.D,
                        .gnorm_w = P + o.gnorm_w,
                        .out_proj_w = P + o.out_proj_w,
                        .in_proj_fused = packed,
                        .out_proj_fused = fused_ ? packed + fin : nullptr});
  }
  allocate(instruments);
}

namespace {
// Floats of the row buffer: the row (I·F floats), then the mask (I bytes) rounded up to whole floats.
size_t row_floats(size_t I, int F) { return I * F + (I + sizeof(float) - 1) / sizeof(float); }
}  // namespace

void GpuStepper::allocate(int instruments) {
  const ModelConfig& c = lay_.cfg;
  const StepDims d = step_dims(c, instruments);
  graph_ = CudaGraphExec();
  I_ = instruments;
  const size_t I = size_t(instruments);
  conv_ = DeviceBuffer<float>(size_t(c.NL) * I * d.conv_floats());
  ssm_ = DeviceBuffer<float>(size_t(c.NL) * I * d.ssm_floats());
  h_ = DeviceBuffer<float>(I * d.D);
  zxo_ = DeviceBuffer<float>(I * d.proj);
  v_ = DeviceBuffer<float>(I * d.di);
  ss_ = DeviceBuffer<float>(I * d.H);
  present_ = DeviceBuffer<uint8_t>(I);
  row_in_ = MappedBuffer<float>(row_floats(I, d.F));
  row_ = DeviceBuffer<float>(row_floats(I, d.F));
  out_ = MappedBuffer<float>(I * d.K);
  conv_.fill_bytes(0, ctx_.stream());
  ssm_.fill_bytes(0, ctx_.stream());
  // One bar with every instrument absent: it loads the kernels' modules outside the capture and leaves the
  // state as it is (absent rows change nothing).
  std::memset(mask_in(), 0, I);
  std::memset(x_in(), 0, I * d.F * sizeof(float));
  enqueue();
  ctx_.synchronize();
  if (!opt_.graph) return;
  try {
    graph_ = CudaGraphExec(capture_graph(ctx_.stream(), [&] { enqueue(); }));
  } catch (const Error&) {
    if (!pdl_) throw;
    // A driver that cannot capture programmatic dependencies (they need CUDA 12.3): the plain launches then.
    (void)cudaGetLastError();
    pdl_ = false;
    graph_ = CudaGraphExec(capture_graph(ctx_.stream(), [&] { enqueue(); }));
  }
}

namespace {
// Bars of at most this many instruments let each kernel's successor be scheduled as soon as it starts (StepDims::
// early_dependents): measured on the H200 (docs/benchmarks.md, "Streaming"), the early trigger saved 22 µs a bar
// at one instrument and cost 46 µs at 100, where the waiting blocks share the SMs with the running grid.
constexpr int kEarlyDependentsMax = 32;
}  // namespace

void GpuStepper::enqueue() {
  const ModelConfig& c = lay_.cfg;
  StepDims d = step_dims(c, I_);
  d.early_dependents = I_ <= kEarlyDependentsMax;
  const gpu::StepLaunch l{ctx_.stream(), pdl_};
  const StepBuffers buf{.h = h_.data(), .zxo = zxo_.data(), .v = v_.data(), .ss = ss_.data(),
                        .present = present_.data()};
  const float* P = params_.data();
  // The row and the mask as the bar starts on the device (the caller writes them before launch() and not again
  // before wait()): a copy of the same bytes, so the same bits as the kernel reading the host memory itself.
  MLALPHA_CUDA_CHECK(cudaMemcpyAsync(row_.data(), x_in(), row_.bytes(), cudaMemcpyHostToDevice, ctx_.stream()));
  const float* x = row_.data();
  const auto* mask = reinterpret_cast<const uint8_t*>(x + size_t(I_) * c.F);
  gpu::step_input(d, x, mask, w_inT_.data(), P + lay_.in_b, buf, l);
  for (int layer = 0; layer < c.NL; ++layer) {
    const StepLayerState s{.conv = conv_.data() + size_t(layer) * I_ * d.conv_floats(),
                           .ssm = ssm_.data() + size_t(layer) * I_ * d.ssm_floats()};
    if (fused_)
      gpu::step_layer_fused(d, layer_w_[layer], s, buf, l);
    else
      gpu::step_layer(d, layer_w_[layer], s, buf, l);
  }
  gpu::step_head(d, P + lay_.norm_f, P + lay_.head_w, P + lay_.head_b, buf, out_.device(), l);
}

void GpuStepper::launch() {
  if (graph_)
    graph_.launch(ctx_.stream());
  else
    enqueue();
}

void GpuStepper::step(const float* x, const uint8_t* mask, float* out) {
  const ModelConfig& c = lay_.cfg;
  // Plain copies into the pinned buffers: no kernel reads them until launch(), an opaque call.
  std::memcpy(x_in(), x, size_t(I_) * c.F * sizeof(float));
  if (mask)
    std::memcpy(mask_in(), mask, size_t(I_));
  else
    std::memset(mask_in(), 1, size_t(I_));
  launch();
  wait();
  std::memcpy(out, this->out(), size_t(I_) * c.K * sizeof(float));
}

void GpuStepper::reset() {
  conv_.fill_bytes(0, ctx_.stream());
  ssm_.fill_bytes(0, ctx_.stream());
  ctx_.synchronize();
}

void GpuStepper::reset(std::span<const int> which) {
  for (int i : which)
    require(i >= 0 && i < I_, "stream: cannot reset instrument " + std::to_string(i) + " of " + std::to_string(I_));
  const StepDims d = step_dims(lay_.cfg, I_);
  for (int l = 0; l < lay_.cfg.NL; ++l)
    for (int i : which) {
      const size_t k = size_t(l) * I_ + i;
      MLALPHA_CUDA_CHECK(cudaMemsetAsync(conv_.data() + k * d.conv_floats(), 0, d.conv_floats() * sizeof(float),
                                         ctx_.stream()));
      MLALPHA_CUDA_CHECK(
          cudaMemsetAsync(ssm_.data() + k * d.ssm_floats(), 0, d.ssm_floats() * sizeof(float), ctx_.stream()));
    }
  ctx_.synchronize();
}

StepState GpuStepper::export_state() const {
  ctx_.synchronize();
  StepState s = StepState::zeros(lay_.cfg, I_);
  if (!s.conv.empty())
    MLALPHA_CUDA_CHECK(cudaMemcpy(s.conv.data(), conv_.data(), conv_.bytes(), cudaMemcpyDeviceToHost));
  MLALPHA_CUDA_CHECK(cudaMemcpy(s.ssm.data(), ssm_.data(), ssm_.bytes(), cudaMemcpyDeviceToHost));
  return s;
}

void GpuStepper::import_state(const StepState& s) {
  s.check(lay_.cfg);
  ctx_.synchronize();
  if (s.instruments != I_) allocate(s.instruments);
  if (!s.conv.empty()) conv_.upload(s.conv);
  ssm_.upload(s.ssm);
}

void GpuStepper::remap(std::span<const int> from) { import_state(export_state().remapped(from)); }

}  // namespace mlalpha
