// The present-row ops (ops/carry_rows/carry_rows.h) on the GPU against their CPU reference, bit for bit (they copy
// or zero floats): random lanes with every count of present rows 0 .. L (random dates, ascending), a strided
// matrix (ld > C: the other columns untouched), W − 1 > some lanes' rows (window0 read) and a null window0;
// outputs poisoned before each run.
#include <cuda_bf16.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "../gpu_util.h"
#include "../test_util.h"
#include "core/device_buffer.h"
#include "ops/carry_rows/carry_rows.h"

namespace mlalpha {
namespace {

using test::from_device;
using test::same_bits;
using test::poisoned;
using test::random_vec;
using test::to_device;

struct Map {
  std::vector<int> rows, dates;
};
// Lane b has b mod (L + 1) present rows (so 0 and L both occur), on a random ascending subset of the L dates.
Map random_map(int B, int L, uint64_t salt) {
  auto rng = test::make_rng(salt);
  Map m{std::vector<int>(size_t(B)), std::vector<int>(size_t(B) * L, -1)};
  for (int b = 0; b < B; ++b) {
    const int n = b % (L + 1);
    std::vector<int> all(static_cast<size_t>(L));
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), rng);
    std::sort(all.begin(), all.begin() + n);
    m.rows[size_t(b)] = n;
    std::copy_n(all.begin(), n, m.dates.begin() + size_t(b) * L);
  }
  return m;
}

DeviceBuffer<int> ints_to_device(const std::vector<int>& h) {
  DeviceBuffer<int> d(h.size());
  d.upload(h.data(), h.size());
  return d;
}

void check(int B, int L, int C, int ld, int W, int K, bool with_window0, uint64_t salt) {
  SCOPED_TRACE("B=" + std::to_string(B) + " L=" + std::to_string(L) + " C=" + std::to_string(C) + " ld=" +
               std::to_string(ld) + " W=" + std::to_string(W) + " K=" + std::to_string(K));
  const Map hm = random_map(B, L, salt);
  const RowMap h{B, L, hm.rows.data(), hm.dates.data()};
  const DeviceBuffer<int> drows = ints_to_device(hm.rows), ddates = ints_to_device(hm.dates);
  const RowMap d{B, L, drows.data(), ddates.data()};
  auto rng = test::make_rng(salt + 1);

  // mask_rows on a strided matrix
  const auto a = random_vec<float>(size_t(B) * L * ld, rng, -2.0, 2.0);
  std::vector<float> a_ref = a;
  ref::mask_rows<float>(h, C, ld, a_ref.data());
  auto a_g = to_device(a);
  gpu::mask_rows(d, C, ld, a_g.data(), nullptr);
  EXPECT_TRUE(same_bits(from_device(a_g), a_ref)) << "mask_rows";
  EXPECT_FALSE(same_bits(a_ref, a)) << "the test masked nothing";

  // window_tail
  const Conv1dParams p{B, L, C, W, ld};
  const auto w0 = random_vec<float>(size_t(B) * (W - 1) * C, rng, -2.0, 2.0);
  std::vector<float> tail_ref(w0.size());
  ref::window_tail<float>(p, h, a.data(), with_window0 ? w0.data() : nullptr, tail_ref.data());
  auto a0 = to_device(a), w0_g = to_device(w0);
  auto tail_g = poisoned(w0.size());
  gpu::window_tail(p, d, a0.data(), with_window0 ? w0_g.data() : nullptr, tail_g.data(), nullptr);
  EXPECT_TRUE(same_bits(from_device(tail_g), tail_ref)) << "window_tail";
  // bf16 precision's input (in_proj's bf16 output): the tail of the same values widened, bit for bit
  std::vector<__nv_bfloat16> a16(a.size());
  std::vector<float> a16f(a.size());
  for (size_t i = 0; i < a.size(); ++i) a16[i] = __float2bfloat16_rn(a[i]), a16f[i] = __bfloat162float(a16[i]);
  std::vector<float> tail16_ref(w0.size());
  ref::window_tail<float>(p, h, a16f.data(), with_window0 ? w0.data() : nullptr, tail16_ref.data());
  DeviceBuffer<__nv_bfloat16> a16_g(a16.size());
  a16_g.upload(a16.data(), a16.size());
  auto tail16_g = poisoned(w0.size());
  gpu::window_tail(p, d, a16_g.data(), with_window0 ? w0_g.data() : nullptr, tail16_g.data(), nullptr);
  EXPECT_TRUE(same_bits(from_device(tail16_g), tail16_ref)) << "window_tail, bf16 input";

  // rows_to_dates, dates_to_rows
  const auto out = random_vec<float>(size_t(B) * L * K, rng, -2.0, 2.0);
  std::vector<float> outd_ref(out.size()), back_ref(out.size());
  ref::rows_to_dates<float>(h, K, out.data(), outd_ref.data());
  ref::dates_to_rows<float>(h, K, out.data(), back_ref.data());
  auto out_g = to_device(out);
  auto outd_g = poisoned(out.size()), back_g = poisoned(out.size());
  gpu::rows_to_dates(d, K, out_g.data(), outd_g.data(), nullptr);
  gpu::dates_to_rows(d, K, out_g.data(), back_g.data(), nullptr);
  EXPECT_TRUE(same_bits(from_device(outd_g), outd_ref)) << "rows_to_dates";
  EXPECT_TRUE(same_bits(from_device(back_g), back_ref)) << "dates_to_rows";
}

TEST(CarryRowsGpu, MatchesReference) {
  check(11, 9, 5, 7, 4, 2, true, 1);      // lanes of 0 .. 9 rows and 1 again; W − 1 = 3 > some lanes' rows
  check(11, 9, 5, 7, 4, 2, false, 2);     // no window0: zeros
  check(40, 64, 96, 200, 4, 1, true, 3);  // a model's shape: conv_dim columns of the in_proj output
  check(3, 2, 3, 3, 5, 3, true, 4);       // L < W − 1
}

TEST(CarryRowsGpu, RejectsAMissingMap) {
  DeviceBuffer<float> a(8);
  EXPECT_THROW(gpu::mask_rows(RowMap{2, 2, nullptr, nullptr}, 2, 2, a.data(), nullptr), Error);
  EXPECT_THROW(gpu::rows_to_dates(RowMap{2, 2, nullptr, nullptr}, 2, a.data(), a.data(), nullptr), Error);
}

}  // namespace
}  // namespace mlalpha
