// libFuzzer target for the CSV reader (scripts/fuzz.sh builds and runs it). Any input must either parse or
// throw mlalpha::Error; anything else is a bug. The first byte picks the dialect (delimiter, with or
// without an instrument column, with or without a time layout); the rest is the file. Columns: t (time), id (instrument), a, b
// (features), y (target). A parsed panel must be consistent: sizes, label counts, sorted unique labels.
#include <cstdint>
#include <string_view>

#include "core/error.h"
#include "data/csv.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  mlalpha::CsvSpec spec;
  spec.time_column = "t";
  spec.instrument_column = (data[0] / 3) % 2 == 0 ? "id" : "";
  spec.feature_columns = {"a", "b"};
  spec.target_columns = {"y"};
  spec.delimiter = ",\t;"[data[0] % 3];
  if ((data[0] / 6) % 2 == 1) spec.time_format = "%b %d %Y %H:%M";
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    const mlalpha::Panel p = mlalpha::parse_csv_panel(text, spec, "fuzz.csv");
    const size_t nt = size_t(p.N) * p.T;
    if (p.N < 1 || p.T < 1 || p.F != 2 || p.K != 1) __builtin_trap();
    if (p.x.size() != nt * 2 || p.y.size() != nt) __builtin_trap();
    if (p.times.size() != size_t(p.T)) __builtin_trap();
    if (!spec.instrument_column.empty() && p.instruments.size() != size_t(p.N)) __builtin_trap();
    if (spec.instrument_column.empty() && p.N != 1) __builtin_trap();
    for (size_t i = 1; i < p.times.size(); ++i)
      if (p.times[i] == p.times[i - 1]) __builtin_trap();
    // The axis is ordered by its parsed values, equal instants merged.
    if (p.time_values.size() != size_t(p.T)) __builtin_trap();
    for (size_t i = 1; i < p.time_values.size(); ++i)
      if (!(p.time_values[i] > p.time_values[i - 1])) __builtin_trap();
    for (const float v : p.x)
      if (__builtin_isinf(v)) __builtin_trap();
  } catch (const mlalpha::Error&) {
  }
  return 0;
}
