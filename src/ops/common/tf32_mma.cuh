#pragma once
// The tf32 tensor-core primitives the matrix-product kernels share (the SSD's tile products, the 3xTF32
// GEMM of the linear layers): the hi/lo split of an fp32 operand and one m16n8k8 mma. For .cu files.
#include <cstdint>

namespace mlalpha::gpu {

// x = hi + lo: hi is x rounded to tf32 on its 13 dropped mantissa bits by an integer add and mask (round half
// away from zero; Inf stays Inf, a finite value that rounds past the largest one becomes Inf as with
// cvt.rna), lo = x − hi exactly (|lo| ≤ 2^-11 |x|). The tensor core reads lo truncated to tf32: an error
// ≤ 2^-21 |x| whose sign follows lo's, which is as often negative as positive, so it does not add up
// coherently (a truncated hi would leave lo with x's sign every time). Three plain instructions, where
// cvt.rna.tf32.f32 is emulated with many more on sm_90.
__device__ __forceinline__ uint32_t round_tf32(float x) { return (__float_as_uint(x) + 0x1000u) & 0xffffe000u; }
__device__ __forceinline__ void split_tf32(float x, uint32_t& hi, uint32_t& lo) {
  hi = round_tf32(x);
  lo = __float_as_uint(x - __uint_as_float(hi));
}
__device__ __forceinline__ void mma_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

}  // namespace mlalpha::gpu
