#include "data/npy.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <string_view>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/error.h"
#include "data/fileio.h"

namespace mlalpha {
namespace {

// A .npy file: magic "\x93NUMPY", major, minor, header length (uint16 LE in 1.0, uint32 LE in 2.0/3.0),
// then a Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded with spaces
// and ended by '\n', then the raw data.
constexpr unsigned char kMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
constexpr int64_t kMaxDim = int64_t(1) << 48;  // far above any real file; keeps products from overflowing

std::string shape_text(std::span<const int64_t> shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

// Header text for an error message: printable ASCII kept, the rest escaped, long headers cut.
std::string printable(std::string_view s) {
  std::string out;
  for (const char c : s.substr(0, 200)) {
    if (c >= 32 && c < 127) {
      out += c;
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", unsigned(static_cast<unsigned char>(c)));
      out += buf;
    }
  }
  return s.size() > 200 ? out + "..." : out;
}

struct Header {
  std::optional<std::string> descr;
  std::optional<bool> fortran_order;
  std::optional<std::vector<int64_t>> shape;
};

// Recursive-descent parser for the one dict literal numpy writes. It accepts what numpy.lib.format writes
// (and reads): single or double quotes, True/False, a tuple of non-negative ints (Python 2 'L' suffix too),
// trailing commas, any whitespace.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& name) : s_(text), name_(name) {}

  Header parse() {
    Header h;
    skip_ws();
    expect('{');
    for (;;) {
      skip_ws();
      if (peek() == '}') break;
      const std::string key = string_literal();
      skip_ws();
      expect(':');
      skip_ws();
      if (key == "descr") {
        if (h.descr) fail("key 'descr' appears twice");
        if (peek() != '\'' && peek() != '"')
          fail("'descr' is not a plain dtype string (structured dtypes are not supported)");
        h.descr = string_literal();
      } else if (key == "fortran_order") {
        if (h.fortran_order) fail("key 'fortran_order' appears twice");
        h.fortran_order = boolean();
      } else if (key == "shape") {
        if (h.shape) fail("key 'shape' appears twice");
        h.shape = int_tuple();
      } else {
        fail("unexpected key '" + printable(key) + "' (expected 'descr', 'fortran_order', 'shape')");
      }
      skip_ws();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      if (peek() != '}') fail("expected ',' or '}'");
    }
    ++i_;  // '}'
    skip_ws();
    if (i_ != s_.size()) fail("unexpected text after the closing '}'");
    if (!h.descr || !h.fortran_order || !h.shape) {
      std::string missing;
      if (!h.descr) missing += " 'descr'";
      if (!h.fortran_order) missing += " 'fortran_order'";
      if (!h.shape) missing += " 'shape'";
      fail("missing key(s)" + missing);
    }
    return h;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(name_ + ": header does not parse: " + what + " at offset " + std::to_string(i_) + " of \"" +
                printable(s_) + "\"");
  }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void skip_ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++i_;
  }
  std::string string_literal() {
    const char q = peek();
    if (q != '\'' && q != '"') fail("expected a quoted string");
    const size_t start = ++i_;
    while (i_ < s_.size() && s_[i_] != q) {
      if (s_[i_] == '\\') fail("escape sequences are not supported in header strings");
      ++i_;
    }
    if (i_ >= s_.size()) fail("unterminated string");
    return std::string(s_.substr(start, i_++ - start));
  }
  bool boolean() {
    for (const bool v : {true, false}) {
      const std::string_view word = v ? "True" : "False";
      if (s_.substr(i_, word.size()) == word) {
        i_ += word.size();
        return v;
      }
    }
    fail("expected True or False");
  }
  std::vector<int64_t> int_tuple() {
    expect('(');
    std::vector<int64_t> dims;
    for (;;) {
      skip_ws();
      if (peek() == ')') break;
      if (peek() == '-') fail("negative dimension");
      if (peek() < '0' || peek() > '9') fail("expected a dimension (a non-negative integer)");
      int64_t v = 0;
      while (peek() >= '0' && peek() <= '9') {
        v = v * 10 + (s_[i_++] - '0');
        if (v > kMaxDim) fail("dimension larger than " + std::to_string(kMaxDim));
      }
      if (peek() == 'L') ++i_;
      dims.push_back(v);
      skip_ws();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      if (peek() != ')') fail("expected ',' or ')' in the shape");
    }
    ++i_;  // ')'
    if (dims.size() > 32) fail("more than 32 dimensions");
    return dims;
  }

  std::string_view s_;
  const std::string& name_;
  size_t i_ = 0;
};

uint32_t read_le(const unsigned char* p, int n) {
  uint32_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Readable shape with the panel's axis names, e.g. "(N=3, T=100, F=8)".
std::string named_shape(std::span<const int64_t> shape, std::span<const char* const> names) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::string(names[i]) + "=" + std::to_string(shape[i]);
  return s + ")";
}

// NaN is allowed (NaN targets are masked, NaN features get the training mean); ±Inf never is.
void require_no_inf(const NpyArray& a, const std::string& name, const char* what) {
  for (size_t i = 0; i < a.data.size(); ++i) {
    if (!std::isinf(a.data[i])) continue;
    std::string idx;
    size_t rest = i;
    for (size_t d = a.shape.size(); d-- > 0;) {
      idx = std::to_string(rest % size_t(a.shape[d])) + (idx.empty() ? "" : ", ") + idx;
      rest /= size_t(a.shape[d]);
    }
    throw Error(name + ": " + what + " value at [" + idx + "] is " + (a.data[i] > 0 ? "+inf" : "-inf") +
                " (or outside the float32 range); values must be finite or NaN");
  }
}

// The fixed prefix: magic, version, header length. Returns where the header ends (= where the data starts),
// checked against the size of the whole file. `b` holds at least the first min(12, file_size) bytes.
size_t npy_header_end(std::span<const unsigned char> b, size_t file_size, const std::string& name) {
  if (file_size == 0) throw Error(name + ": file is empty");
  if (b.size() < 6 || std::memcmp(b.data(), kMagic, 6) != 0)
    throw Error(name + ": not a .npy file (it does not start with \"\\x93NUMPY\")");
  if (b.size() < 8) throw Error(name + ": truncated: the file ends inside the format version");
  const int major = b[6], minor = b[7];
  if (major < 1 || major > 3 || minor != 0)
    throw Error(name + ": .npy format version " + std::to_string(major) + "." + std::to_string(minor) +
                " is not supported (1.0, 2.0 or 3.0)");
  const int len_bytes = major == 1 ? 2 : 4;
  const size_t prefix = 8 + size_t(len_bytes);
  if (b.size() < prefix) throw Error(name + ": truncated: the file ends inside the header length");
  const size_t header_len = read_le(b.data() + 8, len_bytes);
  if (file_size - prefix < header_len)
    throw Error(name + ": truncated: the header is " + std::to_string(header_len) + " bytes but only " +
                std::to_string(file_size - prefix) + " follow");
  return prefix + header_len;
}

// What the header says about the data: shape, element size, element count. `head` is the file up to
// npy_header_end(); the data must be exactly the rest of the file.
struct DataLayout {
  std::vector<int64_t> shape;
  size_t count = 0;
  int itemsize = 0;
};

DataLayout parse_layout(std::span<const unsigned char> head, size_t file_size, const std::string& name) {
  const size_t prefix = head[6] == 1 ? 10 : 12;
  const std::string_view text(reinterpret_cast<const char*>(head.data()) + prefix, head.size() - prefix);
  const Header h = HeaderParser(text, name).parse();

  const std::string& d = *h.descr;
  if (d == ">f4" || d == ">f8")
    throw Error(name + ": dtype '" + d + "' is big-endian; only little-endian float32/float64 ('<f4', '<f8') is supported");
  if (d != "<f4" && d != "<f8")
    throw Error(name + ": dtype '" + printable(d) + "' is not float32/float64 ('<f4' or '<f8')");
  if (*h.fortran_order)
    throw Error(name + ": array is in Fortran order; save it in C order (numpy.ascontiguousarray) first");

  DataLayout out;
  out.shape = *h.shape;
  out.itemsize = d == "<f4" ? 4 : 8;
  out.count = 1;
  size_t need = 0;
  for (const int64_t dim : out.shape)
    if (__builtin_mul_overflow(out.count, size_t(dim), &out.count))
      throw Error(name + ": shape " + shape_text(out.shape) + " has too many elements");
  if (__builtin_mul_overflow(out.count, size_t(out.itemsize), &need))
    throw Error(name + ": shape " + shape_text(out.shape) + " has too many elements");
  const size_t have = file_size - head.size();
  const std::string what = "shape " + shape_text(out.shape) + " of " + (out.itemsize == 4 ? "float32" : "float64");
  if (have < need)
    throw Error(name + ": truncated: " + what + " needs " + std::to_string(need) + " data bytes, the file has " +
                std::to_string(have));
  if (have > need)
    throw Error(name + ": " + std::to_string(have - need) + " unexpected bytes after the data (" + what + " needs " +
                std::to_string(need) + ")");
  return out;
}

// Little-endian float32 or float64 bytes → float32 (the data offset need not be aligned: copy bytes).
void convert(const unsigned char* src, size_t n, int itemsize, float* dst) {
  if (itemsize == 4) {
    if (n) std::memcpy(dst, src, n * 4);
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    double v;
    std::memcpy(&v, src + 8 * i, 8);
    dst[i] = float(v);
  }
}

}  // namespace

NpyArray parse_npy(std::span<const unsigned char> b, const std::string& name) {
  const size_t end = npy_header_end(b, b.size(), name);
  DataLayout layout = parse_layout(b.first(end), b.size(), name);
  NpyArray out;
  out.data.resize(layout.count);
  convert(b.data() + end, layout.count, layout.itemsize, out.data.data());
  out.shape = std::move(layout.shape);
  return out;
}

namespace {

// A read-only private mapping of a whole file; unmapped when the last panel borrowing it is gone.
class MappedFile {
 public:
  MappedFile(const std::string& path, size_t size) : size_(size) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw Error(path + ": cannot open for reading: " + std::strerror(errno));
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    const int err = errno;
    ::close(fd);
    if (p == MAP_FAILED) throw Error(path + ": cannot map " + std::to_string(size) + " bytes: " + std::strerror(err));
    base_ = static_cast<const unsigned char*>(p);
  }
  ~MappedFile() { ::munmap(const_cast<unsigned char*>(base_), size_); }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const unsigned char* data() const { return base_; }

 private:
  const unsigned char* base_ = nullptr;
  size_t size_ = 0;
};

}  // namespace

// Reads the header; float32 data is then borrowed from a mapping of the file, float64 data read in chunks
// and converted: peak memory is at most the array, never the file plus the array.
NpyArray read_npy(const std::string& path) {
  const size_t size = regular_file_size(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open for reading: " + std::strerror(errno));
  auto read = [&](unsigned char* dst, size_t n) {
    if (!in.read(reinterpret_cast<char*>(dst), std::streamsize(n)) || size_t(in.gcount()) != n)
      throw Error(path + ": cannot read " + std::to_string(n) + " bytes (was the file changed while reading?)");
  };
  const size_t first = std::min<size_t>(size, 12);  // the longest fixed prefix (format 2.0 and 3.0)
  std::vector<unsigned char> head(first);
  read(head.data(), first);
  const size_t end = npy_header_end(head, size, path);
  head.resize(end);
  if (end > first) read(head.data() + first, end - first);
  DataLayout layout = parse_layout(head, size, path);
  NpyArray out;
  if (layout.itemsize == 4 && end % alignof(float) == 0 && layout.count > 0) {
    // numpy pads the header to a multiple of 64 bytes, so the floats are aligned in the mapping.
    auto file = std::make_shared<const MappedFile>(path, size);
    const auto* values = reinterpret_cast<const float*>(file->data() + end);  // little-endian host
    out.data = FloatValues::borrow(values, layout.count, std::move(file));
  } else if (layout.itemsize == 4) {
    in.seekg(std::streamoff(end));
    out.data.resize(layout.count);
    read(reinterpret_cast<unsigned char*>(out.data.data()), layout.count * 4);
  } else {
    in.seekg(std::streamoff(end));
    out.data.resize(layout.count);
    std::vector<unsigned char> chunk(std::min<size_t>(layout.count * 8, size_t(1) << 24));
    for (size_t done = 0; done < layout.count;) {
      const size_t n = std::min(layout.count - done, chunk.size() / 8);
      read(chunk.data(), n * 8);
      convert(chunk.data(), n, 8, out.data.data() + done);
      done += n;
    }
  }
  out.shape = std::move(layout.shape);
  return out;
}

namespace {

// The header of a float32 .npy file of `shape` holding `count` values (checked against the shape).
std::string npy_header(std::span<const int64_t> shape, size_t count) {
  size_t expect = 1;
  for (const int64_t dim : shape) {
    require(dim >= 0, "encode_npy: negative dimension in shape " + shape_text(shape));
    expect *= size_t(dim);
  }
  require(count == expect, "encode_npy: shape " + shape_text(shape) + " holds " + std::to_string(expect) +
                               " values, the data has " + std::to_string(count));
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape_text(shape) + ", }";
  // numpy pads so the data starts on a 64-byte boundary; the header ends with '\n'.
  const bool v2 = dict.size() + 1 + 10 > 65535;
  const size_t prefix = v2 ? 12 : 10;
  const size_t total = (prefix + dict.size() + 1 + 63) / 64 * 64;
  dict.append(total - prefix - dict.size() - 1, ' ');
  dict += '\n';
  std::string out(reinterpret_cast<const char*>(kMagic), 6);
  out += char(v2 ? 2 : 1);
  out += char(0);
  const uint32_t len = uint32_t(dict.size());
  for (size_t i = 0; i < (v2 ? 4u : 2u); ++i) out += char((len >> (8 * i)) & 0xff);
  return out + dict;
}

}  // namespace

std::string encode_npy(std::span<const float> data, std::span<const int64_t> shape) {
  std::string out = npy_header(shape, data.size());
  out.append(reinterpret_cast<const char*>(data.data()), data.size() * sizeof(float));  // x86/ARM: little-endian
  return out;
}

// Streams the header and the values into the temporary file: no second copy of a large array in memory.
void write_npy(const std::string& path, std::span<const float> data, std::span<const int64_t> shape) {
  const std::string header = npy_header(shape, data.size());
  write_file_atomic(path, {header, {reinterpret_cast<const char*>(data.data()), data.size() * sizeof(float)}});
}

Panel panel_from_arrays(NpyArray x, NpyArray y, const std::string& xname, const std::string& yname) {
  static constexpr const char* kSeries[] = {"T", "F"};
  static constexpr const char* kPanel[] = {"N", "T", "F"};
  const size_t rx = x.shape.size(), ry = y.shape.size();
  if (rx != 2 && rx != 3)
    throw Error(xname + ": features must have shape (T, F) for one series or (N, T, F) for a panel, got " +
                shape_text(x.shape));
  const bool panel = rx == 3;
  const std::string xs = named_shape(x.shape, panel ? std::span<const char* const>(kPanel) : std::span<const char* const>(kSeries));
  const std::string expect_y = panel ? "(N, T) or (N, T, K)" : "(T,) or (T, K)";
  if (ry != rx - 1 && ry != rx)
    throw Error(yname + ": targets must have shape " + expect_y + " for features " + xname + " of shape " + xs +
                ", got " + shape_text(y.shape));
  for (const int64_t dim : x.shape)
    if (dim < 1 || dim > INT_MAX)
      throw Error(xname + ": every dimension must be in [1, " + std::to_string(INT_MAX) + "], got shape " + xs);
  for (const int64_t dim : y.shape)
    if (dim < 1 || dim > INT_MAX)
      throw Error(yname + ": every dimension must be in [1, " + std::to_string(INT_MAX) + "], got shape " +
                  shape_text(y.shape));
  const int64_t N = panel ? x.shape[0] : 1, T = x.shape[rx - 2], F = x.shape[rx - 1];
  const int64_t Ny = panel ? y.shape[0] : 1, Ty = y.shape[panel ? 1 : 0];
  const int64_t K = ry == rx ? y.shape[ry - 1] : 1;
  if (N != Ny || T != Ty)
    throw Error("features " + xname + " of shape " + xs + " and targets " + yname + " of shape " +
                shape_text(y.shape) + " disagree on " + (N != Ny ? "N (" + std::to_string(N) + " vs " + std::to_string(Ny) + ")"
                                                                  : "T (" + std::to_string(T) + " vs " + std::to_string(Ty) + ")"));
  require_no_inf(x, xname, "feature");
  require_no_inf(y, yname, "target");

  Panel p;
  p.N = int(N), p.T = int(T), p.F = int(F), p.K = int(K);
  // (T, F) and (N, T, F) in C order are exactly the panel's (N, T, F) layout; likewise for the targets.
  p.x = std::move(x.data);
  p.y = std::move(y.data);
  return p;
}

Panel load_npy_panel(const NpyPanelSpec& spec) {
  require(!spec.features.empty(), "data.features is empty: give the path of the features .npy file");
  require(!spec.targets.empty(), "data.targets is empty: give the path of the targets .npy file");
  return panel_from_arrays(read_npy(spec.features), read_npy(spec.targets), spec.features, spec.targets);
}

}  // namespace mlalpha
