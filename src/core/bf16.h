#pragma once
// Host-side bf16 rounding: the value __float2bfloat16_rn stores (round to nearest, ties to even; NaN stays
// NaN), returned as the float it represents. The CPU oracle of the bf16 casts and what the bf16 tests round
// their inputs with.
#include <cstdint>
#include <cstring>

namespace mlalpha {

inline float bf16_round(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof(b));
  if ((b & 0x7f800000u) == 0x7f800000u && (b & 0x007fffffu) != 0) {
    b |= 0x00400000u;  // quiet NaN, payload's top bits kept
  } else {
    b += 0x7fffu + ((b >> 16) & 1u);
  }
  b &= 0xffff0000u;
  float r;
  std::memcpy(&r, &b, sizeof(r));
  return r;
}

}  // namespace mlalpha
