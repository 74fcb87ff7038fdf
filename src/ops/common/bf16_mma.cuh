#pragma once
// The bf16 tensor-core primitives of the matrix-product kernels' bf16 mode (the SSD's tile products): two
// fp32 values rounded into one bf16x2 register and the m16n8k8 / m16n8k16 mma with fp32 accumulation.
// For .cu files; sm_80 and later.
//
// Register layouts (PTX ISA, "Matrix Fragments for mma.m16n8k8 / m16n8k16", .bf16): lane (g = lane / 4,
// q = lane % 4) holds, lower-indexed element in the low 16 bits of each register,
//   m16n8k8:  A {(g, 2q), (g, 2q+1)}, {(g+8, 2q), (g+8, 2q+1)};  B {(k = 2q, n = g), (2q+1, g)}
//   m16n8k16: A as m16n8k8's, then the same at columns 2q+8, 2q+9;  B as m16n8k8's, then rows 2q+8, 2q+9
// and the fp32 accumulator exactly as the tf32 m16n8k8's (tf32_mma.cuh): {(g, 2q), (g, 2q+1), (g+8, 2q),
// (g+8, 2q+1)}.
#include <cstdint>

namespace mlalpha::gpu {

// {lo, hi} each rounded to the nearest bf16 (ties to even; Inf and NaN kept), lo in bits 0–15. cvt's first
// source goes to the upper half.
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
__device__ __forceinline__ void mma_bf16_k8(float (&d)[4], const uint32_t (&a)[2], uint32_t b) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(b));
}
__device__ __forceinline__ void mma_bf16_k16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

}  // namespace mlalpha::gpu
