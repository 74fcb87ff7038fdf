// The 3xTF32 GEMM (ops/linear/gemm_3xtf32.h) in every configuration it has (gemm3_candidates: each block
// tile, the wgmma kernel's where the GPU runs it, with its split of K or not), not only the one
// gemm3_config picks for the shape, against a double
// reference: the four operand layouts, tiles partial in M, N and K, row strides wider than the rows, bias and
// R, a K long enough to split. Poisoned outputs and workspace; the same bits on a second run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include "../gpu_util.h"
#include "../test_util.h"
#include "../tolerances.h"
#include "ops/linear/gemm_3xtf32.h"
#include "ops/linear/gemm_wgmma.h"

namespace mlalpha {
namespace {

struct Shape {
  int M, N, K;
  bool bias_and_r;
};

// C = A·B [+ bias + R] in double, and the same over |operands| (the size of the terms).
void reference(const gpu::Gemm3Params& p, const std::vector<float>& A, const std::vector<float>& B,
               const std::vector<float>& bias, const std::vector<float>& R, bool add, std::vector<double>& ref,
               std::vector<double>& mag) {
  ref.assign(size_t(p.M) * p.N, 0.0), mag.assign(ref.size(), 0.0);
  for (int m = 0; m < p.M; ++m)
    for (int n = 0; n < p.N; ++n) {
      double s = 0, a = 0;
      for (int k = 0; k < p.K; ++k) {
        const double x = A[p.a_kmajor ? m * p.lda + k : k * p.lda + m];
        const double y = B[p.b_kmajor ? n * p.ldb + k : k * p.ldb + n];
        s += x * y, a += std::abs(x * y);
      }
      if (add) {
        const double b = bias[n], r = R[m * p.ldc + n];
        s += b + r, a += std::abs(b) + std::abs(r);
      }
      ref[size_t(m) * p.N + n] = s, mag[size_t(m) * p.N + n] = a;
    }
}

TEST(Gemm3Gpu, EveryConfigurationMatchesReference) {
  // 260 × 132 × 196: partial tiles everywhere; 132 × 264 × 4100: few tiles and a long K, so K is split
  // (with a partial last slice) on any GPU with 12 SMs or more; 2052 × 1028 × 68: 153 tiles of 128 × 128,
  // more than an H200 runs at once.
  const Shape shapes[] = {{260, 132, 196, true}, {132, 264, 4100, true}, {36, 8, 12, false}, {2052, 1028, 68, true}};
  uint64_t salt = 1;
  int configurations = 0, splits = 0;
  for (const Shape& s : shapes)
    for (const bool ak : {true, false})
      for (const bool bk : {true, false}) {
        gpu::Gemm3Params p;
        p.M = s.M, p.N = s.N, p.K = s.K, p.a_kmajor = ak, p.b_kmajor = bk;
        p.lda = (ak ? s.K : s.M) + 4, p.ldb = (bk ? s.K : s.N) + 8, p.ldc = s.N + 4;  // strides wider than rows
        auto rng = test::make_rng(salt++);
        const auto A = test::random_vec<float>(size_t(p.lda) * (ak ? s.M : s.K), rng);
        const auto B = test::random_vec<float>(size_t(p.ldb) * (bk ? s.N : s.K), rng);
        const auto bias = test::random_vec<float>(size_t(s.N), rng);
        const auto R = test::random_vec<float>(size_t(p.ldc) * s.M, rng);
        std::vector<double> ref, mag;
        reference(p, A, B, bias, R, s.bias_and_r, ref, mag);
        auto dA = test::to_device(A), dB = test::to_device(B), dbias = test::to_device(bias), dR = test::to_device(R);
        p.A = dA.data(), p.B = dB.data();
        if (s.bias_and_r) p.bias = dbias.data(), p.R = dR.data();
        auto C = test::poisoned(size_t(p.ldc) * s.M);
        p.C = C.data();
        ASSERT_TRUE(gpu::gemm3_supported(p));
        for (const gpu::Gemm3Config& c : gpu::gemm3_candidates(p, size_t(64) << 20)) {
          SCOPED_TRACE(std::to_string(s.M) + "x" + std::to_string(s.N) + "x" + std::to_string(s.K) + " a_kmajor=" +
                       std::to_string(ak) + " b_kmajor=" + std::to_string(bk) + ": " + c.describe());
          C.fill_bytes(0xFF);
          auto ws = test::poisoned(std::max<size_t>(c.workspace_floats(p), 1));
          gpu::gemm3_run(p, c, ws.data(), nullptr);
          const auto got_ld = test::from_device(C);
          std::vector<float> got(size_t(s.M) * s.N);
          for (int m = 0; m < s.M; ++m)
            for (int n = 0; n < s.N; ++n) got[size_t(m) * s.N + n] = got_ld[size_t(m) * p.ldc + n];
          EXPECT_TRUE(test::rel_l2_close_to_terms(got, ref, mag, tol::kGpuReduceRelL2, "C"));
          for (int m = 0; m < s.M; ++m)  // the padding between rows is not written
            for (int n = s.N; n < p.ldc; ++n) ASSERT_TRUE(std::isnan(got_ld[size_t(m) * p.ldc + n])) << m << "," << n;
          gpu::gemm3_run(p, c, ws.data(), nullptr);
          EXPECT_TRUE(test::same_bits(got_ld, test::from_device(C))) << "a second run gave other bits";
          ++configurations, splits += c.splits > 1;
        }
      }
  int dev = 0, sms = 0, major = 0, minor = 0;
  ASSERT_EQ(cudaSuccess, cudaGetDevice(&dev));
  ASSERT_EQ(cudaSuccess, cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  ASSERT_EQ(cudaSuccess, cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  ASSERT_EQ(cudaSuccess, cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  const bool wgmma = gpu::gemm3w_available();
#if MLALPHA_HAVE_SM90A
  // a build with sm_90a code must run the wgmma kernel on an sm_90 GPU (not fall back silently)
  if (major == 9 && minor == 0) EXPECT_TRUE(wgmma) << "sm_90 GPU, but the wgmma kernel is not available";
#endif
  EXPECT_EQ(configurations, 4 * 4 * (wgmma ? 4 : 3));  // every tile for every shape and layout
  std::cout << "  " << configurations << " configurations checked"
            << (wgmma ? ", the wgmma kernel's included\n" : "\n");
  if (sms >= 12) EXPECT_GE(splits, 4);  // the long-K shape split in every layout
}

}  // namespace
}  // namespace mlalpha
