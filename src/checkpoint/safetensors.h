#pragma once
// safetensors (https://github.com/huggingface/safetensors), the float32 subset:
//   [8 bytes: little-endian u64 N] [N bytes: JSON header, space-padded so 8 + N is a multiple of 8] [data]
// The header maps each tensor name to {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}
// (byte offsets into the data section) plus an optional "__metadata__" object of string → string.
// Tensors are stored contiguously in the order given, with no gaps, so the file loads unchanged in
// Python (safetensors.torch.load_file). Reading validates everything and names the file and the problem.
// Integrity: the writer adds two __metadata__ entries, each 8 lowercase hex digits of a CRC-32 (the
// zlib / PNG / IEEE 802.3 polynomial, Python's zlib.crc32):
//   data_crc32      over the tensors' bytes, tensor after tensor in the byte order of their names (so a
//                   tool that lays the same tensors out in another order still verifies)
//   metadata_crc32  over the other metadata entries in key order, each as key, NUL, value, NUL
// The reader verifies each one present (files without them, e.g. from PyTorch, load unchecked) and
// removes both from SafetensorsFile::metadata.
// Host-only (nlohmann-json inside the .cpp); never include from a .cu file.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace mlalpha {

class AtomicFile;

using SafetensorsMetadata = std::map<std::string, std::string>;

constexpr const char* kDataCrcKey = "data_crc32";
constexpr const char* kMetadataCrcKey = "metadata_crc32";

// CRC-32 (reflected polynomial 0xEDB88320, initial and final XOR 0xFFFFFFFF); `crc` continues a previous
// call's result: crc32(b, crc32(a)) = crc32(a + b). crc32("123456789") = 0xCBF43926.
uint32_t crc32(const void* data, size_t bytes, uint32_t crc = 0);

// A tensor to write: `data` holds product(shape) floats and must outlive the write call.
struct TensorView {
  std::string name;
  std::vector<int64_t> shape;
  const float* data = nullptr;
};

// Serialise into an AtomicFile the caller commits (so several files can be committed together). The
// metadata must not hold the checksum keys (the writer adds them).
void write_safetensors(AtomicFile& out, const std::vector<TensorView>& tensors, const SafetensorsMetadata& metadata);
// The whole file as bytes (for tests and the fuzz target).
std::string encode_safetensors(const std::vector<TensorView>& tensors, const SafetensorsMetadata& metadata);
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
  SafetensorsMetadata metadata;       // without the checksum entries
  bool data_checksummed = false;      // data_crc32 was present (and matched)
  bool metadata_checksummed = false;  // metadata_crc32 was present (and matched)
  std::vector<LoadedTensor> tensors;  // in header order
  const LoadedTensor* find(const std::string& name) const;  // nullptr when absent
};

// Read and validate a whole file: too short, header length past the end, header not a JSON object,
// bad "__metadata__", missing/ill-typed fields, dtype other than F32, shape product ≠ bytes, offsets out
// of range, overlapping or leaving gaps, a checksum that does not match ("<path>: tensor data checksum
// mismatch: the file is corrupted ..."). Throws mlalpha::Error naming the file (and the tensor).
SafetensorsFile load_safetensors(const std::string& path);
// The same checks on a file's bytes in memory; `path` names it in messages.
SafetensorsFile parse_safetensors(std::string_view bytes, const std::string& path);

// "(3, 1, 4)": shapes in error messages.
std::string shape_string(const std::vector<int64_t>& shape);

}  // namespace mlalpha
