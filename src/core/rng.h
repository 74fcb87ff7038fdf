#pragma once
// Counter-based RNG: a value is a pure function of (seed, stream, counter), so the device sampler and
// the CPU trainer draw the same numbers without sharing state, and a run resumes from the step number
// alone. The mixer is SplitMix64's finaliser applied twice (statistically fine for sampling and init).
#include <cstdint>

#include "core/hd.h"

namespace mlalpha {

MLALPHA_HD uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

MLALPHA_HD uint64_t rng_u64(uint64_t seed, uint64_t stream, uint64_t counter) {
  return mix64(mix64(seed * 0x9e3779b97f4a7c15ull + stream) ^ (counter + 0x632be59bd9b4e019ull));
}

// Uniform in [0, 1) with 53 random bits.
MLALPHA_HD double rng_uniform(uint64_t seed, uint64_t stream, uint64_t counter) {
  return static_cast<double>(rng_u64(seed, stream, counter) >> 11) * 0x1.0p-53;
}

// Uniform integer in [0, n) (n > 0); the modulo bias is below 2^-40 for any n < 2^24 we draw from.
MLALPHA_HD uint64_t rng_below(uint64_t seed, uint64_t stream, uint64_t counter, uint64_t n) {
  return rng_u64(seed, stream, counter) % n;
}

// Sequential host-side generator over the same function (initialisation, synthetic data).
class HostRng {
 public:
  HostRng(uint64_t seed, uint64_t stream) : seed_(seed), stream_(stream) {}
  double uniform() { return rng_uniform(seed_, stream_, counter_++); }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  // Standard normal by Box-Muller (two draws per value; simple and reproducible).
  double normal();

 private:
  uint64_t seed_, stream_, counter_ = 0;
};

}  // namespace mlalpha
