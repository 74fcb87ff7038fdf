#include "train/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"

namespace mlalpha {

// The format is little-endian; this code copies floats and the length word as raw bytes.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

namespace {

using ojson = nlohmann::ordered_json;

constexpr uint64_t kMaxHeaderBytes = 100u << 20;  // the reference implementation's limit

// Element count of a shape, or nullopt-like max() on overflow.
uint64_t numel_of(const std::vector<int64_t>& shape) {
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return std::numeric_limits<uint64_t>::max();
    if (d != 0 && n > std::numeric_limits<uint64_t>::max() / 4 / uint64_t(d)) return std::numeric_limits<uint64_t>::max();
    n *= uint64_t(d);
  }
  return n;
}

}  // namespace

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

const LoadedTensor* SafetensorsFile::find(const std::string& name) const {
  for (const LoadedTensor& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

// ---------------------------------------------------------------------------------------------- write

void write_safetensors(AtomicFile& out, const std::vector<TensorView>& tensors, const SafetensorsMetadata& metadata) {
  const std::string& path = out.path();
  ojson header = ojson::object();
  if (!metadata.empty()) {
    ojson meta = ojson::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    header["__metadata__"] = std::move(meta);
  }
  std::set<std::string> seen;
  uint64_t offset = 0;
  for (const TensorView& t : tensors) {
    require(!t.name.empty() && t.name != "__metadata__",
            "cannot write '" + path + "': invalid tensor name '" + t.name + "'");
    require(seen.insert(t.name).second, "cannot write '" + path + "': tensor name '" + t.name + "' appears twice");
    const uint64_t n = numel_of(t.shape);
    require(n != std::numeric_limits<uint64_t>::max(),
            "cannot write '" + path + "': tensor '" + t.name + "' has an invalid shape " + shape_string(t.shape));
    require(n == 0 || t.data != nullptr, "cannot write '" + path + "': tensor '" + t.name + "' has no data");
    header[t.name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + 4 * n}}};
    offset += 4 * n;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // 8 + size stays a multiple of 8: aligned data
  unsigned char len[8];
  const uint64_t hn = text.size();
  std::memcpy(len, &hn, 8);
  out.write(len, 8);
  out.write(text.data(), text.size());
  for (const TensorView& t : tensors) out.write(t.data, 4 * numel_of(t.shape));
}

void save_safetensors(const std::string& path, const std::vector<TensorView>& tensors,
                      const SafetensorsMetadata& metadata) {
  AtomicFile f(path);
  write_safetensors(f, tensors, metadata);
  f.commit();
}

// ----------------------------------------------------------------------------------------------- read

namespace {

struct Entry {
  std::string name;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

class Reader {
 public:
  explicit Reader(std::string path) : path_(std::move(path)) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw Error("safetensors file '" + path_ + "': " + what);
  }

  uint64_t index(const ojson& v, const std::string& what) const {
    if (!v.is_number_unsigned()) fail(what + " must be a non-negative integer, got " + v.dump());
    return v.get<uint64_t>();
  }

  Entry entry(const std::string& name, const ojson& v, uint64_t data_bytes) const {
    const std::string where = "tensor '" + name + "'";
    if (!v.is_object()) fail(where + ": expected an object {dtype, shape, data_offsets}, got " + v.type_name());
    for (const auto& [k, _] : v.items())
      if (k != "dtype" && k != "shape" && k != "data_offsets") fail(where + ": unknown field '" + k + "'");
    for (const char* k : {"dtype", "shape", "data_offsets"})
      if (!v.contains(k)) fail(where + ": missing field '" + std::string(k) + "'");
    const ojson& dt = v["dtype"];
    if (!dt.is_string()) fail(where + ": dtype must be a string, got " + dt.dump());
    if (dt.get<std::string>() != "F32")
      fail(where + " has dtype '" + dt.get<std::string>() + "'; only F32 (float32) is supported");
    Entry e;
    e.name = name;
    const ojson& sh = v["shape"];
    if (!sh.is_array()) fail(where + ": shape must be an array, got " + sh.dump());
    for (const ojson& d : sh) {
      const uint64_t n = index(d, where + ": shape entry");
      if (n > uint64_t(std::numeric_limits<int64_t>::max())) fail(where + ": shape entry " + d.dump() + " is too large");
      e.shape.push_back(int64_t(n));
    }
    const ojson& off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2) fail(where + ": data_offsets must be [begin, end], got " + off.dump());
    e.begin = index(off[0], where + ": data_offsets begin");
    e.end = index(off[1], where + ": data_offsets end");
    const std::string range = "[" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "]";
    if (e.begin > e.end) fail(where + ": data_offsets " + range + " end before they begin");
    if (e.end > data_bytes)
      fail(where + ": data_offsets " + range + " run past the data section of " + std::to_string(data_bytes) +
           " bytes (file truncated?)");
    const uint64_t n = numel_of(e.shape);
    if (n == std::numeric_limits<uint64_t>::max() || 4 * n != e.end - e.begin)
      fail(where + ": shape " + shape_string(e.shape) + " of F32 needs " +
           (n == std::numeric_limits<uint64_t>::max() ? std::string("too many") : std::to_string(4 * n)) +
           " bytes but data_offsets " + range + " span " + std::to_string(e.end - e.begin));
    return e;
  }

 private:
  std::string path_;
};

}  // namespace

SafetensorsFile load_safetensors(const std::string& path) {
  Reader r(path);
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);  // also rejects a missing file or a directory
  if (ec) throw Error("cannot open safetensors file '" + path + "': " + ec.message());
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open safetensors file '" + path + "': " + std::strerror(errno));
  if (size < 8) r.fail("file is too short (" + std::to_string(size) + " bytes) to hold the 8-byte header length");
  unsigned char len[8];
  in.read(reinterpret_cast<char*>(len), 8);
  uint64_t hn = 0;
  std::memcpy(&hn, len, 8);
  if (hn > size - 8)
    r.fail("header length " + std::to_string(hn) + " runs past the end of the file (8 + " + std::to_string(hn) +
           " bytes needed, the file has " + std::to_string(size) + "; truncated or not a safetensors file?)");
  if (hn > kMaxHeaderBytes) r.fail("header length " + std::to_string(hn) + " exceeds the 100 MiB limit");
  if (hn < 2) r.fail("header length " + std::to_string(hn) + " is too small for a JSON object");
  std::string text(hn, '\0');
  if (!in.read(text.data(), std::streamsize(hn))) r.fail("reading the header failed");

  ojson header;
  try {
    header = ojson::parse(text);
  } catch (const ojson::parse_error& e) {
    r.fail(std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) r.fail(std::string("header must be a JSON object, got ") + header.type_name());

  SafetensorsFile file;
  file.path = path;
  const uint64_t data_bytes = size - 8 - hn;
  std::vector<Entry> entries;
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) r.fail("__metadata__ must be an object of strings, got " + value.dump());
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string()) r.fail("__metadata__ entry '" + mk + "' must be a string, got " + mv.dump());
        file.metadata[mk] = mv.get<std::string>();
      }
      continue;
    }
    entries.push_back(r.entry(key, value, data_bytes));
  }

  // The tensors must tile the data section exactly: no overlap, no gap, nothing after the last one.
  std::vector<const Entry*> order;
  for (const Entry& e : entries) order.push_back(&e);
  std::sort(order.begin(), order.end(),
            [](const Entry* a, const Entry* b) { return a->begin != b->begin ? a->begin < b->begin : a->end < b->end; });
  uint64_t covered = 0;
  const Entry* prev = nullptr;
  for (const Entry* e : order) {
    if (e->begin < covered)
      r.fail("tensors '" + prev->name + "' [" + std::to_string(prev->begin) + ", " + std::to_string(prev->end) +
             "] and '" + e->name + "' [" + std::to_string(e->begin) + ", " + std::to_string(e->end) + "] overlap");
    if (e->begin > covered)
      r.fail("bytes [" + std::to_string(covered) + ", " + std::to_string(e->begin) + ") before tensor '" + e->name +
             "' belong to no tensor");
    covered = e->end;
    prev = e;
  }
  if (covered != data_bytes)
    r.fail("the data section has " + std::to_string(data_bytes) + " bytes but the tensors cover " +
           std::to_string(covered) + " (trailing bytes)");

  for (const Entry& e : entries) {
    LoadedTensor t{e.name, e.shape, std::vector<float>((e.end - e.begin) / 4)};
    in.seekg(std::streamoff(8 + hn + e.begin));
    if (!in.read(reinterpret_cast<char*>(t.data.data()), std::streamsize(e.end - e.begin)))
      r.fail("reading the data of tensor '" + e.name + "' failed");
    file.tensors.push_back(std::move(t));
  }
  return file;
}

}  // namespace mlalpha
