#pragma once
// safetensors (https://github.com/huggingface/safetensors), the float32 subset:
//   [8 bytes: little-endian u64 N] [N bytes: JSON header, space-padded so 8 + N is a multiple of 8] [data]
// The header maps each tensor name to {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}
// (byte offsets into the data section) plus an optional "__metadata__" object of string → string.
// Tensors are stored contiguously in the order given, with no gaps, so the file loads unchanged in
// Python (safetensors.torch.load_file). Reading validates everything and names the file and the problem.
// Host-only (nlohmann-json inside the .cpp); never include from a .cu file.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mlalpha {

class AtomicFile;

using SafetensorsMetadata = std::map<std::string, std::string>;

// A tensor to write: `data` holds product(shape) floats and must outlive the write call.
struct TensorView {
  std::string name;
  std::vector<int64_t> shape;
  const float* data = nullptr;
};

// Serialise into an AtomicFile the caller commits (so several files can be committed together).
void write_safetensors(AtomicFile& out, const std::vector<TensorView>& tensors, const SafetensorsMetadata& metadata);
// Write `path` atomically (temporary file + fsync + rename).
void save_safetensors(const std::string& path, const std::vector<TensorView>& tensors,
                      const SafetensorsMetadata& metadata);

struct LoadedTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> data;  // product(shape) values
};

struct SafetensorsFile {
  std::string path;
  SafetensorsMetadata metadata;
  std::vector<LoadedTensor> tensors;  // in header order
  const LoadedTensor* find(const std::string& name) const;  // nullptr when absent
};

// Read and validate a whole file: too short, header length past the end, header not a JSON object,
// bad "__metadata__", missing/ill-typed fields, dtype other than F32, shape product ≠ bytes, offsets out
// of range, overlapping or leaving gaps. Throws mlalpha::Error naming the file (and the tensor).
SafetensorsFile load_safetensors(const std::string& path);

// "(3, 1, 4)": shapes in error messages.
std::string shape_string(const std::vector<int64_t>& shape);

}  // namespace mlalpha
