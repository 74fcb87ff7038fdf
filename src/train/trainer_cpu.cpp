#include "train/trainer_cpu.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "data/synthetic.h"
#include "train/optim.h"
#include "train/schedule.h"

namespace mlalpha {

CpuTrainer::CpuTrainer(const ModelConfig& mc, const TrainConfig& tc, const Panel& data)
    : layout_(mc), tc_(tc), data_(data), model_(layout_) {
  tc_.validate();
  data_.validate();
  require(data_.F == mc.F, "dataset has F = " + std::to_string(data_.F) + " features but model.F = " +
                               std::to_string(mc.F));
  require(data_.K == mc.K, "dataset has K = " + std::to_string(data_.K) + " targets but model.K = " +
                               std::to_string(mc.K));
  require(tc_.L <= data_.T, "train.L = " + std::to_string(tc_.L) + " exceeds the series length T = " +
                                std::to_string(data_.T));
  params_ = init_params(layout_, tc_.seed);
  grads_.assign(params_.size(), 0.0f);
  m_.assign(params_.size(), 0.0f);
  v_.assign(params_.size(), 0.0f);
  decay_ = layout_.table.decay_mask();
  xb_.resize(size_t(tc_.B) * tc_.L * mc.F);
  yb_.resize(size_t(tc_.B) * tc_.L * mc.K);
}

StepRecord CpuTrainer::step() {
  const ModelConfig& c = layout_.cfg;
  gather_batch(data_, tc_.seed, step_, tc_.B, tc_.L, xb_.data(), yb_.data());
  model_.forward(params_.data(), xb_.data(), tc_.B, tc_.L);
  const auto lr = model_.loss(yb_.data(), {tc_.B, tc_.L, c.K, tc_.loss, tc_.huber_delta, tc_.burn_in});
  std::fill(grads_.begin(), grads_.end(), 0.0f);
  model_.backward(params_.data(), grads_.data(), nullptr);
  const double nsq = ref::grad_norm_sq(grads_.data(), grads_.size());
  const ClipResult clip = clip_scale(nsq, tc_.clip);
  const ScheduleParams sched{tc_.lr, tc_.min_lr_ratio, tc_.warmup, tc_.steps, tc_.schedule == Schedule::Cosine};
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
