// libFuzzer target for the safetensors reader and the checkpoint metadata parsers (scripts/fuzz.sh builds
// and runs it). Any input must either parse or throw mlalpha::Error; anything else is a bug. Beyond not
// crashing it checks: every tensor holds product(shape) floats, a parsed file re-encodes and re-parses to
// the same tensors (bits), metadata and verified checksums, and the metadata values a checkpoint reads
// (model_config, train_config, feature_stats, names) either parse and validate or throw Error.
#include <cstdint>
#include <cstring>
#include <string_view>

#include "checkpoint/config_json.h"
#include "checkpoint/safetensors.h"
#include "core/error.h"

namespace {

using namespace mlalpha;

bool parse(std::string_view bytes, SafetensorsFile& out) {
  try {
    out = parse_safetensors(bytes, "fuzz.safetensors");
    return true;
  } catch (const Error&) {
    return false;
  }
}

void check_round_trip(const SafetensorsFile& f) {
  std::vector<TensorView> views;
  for (const LoadedTensor& t : f.tensors) views.push_back({t.name, t.shape, t.data.data()});
  const std::string bytes = encode_safetensors(views, f.metadata);  // throws only on a reader/writer mismatch
  SafetensorsFile g;
  if (!parse(bytes, g)) __builtin_trap();
  if (!g.data_checksummed || !g.metadata_checksummed || g.metadata != f.metadata) __builtin_trap();
  if (g.tensors.size() != f.tensors.size()) __builtin_trap();
  for (size_t i = 0; i < f.tensors.size(); ++i) {
    const LoadedTensor &a = f.tensors[i], &b = g.tensors[i];
    if (a.name != b.name || a.shape != b.shape || a.data.size() != b.data.size()) __builtin_trap();
    if (!a.data.empty() && std::memcmp(a.data.data(), b.data.data(), 4 * a.data.size()) != 0) __builtin_trap();
  }
}

template <typename Fn>
void must_parse_or_throw_error(Fn&& fn) {
  try {
    fn();
  } catch (const Error&) {
  }
}

void check_metadata(const SafetensorsMetadata& m) {
  auto value = [&](const char* k) -> const std::string* {
    const auto it = m.find(k);
    return it == m.end() ? nullptr : &it->second;
  };
  if (const std::string* v = value("model_config"))
    must_parse_or_throw_error([&] { model_config_from_json(*v, "fuzz").validate(); });
  if (const std::string* v = value("train_config"))
    must_parse_or_throw_error([&] { train_config_from_json(*v, "fuzz").validate(); });
  if (const std::string* v = value("feature_stats")) must_parse_or_throw_error([&] { feature_stats_from_json(*v, "fuzz"); });
  if (const std::string* v = value("feature_names")) must_parse_or_throw_error([&] { names_from_json(*v, "fuzz"); });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  SafetensorsFile f;
  if (!parse(std::string_view(reinterpret_cast<const char*>(data), size), f)) return 0;
  uint64_t numel_total = 0;
  for (const LoadedTensor& t : f.tensors) {
    uint64_t n = 1;
    for (const int64_t d : t.shape) n *= uint64_t(d);
    if (n != t.data.size()) __builtin_trap();
    numel_total += n;
  }
  if (4 * numel_total > size) __builtin_trap();
  check_round_trip(f);
  check_metadata(f.metadata);
  return 0;
}
