#pragma once
// NumPy `.npy` files: read float32/float64 arrays (C order, little-endian, format 1.0/2.0/3.0) into float32,
// write float32 arrays atomically, and assemble a Panel from a features file and a targets file.
// The readers parse from a byte buffer (parse_npy); the file functions wrap it, so the fuzzer and the
// tests drive exactly the code that reads files. Every failure is an mlalpha::Error that starts with the
// file name: "x.npy: dtype '<i8' is not float32/float64 ('<f4' or '<f8')".
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "data/panel.h"

namespace mlalpha {

struct NpyArray {
  std::vector<int64_t> shape;  // empty for a 0-d array (one element)
  FloatValues data;            // C order, product(shape) values; a float32 file is memory-mapped (borrowed)
};

// Parse the bytes of a whole .npy file. `name` (usually the path) starts every error message.
NpyArray parse_npy(std::span<const unsigned char> bytes, const std::string& name);
// A float32 file is memory-mapped read-only and its data borrowed in place (no copy: pages are read as
// they are first touched); a float64 file is read and converted.
NpyArray read_npy(const std::string& path);

// The bytes of a float32 .npy file ('<f4', C order, format 1.0, or 2.0 when the header needs it).
std::string encode_npy(std::span<const float> data, std::span<const int64_t> shape);
// Writes encode_npy() to `path` through a temporary file in the same directory and a rename, so `path`
// is either the complete new file or untouched.
void write_npy(const std::string& path, std::span<const float> data, std::span<const int64_t> shape);

// Accepted shapes (docs/data.md):
//   features (T, F)     with targets (T,) [K = 1] or (T, K)      — one series, N = 1
//   features (N, T, F)  with targets (N, T) [K = 1] or (N, T, K)  — a panel
// NaN features and targets are allowed (docs/data.md says how each is treated); ±Inf is an error.
// .npy holds no labels: the panel's instrument/time/feature names stay empty (= indices).
struct NpyPanelSpec {
  std::string features;  // path of the features file
  std::string targets;   // path of the targets file
};

Panel load_npy_panel(const NpyPanelSpec& spec);
// The same checks on arrays already in memory; the names are used in messages.
Panel panel_from_arrays(NpyArray features, NpyArray targets, const std::string& features_name,
                        const std::string& targets_name);

}  // namespace mlalpha
