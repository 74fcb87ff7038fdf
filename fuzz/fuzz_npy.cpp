// libFuzzer target for the .npy reader (scripts/fuzz.sh builds and runs it). Any input must either parse or
// throw mlalpha::Error; anything else (a crash, a sanitizer report, another exception) is a bug.
// Beyond not crashing it checks: a parsed array re-encodes and re-parses to the same shape and bits, and
// two arrays cut from the input go through the panel assembly (rank and shape checks) the same way.
#include <cstdint>
#include <cstring>
#include <span>

#include "core/error.h"
#include "data/npy.h"

namespace {

using mlalpha::NpyArray;

bool parse(std::span<const unsigned char> b, NpyArray& out) {
  try {
    out = mlalpha::parse_npy(b, "fuzz.npy");
    return true;
  } catch (const mlalpha::Error&) {
    return false;
  }
}

void check_round_trip(const NpyArray& a) {
  const std::string bytes = mlalpha::encode_npy(a.data, a.shape);
  NpyArray b;
  if (!parse({reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size()}, b)) __builtin_trap();
  if (b.shape != a.shape || b.data.size() != a.data.size()) __builtin_trap();
  if (!a.data.empty() && std::memcmp(a.data.data(), b.data.data(), a.data.size() * sizeof(float)) != 0) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const unsigned char> all(data, size);
  NpyArray a;
  if (parse(all, a)) check_round_trip(a);

  // Features and targets: the first byte picks where to cut the rest into two files.
  if (size >= 2) {
    const size_t cut = 1 + size_t(data[0]) * (size - 1) / 256;
    NpyArray x, y;
    if (parse(all.subspan(1, cut - 1), x) && parse(all.subspan(cut), y)) {
      try {
        const mlalpha::Panel p = mlalpha::panel_from_arrays(std::move(x), std::move(y), "x.npy", "y.npy");
        if (p.x.size() != size_t(p.N) * p.T * p.F || p.y.size() != size_t(p.N) * p.T * p.K) __builtin_trap();
      } catch (const mlalpha::Error&) {
      }
    }
  }
  return 0;
}
