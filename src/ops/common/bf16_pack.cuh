#pragma once
// Four fp32 values rounded to bf16 (round to nearest even, as __float2bfloat16_rn: the host's bf16_round)
// and packed into 8 bytes, element 0 in the lowest 16 bits: one 8-byte store for four bf16 outputs; and the
// reverse, four bf16 read in one 8-byte load, each widened exactly to the float it represents. For .cu files;
// used by every kernel that writes a bf16 copy, or reads a bf16 activation, four elements at a time.
#include <cuda_bf16.h>

namespace mlalpha::gpu {

__device__ __forceinline__ uint2 pack_bf16x4(float a, float b, float c, float d) {
  const __nv_bfloat162 lo = __floats2bfloat162_rn(a, b), hi = __floats2bfloat162_rn(c, d);
  return make_uint2(*reinterpret_cast<const unsigned*>(&lo), *reinterpret_cast<const unsigned*>(&hi));
}

// The float a bf16 stores (exact: its upper 16 bits).
__device__ __forceinline__ float bf16_bits_to_float(unsigned short b) { return __uint_as_float(unsigned(b) << 16); }

// v[j] = the four bf16 of an 8-byte word t (element 0 in the lowest 16 bits, as pack_bf16x4 writes them).
__device__ __forceinline__ void unpack_bf16x4(uint2 t, float (&v)[4]) {
  v[0] = __uint_as_float(t.x << 16), v[1] = __uint_as_float(t.x & 0xffff0000u);
  v[2] = __uint_as_float(t.y << 16), v[3] = __uint_as_float(t.y & 0xffff0000u);
}

// One element as fp32, whichever of the two types it is stored in.
__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }

}  // namespace mlalpha::gpu
