#include "train/population_trainer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/rng.h"
#include "data/carry_sampler_gpu.h"
#include "data/sampler.h"
#include "model/layer_shapes.h"
#include "dist/nccl.h"
#include "ops/cast/cast.h"
#include "train/schedule.h"

namespace mlalpha {
namespace {

int ring_slots(const GpuTrainerOptions& opt, const std::vector<Member>& members) {
  if (opt.ring_size > 0) return opt.ring_size;
  int64_t log_every = 1;
  for (const Member& m : members) log_every = std::max(log_every, m.train().log_every);
  return int(std::max<int64_t>(1024, 2 * log_every));
}

std::string member_where(size_t m, size_t E) { return E > 1 ? "population member " + std::to_string(m) + ": " : ""; }

// Everything checked before the first allocation beyond each member's own checks (plan_member): the members
// against each other (one step shape), then the device memory against what the GPU has free.
const ModelConfig& preflight(const std::vector<Member>& members, const GpuTrainerOptions& opt) {
  require(!members.empty(), "a population needs at least one member");
  require(members.size() <= 65535, "a population holds at most 65535 members, got " + std::to_string(members.size()));
  const size_t E = members.size();
  const ModelConfig& mc = members[0].model();
  const TrainConfig& t0 = members[0].train();
  const int B0 = members[0].batch();
  for (size_t m = 1; m < E; ++m) {
    const TrainConfig& t = members[m].train();
    require(members[m].batch() == B0 && t.L == t0.L,
            member_where(m, E) + "the batch (" + batch_text(t, members[m].panel().N) + ", train.seq_len = " +
                std::to_string(t.L) + ") differs from member 0's (" + batch_text(t0, members[0].panel().N) +
                ", train.seq_len = " + std::to_string(t0.L) + "): the members of a population share one step shape");
    require(t.precision == t0.precision, member_where(m, E) + "train.precision = \"" + to_string(t.precision) +
                                             "\" differs from member 0's \"" + to_string(t0.precision) +
                                             "\": the members of a population share one step");
  }
  const double free_b = gpu_free_bytes();
  if (E == 1) {  // one model: the message names the settings that size it
    const Panel& d = members[0].panel();
    check_memory(estimate_gpu_training(mc, t0, d.N, d.T, ring_slots(opt, members)), t0, d.N, d.T, free_b,
                 "the GPU training step", "the GPU");
    return mc;
  }
  const PopulationMemory need = estimate_gpu_population(mc, members, ring_slots(opt, members));
  if (need.members(int(E), 1) > free_b) {
    const int fit = need.fitting(free_b, 1);
    throw Error("a population of " + std::to_string(E) + " members needs " + format_bytes(need.members(int(E), 1)) +
                " of GPU memory (" + format_bytes(need.per_member) + " a member for weights, gradients and AdamW state, " +
                format_bytes(need.per_lane + need.shared) +
                " shared: activations, workspaces and the training panels), the GPU has " + format_bytes(free_b) +
                " free; " +
                (fit > 0 ? std::to_string(fit) + " members would fit (lower train.models or the [sweep] lists)"
                         : std::string("not even one member fits: reduce the batch, seq_len or model size")));
  }
  return mc;
}

}  // namespace

void check_gpu_population(const std::vector<Member>& members, const GpuTrainerOptions& opt) {
  preflight(members, opt);
}

std::vector<Member> plan_population(const ModelConfig& mc, const std::vector<PopulationMember>& members) {
  std::vector<Member> out;
  const size_t E = members.size();
  for (size_t m = 0; m < E; ++m) {
    require(members[m].data != nullptr, member_where(m, E) + "no training panel");
    try {
      out.push_back(plan_member(mc, members[m].train, *members[m].data, members[m].range));
    } catch (const Error& e) {
      throw Error(member_where(m, E) + e.what());
    }
  }
  return out;
}

int PopulationMemory::fitting(double available, int lanes) const {
  const double fixed = shared + per_lane * lanes;
  if (available < fixed + per_member) return 0;
  return int(std::min(65535.0, std::floor((available - fixed) / per_member)));
}

namespace {
// The lanes a population runs on: opt.lanes, or min(E, 8) lowered while the lanes' activations would take
// more than a quarter of the free memory or the population more than 90% of it (the preflight made sure
// one lane fits). Eight: on the H200 a population of small steps (S at 8 windows) ran 6.6× one model's
// step on 4 lanes, 5.3× on 8, 5.2× on 16; of large steps (S, M) the same on 4 to 16.
int lane_count(const ModelConfig& mc, const std::vector<Member>& members, const GpuTrainerOptions& opt) {
  const int E = int(members.size());
  if (opt.lanes > 0) return std::min(opt.lanes, E);
  if (E == 1) return 1;
  const PopulationMemory need = estimate_gpu_population(mc, members, ring_slots(opt, members));
  const double free_b = gpu_free_bytes();
  int lanes = std::min(E, 8);
  while (lanes > 1 && (need.per_lane * lanes > 0.25 * free_b || need.members(E, lanes) > 0.9 * free_b)) --lanes;
  return lanes;
}
}  // namespace

PopulationMemory estimate_gpu_population(const ModelConfig& mc, const std::vector<Member>& members,
                                         int ring_slots) {
  require(!members.empty(), "a population needs at least one member");
  const Panel& p0 = members[0].panel();
  const MemoryEstimate one = estimate_gpu_training(mc, members[0].train(), p0.N, p0.T, ring_slots);
  const double n = double(ModelLayout(mc).table.total());
  PopulationMemory e;
  const double weights16 = members[0].train().precision == Precision::BF16 ? n * 2 : 0;  // the bf16 weight copy
  e.per_member = n * 4 * sizeof(float) + weights16 + one.other + sizeof(gpu::MemberOptim) + 2 * sizeof(float);
  e.per_lane = one.activations + one.workspaces + one.batch + double(Context::kWorkspaceBytes);
  e.shared = n + one.prediction;  // the decay mask; the prediction buffers of the largest panel, below
  double largest = double(p0.N) * p0.T;
  std::vector<const Panel*> seen;
  for (const Member& m : members) {
    const Panel* d = &m.panel();
    if (std::find(seen.begin(), seen.end(), d) != seen.end()) continue;
    seen.push_back(d);
    e.shared += double(d->N) * d->T * (mc.F + mc.K) * sizeof(float);
    if (double(d->N) * d->T > largest) {  // the kept rows of a prediction on the largest panel
      e.shared += (double(d->N) * d->T - largest) * mc.K * sizeof(float);
      largest = double(d->N) * d->T;
    }
  }
  return e;
}

PopulationTrainer::PopulationTrainer(Context& ctx, const ModelConfig& mc,
                                     const std::vector<PopulationMember>& members, const GpuTrainerOptions& opt)
    : PopulationTrainer(ctx, plan_population(mc, members), opt) {}

PopulationTrainer::PopulationTrainer(Context& ctx, const std::vector<Member>& members, const GpuTrainerOptions& opt)
    : ctx_(ctx),
      layout_(preflight(members, opt)),
      opt_(opt),
      n_(layout_.table.total()),
      E_(int(members.size())),
      precision_(members[0].train().precision),
      arena_(layout_.table, E_) {
  opt_.ring_size = ring_slots(opt, members);
  const ModelConfig& mc = members[0].model();
  const int B = members[0].batch(), L = members[0].train().L;
  for (int j = 0, lanes = lane_count(mc, members, opt); j < lanes; ++j) {
    Lane lane;
    if (j > 0) lane.own = std::make_unique<Context>(ctx.device());
    lane.model = std::make_unique<GpuModel>(lane.ctx(ctx_), layout_, B, L, precision_, ModelUse::kTrain);
    lane.xb = DeviceBuffer<float>(size_t(B) * L * mc.F);
    lane.yb = DeviceBuffer<float>(size_t(B) * L * mc.K);
    lanes_.push_back(std::move(lane));
  }
  for (const Member& m : members) {
    tc_.push_back(m.train());
    const Panel* panel = &m.panel();
    auto it = std::find_if(data_.begin(), data_.end(), [&](const Dataset& d) { return d.host == panel; });
    if (it == data_.end()) {
      // The panels live in device memory for the whole run (DESIGN section 2, step 1): the whole time axis,
      // so validation and test windows are gathered on the device too.
      Dataset d;
      d.host = panel;
      d.N = panel->N;
      d.T = panel->T;
      d.x = DeviceBuffer<float>(panel->x.size());
      d.x.upload(panel->x.data(), panel->x.size());
      d.y = DeviceBuffer<float>(panel->y.size());
      d.y.upload(panel->y.data(), panel->y.size());
      data_.push_back(std::move(d));
      it = data_.end() - 1;
    }
    data_of_.push_back(int(it - data_.begin()));
    // Rank r of a data-parallel run draws its own windows: rank 0 those of a run on one GPU, rank r > 0 from
    // the seed mixed with r (core/rng.h), so the ranks' batches are independent and a world of one is a plain run.
    GatherParams g = m.gather();
    const int rank = opt_.comm ? opt_.comm->rank() : 0;
    if (rank > 0) g.seed = mix64(g.seed ^ (0x9e3779b97f4a7c15ull * uint64_t(rank)));
    gather_.push_back(g);
  }
  norm_partials_ = DeviceBuffer<float>(size_t(gpu::grad_norm_blocks(n_)) * E_);
  losses_ = DeviceBuffer<float>(size_t(E_));
  losses_.fill_bytes(0);
  std::vector<gpu::MemberOptim> optim;
  for (int m = 0; m < E_; ++m) {
    const TrainConfig& t = tc_[size_t(m)];
    arena_.params.upload(init_params(layout_, t.seed).data(), n_, size_t(m) * n_);
    optim.push_back({{t.clip, t.beta1, t.beta2, schedule_params(t)}, {t.beta1, t.beta2, t.eps, t.weight_decay}});
  }
  if (precision_ == Precision::BF16) {
    // The bf16 copy of every member's weights: set here and by load_state, kept current by AdamW.
    params16_ = DeviceBuffer<__nv_bfloat16>(n_ * size_t(E_));
    gpu::cast_bf16(arena_.params.data(), params16_.data(), n_ * size_t(E_), ctx_.stream());
  }
  optim_ = DeviceBuffer<gpu::MemberOptim>(size_t(E_));
  optim_.upload(optim);
  std::vector<DeviceStepState> s(static_cast<size_t>(E_));
  std::memset(s.data(), 0, s.size() * sizeof(DeviceStepState));
  state_ = DeviceBuffer<DeviceStepState>(size_t(E_));
  state_.upload(s);
  frozen_host_.assign(size_t(E_), 0);
  frozen_ = DeviceBuffer<int>(size_t(E_));
  frozen_.upload(frozen_host_);
  ring_ = MappedBuffer<StepRecord>(size_t(opt_.ring_size) * E_);
  enqueued_.assign(size_t(E_), 0);
  synced_.assign(size_t(E_), 0);
  first_step_.assign(size_t(E_), 1);
  setup_carry(members);
  MLALPHA_CUDA_CHECK(cudaDeviceSynchronize());  // setup done before the first step
}

// train.state = "carry": each such member's device sampler and its lanes' states (zeros: every lane's first window
// is a reset). Data-parallel ranks share one sampler over world · B lanes, rank r drawing lanes [r·B, (r + 1)·B)
// (carry_sampler_gpu.h); the members of one panel and range share its present rows, on the host and the device.
void PopulationTrainer::setup_carry(const std::vector<Member>& members) {
  carry_.resize(size_t(E_));
  struct Shared {
    int data, t_begin, t_end;
    std::shared_ptr<const PresentRows> host;
    std::shared_ptr<const DeviceRows> device;
  };
  std::vector<Shared> shared;
  const ModelConfig& mc = layout_.cfg;
  const int world = opt_.comm ? opt_.comm->world() : 1, rank = opt_.comm ? opt_.comm->rank() : 0;
  for (int m = 0; m < E_; ++m) {
    const TrainConfig& t = tc_[size_t(m)];
    if (t.state != StateMode::Carry) continue;
    const Member& mem = members[size_t(m)];
    const GatherParams& g = mem.gather();
    const int B = mem.batch();
    auto c = std::make_unique<MemberCarry>();
    c->conv = DeviceBuffer<float>(size_t(mc.NL) * carry_conv_floats(mc, B));
    c->ssm = DeviceBuffer<float>(size_t(mc.NL) * carry_ssm_floats(mc, B));
    c->conv.fill_bytes(0, ctx_.stream());
    c->ssm.fill_bytes(0, ctx_.stream());
    const int t_begin = g.t_begin, t_end = g.t_begin + g.T, di = data_of_[size_t(m)];
    auto it = std::find_if(shared.begin(), shared.end(), [&](const Shared& x) {
      return x.data == di && x.t_begin == t_begin && x.t_end == t_end;
    });
    if (it == shared.end()) {
      Shared x{di, t_begin, t_end, present_rows(mem.panel(), t_begin, t_end), nullptr};
      x.device = std::make_shared<const DeviceRows>(*x.host);
      shared.push_back(std::move(x));
      it = shared.end() - 1;
    }
    if (g.dates > 0) {
      // Time batches: date-aligned lanes (the world's lanes are world · D cross-sections of G), each lane's
      // present rows first (the rows tell the gather which dates an instrument has).
      const TimeCarryParams tp{mem.panel().N, g.T, t.L, world * g.dates, g.G, t.seed};
      c->sampler = std::make_unique<DeviceCarrySampler>(tp, g.t_begin, it->device, mem.panel(), B, rank * B, t.burn_in);
      c->lane_rows = DeviceBuffer<int>(size_t(B));
      c->lane_dates = DeviceBuffer<int>(size_t(B) * t.L);
      carry_[size_t(m)] = std::move(c);
      continue;
    }
    c->sampler = std::make_unique<DeviceCarrySampler>(it->host, it->device, mem.panel(), B, rank * B, world * B, t.L,
                                                      t.burn_in, t.seed);
    carry_[size_t(m)] = std::move(c);
  }
}

PopulationTrainer::~PopulationTrainer() = default;

int PopulationTrainer::first_active() const {
  for (int m = 0; m < E_; ++m)
    if (!frozen_host_[size_t(m)]) return m;
  return -1;
}

void PopulationTrainer::enqueue_step() {
  cudaStream_t st = ctx_.stream();
  MLALPHA_CUDA_CHECK(cudaMemsetAsync(arena_.grads.data(), 0, arena_.grads.bytes(), st));
  const int lanes = int(lanes_.size());
  if (lanes > 1) {
    fork_.record(st);
    for (int j = 1; j < lanes; ++j) fork_.wait_on(lanes_[size_t(j)].ctx(ctx_).stream());
  }
  int dealt = 0;  // active members dealt so far: member k of the active ones runs on lane k mod lanes
  for (int m = 0; m < E_; ++m) {
    if (frozen_host_[size_t(m)]) continue;  // its norm and update are skipped by its frozen flag
    Lane& lane = lanes_[size_t(dealt++ % lanes)];
    GpuModel& model = *lane.model;
    const TrainConfig& t = tc_[size_t(m)];
    const Dataset& d = data_[size_t(data_of_[size_t(m)])];
    const float* P = arena_.params.data() + size_t(m) * n_;
    const __nv_bfloat16* P16 = params16_.size() ? params16_.data() + size_t(m) * n_ : nullptr;
    // The sampler reads the member's step counter from device memory, so every replay draws new windows.
    const long long* step = &state_.data()[m].step;
    LossParams lp = model.loss_params(t, t.cross_section(d.N));
    if (MemberCarry* c = carry_[size_t(m)].get()) {
      // Consecutive windows: the lanes the sampler resets start from zero, the others from the states the last
      // step ended with; the forward overwrites them with this window's final states. The sampler masks the
      // burn-in rows itself (after a reset only), so the loss takes none.
      cudaStream_t ls = lane.ctx(ctx_).stream();
      const ModelConfig& mc = layout_.cfg;
      c->sampler->gather(step, d.x.data(), d.y.data(), lane.xb.data(), lane.yb.data(), ls,
                         c->sampler->dated() ? c->lane_rows.data() : nullptr,
                         c->sampler->dated() ? c->lane_dates.data() : nullptr);
      c->sampler->reset(step, mc.NL, carry_conv_floats(mc, 1), carry_ssm_floats(mc, 1), c->conv.data(), c->ssm.data(),
                        ls);
      CarryState<float> cs{c->conv.data(), c->ssm.data(), c->conv.data(), c->ssm.data()};
      if (c->sampler->dated()) cs.rows = c->lane_rows.data(), cs.dates = c->lane_dates.data();
      model.forward(P, lane.xb.data(), P16, &cs);
      lp.burn_in = 0;
    } else {
      // In bf16 the sampler writes x's bf16 copy into the model's operand buffer as it gathers (no cast launch).
      gpu::gather_batch(rank_gather_params(m), d.x.data(), d.y.data(), step, lane.xb.data(), lane.yb.data(),
                        lane.ctx(ctx_).stream(), model.input16());
      model.forward(P, lane.xb.data(), P16, nullptr, model.input16() != nullptr);
    }
    model.loss(lane.yb.data(), lp, losses_.data() + m);
    model.backward(P, arena_.grads.data() + size_t(m) * n_, nullptr, P16);
  }
  for (int j = 1; j < lanes; ++j) {  // every member's gradients are in before the norm reads them
    lanes_[size_t(j)].done.record(lanes_[size_t(j)].ctx(ctx_).stream());
    lanes_[size_t(j)].done.wait_on(st);
  }
  if (opt_.comm) reduce_over_ranks(st);
  gpu::grad_norm_sq_phase1(arena_.grads.data(), n_, E_, norm_partials_.data(), st);
  gpu::grad_norm_sq_phase2_clip(norm_partials_.data(), gpu::grad_norm_blocks(n_), optim_.data(), E_, state_.data(),
                                losses_.data(), frozen_.data(), ring_.device(), opt_.ring_size, st);
  // A skipped step (non-finite norm) zeroes the member's carried states, as CpuTrainer does: its batch may have
  // left non-finite ones.
  for (int m = 0; m < E_; ++m)
    if (MemberCarry* c = carry_[size_t(m)].get(); c && !frozen_host_[size_t(m)])
      gpu::carry_clear_if(&state_.data()[m].skip, c->conv.data(), c->conv.size(), c->ssm.data(), c->ssm.size(), st);
  gpu::adamw_step_devscale(arena_.params.data(), arena_.grads.data(), arena_.m.data(), arena_.v.data(),
                           arena_.decay.data(), n_, E_, optim_.data(), state_.data(), st,
                           params16_.size() ? params16_.data() : nullptr);
}

GatherParams PopulationTrainer::rank_gather_params(int m) const { return gather_[size_t(m)]; }

// Every member's gradient and loss summed over the ranks (NCCL, in place, inside the captured step), then
// divided by the world size: the mean over world × B windows, the same on every rank, so the norm, the clip
// and AdamW that follow agree bitwise across ranks. A world of one sums nothing and scales by nothing.
void PopulationTrainer::reduce_over_ranks(cudaStream_t st) {
  dist::Communicator& comm = *opt_.comm;
  comm.all_reduce_sum(arena_.grads.data(), n_ * size_t(E_), st);
  comm.all_reduce_sum(losses_.data(), size_t(E_), st);
  if (comm.world() == 1) return;
  const float inv = 1.0f / float(comm.world());
  gpu::scale_inplace(arena_.grads.data(), n_ * size_t(E_), inv, st);
  gpu::scale_inplace(losses_.data(), size_t(E_), inv, st);
}

// Waits for the device: a bounded wait that fails naming `what` when a peer rank died or hangs in a
// data-parallel run (dist::Communicator::wait_or_abort), a plain synchronisation otherwise.
void PopulationTrainer::wait_device(const char* what) {
  if (opt_.comm) opt_.comm->wait_or_abort(ctx_.stream(), opt_.dist_timeout, what);
  else ctx_.synchronize();
}

void PopulationTrainer::step() {
  if (first_active() < 0) return;  // every member is frozen: nothing to do
  // Carry: the window table of each member's next step goes up before the step (a copy at an epoch's start only).
  for (int m = 0; m < E_; ++m)
    if (carry_[size_t(m)] && !frozen_host_[size_t(m)])
      carry_[size_t(m)]->sampler->prepare(enqueued_[size_t(m)], ctx_.stream());
  // The first step runs eagerly: it creates the cuBLASLt plans (allocation-free afterwards) and is a
  // real step. Later steps replay one captured graph.
  if (!opt_.graph || !warmed_up_) {
    enqueue_step();
    warmed_up_ = true;
  } else {
    if (!graph_exec_) graph_exec_ = CudaGraphExec(capture_graph(ctx_.stream(), [&] { enqueue_step(); }));
    graph_exec_.launch(ctx_.stream());
  }
  for (int m = 0; m < E_; ++m)
    if (!frozen_host_[size_t(m)]) ++enqueued_[size_t(m)];
}

StepRecord PopulationTrainer::record(int m, int64_t s) {
  require(m >= 0 && m < E_, "PopulationTrainer::record: no member " + std::to_string(m));
  const size_t i = size_t(m);
  require(s >= first_step_[i] && s <= enqueued_[i] && enqueued_[i] - s < opt_.ring_size,
          "PopulationTrainer::record: step " + std::to_string(s) + " of member " + std::to_string(m) +
              " is not in the ring (have steps " +
              std::to_string(std::max<int64_t>(first_step_[i], enqueued_[i] - opt_.ring_size + 1)) + ".." +
              std::to_string(enqueued_[i]) + ")");
  if (s > synced_[i]) {  // one synchronisation covers every step enqueued so far
    wait_device("the GPU's steps");
    synced_ = enqueued_;
  }
  const volatile StepRecord& r = ring_.host()[i * size_t(opt_.ring_size) + size_t((s - 1) % opt_.ring_size)];
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

std::vector<float> PopulationTrainer::params(int m) {
  require(m >= 0 && m < E_, "PopulationTrainer::params: no member " + std::to_string(m));
  wait_device("the GPU's steps");
  return arena_.params.download(size_t(m) * n_, n_);
}

TrainState PopulationTrainer::state(int m) {
  require(m >= 0 && m < E_, "PopulationTrainer::state: no member " + std::to_string(m));
  wait_device("the GPU's steps");
  TrainState s;
  s.params = arena_.params.download(size_t(m) * n_, n_);
  s.m = arena_.m.download(size_t(m) * n_, n_);
  s.v = arena_.v.download(size_t(m) * n_, n_);
  const DeviceStepState d = state_.download(size_t(m), 1)[0];
  s.step = d.step;
  s.adam_step = d.adam_step;
  s.skipped_total = d.skipped_total;
  s.seed = tc_[size_t(m)].seed;
  save_carry(m, s);
  return s;
}

namespace {
// The lanes of every rank (carry_sampler_gpu.h, pack_rank_lanes): a collective, every rank calls it.
std::vector<float> gather_rank_lanes(dist::Communicator& comm, const std::vector<float>& own, int NL, cudaStream_t st,
                                     std::chrono::milliseconds timeout) {
  DeviceBuffer<float> buf(2 * own.size() * size_t(comm.world()));
  buf.upload(pack_rank_lanes(own, NL, comm.world(), comm.rank()));
  comm.all_reduce_sum(buf.data(), buf.size(), st);
  comm.wait_or_abort(st, timeout, "the carried states' gather over the ranks");
  return unpack_rank_lanes(buf.download());
}
}  // namespace

// A carry member's states into its TrainState (after the device is done), all ranks' lanes in a data-parallel run:
// the layout of one trainer of world · B lanes, so `last` is one format however many GPUs wrote it.
void PopulationTrainer::save_carry(int m, TrainState& s) {
  const MemberCarry* c = carry_[size_t(m)].get();
  if (!c) return;
  s.carry_conv = c->conv.download();
  s.carry_ssm = c->ssm.download();
  if (opt_.comm && opt_.comm->world() > 1) {
    const int NL = layout_.cfg.NL;
    s.carry_conv = gather_rank_lanes(*opt_.comm, s.carry_conv, NL, ctx_.stream(), opt_.dist_timeout);
    s.carry_ssm = gather_rank_lanes(*opt_.comm, s.carry_ssm, NL, ctx_.stream(), opt_.dist_timeout);
  }
}

// Member m's carried states from `s` (checked before anything is written): this rank's lanes of them.
void PopulationTrainer::load_carry(int m, const TrainState& s) {
  const std::string who = "PopulationTrainer::load_state" + (E_ > 1 ? " (member " + std::to_string(m) + ")" : "");
  check_carry_sizes(s, layout_.cfg, who);
  const bool has_carry = !s.carry_ssm.empty();
  MemberCarry* c = carry_[size_t(m)].get();
  if (!c) {
    require(!has_carry, who + ": the state holds carried states (a train.state = 'carry' run's), but this trainer has "
                              "train.state = 'zero'; resume it with train.state = 'carry'");
    return;
  }
  // A state of step 0 (train.init's weights) has none yet: the lanes start from zero, as a fresh run's do.
  require(has_carry || s.step == 0, who + ": train.state = 'carry', but the state of step " + std::to_string(s.step) +
                                        " holds no carried states (saved by a zero-state run?); resume it with the "
                                        "train.state it was trained with");
  const int world = opt_.comm ? opt_.comm->world() : 1, rank = opt_.comm ? opt_.comm->rank() : 0;
  const size_t NL = size_t(layout_.cfg.NL);
  if (!has_carry) {
    c->conv.fill_bytes(0, ctx_.stream());
    c->ssm.fill_bytes(0, ctx_.stream());
    return;
  }
  require(s.carry_conv.size() == c->conv.size() * size_t(world) && s.carry_ssm.size() == c->ssm.size() * size_t(world),
          who + ": the carried states are of " + std::to_string(s.carry_ssm.size()) + " SSM floats, this trainer's " +
              std::to_string(world) + " × " + std::to_string(c->ssm.size()) +
              " (lanes of another train.batch or another number of GPUs)");
  // Layer l of the saved states holds world · B lanes; this rank's are the B from rank · B on.
  c->conv.upload(rank_lanes(s.carry_conv, int(NL), world, rank));
  c->ssm.upload(rank_lanes(s.carry_ssm, int(NL), world, rank));
}

std::vector<float> PopulationTrainer::predict(int m, const WindowPlan& plan, const std::vector<float>* params) {
  require(m >= 0 && m < E_, "PopulationTrainer::predict: no member " + std::to_string(m));
  cudaStream_t st = ctx_.stream();
  const float* P = arena_.params.data() + size_t(m) * n_;
  if (params) {
    require(params->size() == n_, "PopulationTrainer::predict: " + std::to_string(params->size()) +
                                      " weights, the model has " + std::to_string(n_));
    if (predict_params_.size() != n_) predict_params_ = DeviceBuffer<float>(n_);
    // Ordered on the step's stream: no step in flight reads this buffer, and the forwards below follow it.
    MLALPHA_CUDA_CHECK(cudaMemcpyAsync(predict_params_.data(), params->data(), n_ * sizeof(float),
                                       cudaMemcpyHostToDevice, st));
    P = predict_params_.data();
  }
  const __nv_bfloat16* P16 = nullptr;
  if (precision_ == Precision::BF16) {  // the bf16 copy the model's GEMMs read, made as a lone prediction makes it
    if (predict_params16_.size() != n_) predict_params16_ = DeviceBuffer<__nv_bfloat16>(n_);
    gpu::cast_bf16(P, predict_params16_.data(), n_, st);
    P16 = predict_params16_.data();
  }
  const Dataset& d = data_[size_t(data_of_[size_t(m)])];
  Lane& lane = lanes_[0];  // on ctx_, the step's stream
  std::vector<float> pred = predict_gpu(ctx_, layout_, *lane.model, lane.xb.data(), P, P16,
                                        {d.x.data(), d.N, d.T, layout_.cfg.F}, plan, plan_buffers_);
  return pred;
}

void PopulationTrainer::load_state(int m, const TrainState& s) {
  require(m >= 0 && m < E_, "PopulationTrainer::load_state: no member " + std::to_string(m));
  check_train_state(s, n_, tc_[size_t(m)].seed, "load_state");
  wait_device("the GPU's steps");  // no step in flight reads the buffers being replaced
  load_carry(m, s);
  arena_.params.upload(s.params.data(), n_, size_t(m) * n_);
  arena_.m.upload(s.m.data(), n_, size_t(m) * n_);
  arena_.v.upload(s.v.data(), n_, size_t(m) * n_);
  if (params16_.size())
    gpu::cast_bf16(arena_.params.data() + size_t(m) * n_, params16_.data() + size_t(m) * n_, n_, ctx_.stream());
  // Every other field of the step state is rewritten by the next step before it is read.
  DeviceStepState d;
  std::memset(&d, 0, sizeof d);
  d.step = s.step;
  d.adam_step = s.adam_step;
  d.skipped_total = s.skipped_total;
  state_.upload(&d, 1, size_t(m));
  MLALPHA_CUDA_CHECK(cudaDeviceSynchronize());  // pageable uploads complete before the next step's kernels
  enqueued_[size_t(m)] = synced_[size_t(m)] = s.step;
  first_step_[size_t(m)] = s.step + 1;
}

void PopulationTrainer::freeze(int m) {
  require(m >= 0 && m < E_, "PopulationTrainer::freeze: no member " + std::to_string(m));
  if (frozen_host_[size_t(m)]) return;
  wait_device("the GPU's steps");  // the flag takes effect from the next step on, never inside one already enqueued
  frozen_host_[size_t(m)] = 1;
  frozen_.upload(frozen_host_);
  graph_exec_ = CudaGraphExec();  // captured again without the member's forward and backward
}

}  // namespace mlalpha
