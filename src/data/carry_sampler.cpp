// The batches of stateful training (carry_sampler.h).
#include "data/carry_sampler.h"

#include <algorithm>
#include <limits>
#include <string>

#include "core/error.h"
#include "core/rng.h"

namespace mlalpha {

namespace {
// The RNG streams of an epoch's draws (distinct from the zero-state sampler's, sampler.h).
constexpr uint64_t kOrderStream = 0xC0A1E000ull, kPhaseStream = 0xC0A1F000ull;
}  // namespace

namespace {
[[noreturn]] void no_window(int L, int t_begin, int t_end) {
  throw Error("train.state = 'carry': no instrument has train.seq_len = " + std::to_string(L) +
              " present rows in the training range [" + std::to_string(t_begin) + ", " + std::to_string(t_end) +
              "), so there is no window to train on; lower train.seq_len");
}
}  // namespace

void CarrySampler::check_range(const Panel& p, int t_begin, int t_end, int L) {
  for (int i = 0; i < p.N; ++i) {
    int n = 0;
    for (int t = t_begin; t < t_end; ++t)
      if ((input_row(p, i, t) & kRowFeatures) && ++n == L) return;
  }
  no_window(L, t_begin, t_end);
}

std::shared_ptr<const PresentRows> present_rows(const Panel& p, int t_begin, int t_end) {
  require(0 <= t_begin && t_begin < t_end && t_end <= p.T, "CarrySampler: the range [" + std::to_string(t_begin) +
                                                               ", " + std::to_string(t_end) + ") is not inside the "
                                                               "panel's " + std::to_string(p.T) + " steps");
  auto out = std::make_shared<PresentRows>();
  out->t_begin = t_begin, out->t_end = t_end;
  out->rows.resize(size_t(p.N));
  for (int i = 0; i < p.N; ++i)
    for (int t = t_begin; t < t_end; ++t)
      if (input_row(p, i, t) & kRowFeatures) out->rows[size_t(i)].push_back(t);
  return out;
}

CarrySampler::CarrySampler(const Panel& p, int t_begin, int t_end, int B, int L, uint64_t seed)
    : CarrySampler(present_rows(p, t_begin, t_end), B, L, seed) {}

CarrySampler::CarrySampler(std::shared_ptr<const PresentRows> rows, int B, int L, uint64_t seed)
    : B_(B), L_(L), seed_(seed), present_(std::move(rows)) {
  require(B >= 1 && L >= 1, "CarrySampler: B and L must be >= 1");
  require(present_ != nullptr, "CarrySampler: no present rows");
  for (size_t i = 0; i < present_->rows.size(); ++i) {
    const int64_t w = int64_t(present_->rows[i].size()) / L;
    if (w > 0) with_windows_.push_back(int(i));
    W_ += w;
  }
  if (W_ == 0) no_window(L, present_->t_begin, present_->t_end);
  S_ = (W_ + B - 1) / B;
}

const CarrySampler::Epoch& CarrySampler::epoch(int64_t e) const {
  if (cache_.number == e) return cache_;
  Epoch& ep = cache_;
  ep.number = e;
  // The order: a Fisher–Yates shuffle of the instruments with windows, each swap drawn from (seed, epoch).
  ep.order = with_windows_;
  const uint64_t order_stream = kOrderStream + uint64_t(e), phase_stream = kPhaseStream + uint64_t(e);
  for (size_t j = ep.order.size(); j > 1; --j)
    std::swap(ep.order[j - 1], ep.order[rng_below(seed_, order_stream, j, j)]);
  ep.phase.assign(present_->rows.size(), 0);
  ep.start.assign(ep.order.size() + 1, 0);
  for (size_t j = 0; j < ep.order.size(); ++j) {
    const int i = ep.order[j];
    const int64_t n = int64_t(present_->rows[size_t(i)].size());
    ep.phase[size_t(i)] = int(rng_below(seed_, phase_stream, uint64_t(i), uint64_t(n % L_) + 1));
    ep.start[j + 1] = ep.start[j] + n / L_;
  }
  return ep;
}

CarryWindow CarrySampler::window(int64_t step, int lane) const {
  require(step >= 0 && lane >= 0 && lane < B_, "CarrySampler::window: step " + std::to_string(step) + ", lane " +
                                                   std::to_string(lane) + " is outside [0, ∞) × [0, " +
                                                   std::to_string(B_) + ")");
  const int64_t e = step / S_, s = step % S_;
  const int64_t q = int64_t(lane) * S_ + s;  // the window's index in the epoch's sequence
  if (q >= W_) return {};
  const Epoch& ep = epoch(e);
  const size_t j = size_t(std::upper_bound(ep.start.begin(), ep.start.end(), q) - ep.start.begin()) - 1;
  const int i = ep.order[j];
  const int64_t k = q - ep.start[j];  // the instrument's k-th window of this epoch
  return {i, ep.phase[size_t(i)] + int(k) * L_, s == 0 || k == 0};
}

void CarrySampler::gather(int64_t step, const Panel& p, int burn_in, float* xb, float* yb,
                          unsigned char* reset) const {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const size_t F = size_t(p.F), K = size_t(p.K);
  for (int b = 0; b < B_; ++b) {
    const CarryWindow w = window(step, b);
    reset[b] = w.reset ? 1 : 0;
    float* xo = xb + size_t(b) * L_ * F;
    float* yo = yb + size_t(b) * L_ * K;
    if (w.instrument < 0) {
      std::fill(xo, xo + size_t(L_) * F, 0.0f);
      std::fill(yo, yo + size_t(L_) * K, nan);
      continue;
    }
    const std::vector<int>& r = present_->rows[size_t(w.instrument)];
    for (int t = 0; t < L_; ++t) {
      const size_t at = size_t(w.instrument) * p.T + size_t(r[size_t(w.first + t)]);
      std::copy_n(p.x.data() + at * F, F, xo + size_t(t) * F);
      if (w.reset && t < burn_in) std::fill(yo + size_t(t) * K, yo + size_t(t + 1) * K, nan);
      else std::copy_n(p.y.data() + at * K, K, yo + size_t(t) * K);
    }
  }
}

void gather_time_carry(const TimeCarryParams& tp, const Panel& p, int t_begin, int64_t step, int burn_in, float* xb,
                       float* yb, unsigned char* reset, int* rows, int* dates) {
  require(tp.L >= 1 && tp.L <= tp.T && tp.dates >= 1 && tp.G >= 1 && tp.G <= tp.N && tp.N == p.N,
          "gather_time_carry: need 1 <= L <= T, dates >= 1, 1 <= G <= N = the panel's " + std::to_string(p.N) +
              ", got L = " + std::to_string(tp.L) + ", T = " + std::to_string(tp.T) + ", dates = " +
              std::to_string(tp.dates) + ", G = " + std::to_string(tp.G) + ", N = " + std::to_string(tp.N));
  require(t_begin >= 0 && int64_t(t_begin) + tp.T <= p.T,
          "gather_time_carry: the range [" + std::to_string(t_begin) + ", " + std::to_string(int64_t(t_begin) + tp.T) +
              ") is not inside the panel's " + std::to_string(p.T) + " steps");
  require(step >= 0, "gather_time_carry: step " + std::to_string(step) + " < 0");
  require((rows == nullptr) == (dates == nullptr), "gather_time_carry: rows without dates, or dates without rows");
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const size_t F = size_t(p.F), K = size_t(p.K), L = size_t(tp.L);
  const int B = tp.dates * tp.G;
  for (int b = 0; b < B; ++b) {
    const TimeCarryWindow w = time_carry_window(tp, step, b);
    reset[b] = w.reset ? 1 : 0;
    float* xo = xb + size_t(b) * L * F;
    float* yo = yb + size_t(b) * L * K;
    if (w.instrument < 0) {
      std::fill(xo, xo + L * F, 0.0f);
      std::fill(yo, yo + L * K, nan);
      if (rows) rows[b] = 0, std::fill(dates + size_t(b) * L, dates + size_t(b + 1) * L, -1);
      continue;
    }
    const size_t row = size_t(w.instrument) * size_t(p.T) + size_t(t_begin) + size_t(w.start);
    if (!rows) {
      std::copy_n(p.x.data() + row * F, L * F, xo);
      std::copy_n(p.y.data() + row * K, L * K, yo);
    } else {
      // The present rows first, in date order, then zero padding rows; the targets stay on their dates, NaN
      // where the instrument has no row.
      int n = 0;
      for (int r = 0; r < tp.L; ++r) {
        const int t = t_begin + w.start + r;
        if (input_row(p, w.instrument, t) & kRowFeatures) {
          std::copy_n(p.x.data() + (row + size_t(r)) * F, F, xo + size_t(n) * F);
          std::copy_n(p.y.data() + (row + size_t(r)) * K, K, yo + size_t(r) * K);
          dates[size_t(b) * L + size_t(n++)] = r;
        } else {
          std::fill(yo + size_t(r) * K, yo + size_t(r + 1) * K, nan);
        }
      }
      rows[b] = n;
      std::fill(xo + size_t(n) * F, xo + L * F, 0.0f);
      std::fill(dates + size_t(b) * L + size_t(n), dates + size_t(b + 1) * L, -1);
    }
    if (w.reset) std::fill(yo, yo + size_t(std::min(burn_in, tp.L)) * K, nan);
  }
}

}  // namespace mlalpha
