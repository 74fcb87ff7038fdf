// The chunked SSD form equals the plain recurrence (DESIGN section 1) for any chunk length Q,
// including L not a multiple of Q, Q > L, Q = 1, L = 1 and G > 1. The GPU kernels' shape rules:
// test_ssd_shapes_gpu_code.cpp.
#include <gtest/gtest.h>

#include "ops/ssd/ssd.h"
#include "test_util.h"
#include "tolerances.h"

namespace mlalpha::test {
namespace {

TEST(SsdChunked, EqualsRecurrence) {
  struct Shape { int B, L, H, P, G, N, Q; };
  for (Shape s : {Shape{1, 1, 1, 1, 1, 1, 1}, Shape{2, 17, 2, 3, 1, 4, 5}, Shape{1, 16, 4, 2, 2, 3, 4},
                  Shape{2, 9, 3, 2, 3, 2, 32}, Shape{1, 33, 2, 4, 1, 8, 1}, Shape{3, 64, 4, 8, 2, 16, 16}}) {
    const int ld = s.H * s.P + 2 * s.G * s.N + 2;
    auto rng = make_rng(s.L * 7 + s.Q);
    auto xbc = random_vec<double>(size_t(s.B) * s.L * ld, rng);
    auto delta = random_vec<double>(size_t(s.B) * s.L * s.H, rng, 0.001, 1.0);
    auto A_log = random_vec<double>(s.H, rng, 0.0, 2.77);  // A in [1, 16] as initialised
    auto D = random_vec<double>(s.H, rng);
    const SsdParams p{s.B, s.L, s.H, s.P, s.G, s.N, s.Q, ld};
    const int bo = s.H * s.P, co = bo + s.G * s.N;
    std::vector<double> y_rec(size_t(s.B) * s.L * s.H * s.P), y_chk(y_rec.size(), 12345.0);
    const SsdInputs<double> in{.x = xbc.data(), .delta = delta.data(), .A_log = A_log.data(),
                               .Bm = xbc.data() + bo, .Cm = xbc.data() + co, .Dskip = D.data()};
    ref::ssd_fwd_recurrent(p, in, y_rec.data());
    ref::ssd_fwd_chunked(p, in, y_chk.data());
    EXPECT_TRUE(all_close(y_chk, y_rec, tol::kChunkedVsRecurrent, tol::kChunkedVsRecurrent,
                          "chunked vs recurrent L=" + std::to_string(s.L) + " Q=" + std::to_string(s.Q)));
  }
}

}  // namespace
}  // namespace mlalpha::test
