// ml-alpha-kernels' kernel-name shortening (bench/kernel_names.h): the table must stay readable and still
// tell apart kernels that differ only in their template arguments (SSD forward vs backward passes).
#include <gtest/gtest.h>

#include <string>

#include "bench/kernel_names.h"

namespace mlalpha {
namespace {

using kernel_names::demangle;
using kernel_names::shorten;

TEST(KernelNames, DemanglesProjectKernelsAndPassesPlainNamesThrough) {
  EXPECT_EQ(demangle("_ZN7mlalpha3gpu12_GLOBAL__N_112adamw_kernelEP6float4"),
            "mlalpha::gpu::(anonymous namespace)::adamw_kernel(float4*)");
  const char* cublas = "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_execute_kernel__5x_cublas";
  EXPECT_EQ(demangle(cublas), cublas);  // not a C++ name: unchanged
  EXPECT_EQ(demangle(nullptr), "<unnamed>");
}

TEST(KernelNames, DropsReturnTypeParametersAndProjectNamespaces) {
  EXPECT_EQ(shorten("mlalpha::gpu::(anonymous namespace)::adamw_kernel(float4*, float4 const*, unsigned long, "
                    "mlalpha::gpu::AdamWConfig, mlalpha::DeviceStepState const*)"),
            "adamw_kernel");
  EXPECT_EQ(shorten("void mlalpha::gpu::(anonymous namespace)::conv1d_silu_bwd_kernel<4>(mlalpha::Conv1dParams, "
                    "float const*, float*)"),
            "conv1d_silu_bwd_kernel<4>");
}

TEST(KernelNames, KeepsShortTemplateArgumentsSoForwardAndBackwardPassesDiffer) {
  const std::string fwd = shorten(
      "void mlalpha::gpu::ssd_detail::(anonymous namespace)::chunk_sum_kernel<4, 2, false>(mlalpha::gpu::"
      "ssd_detail::(anonymous namespace)::Args)");
  const std::string bwd = shorten(
      "void mlalpha::gpu::ssd_detail::(anonymous namespace)::chunk_sum_kernel<4, 2, true>(mlalpha::gpu::"
      "ssd_detail::(anonymous namespace)::Args)");
  EXPECT_EQ(fwd, "ssd_detail::chunk_sum_kernel<4,2,false>");
  EXPECT_EQ(bwd, "ssd_detail::chunk_sum_kernel<4,2,true>");
  EXPECT_EQ(shorten("void ns::k<(Mode)1, -3>(int)"), "ns::k<(Mode)1,-3>");
}

TEST(KernelNames, WrapperShowsWhatItWrapsOtherTemplatesCollapse) {
  EXPECT_EQ(shorten("void cutlass::Kernel2<cutlass_80_simt_sgemm_128x128_8x4_nn_align1>("
                    "cutlass_80_simt_sgemm_128x128_8x4_nn_align1::Params)"),
            "cutlass::Kernel2<cutlass_80_simt_sgemm_128x128_8x4_nn_align1>");
  EXPECT_EQ(shorten("void cub::DeviceReduceKernel<cub::DeviceReducePolicy<float, float, int, cub::Sum>::Policy600, "
                    "float*, float*, int, cub::Sum>(float*, float*, int, cub::GridEvenShare<int>, cub::Sum)"),
            "cub::DeviceReduceKernel<...>");
}

TEST(KernelNames, LongNamesKeepHeadAndTail) {
  const std::string name = "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_"
                           "segment_k_off_kernel__5x_cublas";
  const std::string s = shorten(name, 60);
  EXPECT_EQ(s.size(), 60u);
  EXPECT_EQ(s.substr(0, 20), name.substr(0, 20));
  EXPECT_EQ(s.substr(s.size() - 10), name.substr(name.size() - 10));
  EXPECT_NE(s.find("..."), std::string::npos);
  EXPECT_EQ(shorten("short_kernel", 60), "short_kernel");
}

}  // namespace
}  // namespace mlalpha
