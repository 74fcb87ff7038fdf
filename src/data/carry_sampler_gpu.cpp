// The carry sampler on the device: the host side (carry_sampler_gpu.h).
#include "data/carry_sampler_gpu.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"

namespace mlalpha {

DeviceRows::DeviceRows(const PresentRows& r) : t_begin(r.t_begin), t_end(r.t_end) {
  std::vector<int> off(r.rows.size() + 1, 0), all;
  for (size_t i = 0; i < r.rows.size(); ++i) {
    require(all.size() + r.rows[i].size() <= size_t(0x7fffffff), "DeviceRows: more than 2^31 present rows");
    all.insert(all.end(), r.rows[i].begin(), r.rows[i].end());
    off[i + 1] = int(all.size());
  }
  offsets = DeviceBuffer<int>(off.size());
  offsets.upload(off.data(), off.size());
  rows = DeviceBuffer<int>(std::max<size_t>(all.size(), 1));  // a non-null pointer even for an empty range
  if (!all.empty()) rows.upload(all.data(), all.size());
}

DeviceCarrySampler::DeviceCarrySampler(std::shared_ptr<const PresentRows> present,
                                       std::shared_ptr<const DeviceRows> device_rows, const Panel& panel, int B,
                                       int lane0, int lanes_total, int L, int burn_in, uint64_t seed)
    : sampler_(std::in_place, present, lanes_total, L, seed), rows_(std::move(device_rows)), lane0_(lane0) {
  require(rows_ && present && rows_->t_begin == present->t_begin && rows_->t_end == present->t_end &&
              rows_->offsets.size() == present->rows.size() + 1,
          "DeviceCarrySampler: the device rows are of another range or panel");
  require(B >= 1 && lane0 >= 0 && lane0 + B <= lanes_total,
          "DeviceCarrySampler: lanes [" + std::to_string(lane0) + ", " + std::to_string(lane0 + B) +
              ") are not inside the sampler's " + std::to_string(lanes_total));
  p_.N = panel.N, p_.T = panel.T, p_.F = panel.F, p_.K = panel.K;
  p_.B = B, p_.L = L, p_.S = sampler_->epoch_steps(), p_.burn_in = burn_in;
  make_tables();
}

DeviceCarrySampler::DeviceCarrySampler(const TimeCarryParams& time, int t_begin,
                                       std::shared_ptr<const DeviceRows> device_rows, const Panel& panel, int B,
                                       int lane0, int burn_in)
    : time_(time), t_begin_(t_begin), rows_(std::move(device_rows)), lane0_(lane0) {
  require(rows_ && rows_->t_begin == t_begin && rows_->t_end == t_begin + time.T &&
              rows_->offsets.size() == size_t(panel.N) + 1,
          "DeviceCarrySampler: the device rows are of another range or panel");
  require(time.N == panel.N && time.L >= 1 && time.L <= time.T && time.dates >= 1 && time.G >= 1 &&
              time.G <= time.N && t_begin >= 0 && int64_t(t_begin) + time.T <= panel.T,
          "DeviceCarrySampler: the time-batch schedule (N = " + std::to_string(time.N) + ", T = " +
              std::to_string(time.T) + " from " + std::to_string(t_begin) + ", L = " + std::to_string(time.L) +
              ", dates = " + std::to_string(time.dates) + ", G = " + std::to_string(time.G) +
              ") does not fit the panel's " + std::to_string(panel.N) + " instruments and " +
              std::to_string(panel.T) + " steps");
  const int total = time.dates * time.G;
  require(B >= 1 && lane0 >= 0 && lane0 + B <= total && lane0 % time.G == 0 && B % time.G == 0,
          "DeviceCarrySampler: lanes [" + std::to_string(lane0) + ", " + std::to_string(lane0 + B) +
              ") are not whole cross-sections of the schedule's " + std::to_string(total) + " lanes");
  p_.N = panel.N, p_.T = panel.T, p_.F = panel.F, p_.K = panel.K;
  p_.B = B, p_.L = time.L, p_.S = time_carry_epoch_steps(time), p_.burn_in = burn_in, p_.dated = 1;
  make_tables();
}

void DeviceCarrySampler::make_tables() {
  const size_t slots = size_t(p_.B) * size_t(p_.S);
  for (int k = 0; k < 2; ++k) {
    table_[k] = DeviceBuffer<int4>(slots);
    staging_[k] = MappedBuffer<int4>(slots);
  }
}

int4 DeviceCarrySampler::slot(int64_t step, int lane) const {
  if (time_) {
    const TimeCarryWindow w = time_carry_window(*time_, step, lane);
    return int4{w.instrument, t_begin_ + w.start, w.reset ? 1 : 0, 0};
  }
  const CarryWindow w = sampler_->window(step, lane);
  return int4{w.instrument, w.first, w.reset ? 1 : 0, 0};
}

void DeviceCarrySampler::prepare(int64_t step, cudaStream_t stream) {
  require(step >= 0, "DeviceCarrySampler::prepare: step " + std::to_string(step) + " < 0");
  const int64_t e = step / p_.S;
  const int k = int(e & 1);
  if (loaded_[k] == e) return;
  // The staging buffer's last copy (epoch e − 2, or an abandoned one) must have run before it is rewritten.
  copied_[k].synchronize();
  int4* out = const_cast<int4*>(staging_[k].host());
  for (int b = 0; b < p_.B; ++b)
    for (int64_t s = 0; s < p_.S; ++s) out[size_t(b) * size_t(p_.S) + size_t(s)] = slot(e * p_.S + s, lane0_ + b);
  // Ordered on the step's stream after every step enqueued before it, which read the other table or this one's
  // epoch e − 2, long done.
  MLALPHA_CUDA_CHECK(cudaMemcpyAsync(table_[k].data(), out,
                                     table_[k].bytes(), cudaMemcpyHostToDevice, stream));
  copied_[k].record(stream);
  loaded_[k] = e;
}

gpu::CarryTables DeviceCarrySampler::tables() const {
  if (!rows_) return {{table_[0].data(), table_[1].data()}, nullptr, nullptr};
  return {{table_[0].data(), table_[1].data()}, rows_->offsets.data(), rows_->rows.data()};
}

void DeviceCarrySampler::gather(const long long* step, const float* x, const float* y, float* xb, float* yb,
                                cudaStream_t stream, int* lane_rows, int* lane_dates) const {
  require(!p_.dated || (lane_rows && lane_dates), "DeviceCarrySampler::gather: time batches write the lanes' rows");
  gpu::carry_gather(p_, tables(), step, x, y, xb, yb, stream, lane_rows, lane_dates);
}

void DeviceCarrySampler::reset(const long long* step, int NL, size_t conv_lane, size_t ssm_lane, float* conv,
                               float* ssm, cudaStream_t stream) const {
  gpu::carry_reset(p_, tables(), step, NL, conv_lane, ssm_lane, conv, ssm, stream);
}

namespace {
void check_lanes(size_t n, int NL, int world, int rank, const char* what) {
  require(NL >= 1 && world >= 1 && rank >= 0 && rank < world && n % size_t(NL) == 0,
          std::string(what) + ": " + std::to_string(n) + " floats are not NL = " + std::to_string(NL) +
              " layers, or rank " + std::to_string(rank) + " is not one of " + std::to_string(world));
}
}  // namespace

std::vector<float> pack_rank_lanes(const std::vector<float>& own, int NL, int world, int rank) {
  check_lanes(own.size(), NL, world, rank, "pack_rank_lanes");
  const size_t per = own.size() / size_t(NL), W = size_t(world);
  std::vector<float> out(2 * own.size() * W, 0.0f);
  for (size_t l = 0; l < size_t(NL); ++l)
    for (size_t j = 0; j < per; ++j) {
      uint32_t bits;
      std::memcpy(&bits, &own[l * per + j], sizeof bits);
      const size_t at = (l * W + size_t(rank)) * per + j;
      out[2 * at] = float(bits >> 16);
      out[2 * at + 1] = float(bits & 0xffffu);
    }
  return out;
}

std::vector<float> unpack_rank_lanes(const std::vector<float>& summed) {
  require(summed.size() % 2 == 0, "unpack_rank_lanes: an odd count of halves");
  std::vector<float> out(summed.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) {
    const uint32_t bits = (uint32_t(summed[2 * i]) << 16) | uint32_t(summed[2 * i + 1]);
    std::memcpy(&out[i], &bits, sizeof bits);
  }
  return out;
}

std::vector<float> rank_lanes(const std::vector<float>& all, int NL, int world, int rank) {
  check_lanes(all.size(), NL, world, rank, "rank_lanes");
  require(all.size() % (size_t(NL) * size_t(world)) == 0, "rank_lanes: the states are not whole lanes of every rank");
  const size_t per = all.size() / (size_t(NL) * size_t(world));
  std::vector<float> out(size_t(NL) * per);
  for (size_t l = 0; l < size_t(NL); ++l)
    std::copy_n(all.begin() + std::ptrdiff_t((l * size_t(world) + size_t(rank)) * per), per,
                out.begin() + std::ptrdiff_t(l * per));
  return out;
}

}  // namespace mlalpha
