#include "train/trainer_cpu.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "data/sampler.h"
#include "train/optim.h"
#include "train/schedule.h"
#include "train/train_plan.h"

namespace mlalpha {
namespace {

// Everything checked before the first allocation: the configs against the dataset, then the host memory
// the run will hold against what this machine has available.
const ModelConfig& preflight(const ModelConfig& mc, const TrainConfig& tc, const Panel& data, TrainRange range) {
  check_cpu_training(mc, tc, data, range);
  return mc;
}

}  // namespace

void check_cpu_training(const ModelConfig& mc, const TrainConfig& tc, const Panel& data, TrainRange range, int members) {
  validate_training(mc, tc, data, range);
  MemoryEstimate e = estimate_cpu_training(mc, tc, data.N);
  for (double* part : {&e.params, &e.activations, &e.workspaces, &e.batch, &e.other}) *part *= members;
  check_memory(e, tc, data.N, data.T, host_available_bytes(),
               members > 1 ? "the CPU training step of the population" : "the CPU training step", "this machine");
}

CpuTrainer::CpuTrainer(const ModelConfig& mc, const TrainConfig& tc, const Panel& data, TrainRange range)
    : layout_(preflight(mc, tc, data, range)),
      tc_(tc),
      data_(data),
      gather_(gather_params(tc, data, range)),
      model_(layout_) {
  params_ = init_params(layout_, tc_.seed);
  grads_.assign(params_.size(), 0.0f);
  m_.assign(params_.size(), 0.0f);
  v_.assign(params_.size(), 0.0f);
  decay_ = layout_.table.decay_mask();
  const size_t B = size_t(tc_.windows_per_step(data.N));
  xb_.resize(B * tc_.L * mc.F);
  yb_.resize(B * tc_.L * mc.K);
}

StepRecord CpuTrainer::step() {
  const ModelConfig& c = layout_.cfg;
  const GatherParams& g = gather_;
  gather_batch(g, data_.x.data(), data_.y.data(), step_, xb_.data(), yb_.data());
  model_.forward(params_.data(), xb_.data(), g.B, tc_.L);
  const auto lr = model_.loss(yb_.data(), {g.B, tc_.L, c.K, tc_.loss, tc_.huber_delta, tc_.burn_in,
                                           tc_.cross_section(data_.N)});
  std::fill(grads_.begin(), grads_.end(), 0.0f);
  model_.backward(params_.data(), grads_.data(), nullptr);
  const double nsq = ref::grad_norm_sq(grads_.data(), grads_.size());
  const ClipResult clip = clip_scale(nsq, tc_.clip);
  const ScheduleParams sched = schedule_params(tc_);
  StepRecord st{};
  st.lr = lr_at(sched, step_);
  st.loss = lr.loss;
  st.grad_norm = float(std::sqrt(nsq));
  st.clip_scale = clip.scale;
  st.skipped = clip.skip;
  if (!clip.skip) {
    AdamWParams a{st.lr, tc_.beta1, tc_.beta2, tc_.eps, tc_.weight_decay, step_ + 1 - skipped_};
    ref::adamw(params_.data(), grads_.data(), m_.data(), v_.data(), decay_.data(), params_.size(), a, clip.scale);
  } else {
    ++skipped_;
  }
  st.step = ++step_;
  return st;
}

TrainState CpuTrainer::state() const {
  TrainState s;
  s.params = params_;
  s.m = m_;
  s.v = v_;
  s.step = step_;
  s.adam_step = step_ - skipped_;  // step() derives the AdamW step from these two
  s.skipped_total = skipped_;
  s.seed = tc_.seed;
  return s;
}

void CpuTrainer::load_state(const TrainState& s) {
  check_train_state(s, params_.size(), tc_.seed, "CpuTrainer::load_state");
  params_ = s.params;
  m_ = s.m;
  v_ = s.v;
  step_ = s.step;
  skipped_ = s.skipped_total;
}

}  // namespace mlalpha
