#include "checkpoint/safetensors.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cstdio>
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

// Slicing-by-4 tables for the reflected CRC-32 polynomial: t[0] is the classic byte table, t[j][b] the
// CRC of byte b followed by j zero bytes, so four bytes are folded per step.
struct CrcTables {
  uint32_t t[4][256];
  constexpr CrcTables() : t{} {
    for (uint32_t b = 0; b < 256; ++b) {
      uint32_t c = b;
      for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
      t[0][b] = c;
    }
    for (uint32_t b = 0; b < 256; ++b)
      for (int j = 1; j < 4; ++j) t[j][b] = (t[j - 1][b] >> 8) ^ t[0][t[j - 1][b] & 0xff];
  }
};
constexpr CrcTables kCrc{};

std::string hex8(uint32_t v) {
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", unsigned(v));
  return buf;
}

// The metadata checksum: entries in key order (std::map order = bytewise), checksum keys left out.
uint32_t metadata_crc(const SafetensorsMetadata& m) {
  uint32_t c = 0;
  const char nul = '\0';
  for (const auto& [k, v] : m) {
    if (k == kDataCrcKey || k == kMetadataCrcKey) continue;
    c = crc32(k.data(), k.size(), c);
    c = crc32(&nul, 1, c);
    c = crc32(v.data(), v.size(), c);
    c = crc32(&nul, 1, c);
  }
  return c;
}

}  // namespace

uint32_t crc32(const void* data, size_t bytes, uint32_t crc) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = ~crc;
  for (; bytes >= 4; bytes -= 4, p += 4) {
    c ^= uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
    c = kCrc.t[3][c & 0xff] ^ kCrc.t[2][(c >> 8) & 0xff] ^ kCrc.t[1][(c >> 16) & 0xff] ^ kCrc.t[0][c >> 24];
  }
  for (; bytes > 0; --bytes, ++p) c = (c >> 8) ^ kCrc.t[0][(c ^ *p) & 0xff];
  return ~c;
}

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

namespace {

// The 8-byte length and the padded JSON header for these tensors; `path` names the file in messages.
std::string encode_header(const std::string& path, const std::vector<TensorView>& tensors,
                          const SafetensorsMetadata& metadata) {
  for (const char* k : {kDataCrcKey, kMetadataCrcKey})
    require(!metadata.count(k), "cannot write '" + path + "': metadata key '" + k + "' is reserved for the checksum");
  // data_crc32 covers the tensors in name order (see the header), so the checksum does not depend on
  // the order they are laid out in.
  std::vector<const TensorView*> by_name;
  for (const TensorView& t : tensors) by_name.push_back(&t);
  std::sort(by_name.begin(), by_name.end(), [](const TensorView* a, const TensorView* b) { return a->name < b->name; });
  uint32_t data_crc = 0;
  for (const TensorView* t : by_name) {
    const uint64_t n = numel_of(t->shape);
    if (n != std::numeric_limits<uint64_t>::max() && t->data) data_crc = crc32(t->data, 4 * n, data_crc);
  }
  ojson header = ojson::object();
  ojson meta = ojson::object();
  for (const auto& [k, v] : metadata) meta[k] = v;
  meta[kDataCrcKey] = hex8(data_crc);
  meta[kMetadataCrcKey] = hex8(metadata_crc(metadata));
  header["__metadata__"] = std::move(meta);
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
  const uint64_t hn = text.size();
  std::string out(8, '\0');
  std::memcpy(out.data(), &hn, 8);
  return out + text;
}

}  // namespace

void write_safetensors(AtomicFile& out, const std::vector<TensorView>& tensors, const SafetensorsMetadata& metadata) {
  const std::string head = encode_header(out.path(), tensors, metadata);
  out.write(head.data(), head.size());
  for (const TensorView& t : tensors) out.write(t.data, 4 * numel_of(t.shape));
}

std::string encode_safetensors(const std::vector<TensorView>& tensors, const SafetensorsMetadata& metadata) {
  std::string out = encode_header("(in memory)", tensors, metadata);
  for (const TensorView& t : tensors) out.append(reinterpret_cast<const char*>(t.data), 4 * numel_of(t.shape));
  return out;
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
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);  // also rejects a missing file or a directory
  if (ec) throw Error("cannot open safetensors file '" + path + "': " + ec.message());
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open safetensors file '" + path + "': " + std::strerror(errno));
  std::string bytes(size, '\0');
  if (!in.read(bytes.data(), std::streamsize(size)) || in.gcount() != std::streamsize(size))
    throw Error("safetensors file '" + path + "': reading " + std::to_string(size) + " bytes failed");
  return parse_safetensors(bytes, path);
}

SafetensorsFile parse_safetensors(std::string_view bytes, const std::string& path) {
  Reader r(path);
  const uint64_t size = bytes.size();
  if (size < 8) r.fail("file is too short (" + std::to_string(size) + " bytes) to hold the 8-byte header length");
  uint64_t hn = 0;
  std::memcpy(&hn, bytes.data(), 8);
  if (hn > size - 8)
    r.fail("header length " + std::to_string(hn) + " runs past the end of the file (8 + " + std::to_string(hn) +
           " bytes needed, the file has " + std::to_string(size) + "; truncated or not a safetensors file?)");
  if (hn > kMaxHeaderBytes) r.fail("header length " + std::to_string(hn) + " exceeds the 100 MiB limit");
  if (hn < 2) r.fail("header length " + std::to_string(hn) + " is too small for a JSON object");
  const std::string_view text = bytes.substr(8, hn);

  ojson header;
  try {
    header = ojson::parse(text);
  } catch (const ojson::exception& e) {  // parse_error, and out_of_range for a number beyond double's range
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
    if (key.empty()) r.fail("a tensor has an empty name");  // the writer cannot write one back either
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
    if (e.end > e.begin) std::memcpy(t.data.data(), bytes.data() + 8 + hn + e.begin, e.end - e.begin);
    file.tensors.push_back(std::move(t));
  }

  // Checksums (each only when present): a mismatch means the bytes changed after the save.
  auto stored_crc = [&](const char* key, uint32_t& v) {
    const auto it = file.metadata.find(key);
    if (it == file.metadata.end()) return false;
    const std::string& s = it->second;
    const auto res = std::from_chars(s.data(), s.data() + s.size(), v, 16);
    if (s.size() != 8 || res.ec != std::errc() || res.ptr != s.data() + s.size())
      r.fail("__metadata__ entry '" + std::string(key) + "' must be 8 hex digits, got '" + s.substr(0, 40) + "'");
    return true;
  };
  uint32_t want = 0;
  if (stored_crc(kDataCrcKey, want)) {
    std::vector<const LoadedTensor*> by_name;
    for (const LoadedTensor& t : file.tensors) by_name.push_back(&t);
    std::sort(by_name.begin(), by_name.end(), [](const LoadedTensor* a, const LoadedTensor* b) { return a->name < b->name; });
    uint32_t got = 0;
    for (const LoadedTensor* t : by_name) got = crc32(t->data.data(), 4 * t->data.size(), got);
    if (got != want)
      throw Error(path + ": tensor data checksum mismatch: the file is corrupted (" + kDataCrcKey + " " + hex8(want) +
                  " in the header, " + hex8(got) + " computed from the data)");
    file.data_checksummed = true;
  }
  if (stored_crc(kMetadataCrcKey, want)) {
    const uint32_t got = metadata_crc(file.metadata);
    if (got != want)
      throw Error(path + ": metadata checksum mismatch: the file is corrupted (" + kMetadataCrcKey + " " + hex8(want) +
                  " in the header, " + hex8(got) + " computed from the metadata)");
    file.metadata_checksummed = true;
  }
  file.metadata.erase(kDataCrcKey);
  file.metadata.erase(kMetadataCrcKey);
  return file;
}

}  // namespace mlalpha
