#pragma once
// The carry sampler on the device (train.state = "carry"; GPU code): CarrySampler's windows (carry_sampler.h) fed
// to the captured training step without a host→device copy inside it. The windows are a pure function of (seed,
// step, lane) given an epoch's order and phases, so the host writes each epoch's window table (carry_gather.h:
// one int4 slot per lane and step of the epoch) into pinned memory and copies it, asynchronously on the step's
// stream, into the device table of that epoch's parity before it enqueues the epoch's first step; the step's
// kernels pick the table and the slot from the step counter in device memory. The present-row lists go up once.
//
// Time batches (carry_sampler_time.h) fill the same tables: a slot's `first` is then its window's first time index
// of the panel and its rows are consecutive dates (CarryGatherParams::dated); the present-row lists tell the
// gather which of those dates an instrument has (it skips the others, as gather_time_carry does).
//
// Several GPUs: the sampler spans world · B lanes and rank r draws lanes [r·B, (r + 1)·B) of it, so the ranks
// share one epoch (every window once) and each keeps its own lanes' states; a world of one is the plain sampler.
// With time batches the world's lanes are world · D cross-sections, so a rank holds whole cross-sections (the IC
// loss's groups) and the ranks walk different runs of the range.
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "core/cuda_event.h"
#include "core/device_buffer.h"
#include "core/mapped_buffer.h"
#include "data/carry_gather.h"
#include "data/carry_sampler.h"
#include "data/carry_sampler_time.h"

namespace mlalpha {

// A panel's present rows over one range in device memory (CarryTables::offsets, rows), shared by the samplers of
// the members that train on that panel and range.
struct DeviceRows {
  explicit DeviceRows(const PresentRows& rows);
  int t_begin = 0, t_end = 0;
  DeviceBuffer<int> offsets, rows;  // (N + 1), (present rows)
};

class DeviceCarrySampler {
 public:
  // The windows of lanes [lane0, lane0 + B) of a CarrySampler over `lanes_total` lanes of `present` (rows on the
  // host) and `device_rows` (the same rows on the device); the panel of (N, T, F, K); burn-in as
  // CarrySampler::gather applies it.
  DeviceCarrySampler(std::shared_ptr<const PresentRows> present, std::shared_ptr<const DeviceRows> device_rows,
                     const Panel& panel, int B, int lane0, int lanes_total, int L, int burn_in, uint64_t seed);
  // Time batches: lanes [lane0, lane0 + B) of the schedule `time` (its dates · G lanes) over the training range
  // that starts at time step t_begin of `panel` (N, T, F, K); device_rows: the present rows of that range.
  DeviceCarrySampler(const TimeCarryParams& time, int t_begin, std::shared_ptr<const DeviceRows> device_rows,
                     const Panel& panel, int B, int lane0, int burn_in);

  int lanes() const { return p_.B; }
  int64_t epoch_steps() const { return p_.S; }
  // Before the step `step` (0-based) is enqueued or launched on `stream`, outside graph capture: makes the table
  // of its epoch current (a copy on `stream` at an epoch's first step, or after a jump such as a resume; nothing
  // otherwise). The host waits only when it is two epochs ahead of the device (its staging buffer still in use).
  void prepare(int64_t step, cudaStream_t stream);
  // Inside the step: the batch of the step *step (device memory, 1), then the lanes' resets (carry_gather.h).
  // Time batches also write the lanes' present rows (lane_rows, lane_dates: carry_gather.h), required there.
  void gather(const long long* step, const float* x /* (N, T, F) */, const float* y /* (N, T, K) */,
              float* xb /* (B, L, F) */, float* yb /* (B, L, K) */, cudaStream_t stream, int* lane_rows /* (B) */ = nullptr,
              int* lane_dates /* (B, L) */ = nullptr) const;
  bool dated() const { return p_.dated != 0; }
  void reset(const long long* step, int NL, size_t conv_lane, size_t ssm_lane, float* conv /* (NL, B, conv_lane) */,
             float* ssm /* (NL, B, ssm_lane) */, cudaStream_t stream) const;

 private:
  gpu::CarryTables tables() const;
  void make_tables();
  int4 slot(int64_t step, int lane) const;  // lane's window at step, as a table holds it

  std::optional<CarrySampler> sampler_;  // windows mode
  std::optional<TimeCarryParams> time_;  // time batches
  int t_begin_ = 0;                      // time batches: the range's first time step
  std::shared_ptr<const DeviceRows> rows_;  // the range's present rows
  CarryGatherParams p_;
  int lane0_;
  DeviceBuffer<int4> table_[2];   // (B·S) each: epochs of even and odd number
  MappedBuffer<int4> staging_[2];  // (B·S) each: pinned, the host writes the epoch here before the copy
  CudaEvent copied_[2]{CudaEvent(cudaEventDisableTiming), CudaEvent(cudaEventDisableTiming)};
  int64_t loaded_[2] = {-1, -1};  // the epoch each table holds (or has been enqueued to hold)
};

// Data-parallel checkpoints: `last` holds the carried states of all world · B lanes, (NL, world · B, per_lane) as
// one trainer of world · B lanes holds them, gathered with a float sum over the ranks (the only collective the
// communicator offers). A float sum of the states themselves would turn a −0 into +0, so each float travels as its
// two 16-bit halves, integers that a sum with zeros leaves exact in any order.
// This rank's (NL, per_layer) states → (2 · NL · world · per_layer) halves, zero but for its own lanes' slots.
std::vector<float> pack_rank_lanes(const std::vector<float>& own, int NL, int world, int rank);
// The ranks' packed buffers summed → (NL · world · per_layer) floats, bit for bit.
std::vector<float> unpack_rank_lanes(const std::vector<float>& summed);
// Rank r's (NL, per_layer) states of the world's (NL, world · per_layer).
std::vector<float> rank_lanes(const std::vector<float>& all, int NL, int world, int rank);

}  // namespace mlalpha
