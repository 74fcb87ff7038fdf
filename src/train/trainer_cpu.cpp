#include "train/trainer_cpu.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/error.h"
#include "model/layer_shapes.h"
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
  if (tc_.state == StateMode::Carry) {
    const int t_begin = gather_.t_begin, t_end = gather_.t_begin + gather_.T;
    std::shared_ptr<const PresentRows> present = opt.present;
    require(!present || (present->t_begin == t_begin && present->t_end == t_end &&
                         present->rows.size() == size_t(data_.N)),
            "CpuTrainer: the shared present rows are of another range or panel");
    if (gather_.dates > 0) {  // time batches: date-aligned lanes, presence read from the panel by the gather
      time_carry_ = std::make_unique<TimeCarryParams>(
          TimeCarryParams{data_.N, gather_.T, tc_.L, gather_.dates, gather_.G, tc_.seed});
    } else {
      if (!present) present = present_rows(data_, t_begin, t_end);
      carry_ = std::make_unique<CarrySampler>(std::move(present), B, tc_.L, tc_.seed);
    }
    carry_conv_.assign(size_t(mc.NL) * carry_conv_floats(mc, B), 0.0f);
    carry_ssm_.assign(size_t(mc.NL) * carry_ssm_floats(mc, B), 0.0f);
    reset_.assign(size_t(B), 1);
  }
}

// The lanes the sampler resets start this step's window from zero; the others from the states the last step
// ended with.
void CpuTrainer::reset_lanes() {
  const ModelConfig& c = layout_.cfg;
  const int B = gather_.B;
  const size_t nconv = carry_conv_floats(c, 1), nssm = carry_ssm_floats(c, 1);
  for (int l = 0; l < c.NL; ++l)
    for (int b = 0; b < B; ++b) {
      if (!reset_[size_t(b)]) continue;
      float* conv = carry_conv_.data() + (size_t(l) * B + b) * nconv;
      float* ssm = carry_ssm_.data() + (size_t(l) * B + b) * nssm;
      std::fill(conv, conv + nconv, 0.0f);
      std::fill(ssm, ssm + nssm, 0.0f);
    }
}

CpuTrainer::~CpuTrainer() = default;

int CpuTrainer::threads() const { return fast_ ? fast_->threads() : 1; }

StepRecord CpuTrainer::step() {
  const ModelConfig& c = layout_.cfg;
  const GatherParams& g = gather_;
  const Clock::time_point t0 = Clock::now();
  // Carry: the sampler masks the burn-in rows itself (a lane's first window after a reset only), so the loss
  // takes none.
  int burn_in = tc_.burn_in;
  CarryState<float> carry;
  const bool carried = carry_ || time_carry_;
  if (carried) {
    if (carry_) carry_->gather(step_, data_, tc_.burn_in, xb_.data(), yb_.data(), reset_.data());
    else {
      // Time batches skip an instrument's missing dates: present rows first, the model told which (RowMap).
      lane_rows_.resize(size_t(g.B));
      lane_dates_.resize(size_t(g.B) * tc_.L);
      gather_time_carry(*time_carry_, data_, g.t_begin, step_, tc_.burn_in, xb_.data(), yb_.data(), reset_.data(),
                        lane_rows_.data(), lane_dates_.data());
    }
    reset_lanes();
    burn_in = 0;
    // in and out the same buffers: the models copy the in states before they write the out ones
    carry = {carry_conv_.data(), carry_ssm_.data(), carry_conv_.data(), carry_ssm_.data()};
    if (time_carry_) carry.rows = lane_rows_.data(), carry.dates = lane_dates_.data();
  } else {
    gather_batch(g, data_.x.data(), data_.y.data(), step_, xb_.data(), yb_.data());
  }
  std::fill(grads_.begin(), grads_.end(), 0.0f);
  const LossParams lp{g.B, tc_.L, c.K, tc_.loss, tc_.huber_delta, burn_in, tc_.cross_section(data_.N)};
  ref::LossResult<float> loss;
  if (fast_) {
    fast_->forward(params_.data(), xb_.data(), g.B, tc_.L, carried ? &carry : nullptr);
    loss = fast_->loss(yb_.data(), lp);
  } else {
    ref_->forward(params_.data(), xb_.data(), g.B, tc_.L, carried ? &carry : nullptr);
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
    // A non-finite batch may have left non-finite states: every lane starts its next window from zero rather than
    // carry them (the weights, too, stay as they were).
    std::fill(carry_conv_.begin(), carry_conv_.end(), 0.0f);
    std::fill(carry_ssm_.begin(), carry_ssm_.end(), 0.0f);
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

std::vector<float> CpuTrainer::predict_carry(const Panel& p, int t0, int t1, const std::vector<float>* params) {
  const CarryInput in = carry_input(p, t0, t1);
  if (in.plan.windows.empty()) return carry_output(in, {}, p);
  return carry_output(in, predict(in.compact, in.plan, carry_prediction_tile(tc_, p.N, in.plan.L), params), p);
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
  s.carry_conv = carry_conv_;
  s.carry_ssm = carry_ssm_;
  return s;
}

void CpuTrainer::load_state(const TrainState& s) {
  check_train_state(s, params_.size(), tc_.seed, "CpuTrainer::load_state");
  check_carry_sizes(s, layout_.cfg, "CpuTrainer::load_state");
  // A carry run continues from the states its lanes carried; a state of step 0 (train.init's weights) has none
  // yet: the lanes start from zero, as a fresh run's do.
  const bool has_carry = !s.carry_ssm.empty();
  if (carry_ || time_carry_) {
    require(has_carry || s.step == 0,
            "CpuTrainer::load_state: train.state = 'carry', but the state of step " + std::to_string(s.step) +
                " holds no carried states (saved by a zero-state run?); resume it with the train.state it was trained with");
    require(!has_carry || (s.carry_conv.size() == carry_conv_.size() && s.carry_ssm.size() == carry_ssm_.size()),
            "CpuTrainer::load_state: the carried states are of " + std::to_string(s.carry_ssm.size()) +
                " SSM floats, this trainer's lanes hold " + std::to_string(carry_ssm_.size()) +
                " (another train.batch)");
    if (has_carry) {
      carry_conv_ = s.carry_conv;
      carry_ssm_ = s.carry_ssm;
    } else {
      std::fill(carry_conv_.begin(), carry_conv_.end(), 0.0f);
      std::fill(carry_ssm_.begin(), carry_ssm_.end(), 0.0f);
    }
  } else {
    require(!has_carry, "CpuTrainer::load_state: the state holds carried states (a train.state = 'carry' run's), but "
                        "this trainer has train.state = 'zero'; resume it with train.state = 'carry'");
  }
  params_ = s.params;
  m_ = s.m;
  v_ = s.v;
  step_ = s.step;
  skipped_ = s.skipped_total;
}

}  // namespace mlalpha
