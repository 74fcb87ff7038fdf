// .npy and CSV readers: round trips, every accepted layout, and every bad input with its message checked.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "data/csv.h"
#include "data/npy.h"
#include "test_files.h"
#include "test_util.h"

namespace mlalpha {
namespace {

using test::contains;
using test::error_of;
using test::TempDir;
using test::write_bytes;

// A hand-made .npy image: any dict text, any version, raw data bytes (numpy pads the header the same way).
std::string npy_bytes(const std::string& dict, const std::string& data, int major = 1) {
  const size_t prefix = major == 1 ? 10 : 12;
  std::string h = dict;
  while ((prefix + h.size() + 1) % 64 != 0) h += ' ';
  h += '\n';
  std::string out = "\x93NUMPY";
  out += char(major);
  out += char(0);
  for (size_t i = 0; i < (major == 1 ? 2u : 4u); ++i) out += char((h.size() >> (8 * i)) & 0xff);
  return out + h + data;
}

template <typename T>
std::string raw(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

std::string f4_dict(const std::string& shape) {
  return "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
}

// ------------------------------------------------------------------------------------------------ .npy

TEST(Npy, Float32RoundTripIsExactAndAtomic) {
  TempDir dir;
  auto rng = test::make_rng(1);
  const std::vector<int64_t> shape = {3, 5, 7};
  std::vector<float> data = test::random_vec<float>(3 * 5 * 7, rng, -100, 100);
  data[4] = NAN;  // NaN survives
  const std::string path = dir / "x.npy";
  write_npy(path, data, shape);
  EXPECT_EQ(dir.listing().size(), 1u) << "the temporary file must be renamed away";
  const NpyArray a = read_npy(path);
  EXPECT_EQ(a.shape, shape);
  ASSERT_EQ(a.data.size(), data.size());
  EXPECT_EQ(std::memcmp(a.data.data(), data.data(), data.size() * 4), 0);
  // numpy's layout: magic, version 1.0, data aligned to 64 bytes.
  const std::string bytes = encode_npy(data, shape);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  EXPECT_EQ((bytes.size() - data.size() * 4) % 64, 0u);
  EXPECT_TRUE(contains(bytes, "'shape': (3, 5, 7)"));

  // Overwriting replaces the file whole; 1-d shapes are written as (n,).
  const std::vector<float> small = {1, 2, 3};
  write_npy(path, small, std::vector<int64_t>{3});
  const NpyArray b = read_npy(path);
  EXPECT_EQ(b.shape, (std::vector<int64_t>{3}));
  EXPECT_EQ(b.data, small);
  EXPECT_EQ(dir.listing().size(), 1u);
}

TEST(Npy, Float32FileIsMappedNotCopied) {
  // A float32 file is borrowed from a read-only mapping: a panel of it costs no second host copy, the
  // first write copies (the file is never written), and an atomic overwrite of the file leaves the
  // mapping of the old contents intact.
  TempDir dir;
  auto rng = test::make_rng(11);
  const std::vector<float> x = test::random_vec<float>(2 * 50 * 3, rng, -5, 5);
  const std::vector<float> y = test::random_vec<float>(2 * 50, rng, -1, 1);
  write_npy(dir / "x.npy", x, std::vector<int64_t>{2, 50, 3});
  write_npy(dir / "y.npy", y, std::vector<int64_t>{2, 50});
  Panel p = load_npy_panel({dir / "x.npy", dir / "y.npy"});
  const Panel& view = p;
  EXPECT_TRUE(view.x.borrowed() && view.y.borrowed());
  EXPECT_EQ(view.x, x);
  EXPECT_EQ(view.y, y);
  Panel copy = view;  // copies share the borrow
  EXPECT_TRUE(copy.x.borrowed());
  EXPECT_EQ(std::as_const(copy).x.data(), view.x.data());

  write_npy(dir / "x.npy", std::vector<float>(x.size(), 7.0f), std::vector<int64_t>{2, 50, 3});
  EXPECT_EQ(view.x, x) << "the mapping keeps the replaced file's contents";

  p.x[5] = 123.0f;  // copy on write
  EXPECT_FALSE(p.x.borrowed());
  EXPECT_EQ(p.x[5], 123.0f);
  EXPECT_EQ(copy.x[5], x[5]);
  EXPECT_EQ(read_npy(dir / "x.npy").data[5], 7.0f);

  // float64 is converted into owned memory.
  write_bytes(dir / "d.npy", npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", raw(std::vector<double>{1, 2})));
  EXPECT_FALSE(read_npy(dir / "d.npy").data.borrowed());
}

TEST(Npy, Float64IsConvertedToFloat32) {
  TempDir dir;
  auto rng = test::make_rng(2);
  std::vector<double> d = test::random_vec<double>(2 * 3, rng, -1e3, 1e3);
  d[1] = 1.0 / 3.0;
  const std::string path = dir / "d.npy";
  write_bytes(path, npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }", raw(d)));
  const NpyArray a = read_npy(path);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
  ASSERT_EQ(a.data.size(), 6u);
  for (size_t i = 0; i < d.size(); ++i) EXPECT_EQ(a.data[i], float(d[i])) << i;
  EXPECT_EQ(a.data[1], 1.0f / 3.0f);
}

TEST(Npy, LargeFloat64FileIsReadInChunks) {
  // 2.5M doubles = 20 MB, more than one 16 MB read chunk; also an unaligned data offset (format 2.0).
  TempDir dir;
  std::vector<double> d(2'500'000);
  for (size_t i = 0; i < d.size(); ++i) d[i] = double(i) * 0.5 - 1e5;
  const std::string path = dir / "big.npy";
  std::string bytes = npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (2500000,), }", raw(d), 2);
  write_bytes(path, bytes);
  const NpyArray a = read_npy(path);
  ASSERT_EQ(a.data.size(), d.size());
  for (size_t i : {size_t(0), size_t(1), size_t(2'097'151), size_t(2'097'152), d.size() - 1})
    EXPECT_EQ(a.data[i], float(d[i])) << i;
}

TEST(Npy, FormatVersionsAndHeaderSpellings) {
  const std::vector<float> v = {1.5f, -2.25f};
  const auto span = [](const std::string& s) {
    return std::span<const unsigned char>(reinterpret_cast<const unsigned char*>(s.data()), s.size());
  };
  for (int major : {1, 2, 3}) {
    const NpyArray a = parse_npy(span(npy_bytes(f4_dict("(2,)"), raw(v), major)), "v.npy");
    EXPECT_EQ(a.data, v) << "version " << major;
  }
  // Double quotes, keys in another order, no trailing comma, Python 2 long suffix.
  const NpyArray b = parse_npy(
      span(npy_bytes("{\"shape\": (1L, 2L), \"fortran_order\": False, \"descr\": \"<f4\"}", raw(v))), "b.npy");
  EXPECT_EQ(b.shape, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(b.data, v);
  // A 0-d array has one element; an empty dimension has none.
  const NpyArray s = parse_npy(span(npy_bytes(f4_dict("()"), raw(std::vector<float>{7}))), "s.npy");
  EXPECT_TRUE(s.shape.empty());
  EXPECT_EQ(s.data, std::vector<float>{7});
  const NpyArray e = parse_npy(span(npy_bytes(f4_dict("(0, 3)"), "")), "e.npy");
  EXPECT_TRUE(e.data.empty());
}

TEST(Npy, BadFilesNameTheFileAndTheProblem) {
  TempDir dir;
  const std::vector<float> six(6, 1.0f);
  struct Case {
    const char* file;
    std::string bytes;
    const char* expect;
  };
  const std::vector<Case> cases = {
      {"empty.npy", "", "empty.npy: file is empty"},
      {"text.npy", "time,value\n1,2\n", "text.npy: not a .npy file"},
      {"short.npy", std::string("\x93NUMPY\x01", 7), "short.npy: truncated"},
      {"i8.npy", npy_bytes("{'descr': '<i8', 'fortran_order': False, 'shape': (6,), }", std::string(48, '\0')),
       "i8.npy: dtype '<i8' is not float32/float64"},
      {"f2.npy", npy_bytes("{'descr': '<f2', 'fortran_order': False, 'shape': (6,), }", std::string(12, '\0')),
       "f2.npy: dtype '<f2' is not float32/float64"},
      {"be.npy", npy_bytes("{'descr': '>f4', 'fortran_order': False, 'shape': (6,), }", raw(six)),
       "be.npy: dtype '>f4' is big-endian"},
      {"struct.npy", npy_bytes("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (6,), }", raw(six)),
       "struct.npy: header does not parse: 'descr' is not a plain dtype string"},
      {"fortran.npy", npy_bytes("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", raw(six)),
       "fortran.npy: array is in Fortran order"},
      {"trunc.npy", npy_bytes(f4_dict("(2, 3)"), raw(six).substr(0, 20)),
       "trunc.npy: truncated: shape (2, 3) of float32 needs 24 data bytes, the file has 20"},
      {"long.npy", npy_bytes(f4_dict("(2, 3)"), raw(six) + "xx"), "long.npy: 2 unexpected bytes after the data"},
      {"hdr.npy", npy_bytes(f4_dict("(2, 3)"), raw(six)).substr(0, 40), "hdr.npy: truncated: the header is"},
      {"garbage.npy", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3) ", raw(six)),
       "garbage.npy: header does not parse: expected ',' or '}'"},
      {"nokey.npy", npy_bytes("{'descr': '<f4', 'shape': (6,), }", raw(six)),
       "nokey.npy: header does not parse: missing key(s) 'fortran_order'"},
      {"extra.npy", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'x': 1}", raw(six)),
       "extra.npy: header does not parse: unexpected key 'x'"},
      {"neg.npy", npy_bytes(f4_dict("(-6,)"), raw(six)), "neg.npy: header does not parse: negative dimension"},
      {"huge.npy", npy_bytes(f4_dict("(281474976710656, 281474976710656)"), raw(six)),
       "huge.npy: shape (281474976710656, 281474976710656) has too many elements"},
      {"v4.npy", npy_bytes(f4_dict("(6,)"), raw(six), 4), "v4.npy: .npy format version 4.0 is not supported"},
  };
  for (const Case& c : cases) {
    write_bytes(dir / c.file, c.bytes);
    const std::string from_file = error_of([&] { read_npy(dir / c.file); });
    EXPECT_TRUE(contains(from_file, c.expect)) << c.file;
    // The in-memory parser (what the fuzzer drives) says exactly the same.
    const std::span<const unsigned char> bytes(reinterpret_cast<const unsigned char*>(c.bytes.data()), c.bytes.size());
    EXPECT_EQ(error_of([&] { parse_npy(bytes, dir / c.file); }), from_file) << c.file;
  }
  EXPECT_TRUE(contains(error_of([&] { read_npy(dir / "nope.npy"); }), "nope.npy: no such file"));
  EXPECT_TRUE(contains(error_of([&] { read_npy(dir.path.string()); }), "is a directory"));
}

TEST(Npy, FailedWriteLeavesNothingBehind) {
  TempDir dir;
  const std::vector<float> v = {1, 2};
  EXPECT_TRUE(contains(error_of([&] { write_npy(dir / "missing_dir/x.npy", v, std::vector<int64_t>{2}); }),
              "missing_dir/x.npy: cannot create a temporary file"));
  EXPECT_TRUE(contains(error_of([&] { write_npy(dir / "y.npy", v, std::vector<int64_t>{3}); }),
              "shape (3,) holds 3 values, the data has 2"));
  EXPECT_EQ(dir.listing().size(), 0u);
}

// --------------------------------------------------------------------------------------- .npy panels

struct NpyPair {
  TempDir dir;
  std::string x, y;
  NpyPair(const std::vector<float>& xv, std::vector<int64_t> xs, const std::vector<float>& yv, std::vector<int64_t> ys)
      : x(dir / "features.npy"), y(dir / "targets.npy") {
    write_npy(x, xv, xs);
    write_npy(y, yv, ys);
  }
  Panel load() const { return load_npy_panel({x, y}); }
};

std::vector<float> iota_vec(size_t n, float start = 0) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + float(i);
  return v;
}

TEST(NpyPanel, AcceptedShapes) {
  {  // (T, F) + (T,): one series, K = 1
    NpyPair f(iota_vec(10 * 3), {10, 3}, iota_vec(10, 100), {10});
    const Panel p = f.load();
    EXPECT_EQ(p.N, 1);
    EXPECT_EQ(p.T, 10);
    EXPECT_EQ(p.F, 3);
    EXPECT_EQ(p.K, 1);
    EXPECT_EQ(p.x, iota_vec(30));
    EXPECT_EQ(p.y, iota_vec(10, 100));
    EXPECT_TRUE(p.instruments.empty() && p.times.empty());
  }
  {  // (T, F) + (T, K)
    NpyPair f(iota_vec(10 * 3), {10, 3}, iota_vec(20), {10, 2});
    const Panel p = f.load();
    EXPECT_EQ(p.N, 1);
    EXPECT_EQ(p.K, 2);
    EXPECT_EQ(p.y, iota_vec(20));
  }
  {  // (N, T, F) + (N, T), with NaN in both (allowed)
    std::vector<float> x = iota_vec(4 * 6 * 2), y = iota_vec(4 * 6);
    x[5] = NAN;
    y[7] = NAN;
    NpyPair f(x, {4, 6, 2}, y, {4, 6});
    const Panel p = f.load();
    EXPECT_EQ(p.N, 4);
    EXPECT_EQ(p.T, 6);
    EXPECT_EQ(p.F, 2);
    EXPECT_EQ(p.K, 1);
    EXPECT_TRUE(std::isnan(p.x[5]) && std::isnan(p.y[7]));
    EXPECT_EQ(p.x[(size_t(3) * 6 + 5) * 2 + 1], x.back());  // C order is the panel's (N, T, F) order
  }
  {  // (N, T, F) + (N, T, K)
    NpyPair f(iota_vec(2 * 5 * 3), {2, 5, 3}, iota_vec(2 * 5 * 4), {2, 5, 4});
    const Panel p = f.load();
    EXPECT_EQ(p.N, 2);
    EXPECT_EQ(p.K, 4);
    EXPECT_EQ(p.y[(size_t(1) * 5 + 4) * 4 + 3], float(2 * 5 * 4 - 1));
  }
}

TEST(NpyPanel, BadShapesNameBothFiles) {
  {
    NpyPair f(iota_vec(2 * 10 * 3), {2, 10, 3}, iota_vec(2 * 9), {2, 9});
    const std::string e = error_of([&] { f.load(); });
    EXPECT_TRUE(contains(e, "features.npy of shape (N=2, T=10, F=3)"));
    EXPECT_TRUE(contains(e, "targets.npy of shape (2, 9)"));
    EXPECT_TRUE(contains(e, "disagree on T (10 vs 9)"));
  }
  {
    NpyPair f(iota_vec(2 * 10 * 3), {2, 10, 3}, iota_vec(3 * 10), {3, 10});
    EXPECT_TRUE(contains(error_of([&] { f.load(); }), "disagree on N (2 vs 3)"));
  }
  {
    NpyPair f(iota_vec(10 * 3), {10, 3}, iota_vec(9), {9});
    EXPECT_TRUE(contains(error_of([&] { f.load(); }), "(T=10, F=3) and targets"));
  }
  {
    NpyPair f(iota_vec(10), {10}, iota_vec(10), {10});
    EXPECT_TRUE(contains(error_of([&] { f.load(); }), "features must have shape (T, F) for one series or (N, T, F)"));
  }
  {
    NpyPair f(iota_vec(2 * 10 * 3), {2, 10, 3}, iota_vec(10), {10});
    EXPECT_TRUE(contains(error_of([&] { f.load(); }), "targets.npy: targets must have shape (N, T) or (N, T, K)"));
  }
  {
    NpyPair f({}, {0, 3}, {}, {0});
    EXPECT_TRUE(contains(error_of([&] { f.load(); }), "every dimension must be in [1,"));
  }
  {
    std::vector<float> x = iota_vec(2 * 4 * 3);
    x[(size_t(1) * 4 + 2) * 3 + 1] = -INFINITY;
    NpyPair f(x, {2, 4, 3}, iota_vec(8), {2, 4});
    EXPECT_TRUE(contains(error_of([&] { f.load(); }), "features.npy: feature value at [1, 2, 1] is -inf"));
  }
  {
    std::vector<float> y = iota_vec(8);
    y[3] = INFINITY;
    NpyPair f(iota_vec(8 * 2), {8, 2}, y, {8});
    EXPECT_TRUE(contains(error_of([&] { f.load(); }), "targets.npy: target value at [3] is +inf"));
  }
  TempDir dir;
  write_npy(dir / "x.npy", iota_vec(6), std::vector<int64_t>{3, 2});
  EXPECT_TRUE(contains(error_of([&] { load_npy_panel({dir / "x.npy", dir / "y.npy"}); }), "y.npy: no such file"));
}

// --------------------------------------------------------------------------------------------- CSV

CsvSpec spec_of(std::vector<std::string> features, std::vector<std::string> targets) {
  CsvSpec s;
  s.time_column = "date";
  s.instrument_column = "ticker";
  s.feature_columns = std::move(features);
  s.target_columns = std::move(targets);
  return s;
}

float at_x(const Panel& p, int i, int t, int f) { return p.x[(size_t(i) * p.T + t) * p.F + f]; }
float at_y(const Panel& p, int i, int t, int k) { return p.y[(size_t(i) * p.T + t) * p.K + k]; }

TEST(Csv, LongFormatWithMissingRowsNaNQuotesAndCrlf) {
  // Rows out of order, an unused column, a quoted instrument holding a comma and "" quotes, a quoted
  // number, CRLF line ends, NaN in several spellings, missing (instrument, time) rows, no final newline.
  const std::string text =
      "date,ticker,unused,f1,f2,ret\r\n"
      "2024-01-03,BBB,x,1.5,2.5,0.01\r\n"
      "2024-01-02,\"Acme, \"\"The\"\" Co\",y,-1,\"3.25\",0.02\r\n"
      "2024-01-02,BBB,z,,NaN,nan\r\n"
      "\r\n"
      "2024-01-04,\"Acme, \"\"The\"\" Co\",w, 4 ,NA,-0.5\r\n"
      "2024-01-04,CCC,v,+7e-1,N/A,1e-3";
  const Panel p = parse_csv_panel(text, spec_of({"f1", "f2"}, {"ret"}), "data.csv");
  ASSERT_EQ(p.N, 3);
  ASSERT_EQ(p.T, 3);
  EXPECT_EQ(p.F, 2);
  EXPECT_EQ(p.K, 1);
  EXPECT_EQ(p.times, (std::vector<std::string>{"2024-01-02", "2024-01-03", "2024-01-04"}));
  EXPECT_EQ(p.instruments, (std::vector<std::string>{"Acme, \"The\" Co", "BBB", "CCC"}));
  EXPECT_EQ(p.feature_names, (std::vector<std::string>{"f1", "f2"}));
  EXPECT_EQ(p.target_names, std::vector<std::string>{"ret"});
  // Acme: t0 (-1, 3.25 | 0.02), t1 missing, t2 (4, NaN | -0.5)
  EXPECT_EQ(at_x(p, 0, 0, 0), -1.0f);
  EXPECT_EQ(at_x(p, 0, 0, 1), 3.25f);
  EXPECT_EQ(at_y(p, 0, 0, 0), 0.02f);
  EXPECT_TRUE(std::isnan(at_x(p, 0, 1, 0)) && std::isnan(at_x(p, 0, 1, 1)) && std::isnan(at_y(p, 0, 1, 0)));
  EXPECT_EQ(at_x(p, 0, 2, 0), 4.0f);
  EXPECT_TRUE(std::isnan(at_x(p, 0, 2, 1)));
  EXPECT_EQ(at_y(p, 0, 2, 0), -0.5f);
  // BBB: t0 (NaN, NaN | NaN), t1 (1.5, 2.5 | 0.01), t2 missing
  EXPECT_TRUE(std::isnan(at_x(p, 1, 0, 0)) && std::isnan(at_x(p, 1, 0, 1)) && std::isnan(at_y(p, 1, 0, 0)));
  EXPECT_EQ(at_x(p, 1, 1, 0), 1.5f);
  EXPECT_EQ(at_x(p, 1, 1, 1), 2.5f);
  EXPECT_EQ(at_y(p, 1, 1, 0), 0.01f);
  EXPECT_TRUE(std::isnan(at_y(p, 1, 2, 0)));
  // CCC: only t2
  EXPECT_EQ(at_x(p, 2, 2, 0), 0.7f);
  EXPECT_TRUE(std::isnan(at_x(p, 2, 2, 1)));
  EXPECT_EQ(at_y(p, 2, 2, 0), 1e-3f);
  EXPECT_TRUE(std::isnan(at_x(p, 2, 0, 0)) && std::isnan(at_y(p, 2, 1, 0)));

  // The same file with LF ends, a final newline, a BOM and the rows in another order gives the same panel.
  std::string lf = "\xEF\xBB\xBF" "date,ticker,unused,f1,f2,ret\n"
                   "2024-01-04,CCC,v,+7e-1,N/A,1e-3\n"
                   "2024-01-04,\"Acme, \"\"The\"\" Co\",w, 4 ,NA,-0.5\n"
                   "2024-01-02,BBB,z,,NaN,nan\n"
                   "2024-01-02,\"Acme, \"\"The\"\" Co\",y,-1,\"3.25\",0.02\n"
                   "2024-01-03,BBB,x,1.5,2.5,0.01\n";
  const Panel q = parse_csv_panel(lf, spec_of({"f1", "f2"}, {"ret"}), "data.csv");
  EXPECT_EQ(q.times, p.times);
  EXPECT_EQ(q.instruments, p.instruments);
  EXPECT_EQ(std::memcmp(q.x.data(), p.x.data(), p.x.size() * 4), 0);
  EXPECT_EQ(std::memcmp(q.y.data(), p.y.data(), p.y.size() * 4), 0);
}

TEST(Csv, QuotedNewlinesKeepLineNumbersRight) {
  const std::string text =
      "date,ticker,note,f1,y\n"
      "1,A,\"two\nlines\",1,2\n"
      "2,A,plain,oops,3\n";
  EXPECT_TRUE(contains(error_of([&] { parse_csv_panel(text, spec_of({"f1"}, {"y"}), "q.csv"); }),
              "q.csv:4: column 'f1': 'oops' is not a number"));
}

TEST(Csv, TimeOrderIsNumericOnlyWhenEveryTimeIsANumber) {
  const auto times_of = [](const std::string& body) {
    return parse_csv_panel("date,ticker,f1,y\n" + body, spec_of({"f1"}, {"y"}), "t.csv").times;
  };
  // Numeric: 9 < 10 < 100 (as strings "10" < "100" < "9").
  EXPECT_EQ(times_of("10,A,1,1\n9,A,2,2\n100,A,3,3\n1e1,B,4,4\n"), (std::vector<std::string>{"9", "10", "100"}));
  // ISO dates sort as strings.
  EXPECT_EQ(times_of("2024-01-10,A,1,1\n2024-01-09,A,1,1\n2023-12-31,A,1,1\n"),
            (std::vector<std::string>{"2023-12-31", "2024-01-09", "2024-01-10"}));
  // "10" and "1e1" are one time step (numerically equal): B's row lands at t = 1 next to A's.
  const Panel p = parse_csv_panel("date,ticker,f1,y\n10,A,1,1\n9,A,2,2\n1e1,B,4,5\n", spec_of({"f1"}, {"y"}), "t.csv");
  ASSERT_EQ(p.T, 2);
  EXPECT_EQ(at_x(p, 1, 1, 0), 4.0f);
  EXPECT_TRUE(std::isnan(at_x(p, 1, 0, 0)));
  // ... so A at "10" and A at "1e1" are duplicates.
  EXPECT_TRUE(contains(error_of([&] {
                parse_csv_panel("date,ticker,f1,y\n10,A,1,1\n1e1,A,2,2\n", spec_of({"f1"}, {"y"}), "d.csv");
              }),
              "d.csv:3: duplicate row for time '1e1', instrument 'A' (first seen on line 2)"));
}

TEST(Csv, TimesMixingNumbersAndTextAreAnError) {
  const auto err = [](const std::string& body) {
    return error_of([&] { parse_csv_panel("date,ticker,f1,y\n" + body, spec_of({"f1"}, {"y"}), "t.csv"); });
  };
  // One stray label among numbers: the error names the file, the line where the label first appears and
  // the value.
  EXPECT_EQ(err("10,A,1,1\n9,A,2,2\n9,B,2,2\nx,A,3,3\nx,B,3,3\n"),
            "t.csv:5: time 'x' is not a number or an ISO 8601 date, but 2 other times are numbers (e.g. '10' at "
            "t.csv:2); write every time in one layout");
  // A missing-value spelling and an infinite time are not numbers either.
  EXPECT_TRUE(contains(err("1,A,1,1\n2,A,1,1\nNaN,A,1,1\n"), "t.csv:4: time 'NaN' is not a number or an ISO 8601 date"));
  EXPECT_TRUE(contains(err("1,A,1,1\n2,A,1,1\ninf,A,1,1\n"), "t.csv:4: time 'inf' is not a number or an ISO 8601 date"));
  // Mostly dates: the one number is the stray value.
  EXPECT_EQ(err("2024-01-02,A,1,1\n2024-01-03,A,1,1\n20240104,A,1,1\n"),
            "t.csv:4: time '20240104' is a number, but 2 other times are ISO 8601 dates (e.g. '2024-01-02' at "
            "t.csv:2); times must be all numbers or all dates");
  // Mostly numbers: the one date is the stray value.
  EXPECT_EQ(err("1,A,1,1\n2,A,1,1\n2024-01-02,A,1,1\n"),
            "t.csv:4: time '2024-01-02' is an ISO 8601 date, but 2 other times are numbers (e.g. '1' at t.csv:2); "
            "times must be all numbers or all dates");
  // Instruments may mix (their order carries no meaning): "1301" and "AAPL" are two instruments.
  const Panel p = parse_csv_panel("date,ticker,f1,y\n1,AAPL,1,1\n1,1301,2,2\n", spec_of({"f1"}, {"y"}), "t.csv");
  EXPECT_EQ(p.instruments, (std::vector<std::string>{"1301", "AAPL"}));
}

TEST(Csv, DelimiterTabSemicolonAndPipe) {
  TempDir dir;
  CsvSpec tsv = spec_of({"f1", "f2"}, {"y"});
  tsv.path = dir / "d.tsv";
  tsv.delimiter = '\t';
  // Commas inside a TSV cell are plain text; a tab inside quotes is part of the cell.
  write_bytes(tsv.path, "date\tticker\tnote\tf1\tf2\ty\n2\tA\ta,b\t1.5\t\t0.5\n1\t\"B\tC\"\tx\t-2\t3\t\n");
  const Panel p = load_csv_panel(tsv);
  EXPECT_EQ(p.times, (std::vector<std::string>{"1", "2"}));
  EXPECT_EQ(p.instruments, (std::vector<std::string>{"A", "B\tC"}));
  EXPECT_EQ(at_x(p, 0, 1, 0), 1.5f);
  EXPECT_TRUE(std::isnan(at_x(p, 0, 1, 1)));
  EXPECT_EQ(at_y(p, 0, 1, 0), 0.5f);
  EXPECT_EQ(at_x(p, 1, 0, 0), -2.0f);
  EXPECT_EQ(at_x(p, 1, 0, 1), 3.0f);
  EXPECT_TRUE(std::isnan(at_y(p, 1, 0, 0)));

  CsvSpec semi = spec_of({"f1"}, {"y"});
  semi.delimiter = ';';
  // European exports: ';' between cells, so a ',' in a cell is not a separator (and not a decimal point).
  const Panel q = parse_csv_panel("date;ticker;f1;y\n2024-01-02;\"A;1\";0.25;-1\n2024-01-02;B,2;4;\n", semi, "e.csv");
  EXPECT_EQ(q.instruments, (std::vector<std::string>{"A;1", "B,2"}));
  EXPECT_EQ(q.x, (std::vector<float>{0.25f, 4.0f}));
  EXPECT_EQ(q.y[0], -1.0f);
  EXPECT_TRUE(std::isnan(q.y[1]));
  EXPECT_TRUE(contains(error_of([&] { parse_csv_panel("date;ticker;f1;y\n1;A;0,5;1\n", semi, "e.csv"); }),
                       "e.csv:2: column 'f1': '0,5' is not a number"));

  CsvSpec pipe = spec_of({"f1"}, {"y"});
  pipe.delimiter = '|';
  EXPECT_EQ(parse_csv_panel("date|ticker|f1|y\n1|A|7|8\n", pipe, "p.csv").x, std::vector<float>{7.0f});
}

TEST(Csv, WrongDelimiterNamesTheLikelyOne) {
  const CsvSpec comma = spec_of({"f1"}, {"y"});
  EXPECT_EQ(error_of([&] { parse_csv_panel("date;ticker;f1;y\n1;A;1;1\n", comma, "s.csv"); }),
            "s.csv:1: data.time_column = 'date' is not in the header split at ',' (1 column), but the header line "
            "looks ';'-separated: set data.delimiter to ';'");
  // A TSV read as CSV; the header starts after a BOM and blank lines, on line 3.
  EXPECT_EQ(error_of([&] { parse_csv_panel("\xEF\xBB\xBF\n\ndate\tticker\tf1\ty\n1\tA\t1\t1\n", comma, "t.tsv"); }),
            "t.tsv:3: data.time_column = 'date' is not in the header split at ',' (1 column), but the header line "
            "looks tab ('\\t')-separated: set data.delimiter to tab ('\\t')");
  // A CSV read as TSV.
  CsvSpec tab = comma;
  tab.delimiter = '\t';
  EXPECT_TRUE(contains(error_of([&] { parse_csv_panel("date,ticker,f1,y\n1,A,1,1\n", tab, "c.csv"); }),
                       "c.csv:1: data.time_column = 'date' is not in the header split at tab ('\\t') (1 column), "
                       "but the header line looks ','-separated: set data.delimiter to ','"));
  // A header that is fine but a column really missing: the usual message, no delimiter hint.
  EXPECT_EQ(error_of([&] { parse_csv_panel("Date,ticker,f1,y\n1,A,1,1\n", comma, "m.csv"); }),
            "data.time_column = 'date' is not a column of m.csv (header: Date, ticker, f1, y); did you mean 'Date'?");
  // A data row written with another delimiter.
  EXPECT_EQ(error_of([&] { parse_csv_panel("date,ticker,f1,y\n1,A,1,1\n2;A;1;1\n", comma, "r.csv"); }),
            "r.csv:3: 1 fields, the header has 4 (the line looks ';'-separated, the file's delimiter is ',')");
}

TEST(Csv, DelimiterSettingIsValidated) {
  EXPECT_EQ(csv_delimiter_from_string(",", "data.delimiter"), ',');
  EXPECT_EQ(csv_delimiter_from_string("\t", "data.delimiter"), '\t');
  EXPECT_EQ(csv_delimiter_from_string("tab", "data.delimiter"), '\t');
  EXPECT_EQ(csv_delimiter_from_string("\\t", "data.delimiter"), '\t');
  EXPECT_EQ(csv_delimiter_from_string(";", "data.delimiter"), ';');
  EXPECT_EQ(csv_delimiter_from_string(" ", "data.delimiter"), ' ');
  EXPECT_EQ(error_of([] { csv_delimiter_from_string(";;", "data.delimiter"); }),
            "data.delimiter must be one character (e.g. \",\", \"\\t\" or \"tab\" for TSV, \";\"), got ';;' (2 characters)");
  EXPECT_TRUE(contains(error_of([] { csv_delimiter_from_string("", "data.delimiter"); }), "got '' (0 characters)"));
  EXPECT_EQ(error_of([] { csv_delimiter_from_string("\"", "data.delimiter"); }),
            "data.delimiter '\"' cannot be used: it must not be a quote, a line end, NUL, a letter, a digit or one of "
            ". + - (they occur inside cells); use e.g. ',', tab or ';'");
  EXPECT_TRUE(contains(error_of([] { csv_delimiter_from_string("\n", "data.delimiter"); }),
                       "data.delimiter byte 0x0a cannot be used"));
  EXPECT_TRUE(contains(error_of([] { csv_delimiter_from_string(".", "data.delimiter"); }), "data.delimiter '.' cannot be used"));
  EXPECT_TRUE(contains(error_of([] { csv_delimiter_from_string("x", "data.delimiter"); }), "data.delimiter 'x' cannot be used"));
  // The reader checks the spec's delimiter the same way.
  CsvSpec s = spec_of({"f1"}, {"y"});
  s.delimiter = '\r';
  EXPECT_TRUE(contains(error_of([&] { parse_csv_panel("date,ticker,f1,y\n1,A,1,1\n", s, "d.csv"); }),
                       "data.delimiter byte 0x0d cannot be used"));
  s.delimiter = '5';
  EXPECT_TRUE(contains(error_of([&] { parse_csv_panel("date,ticker,f1,y\n1,A,1,1\n", s, "d.csv"); }),
                       "data.delimiter '5' cannot be used"));
}

TEST(Csv, InstrumentsAreSortedAndSingleSeriesNeedsNoInstrumentColumn) {
  const Panel p = parse_csv_panel("date,ticker,f1,y\n1,10,1,1\n1,9,2,2\n1,100,3,3\n", spec_of({"f1"}, {"y"}), "i.csv");
  EXPECT_EQ(p.instruments, (std::vector<std::string>{"9", "10", "100"}));
  EXPECT_EQ(at_x(p, 0, 0, 0), 2.0f);
  const Panel s = parse_csv_panel("date,ticker,f1,y\n1,z,1,1\n1,a,2,2\n", spec_of({"f1"}, {"y"}), "i.csv");
  EXPECT_EQ(s.instruments, (std::vector<std::string>{"a", "z"}));
  // Numerically equal instrument ids stay two instruments (ordered by their text), unlike times.
  const Panel e = parse_csv_panel("date,ticker,f1,y\n1,1e1,1,1\n1,10,2,2\n1,9,3,3\n", spec_of({"f1"}, {"y"}), "i.csv");
  EXPECT_EQ(e.instruments, (std::vector<std::string>{"9", "10", "1e1"}));
  EXPECT_EQ(e.x, (std::vector<float>{3, 2, 1}));

  CsvSpec one = spec_of({"b", "a"}, {"y1", "y2"});
  one.instrument_column = "";
  one.delimiter = '\t';
  const Panel q = parse_csv_panel("date\ta\tb\ty1\ty2\n2\t1\t2\t3\t4\n1\t5\t6\t7\t\n", one, "s.tsv");
  EXPECT_EQ(q.N, 1);
  EXPECT_EQ(q.T, 2);
  EXPECT_TRUE(q.instruments.empty());
  EXPECT_EQ(q.x, (std::vector<float>{6, 5, 2, 1}));  // features in the order the spec names them
  EXPECT_EQ(q.y[0], 7.0f);
  EXPECT_TRUE(std::isnan(q.y[1]));
  EXPECT_EQ(q.y[3], 4.0f);
}

TEST(Csv, BadCellsNameFileLineAndColumn) {
  const CsvSpec spec = spec_of({"f1", "f2"}, {"y"});
  const std::string head = "date,ticker,f1,f2,y\n";
  const auto err = [&](const std::string& body) { return error_of([&] { parse_csv_panel(head + body, spec, "p.csv"); }); };
  EXPECT_TRUE(contains(err("1,A,1,2,3\n2,A,1,2,3\n3,A,1,abc,3\n"), "p.csv:4: column 'f2': 'abc' is not a number"));
  EXPECT_TRUE(contains(err("1,A,1,1.5x,3\n"), "p.csv:2: column 'f2': '1.5x' is not a number"));
  EXPECT_TRUE(contains(err("1,A,1,2,--3\n"), "p.csv:2: column 'y': '--3' is not a number"));
  EXPECT_TRUE(contains(err("1,A,inf,2,3\n"), "p.csv:2: column 'f1': 'inf' is infinite"));
  EXPECT_TRUE(contains(err("1,A,1,-Infinity,3\n"), "p.csv:2: column 'f2': '-Infinity' is infinite"));
  EXPECT_TRUE(contains(err("1,A,1,2,1e39\n"), "p.csv:2: column 'y': '1e39' is outside the float32 range"));
  EXPECT_TRUE(contains(err("1,A,1,2\n"), "p.csv:2: 4 fields, the header has 5"));
  EXPECT_TRUE(contains(err("1,A,1,2,3\n,A,1,2,3\n"), "p.csv:3: column 'date': the time is empty"));
  EXPECT_TRUE(contains(err("1, ,1,2,3\n"), "p.csv:2: column 'ticker': the instrument is empty"));
  EXPECT_TRUE(contains(err("1,\"A,1,2,3\n2,A,1,2,3\n"), "p.csv:2: quoted field in column 2 is never closed"));
  EXPECT_TRUE(contains(err("1,\"A\"B,1,2,3\n"), "p.csv:2: unexpected character 'B' after the closing quote of column 2"));
  EXPECT_TRUE(contains(err("1,A,1,2,3\n2,B,1,2,3\n1,A,4,5,6\n"),
              "p.csv:4: duplicate row for time '1', instrument 'A' (first seen on line 2)"));
  EXPECT_TRUE(contains(err(""), "p.csv: no data rows after the header"));
  EXPECT_TRUE(contains(error_of([&] { parse_csv_panel("", spec, "p.csv"); }), "p.csv: file is empty"));
  EXPECT_TRUE(contains(error_of([&] { parse_csv_panel("\n\r\n", spec, "p.csv"); }), "p.csv: no header row"));
}

TEST(Csv, MissingColumnsAndBadSpecs) {
  const std::string text = "date,ticker,f1,y\n1,A,1,1\n";
  // Each message names the setting, shows the header and suggests the nearest column.
  EXPECT_EQ(error_of([&] { parse_csv_panel(text, spec_of({"f1", "f9"}, {"y"}), "m.csv"); }),
            "data.feature_columns: 'f9' is not a column of m.csv (header: date, ticker, f1, y); did you mean 'f1'?");
  EXPECT_EQ(error_of([&] { parse_csv_panel(text, spec_of({"f1"}, {"ret"}), "m.csv"); }),
            "data.target_columns: 'ret' is not a column of m.csv (header: date, ticker, f1, y)");
  CsvSpec s = spec_of({"f1"}, {"y"});
  s.time_column = "time";
  // No name is close to 'time', but 'date' is what time columns are called.
  EXPECT_EQ(error_of([&] { parse_csv_panel(text, s, "m.csv"); }),
            "data.time_column = 'time' is not a column of m.csv (header: date, ticker, f1, y); did you mean 'date'?");
  s = spec_of({"f1"}, {"y"});
  s.instrument_column = "instrument";
  EXPECT_EQ(error_of([&] { parse_csv_panel(text, s, "m.csv"); }),
            "data.instrument_column = 'instrument' is not a column of m.csv (header: date, ticker, f1, y); did you "
            "mean 'ticker'?");
  s = spec_of({"ret_1", "ret5"}, {"fwd_ret_1"});
  EXPECT_EQ(error_of([&] { parse_csv_panel("date,ticker,ret_1,ret_5,fwd_ret_1\n1,A,1,1,1\n", s, "r.csv"); }),
            "data.feature_columns: 'ret5' is not a column of r.csv (header: date, ticker, ret_1, ret_5, fwd_ret_1); "
            "did you mean 'ret_5'?");
  EXPECT_EQ(error_of([&] { parse_csv_panel("date,ticker,f1,f1,y\n1,A,1,1,1\n", spec_of({"f1"}, {"y"}), "m.csv"); }),
            "m.csv:1: column 'f1' appears twice in the header (columns 3 and 4), so data.feature_columns: 'f1' is "
            "ambiguous; rename one of them");
  EXPECT_EQ(error_of([&] { parse_csv_panel(text, spec_of({"f1", "f1"}, {"y"}), "m.csv"); }),
            "data.feature_columns lists 'f1' twice");
  EXPECT_EQ(error_of([&] { parse_csv_panel(text, spec_of({}, {"y"}), "m.csv"); }),
            "data.feature_columns is empty: list the feature columns of m.csv (header: date, ticker, f1, y)");
  EXPECT_EQ(error_of([&] { parse_csv_panel(text, spec_of({"f1"}, {}), "m.csv"); }),
            "data.target_columns is empty: list the target columns of m.csv (header: date, ticker, f1, y)");
  s = spec_of({"f1"}, {"y"});
  s.instrument_column = "date";
  EXPECT_TRUE(contains(error_of([&] { parse_csv_panel(text, s, "m.csv"); }),
                       "data.time_column and data.instrument_column are both 'date'"));
}

TEST(Csv, ReadsFilesAndReportsMissingOnes) {
  TempDir dir;
  CsvSpec s = spec_of({"f1"}, {"y"});
  s.path = dir / "d.csv";
  EXPECT_TRUE(contains(error_of([&] { load_csv_panel(s); }), "d.csv: no such file"));
  write_bytes(s.path, "");
  EXPECT_TRUE(contains(error_of([&] { load_csv_panel(s); }), "d.csv: file is empty"));
  write_bytes(s.path, "date,ticker,f1,y\n5,A,0.25,-1\n");
  const Panel p = load_csv_panel(s);
  EXPECT_EQ(p.x, std::vector<float>{0.25f});
  EXPECT_EQ(p.y, std::vector<float>{-1.0f});
}

TEST(Csv, LargeFileParsesQuickly) {
  // 200k rows × 5 value columns (1M cells; the design target is ~10M in seconds).
  auto rng = test::make_rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  std::string text = "date,ticker,f1,f2,f3,f4,y\n";
  const int N = 200, T = 1000;
  std::vector<float> f3(size_t(N) * T);
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < N; ++i) {
      char line[160];
      f3[size_t(i) * T + t] = u(rng);
      std::snprintf(line, sizeof line, "%d,S%03d,%.6g,%.6g,%.9g,%.6g,%.6g\n", 20000000 + t, i, u(rng), u(rng),
                    double(f3[size_t(i) * T + t]), u(rng), u(rng));
      text += line;
    }
  const auto t0 = std::chrono::steady_clock::now();
  const Panel p = parse_csv_panel(text, spec_of({"f1", "f2", "f3", "f4"}, {"y"}), "big.csv");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("parsed %zu bytes, %d cells in %.3f s\n", text.size(), N * T * 5, s);
  ASSERT_EQ(p.N, N);
  ASSERT_EQ(p.T, T);
  for (int i = 0; i < N; i += 37)
    for (int t = 0; t < T; t += 91) ASSERT_EQ(at_x(p, i, t, 2), f3[size_t(i) * T + t]) << i << "," << t;
  EXPECT_LT(s, 2.0);
}

}  // namespace
}  // namespace mlalpha
