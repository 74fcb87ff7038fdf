#include "train/trainer_gpu.h"

#include <algorithm>
#include <cstring>

#include "data/sampler.h"
#include "train/schedule.h"
#include "train/train_plan.h"

namespace mlalpha {
namespace {

int ring_slots(const GpuTrainerOptions& opt, const TrainConfig& tc) {
  return opt.ring_size > 0 ? opt.ring_size : int(std::max<int64_t>(1024, 2 * tc.log_every));
}

// Everything checked before the first allocation: the configs against the dataset, then the device memory
// the run will hold against what the GPU has free.
const ModelConfig& preflight(const ModelConfig& mc, const TrainConfig& tc, const Panel& data,
                             const GpuTrainerOptions& opt) {
  validate_training(mc, tc, data);
  check_memory(estimate_gpu_training(mc, tc, data.N, data.T, ring_slots(opt, tc)), tc, data.N, data.T,
               gpu_free_bytes(), "the GPU training step", "the GPU");
  return mc;
}

}  // namespace

GpuTrainer::GpuTrainer(Context& ctx, const ModelConfig& mc, const TrainConfig& tc, const Panel& data,
                       const GpuTrainerOptions& opt)
    : ctx_(ctx),
      layout_(preflight(mc, tc, data, opt)),
      tc_(tc),
      opt_(opt),
      arena_(layout_.table),
      model_(ctx, layout_, tc.windows_per_step(data.N), tc.L, opt.tf32),
      N_(data.N),
      T_(data.T) {
  opt_.ring_size = ring_slots(opt_, tc_);
  // The dataset lives in device memory for the whole run (DESIGN section 2, step 1).
  data_x_ = DeviceBuffer<float>(data.x.size());
  data_x_.upload(data.x.data(), data.x.size());
  data_y_ = DeviceBuffer<float>(data.y.size());
  data_y_.upload(data.y.data(), data.y.size());
  const size_t B = size_t(tc_.windows_per_step(N_));
  xb_ = DeviceBuffer<float>(B * tc_.L * mc.F);
  yb_ = DeviceBuffer<float>(B * tc_.L * mc.K);
  norm_partials_ = DeviceBuffer<float>(gpu::grad_norm_blocks(layout_.table.total()));
  arena_.params.upload(init_params(layout_, tc_.seed));
  DeviceStepState s;
  std::memset(&s, 0, sizeof s);
  state_ = DeviceBuffer<DeviceStepState>(1);
  state_.upload(&s, 1);
  ring_ = MappedBuffer<StepRecord>(size_t(opt_.ring_size));
  MLALPHA_CUDA_CHECK(cudaDeviceSynchronize());  // setup done before the first step
}

GpuTrainer::~GpuTrainer() = default;

void GpuTrainer::enqueue_step() {
  cudaStream_t st = ctx_.stream();
  const ModelConfig& c = layout_.cfg;
  const size_t n = layout_.table.total();
  // The sampler reads the step counter from device memory, so every replay of the graph draws new windows.
  const long long* step_ptr = &state_.data()->step;
  gpu::gather_batch(gather_params(tc_, N_, T_, c.F, c.K), data_x_.data(), data_y_.data(), step_ptr, xb_.data(),
                    yb_.data(), st);
  MLALPHA_CUDA_CHECK(cudaMemsetAsync(arena_.grads.data(), 0, arena_.grads.bytes(), st));
  model_.forward(arena_.params.data(), xb_.data());
  model_.loss(yb_.data(), model_.loss_params(tc_, tc_.cross_section(N_)));
  model_.backward(arena_.params.data(), arena_.grads.data(), nullptr);
  gpu::grad_norm_sq_phase1(arena_.grads.data(), n, norm_partials_.data(), st);
  gpu::grad_norm_sq_phase2(norm_partials_.data(), gpu::grad_norm_blocks(n), state_.data(), st);
  const ScheduleParams sched = schedule_params(tc_);
  gpu::grad_clip_scale({tc_.clip, tc_.beta1, tc_.beta2, sched}, state_.data(), model_.loss_value(), ring_.device(),
                       opt_.ring_size, st);
  gpu::adamw_step_devscale(arena_.params.data(), arena_.grads.data(), arena_.m.data(), arena_.v.data(),
                           arena_.decay.data(), n, {tc_.beta1, tc_.beta2, tc_.eps, tc_.weight_decay}, state_.data(),
                           st);
}

void GpuTrainer::step() {
  // The first step runs eagerly: it creates the cuBLASLt plans (allocation-free afterwards) and is a
  // real step. Later steps replay one captured graph.
  if (!opt_.graph || !warmed_up_) {
    enqueue_step();
    warmed_up_ = true;
  } else {
    if (!graph_exec_) graph_exec_ = CudaGraphExec(capture_graph(ctx_.stream(), [&] { enqueue_step(); }));
    graph_exec_.launch(ctx_.stream());
  }
  ++enqueued_;
}

StepRecord GpuTrainer::record(int64_t s) {
  require(s >= first_step_ && s <= enqueued_ && enqueued_ - s < opt_.ring_size,
          "GpuTrainer::record: step " + std::to_string(s) + " is not in the ring (have steps " +
              std::to_string(std::max<int64_t>(first_step_, enqueued_ - opt_.ring_size + 1)) + ".." +
              std::to_string(enqueued_) + ")");
  if (s > synced_) {  // one synchronisation covers every step enqueued so far
    ctx_.synchronize();
    synced_ = enqueued_;
  }
  const volatile StepRecord& r = ring_.host()[(s - 1) % opt_.ring_size];
  StepRecord out;
  out.step = r.step;
  out.loss = r.loss;
  out.grad_norm = r.grad_norm;
  out.clip_scale = r.clip_scale;
  out.lr = r.lr;
  out.skipped = r.skipped;
  out.pad_ = 0;
  return out;
}

std::vector<float> GpuTrainer::params() {
  ctx_.synchronize();
  return arena_.params.download();
}

TrainState GpuTrainer::state() {
  ctx_.synchronize();
  TrainState s;
  s.params = arena_.params.download();
  s.m = arena_.m.download();
  s.v = arena_.v.download();
  const DeviceStepState d = state_.download()[0];
  s.step = d.step;
  s.adam_step = d.adam_step;
  s.skipped_total = d.skipped_total;
  s.seed = tc_.seed;
  return s;
}

void GpuTrainer::load_state(const TrainState& s) {
  check_train_state(s, layout_.table.total(), tc_.seed, "GpuTrainer::load_state");
  ctx_.synchronize();  // no step in flight reads the buffers being replaced
  arena_.params.upload(s.params);
  arena_.m.upload(s.m);
  arena_.v.upload(s.v);
  // Every other field of the step state is rewritten by the next step before it is read.
  DeviceStepState d;
  std::memset(&d, 0, sizeof d);
  d.step = s.step;
  d.adam_step = s.adam_step;
  d.skipped_total = s.skipped_total;
  state_.upload(&d, 1);
  MLALPHA_CUDA_CHECK(cudaDeviceSynchronize());  // pageable uploads complete before the next step's kernels
  enqueued_ = synced_ = s.step;
  first_step_ = s.step + 1;
}

}  // namespace mlalpha
