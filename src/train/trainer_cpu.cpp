#include "train/trainer_cpu.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/error.h"
#include "model/model_cpu.h"
#include "train/optim_cpu.h"
#include "cpu/thread_pool.h"
#include "data/sampler.h"
#include "model/model_ref.h"
#include "predict/predict.h"
#include "train/optim.h"
#include "train/schedule.h"
#include "train/train_plan.h"

namespace mlalpha {
namespace {

// Checked before the first allocation (the member's settings are, by plan_member): the host memory the run
// will hold against what this machine has available.
const ModelConfig& preflight(const Member& m, const CpuTrainerOptions& opt) {
  check_cpu_training(m, 1, opt.compute);
  return m.model();
}

using Clock = std::chrono::steady_clock;
double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

}  // namespace

void check_cpu_training(const Member& m, int members, const Compute& compute) {
  const TrainConfig& tc = m.train();
  const Panel& data = m.panel();
  MemoryEstimate e = estimate_cpu_training(m.model(), tc, data.N, compute);
  for (double* part : {&e.params, &e.activations, &e.workspaces, &e.batch, &e.other}) *part *= members;
  check_memory(e, tc, data.N, data.T, host_available_bytes(),
               members > 1 ? "the CPU training step of the population" : "the CPU training step", "this machine");
}

CpuTrainer::CpuTrainer(const ModelConfig& mc, const TrainConfig& tc, const Panel& data, TrainRange range,
                       const CpuTrainerOptions& opt)
    : CpuTrainer(plan_member(mc, tc, data, range), opt) {}

CpuTrainer::CpuTrainer(const Member& member, const CpuTrainerOptions& opt)
    : layout_(preflight(member, opt)),
      tc_(member.train()),
      compute_(opt.compute),
      data_(member.panel()),
      gather_(member.gather()) {
  const ModelConfig& mc = member.model();
  const int B = member.batch();
  if (opt.compute.reference()) {
    ref_ = std::make_unique<RefModel<float>>(layout_);
  } else {
    fast_ = std::make_unique<cpu::CpuModel>(layout_, cpu::CpuOptions{.threads = opt.compute.threads(), .pool = opt.pool});
    fast_->reserve(B, tc_.L);
    norm_partials_.assign(cpu::norm_blocks(layout_.table.total()), 0.0);
  }
  params_ = init_params(layout_, tc_.seed);
  grads_.assign(params_.size(), 0.0f);
  m_.assign(params_.size(), 0.0f);
  v_.assign(params_.size(), 0.0f);
  decay_ = layout_.table.decay_mask();
  xb_.resize(size_t(B) * tc_.L * mc.F);
  yb_.resize(size_t(B) * tc_.L * mc.K);
}

CpuTrainer::~CpuTrainer() = default;

int CpuTrainer::threads() const { return fast_ ? fast_->threads() : 1; }

StepRecord CpuTrainer::step() {
  const ModelConfig& c = layout_.cfg;
  const GatherParams& g = gather_;
  const Clock::time_point t0 = Clock::now();
  gather_batch(g, data_.x.data(), data_.y.data(), step_, xb_.data(), yb_.data());
  std::fill(grads_.begin(), grads_.end(), 0.0f);
  const LossParams lp{g.B, tc_.L, c.K, tc_.loss, tc_.huber_delta, tc_.burn_in, tc_.cross_section(data_.N)};
  ref::LossResult<float> loss;
  if (fast_) {
    fast_->forward(params_.data(), xb_.data(), g.B, tc_.L);
    loss = fast_->loss(yb_.data(), lp);
  } else {
    ref_->forward(params_.data(), xb_.data(), g.B, tc_.L);
    loss = ref_->loss(yb_.data(), lp);
  }
  const Clock::time_point t1 = Clock::now();
  if (fast_) fast_->backward(params_.data(), grads_.data(), nullptr);
  else ref_->backward(params_.data(), grads_.data(), nullptr);
  const Clock::time_point t2 = Clock::now();
  // The fast norm sums fixed blocks in double, the reference in index order: ~1e-16 apart (docs/testing.md).
  const size_t n = params_.size();
  const double nsq = fast_ ? cpu::grad_norm_sq(fast_->pool(), grads_.data(), n, norm_partials_.data())
                           : ref::grad_norm_sq(grads_.data(), n);
  const ClipResult clip = clip_scale(nsq, tc_.clip);
  const ScheduleParams sched = schedule_params(tc_);
  StepRecord st{};
  st.lr = lr_at(sched, step_);
  st.loss = loss.loss;
  st.grad_norm = float(std::sqrt(nsq));
  st.clip_scale = clip.scale;
  st.skipped = clip.skip;
  if (!clip.skip) {
    const int64_t adam_step = step_ + 1 - skipped_;
    if (fast_) {  // the same arithmetic as ref::adamw, bit for bit (train/optim_cpu.h)
      const cpu::AdamWSettings a{st.lr, tc_.beta1, tc_.beta2, tc_.eps, tc_.weight_decay, adam_step};
      cpu::adamw(fast_->pool(), params_.data(), grads_.data(), m_.data(), v_.data(), decay_.data(), n, a, clip.scale);
    } else {
      const AdamWParams a{st.lr, tc_.beta1, tc_.beta2, tc_.eps, tc_.weight_decay, adam_step};
      ref::adamw(params_.data(), grads_.data(), m_.data(), v_.data(), decay_.data(), n, a, clip.scale);
    }
  } else {
    ++skipped_;
  }
  times_ = {seconds(t0, t1), seconds(t1, t2), seconds(t2, Clock::now())};
  st.step = ++step_;
  return st;
}

std::vector<float> CpuTrainer::predict(const Panel& p, const WindowPlan& plan, int B, const std::vector<float>* params) {
  const std::vector<float>& w = params ? *params : params_;
  if (fast_) return predict_cpu(*fast_, w, p, plan, B);
  return predict_cpu(layout_, w, p, plan, B, compute_);
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
