// Checkpoints (docs/checkpoints.md): the safetensors writer produces the standard format and the reader
// rejects every kind of damage with a message naming the file and the problem; a checkpoint round-trips
// every tensor, counter and metadata field bitwise; its tensors are exactly the ParamTable's; a different
// model shape or a sidecar from another save is rejected; a failed save leaves the old checkpoint intact
// and no temporary file; and CPU training resumes bit-exactly (100 steps = 50 + save/load + 50).
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/synthetic.h"
#include "test_files.h"
#include "test_util.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/config_json.h"
#include "checkpoint/safetensors.h"
#include "train/trainer_cpu.h"

namespace mlalpha::test {
namespace {

namespace fs = std::filesystem;

#define EXPECT_HAS(msg, part) EXPECT_NE(std::string(msg).find(part), std::string::npos) << "message: " << (msg)

uint64_t header_len(const std::string& bytes) {
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  return n;
}

// A file from a hand-written header (padded like the writer does) and `data_bytes` zero bytes of data.
void write_raw(const std::string& path, std::string header, size_t data_bytes) {
  header.append((8 - header.size() % 8) % 8, ' ');
  const uint64_t n = header.size();
  std::string bytes(8, '\0');
  std::memcpy(bytes.data(), &n, 8);
  write_bytes(path, bytes + header + std::string(data_bytes, '\0'));
}

// ------------------------------------------------------------------------------------------ safetensors

struct Sample {
  std::vector<std::vector<float>> data;
  std::vector<TensorView> views;
};

Sample sample_tensors() {
  auto rng = make_rng(1);
  Sample s;
  const std::vector<std::pair<std::string, std::vector<int64_t>>> specs = {
      {"a.weight", {3, 4}}, {"b.bias", {5}}, {"c.conv", {2, 1, 3}}, {"scalar", {}}};
  s.data.reserve(specs.size());
  for (const auto& [name, shape] : specs) {
    size_t n = 1;
    for (int64_t d : shape) n *= size_t(d);
    s.data.push_back(random_vec<float>(n, rng, -3, 3));
    s.views.push_back({name, shape, s.data.back().data()});
  }
  return s;
}

TEST(Safetensors, RoundTripAndStandardLayout) {
  TempDir tmp;
  const std::string path = tmp / "t.safetensors";
  const Sample s = sample_tensors();
  save_safetensors(path, s.views, {{"format", "test"}, {"answer", "42"}});

  // The layout, read independently of our reader: u64 length, space-padded JSON, data in given order.
  const std::string bytes = read_bytes(path);
  const uint64_t n = header_len(bytes);
  EXPECT_EQ((8 + n) % 8, 0u);
  const auto header = nlohmann::json::parse(bytes.substr(8, n));
  EXPECT_EQ(header["__metadata__"]["answer"], "42");
  EXPECT_EQ(header["a.weight"]["dtype"], "F32");
  EXPECT_EQ(header["c.conv"]["shape"], nlohmann::json({2, 1, 3}));
  EXPECT_EQ(header["b.bias"]["data_offsets"], nlohmann::json({48, 68}));
  EXPECT_EQ(header["scalar"]["data_offsets"], nlohmann::json({92, 96}));
  EXPECT_EQ(bytes.size(), 8 + n + 96);
  EXPECT_EQ(std::memcmp(bytes.data() + 8 + n + 48, s.data[1].data(), 20), 0);

  const SafetensorsFile f = load_safetensors(path);
  EXPECT_EQ(f.metadata, (SafetensorsMetadata{{"format", "test"}, {"answer", "42"}}));
  ASSERT_EQ(f.tensors.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(f.tensors[i].name, s.views[i].name);
    EXPECT_EQ(f.tensors[i].shape, s.views[i].shape);
    ASSERT_EQ(f.tensors[i].data.size(), s.data[i].size());
    EXPECT_EQ(std::memcmp(f.tensors[i].data.data(), s.data[i].data(), 4 * s.data[i].size()), 0) << s.views[i].name;
  }
  EXPECT_EQ(f.find("b.bias"), &f.tensors[1]);
  EXPECT_EQ(f.find("nope"), nullptr);
}

TEST(Safetensors, WriterRejectsDuplicateAndReservedNames) {
  TempDir tmp;
  const float x[2] = {1, 2};
  EXPECT_HAS(error_of([&] { save_safetensors(tmp / "d", {{"w", {2}, x}, {"w", {1}, x}}, {}); }), "appears twice");
  EXPECT_HAS(error_of([&] { save_safetensors(tmp / "d", {{"__metadata__", {2}, x}}, {}); }), "invalid tensor name");
  EXPECT_TRUE(tmp.listing().empty()) << "a failed write left a file behind";
}

TEST(Safetensors, TruncatedFileIsRejectedAtEveryPoint) {
  TempDir tmp;
  const std::string good = tmp / "good.safetensors", bad = tmp / "bad.safetensors";
  save_safetensors(good, sample_tensors().views, {{"k", "v"}});
  const std::string bytes = read_bytes(good);
  const size_t n = header_len(bytes);
  const std::vector<std::pair<size_t, std::string>> cuts = {
      {0, "too short (0 bytes)"},          {5, "too short (5 bytes)"},
      {8, "runs past the end of the file"}, {8 + n / 2, "runs past the end of the file"},
      {8 + n, "run past the data section"}, {8 + n + 50, "run past the data section"},
      {bytes.size() - 1, "run past the data section"}};
  for (const auto& [cut, expect] : cuts) {
    write_bytes(bad, bytes.substr(0, cut));
    const std::string msg = error_of([&] { load_safetensors(bad); });
    EXPECT_HAS(msg, bad);
    EXPECT_HAS(msg, expect);
  }
}

TEST(Safetensors, CorruptHeaderLengthOrJsonIsRejected) {
  TempDir tmp;
  const std::string good = tmp / "good.safetensors", bad = tmp / "bad.safetensors";
  save_safetensors(good, sample_tensors().views, {});
  const std::string bytes = read_bytes(good);

  std::string flipped = bytes;
  flipped[7] = char(0x80);  // the length's top bit: 2^63 + n
  write_bytes(bad, flipped);
  EXPECT_HAS(error_of([&] { load_safetensors(bad); }), "runs past the end of the file");

  std::string shorter = bytes;
  const uint64_t cut = header_len(bytes) - 16;  // the header now ends inside the JSON text
  std::memcpy(shorter.data(), &cut, 8);
  write_bytes(bad, shorter);
  EXPECT_HAS(error_of([&] { load_safetensors(bad); }), "header is not valid JSON");

  std::string garbled = bytes;
  garbled[8] = '#';  // the opening brace
  write_bytes(bad, garbled);
  const std::string msg = error_of([&] { load_safetensors(bad); });
  EXPECT_HAS(msg, "header is not valid JSON");
  EXPECT_HAS(msg, bad);

  write_raw(bad, "[1, 2]", 0);
  EXPECT_HAS(error_of([&] { load_safetensors(bad); }), "header must be a JSON object, got array");
  // A number beyond double's range is nlohmann's out_of_range, not a parse_error: still an Error (found by fuzzing).
  write_raw(bad, R"({"__metadata__":{"k":"v"},"x":1e99999})", 0);
  EXPECT_HAS(error_of([&] { load_safetensors(bad); }), "header is not valid JSON: [json.exception.out_of_range.406] number overflow");

  const std::string missing = tmp / "missing.safetensors";
  EXPECT_HAS(error_of([&] { load_safetensors(missing); }), "cannot open safetensors file '" + missing + "'");
}

TEST(Safetensors, BadTensorEntriesAreRejectedNamingTheTensor) {
  TempDir tmp;
  const std::string p = tmp / "x.safetensors";
  struct Case {
    std::string header;
    size_t data;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {R"({"w":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})", 4, "tensor 'w' has dtype 'F16'; only F32"},
      {R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})", 20,
       "tensor 'w': shape (2, 3) of F32 needs 24 bytes but data_offsets [0, 20] span 20"},
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4, "data_offsets [0, 8] run past the data section"},
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8, "end before they begin"},
      {R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})",
       24, "tensors 'a' [0, 16] and 'b' [8, 24] overlap"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8, "bytes [0, 4) before tensor 'a' belong to no tensor"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 12, "the tensors cover 4 (trailing bytes)"},
      {R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8, "shape entry must be a non-negative integer"},
      {R"({"w":{"dtype":"F32","shape":[2]}})", 8, "tensor 'w': missing field 'data_offsets'"},
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"extra":1}})", 8, "tensor 'w': unknown field 'extra'"},
      {R"({"w":[1,2]})", 0, "tensor 'w': expected an object"},
      {R"({"__metadata__":{"k":3}})", 0, "__metadata__ entry 'k' must be a string, got 3"},
  };
  for (const Case& c : cases) {
    write_raw(p, c.header, c.data);
    const std::string msg = error_of([&] { load_safetensors(p); });
    EXPECT_HAS(msg, p);
    EXPECT_HAS(msg, c.expect);
  }
}

// A safetensors file taken apart (header JSON, data bytes) and put back together, to damage or edit it.
struct RawFile {
  nlohmann::ordered_json header;
  std::string data;
};
RawFile split_file(const std::string& path) {
  const std::string bytes = read_bytes(path);
  const uint64_t n = header_len(bytes);
  return {nlohmann::ordered_json::parse(bytes.substr(8, n)), bytes.substr(8 + n)};
}
void join_file(const std::string& path, const RawFile& f) {
  std::string header = f.header.dump();
  header.append((8 - header.size() % 8) % 8, ' ');
  const uint64_t n = header.size();
  std::string bytes(8, '\0');
  std::memcpy(bytes.data(), &n, 8);
  write_bytes(path, bytes + header + f.data);
}

// The CRC-32 bit by bit, straight from its definition (reflected 0xEDB88320, init and final XOR ~0).
uint32_t crc32_bitwise(const std::string& s) {
  uint32_t c = 0xFFFFFFFFu;
  for (const unsigned char b : s) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
  }
  return ~c;
}

TEST(Safetensors, Crc32MatchesTheStandardAndTheBitwiseDefinition) {
  EXPECT_EQ(crc32("123456789", 9), 0xCBF43926u);  // the standard check value (zlib.crc32(b"123456789"))
  EXPECT_EQ(crc32("", 0), 0u);
  EXPECT_EQ(crc32("The quick brown fox jumps over the lazy dog", 43), 0x414FA339u);
  auto rng = make_rng(11);
  std::uniform_int_distribution<int> byte(0, 255);
  for (const size_t n : {1u, 3u, 4u, 5u, 63u, 1000u}) {
    std::string s(n, '\0');
    for (char& c : s) c = char(byte(rng));
    EXPECT_EQ(crc32(s.data(), n), crc32_bitwise(s)) << n;
    const size_t cut = n / 3;  // chaining: crc(a + b) = crc(b, crc(a))
    EXPECT_EQ(crc32(s.data() + cut, n - cut, crc32(s.data(), cut)), crc32_bitwise(s)) << n;
  }
}

TEST(Safetensors, ChecksumsAreWrittenInTheMetadataAndHiddenFromReaders) {
  TempDir tmp;
  const std::string path = tmp / "t.safetensors";
  const Sample s = sample_tensors();
  save_safetensors(path, s.views, {{"format", "test"}, {"answer", "42"}});
  const RawFile raw = split_file(path);
  const auto& meta = raw.header["__metadata__"];
  // data_crc32: the tensors in name order (a.weight, b.bias, c.conv, scalar: here also the file order).
  std::string by_name;
  for (const char* name : {"a.weight", "b.bias", "c.conv", "scalar"})
    for (size_t i = 0; i < s.views.size(); ++i)
      if (s.views[i].name == name) by_name.append(reinterpret_cast<const char*>(s.data[i].data()), 4 * s.data[i].size());
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", unsigned(crc32_bitwise(by_name)));
  EXPECT_EQ(meta["data_crc32"], std::string(hex));
  // metadata_crc32: "answer\0" "42\0" "format\0" "test\0" (keys in order, checksum keys left out).
  std::snprintf(hex, sizeof hex, "%08x", unsigned(crc32_bitwise(std::string("answer\0" "42\0format\0test\0", 22))));
  EXPECT_EQ(meta["metadata_crc32"], std::string(hex));

  const SafetensorsFile f = load_safetensors(path);
  EXPECT_TRUE(f.data_checksummed);
  EXPECT_TRUE(f.metadata_checksummed);
  EXPECT_EQ(f.metadata, (SafetensorsMetadata{{"format", "test"}, {"answer", "42"}}));

  // The same tensors laid out in another order have the same data checksum.
  std::vector<TensorView> reversed(s.views.rbegin(), s.views.rend());
  save_safetensors(tmp / "r.safetensors", reversed, {{"format", "test"}, {"answer", "42"}});
  EXPECT_EQ(split_file(tmp / "r.safetensors").header["__metadata__"]["data_crc32"], meta["data_crc32"]);
  EXPECT_NO_THROW(load_safetensors(tmp / "r.safetensors"));

  const float x[1] = {1};
  EXPECT_HAS(error_of([&] { save_safetensors(tmp / "k", {{"w", {1}, x}}, {{"data_crc32", "0"}}); }),
             "metadata key 'data_crc32' is reserved for the checksum");
}

TEST(Safetensors, CorruptedBytesAreDetectedByTheChecksums) {
  TempDir tmp;
  const std::string path = tmp / "t.safetensors";
  const Sample s = sample_tensors();
  save_safetensors(path, s.views, {{"format", "test"}, {"answer", "42"}});
  const std::string good = read_bytes(path);
  const uint64_t n = header_len(good);

  // One bit flipped in each tensor's data in turn: every one is caught.
  for (const size_t at : {size_t(0), size_t(50), size_t(95)}) {
    std::string bad = good;
    bad[8 + n + at] ^= 0x10;
    write_bytes(path, bad);
    const std::string msg = error_of([&] { load_safetensors(path); });
    EXPECT_EQ(msg.rfind(path + ": tensor data checksum mismatch: the file is corrupted (data_crc32 ", 0), 0u) << msg;
  }
  // A metadata value changed (same length, so the header still parses).
  write_bytes(path, good);
  RawFile raw = split_file(path);
  raw.header["__metadata__"]["answer"] = "43";
  join_file(path, raw);
  EXPECT_HAS(error_of([&] { load_safetensors(path); }), path + ": metadata checksum mismatch: the file is corrupted");
  // A checksum that is not 8 hex digits.
  raw = split_file(tmp / "t.safetensors");
  raw.header["__metadata__"]["answer"] = "42";
  raw.header["__metadata__"]["data_crc32"] = "xyz";
  join_file(path, raw);
  EXPECT_HAS(error_of([&] { load_safetensors(path); }), "__metadata__ entry 'data_crc32' must be 8 hex digits, got 'xyz'");

  // Files without checksums (PyTorch's, or ml-alpha's before they existed) load unchecked.
  raw.header["__metadata__"].erase("data_crc32");
  raw.header["__metadata__"].erase("metadata_crc32");
  join_file(path, raw);
  const SafetensorsFile f = load_safetensors(path);
  EXPECT_FALSE(f.data_checksummed);
  EXPECT_FALSE(f.metadata_checksummed);
  EXPECT_EQ(f.metadata.at("answer"), "42");
  write_raw(path, R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4);
  EXPECT_NO_THROW(load_safetensors(path));
}

// ------------------------------------------------------------------------------------------- configs

TEST(ConfigJson, EveryFieldRoundTripsExactly) {
  ModelConfig m;
  m.F = 7, m.K = 3, m.D = 48, m.NL = 3, m.expand = 2, m.P = 12, m.G = 2, m.N = 24, m.W = 3, m.Q = 32;
  m.dt_min = 1.2345678e-3f, m.dt_max = 0.0999999f, m.dt_init_floor = 3e-5f;
  m.dt_limit_lo = std::nextafter(0.0f, 1.0f), m.dt_limit_hi = 7.1f;  // a denormal survives too
  const ModelConfig m2 = model_config_from_json(to_json(m), "test");
  EXPECT_TRUE(model_config_differences(m, m2).empty());
  EXPECT_EQ(std::memcmp(&m, &m2, sizeof m), 0);
  ModelConfig inf_limit;  // default dt_limit_hi = +inf is not a JSON number
  EXPECT_EQ(model_config_from_json(to_json(inf_limit), "test").dt_limit_hi, std::numeric_limits<float>::infinity());
  EXPECT_HAS(to_json(inf_limit), R"("dt_limit_hi":"inf")");
  EXPECT_HAS(to_json(inf_limit), R"("dt_min":0.001,)");  // shortest form, not 0.0010000000474974513

  TrainConfig t;
  t.B = 9, t.L = 77, t.steps = 123456789012, t.lr = 3.7e-4f, t.min_lr_ratio = 0.3f, t.warmup = 17;
  t.schedule = Schedule::Constant, t.weight_decay = 0.123f, t.beta1 = 0.85f, t.beta2 = 0.9876f, t.eps = 1e-7f;
  t.clip = -1.0f, t.loss = LossKind::Huber, t.huber_delta = 0.25f, t.burn_in = 5;
  t.seed = 0xFEDCBA9876543210ull, t.log_every = 3;
  const TrainConfig t2 = train_config_from_json(to_json(t), "test");  // (memcmp would see its padding)
  EXPECT_EQ(t2.steps, 123456789012);
  EXPECT_EQ(t2.lr, 3.7e-4f);
  EXPECT_EQ(t2.beta2, 0.9876f);
  EXPECT_EQ(t2.clip, -1.0f);
  EXPECT_EQ(t2.schedule, Schedule::Constant);
  EXPECT_EQ(t2.seed, 0xFEDCBA9876543210ull);
  EXPECT_EQ(t2.loss, LossKind::Huber);
  EXPECT_EQ(to_json(t2), to_json(t));

  TrainConfig x;  // cross-sectional batches and the IC loss
  x.batch_mode = BatchMode::Time, x.dates = 6, x.instruments = 250, x.loss = LossKind::IC;
  const TrainConfig x2 = train_config_from_json(to_json(x), "test");
  EXPECT_EQ(x2.batch_mode, BatchMode::Time);
  EXPECT_EQ(x2.dates, 6);
  EXPECT_EQ(x2.instruments, 250);
  EXPECT_EQ(x2.loss, LossKind::IC);
  // A checkpoint written before the time batch mode existed lacks its fields: windows mode and the defaults.
  std::string old = to_json(TrainConfig{});
  for (const char* f : {R"("batch_mode":"windows",)", R"("dates":4,)", R"("instruments":0,)"}) {
    ASSERT_NE(old.find(f), std::string::npos) << f << " in " << old;
    old.erase(old.find(f), std::string(f).size());
  }
  const TrainConfig o = train_config_from_json(old, "test");
  EXPECT_EQ(o.batch_mode, BatchMode::Windows);
  EXPECT_EQ(o.dates, 4);

  // The GPU's precision is recorded, so a resume continues in it; a checkpoint from before it was
  // recorded reads as fp32.
  for (Precision p : {Precision::FP32, Precision::TF32, Precision::BF16}) {
    TrainConfig b;
    b.precision = p;
    EXPECT_HAS(to_json(b), "\"precision\":\"" + to_string(p) + "\"");
    EXPECT_EQ(train_config_from_json(to_json(b), "test").precision, p);
  }
  std::string before = to_json(TrainConfig{});
  const std::string field = R"(,"precision":"fp32")";
  ASSERT_NE(before.find(field), std::string::npos) << before;
  before.erase(before.find(field), field.size());
  EXPECT_EQ(train_config_from_json(before, "test").precision, Precision::FP32);
}

TEST(ConfigJson, CoversEveryField) {
  // Adding a field to ModelConfig or TrainConfig changes these sizes: add the field to visit_fields in
  // src/checkpoint/config_json.cpp (or checkpoints silently lose it), then update the numbers here.
  EXPECT_EQ(sizeof(ModelConfig), 10 * sizeof(int) + 5 * sizeof(float));
  EXPECT_EQ(sizeof(TrainConfig), 120u + sizeof(std::string));  // + init; state (4 bytes, 8 with padding)
}

TEST(ConfigJson, BadFieldsAreNamed) {
  const std::string where = "checkpoint 'x'";
  EXPECT_HAS(error_of([&] { model_config_from_json(R"({"F":1})", where); }), "lacks the field 'K'");
  std::string j = to_json(ModelConfig{});
  j.insert(1, R"("Dd":32,)");
  EXPECT_HAS(error_of([&] { model_config_from_json(j, where); }), "unknown field 'Dd'");
  j = to_json(ModelConfig{});
  j.replace(j.find(R"("D":32)"), 6, R"("D":"32")");
  EXPECT_HAS(error_of([&] { model_config_from_json(j, where); }), "checkpoint 'x': model_config: field 'D' must be an integer, got \"32\"");
  j = to_json(TrainConfig{});
  j.replace(j.find(R"("loss":"mse")"), 12, R"("loss":"mae")");
  EXPECT_HAS(error_of([&] { train_config_from_json(j, where); }), "field 'loss' must be \"mse\", \"huber\" or \"ic\"");
  j = to_json(TrainConfig{});
  j.replace(j.find(R"("precision":"fp32")"), 18, R"("precision":"fp16")");
  EXPECT_HAS(error_of([&] { train_config_from_json(j, where); }), "field 'precision' must be \"fp32\", \"tf32\" or \"bf16\", got \"fp16\"");
  j = to_json(TrainConfig{});
  j.replace(j.find(R"("B":16)"), 6, R"("B":1e99)");
  EXPECT_HAS(error_of([&] { train_config_from_json(j, where); }), "field 'B' must be an integer");
  EXPECT_HAS(error_of([&] { train_config_from_json("{", where); }), "train_config is not valid JSON");
  EXPECT_HAS(error_of([&] { model_config_from_json(R"({"F":1e99999})", where); }),
             "checkpoint 'x': model_config is not valid JSON: [json.exception.out_of_range.406] number overflow");
  EXPECT_HAS(error_of([&] { feature_stats_from_json(R"({"mean":[1],"stdev":[]})", where); }),
             "mean has 1 entries but stdev 0");
}

// ------------------------------------------------------------------------------------------ checkpoints

ModelConfig small_model() {
  ModelConfig m;
  m.F = 3, m.K = 2, m.D = 16, m.NL = 2, m.P = 8, m.N = 8, m.Q = 16;
  return m;
}

CheckpointMeta sample_meta(const ModelConfig& m) {
  CheckpointMeta meta;
  meta.model = m;
  meta.train.B = 5, meta.train.L = 33, meta.train.lr = 2.5e-3f, meta.train.seed = 1234567890123ull;
  meta.stats.mean = {0.5f, -1.25f, 3.0e-7f};
  meta.stats.stdev = {1.0f, 2.75f, 1e-3f};
  meta.feature_names = {"ret_1", "vol \"20\"", "日本"};
  meta.target_names = {"fwd_1", "fwd_5"};
  return meta;
}

// Random arenas with the padding left zero (as training keeps it).
TrainState sample_state(const ModelLayout& lay, uint64_t seed, int64_t step, int64_t skipped) {
  auto rng = make_rng(seed);
  TrainState s;
  for (auto* a : {&s.params, &s.m, &s.v}) {
    a->assign(lay.table.total(), 0.0f);
    for (const ParamTensor& t : lay.table.tensors()) {
      const auto r = random_vec<float>(t.numel, rng, -2, 2);
      std::copy(r.begin(), r.end(), a->begin() + t.offset);
    }
  }
  s.step = step, s.skipped_total = skipped, s.adam_step = step - skipped, s.seed = 1234567890123ull;
  return s;
}

TEST(Checkpoint, RoundTripsEveryTensorCounterAndField) {
  TempDir tmp;
  const ModelLayout lay(small_model());
  const CheckpointMeta meta = sample_meta(lay.cfg);
  const TrainState st = sample_state(lay, 2, 77, 3);
  const std::string path = tmp / "ck.safetensors";
  save_checkpoint(path, lay, st, meta);
  EXPECT_EQ(tmp.listing(), (std::vector<std::string>{"ck.safetensors", "ck.safetensors.optim.safetensors"}));

  const Checkpoint c = load_checkpoint(path);
  EXPECT_TRUE(same_bits(c.state.params, st.params));
  EXPECT_TRUE(same_bits(c.state.m, st.m));
  EXPECT_TRUE(same_bits(c.state.v, st.v));
  EXPECT_EQ(c.state.step, 77);
  EXPECT_EQ(c.state.adam_step, 74);
  EXPECT_EQ(c.state.skipped_total, 3);
  EXPECT_EQ(c.state.seed, 1234567890123ull);
  EXPECT_TRUE(model_config_differences(c.meta.model, meta.model).empty());
  EXPECT_EQ(to_json(c.meta.train), to_json(meta.train));
  EXPECT_EQ(c.meta.train.lr, 2.5e-3f);
  EXPECT_TRUE(same_bits(c.meta.stats.mean, meta.stats.mean));
  EXPECT_TRUE(same_bits(c.meta.stats.stdev, meta.stats.stdev));
  EXPECT_EQ(c.meta.feature_names, meta.feature_names);
  EXPECT_EQ(c.meta.target_names, meta.target_names);

  // The weights alone need no sidecar.
  fs::remove(optim_sidecar_path(path));
  const CheckpointWeights w = load_checkpoint_weights(path, lay.cfg);
  EXPECT_TRUE(same_bits(w.params, st.params));
  EXPECT_EQ(w.step, 77);
  const std::string msg = error_of([&] { load_checkpoint(path); });
  EXPECT_HAS(msg, "cannot read the optimizer state needed to resume");
  EXPECT_HAS(msg, optim_sidecar_path(path));
}

TEST(Checkpoint, TensorNamesAndShapesAreTheParamTable) {
  TempDir tmp;
  const ModelLayout lay(small_model());
  const TrainState st = sample_state(lay, 3, 10, 0);
  const std::string path = tmp / "ck.safetensors";
  save_checkpoint(path, lay, st, sample_meta(lay.cfg));
  const SafetensorsFile w = load_safetensors(path), o = load_safetensors(optim_sidecar_path(path));
  const auto& ts = lay.table.tensors();
  ASSERT_EQ(w.tensors.size(), ts.size());
  ASSERT_EQ(o.tensors.size(), 2 * ts.size());
  size_t stored = 0;
  for (size_t i = 0; i < ts.size(); ++i) {
    EXPECT_EQ(w.tensors[i].name, ts[i].name);
    EXPECT_EQ(w.tensors[i].shape, ts[i].shape) << ts[i].name;
    EXPECT_EQ(std::memcmp(w.tensors[i].data.data(), st.params.data() + ts[i].offset, 4 * ts[i].numel), 0);
    EXPECT_EQ(o.tensors[i].name, "exp_avg." + ts[i].name);
    EXPECT_EQ(o.tensors[ts.size() + i].name, "exp_avg_sq." + ts[i].name);
    EXPECT_EQ(o.tensors[ts.size() + i].shape, ts[i].shape);
    stored += w.tensors[i].data.size();
  }
  EXPECT_EQ(stored, lay.table.count());  // no padding stored
  // The PyTorch names of DESIGN section 1 (spot checks against the literal strings).
  EXPECT_NE(w.find("layers.1.mixer.conv1d.weight"), nullptr);
  EXPECT_EQ(w.find("layers.1.mixer.conv1d.weight")->shape, (std::vector<int64_t>{32 + 16, 1, 4}));
  EXPECT_NE(w.find("input_proj.weight"), nullptr);
  EXPECT_NE(w.find("head.bias"), nullptr);
  EXPECT_EQ(w.metadata.at("format"), "ml-alpha.weights");
  EXPECT_EQ(w.metadata.at("step"), "10");
  EXPECT_EQ(w.metadata.at("save_id"), o.metadata.at("save_id"));
  EXPECT_EQ(o.metadata.at("seed"), "1234567890123");
}

TEST(Checkpoint, DifferentModelShapeIsRejectedNamingTheTensor) {
  TempDir tmp;
  const ModelLayout lay(small_model());
  const std::string path = tmp / "ck.safetensors";
  save_checkpoint(path, lay, sample_state(lay, 4, 1, 0), sample_meta(lay.cfg));

  ModelConfig wider = lay.cfg;
  wider.D = 32;
  std::string msg = error_of([&] { load_checkpoint_weights(path, wider); });
  EXPECT_HAS(msg, "tensor 'input_proj.weight' has shape (16, 3) in checkpoint '" + path + "' but the model expects (32, 3)");

  ModelConfig deeper = lay.cfg;
  deeper.NL = 3;
  msg = error_of([&] { load_checkpoint(path, deeper); });
  EXPECT_HAS(msg, "has no tensor 'layers.2.norm.weight' of shape (16,)");

  ModelConfig shallower = lay.cfg;
  shallower.NL = 1;
  EXPECT_HAS(error_of([&] { load_checkpoint_weights(path, shallower); }),
             "has a tensor 'layers.1.norm.weight' of shape (16,) that the model does not have");

  // G·N unchanged: every shape agrees, but the model is another one.
  ModelConfig regrouped = lay.cfg;
  regrouped.G = 2, regrouped.N = 4;
  msg = error_of([&] { load_checkpoint_weights(path, regrouped); });
  EXPECT_HAS(msg, "was saved for a different model: G = 1 vs 2, N = 8 vs 4");

  EXPECT_NO_THROW(load_checkpoint(path, lay.cfg));
}

TEST(Checkpoint, SidecarFromAnotherSaveIsRejected) {
  TempDir tmp;
  const ModelLayout lay(small_model());
  const CheckpointMeta meta = sample_meta(lay.cfg);
  const std::string a = tmp / "a.safetensors", b = tmp / "b.safetensors", c = tmp / "c.safetensors";
  save_checkpoint(a, lay, sample_state(lay, 5, 10, 0), meta);
  save_checkpoint(b, lay, sample_state(lay, 6, 20, 0), meta);
  save_checkpoint(c, lay, sample_state(lay, 5, 10, 0), meta);  // same step and content as a, another save

  fs::copy_file(optim_sidecar_path(a), optim_sidecar_path(b), fs::copy_options::overwrite_existing);
  std::string msg = error_of([&] { load_checkpoint(b); });
  EXPECT_HAS(msg, "optimizer sidecar '" + optim_sidecar_path(b) + "' belongs to another save");
  EXPECT_HAS(msg, "step 10) than checkpoint");

  fs::copy_file(optim_sidecar_path(a), optim_sidecar_path(c), fs::copy_options::overwrite_existing);
  EXPECT_HAS(error_of([&] { load_checkpoint(c); }), "belongs to another save");
  EXPECT_NO_THROW(load_checkpoint(a));
  EXPECT_NO_THROW(load_checkpoint_weights(b));  // the weights themselves are fine
}

TEST(Checkpoint, DamagedOrForeignFilesAreRejected) {
  TempDir tmp;
  const ModelLayout lay(small_model());
  const std::string path = tmp / "ck.safetensors";
  save_checkpoint(path, lay, sample_state(lay, 7, 3, 0), sample_meta(lay.cfg));
  const std::string bytes = read_bytes(path);
  write_bytes(path, bytes.substr(0, bytes.size() - 100));
  EXPECT_HAS(error_of([&] { load_checkpoint_weights(path); }), "run past the data section");

  const float x[2] = {1, 2};
  save_safetensors(path, {{"input_proj.weight", {2}, x}}, {});  // e.g. a PyTorch state dict
  EXPECT_HAS(error_of([&] { load_checkpoint_weights(path); }),
             "checkpoint '" + path + "': not an ml-alpha checkpoint (metadata 'format' is missing");
  save_safetensors(path, {}, {{"format", "ml-alpha.weights"}, {"format_version", "2"}});
  EXPECT_HAS(error_of([&] { load_checkpoint_weights(path); }), "format version 2 is not readable");
}

TEST(Checkpoint, SaveRejectsInconsistentState) {
  TempDir tmp;
  const ModelLayout lay(small_model());
  const CheckpointMeta meta = sample_meta(lay.cfg);
  TrainState st = sample_state(lay, 8, 5, 1);
  st.m.pop_back();
  EXPECT_HAS(error_of([&] { save_checkpoint(tmp / "x", lay, st, meta); }), "needs table.total()");
  st = sample_state(lay, 8, 5, 1);
  st.adam_step = 5;
  EXPECT_HAS(error_of([&] { save_checkpoint(tmp / "x", lay, st, meta); }), "inconsistent step counters");
  st = sample_state(lay, 8, 5, 1);
  st.seed = 1;
  EXPECT_HAS(error_of([&] { save_checkpoint(tmp / "x", lay, st, meta); }), "differs from meta.train.seed");
  CheckpointMeta bad = meta;
  bad.feature_names.pop_back();
  EXPECT_HAS(error_of([&] { save_checkpoint(tmp / "x", lay, sample_state(lay, 8, 5, 1), bad); }),
             "2 feature names for model.F = 3");
  EXPECT_TRUE(tmp.listing().empty());
}

TEST(Checkpoint, NonFiniteWeightsAreRefusedOnSaveAndOnLoad) {
  TempDir tmp;
  const ModelLayout lay(small_model());
  const CheckpointMeta meta = sample_meta(lay.cfg);
  const std::string path = tmp / "ck.safetensors";
  const ParamTensor& head_bias = lay.table.tensors().back();
  ASSERT_EQ(head_bias.name, "head.bias");

  TrainState st = sample_state(lay, 12, 5, 0);
  st.params[head_bias.offset + 1] = NAN;
  EXPECT_EQ(error_of([&] { save_checkpoint(path, lay, st, meta); }),
            "save_checkpoint '" + path + "': tensor 'head.bias' holds NaN at element 1 (1 of its 2 values are not "
            "finite): not saved (the training diverged; lower train.lr or check the data)");
  st = sample_state(lay, 12, 5, 0);
  st.v[lay.table.tensors()[0].offset] = INFINITY;
  EXPECT_HAS(error_of([&] { save_checkpoint(path, lay, st, meta); }), "tensor 'exp_avg_sq.input_proj.weight' holds ±Inf at element 0");
  EXPECT_TRUE(tmp.listing().empty());

  // A file holding a NaN (written by another tool, without checksums): the load names the tensor.
  save_checkpoint(path, lay, sample_state(lay, 12, 5, 0), meta);
  for (const std::string& file : {path, optim_sidecar_path(path)}) {
    RawFile raw = split_file(file);
    raw.header["__metadata__"].erase("data_crc32");
    raw.header["__metadata__"].erase("metadata_crc32");
    join_file(file, raw);
  }
  EXPECT_NO_THROW(load_checkpoint(path));  // old-style files (no checksums) still load
  RawFile raw = split_file(path);
  const uint64_t at = raw.header["layers.1.mixer.A_log"]["data_offsets"][0].get<uint64_t>() + 4 * 3;
  const float nan = NAN;
  std::memcpy(raw.data.data() + at, &nan, 4);
  join_file(path, raw);
  EXPECT_EQ(error_of([&] { load_checkpoint_weights(path); }),
            "checkpoint '" + path + "': tensor 'layers.1.mixer.A_log' holds NaN at element 3 (1 of its 4 values are "
            "not finite): the checkpoint is unusable (saved from a diverged run, or edited)");
}

TEST(Checkpoint, CorruptedCheckpointIsDetected) {
  TempDir tmp;
  const ModelLayout lay(small_model());
  const std::string path = tmp / "ck.safetensors";
  save_checkpoint(path, lay, sample_state(lay, 13, 5, 0), sample_meta(lay.cfg));
  EXPECT_TRUE(load_safetensors(path).data_checksummed);
  EXPECT_TRUE(load_safetensors(optim_sidecar_path(path)).data_checksummed);
  // One weight's bits changed on disk: still a finite float, caught only by the checksum.
  std::string bytes = read_bytes(path);
  bytes[8 + header_len(bytes) + 17] ^= 0x01;
  write_bytes(path, bytes);
  EXPECT_HAS(error_of([&] { load_checkpoint_weights(path); }), path + ": tensor data checksum mismatch: the file is corrupted");
  // A digit of the feature statistics changed: caught by the metadata checksum.
  save_checkpoint(path, lay, sample_state(lay, 13, 5, 0), sample_meta(lay.cfg));
  RawFile raw = split_file(path);
  std::string stats = raw.header["__metadata__"]["feature_stats"];
  stats.replace(stats.find("2.75"), 4, "2.76");
  raw.header["__metadata__"]["feature_stats"] = stats;
  join_file(path, raw);
  EXPECT_HAS(error_of([&] { load_checkpoint(path); }), path + ": metadata checksum mismatch: the file is corrupted");
}

TEST(Checkpoint, DataConfigIsRecordedAndReadBack) {
  TempDir tmp;
  const ModelLayout lay(small_model());
  CheckpointMeta meta = sample_meta(lay.cfg);
  const std::string path = tmp / "ck.safetensors";
  save_checkpoint(path, lay, sample_state(lay, 14, 5, 0), meta);
  EXPECT_EQ(load_checkpoint_weights(path).meta.data_json, "");  // not recorded: no key at all
  EXPECT_EQ(load_safetensors(path).metadata.count("data_config"), 0u);

  meta.data_json = R"({"source":"csv","csv":"data/d.csv","delimiter":";","split":{"train_end":0.7,"gap":2}})";
  save_checkpoint(path, lay, sample_state(lay, 14, 5, 0), meta);
  EXPECT_EQ(load_safetensors(path).metadata.at("data_config"), meta.data_json);
  EXPECT_EQ(load_checkpoint_weights(path).meta.data_json, meta.data_json);
  EXPECT_EQ(load_checkpoint(path, lay.cfg).meta.data_json, meta.data_json);

  meta.data_json = "[1, 2]";
  EXPECT_HAS(error_of([&] { save_checkpoint(path, lay, sample_state(lay, 14, 5, 0), meta); }),
             "meta.data_json: the data config must be a JSON object, got '[1, 2]'");
  meta.data_json = "{bad";
  EXPECT_HAS(error_of([&] { save_checkpoint(path, lay, sample_state(lay, 14, 5, 0), meta); }),
             "the data config must be a JSON object, got '{bad'");
}

// Real write failures half-way: the file-size limit (RLIMIT_FSIZE, enforced even for root, unlike a
// read-only directory) makes write() fail with EFBIG once a temporary file reaches it.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    old_handler_ = std::signal(SIGXFSZ, SIG_IGN);  // report EFBIG instead of killing the process
    getrlimit(RLIMIT_FSIZE, &old_);
    rlimit r = old_;
    r.rlim_cur = bytes;
    EXPECT_EQ(setrlimit(RLIMIT_FSIZE, &r), 0);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &old_);
    std::signal(SIGXFSZ, old_handler_);
  }

 private:
  rlimit old_{};
  void (*old_handler_)(int) = nullptr;
};

TEST(Checkpoint, FailedSaveLeavesOldCheckpointAndNoTempFile) {
  TempDir tmp;
  const ModelLayout lay(small_model());
  const CheckpointMeta meta = sample_meta(lay.cfg);
  const std::string path = tmp / "ck.safetensors", side = optim_sidecar_path(path);
  save_checkpoint(path, lay, sample_state(lay, 9, 10, 0), meta);
  const std::string old_w = read_bytes(path), old_o = read_bytes(side);
  const auto files = tmp.listing();
  ASSERT_GT(old_o.size(), old_w.size() + 64);

  // (a) the weights' temporary file fails half-way; (b) the weights' one completes, the sidecar's fails.
  for (rlim_t limit : {rlim_t(old_w.size() / 2), rlim_t(old_w.size() + 64)}) {
    std::string msg;
    {
      FileSizeLimit lim(limit);
      msg = error_of([&] { save_checkpoint(path, lay, sample_state(lay, 10, 20, 0), meta); });
    }
    EXPECT_HAS(msg, "writing the temporary file failed");
    EXPECT_HAS(msg, limit < old_w.size() ? path + "'" : side + "'");
    EXPECT_EQ(tmp.listing(), files) << "limit " << limit << ": a temporary file was left behind";
    EXPECT_EQ(read_bytes(path), old_w);
    EXPECT_EQ(read_bytes(side), old_o);
    const Checkpoint c = load_checkpoint(path);
    EXPECT_EQ(c.state.step, 10);
  }
  // A directory that does not exist: the error names it and nothing is created.
  const std::string msg = error_of([&] { save_checkpoint(tmp / "no/such/dir/ck", lay, sample_state(lay, 9, 1, 0), meta); });
  EXPECT_HAS(msg, "no/such/dir");
  EXPECT_HAS(msg, "No such file or directory");
  // And the next good save replaces the old one.
  save_checkpoint(path, lay, sample_state(lay, 10, 20, 0), meta);
  EXPECT_EQ(load_checkpoint(path).state.step, 20);
  EXPECT_EQ(tmp.listing(), files);
}

// ----------------------------------------------------------------------------------------- CPU resume

struct ResumeCase {
  ModelConfig mc;
  TrainConfig tc;
  Panel data;
};

ResumeCase resume_case() {
  ResumeCase r;
  r.data = make_synthetic({6, 200, 4, 1, 0.1f, 5});
  r.mc.F = 4, r.mc.K = 1, r.mc.D = 16, r.mc.NL = 2, r.mc.P = 8, r.mc.N = 8, r.mc.Q = 16;
  r.tc.B = 4, r.tc.L = 24, r.tc.steps = 100, r.tc.lr = 3e-3f, r.tc.warmup = 10, r.tc.seed = 17, r.tc.burn_in = 2;
  // One Inf feature: the windows that contain it are skipped, so the skip counter is part of the state.
  r.data.x[size_t(2) * r.data.T * r.data.F + 150 * r.data.F + 1] = std::numeric_limits<float>::infinity();
  return r;
}

TEST(ResumeCpu, FiftyPlusFiftyEqualsHundredBitwise) {
  const ResumeCase r = resume_case();
  CpuTrainer straight(r.mc, r.tc, r.data);
  std::vector<float> losses;
  for (int i = 0; i < 100; ++i) losses.push_back(straight.step().loss);

  TempDir tmp;
  const std::string path = tmp / "step50.safetensors";
  {
    CpuTrainer first(r.mc, r.tc, r.data);
    for (int i = 0; i < 50; ++i) first.step();
    EXPECT_GT(first.skipped_total(), 0) << "no step hit the Inf: the skip counter was not exercised";
    EXPECT_LT(first.skipped_total(), 50);
    std::printf("steps 1-50: %lld skipped for the Inf feature\n", static_cast<long long>(first.skipped_total()));
    CheckpointMeta meta;
    meta.model = r.mc, meta.train = r.tc;
    save_checkpoint(path, first.layout(), first.state(), meta);
  }
  const Checkpoint c = load_checkpoint(path, r.mc);
  CpuTrainer resumed(c.meta.model, c.meta.train, r.data);
  resumed.load_state(c.state);
  EXPECT_EQ(resumed.steps_done(), 50);
  for (int i = 50; i < 100; ++i) {
    const StepRecord st = resumed.step();
    EXPECT_EQ(st.step, i + 1);
    EXPECT_EQ(std::memcmp(&st.loss, &losses[size_t(i)], 4), 0) << "loss of step " << i + 1;
  }
  const TrainState a = straight.state(), b = resumed.state();
  EXPECT_TRUE(same_bits(a.params, b.params));
  EXPECT_TRUE(same_bits(a.m, b.m));
  EXPECT_TRUE(same_bits(a.v, b.v));
  EXPECT_EQ(a.step, 100);
  EXPECT_EQ(b.step, 100);
  EXPECT_EQ(a.skipped_total, b.skipped_total);
  EXPECT_EQ(a.adam_step, b.adam_step);
}

TEST(ResumeCpu, LoadStateRejectsAnotherSeedOrSize) {
  const ResumeCase r = resume_case();
  CpuTrainer tr(r.mc, r.tc, r.data);
  TrainState s = tr.state();
  s.seed = 18;
  EXPECT_HAS(error_of([&] { tr.load_state(s); }), "trained with seed 18 but this trainer has train.seed = 17");
  s = tr.state();
  s.v.resize(s.v.size() + 64);
  EXPECT_HAS(error_of([&] { tr.load_state(s); }), "the model needs");
  s = tr.state();
  s.step = 3;  // adam_step 0 + skipped 0 ≠ 3
  EXPECT_HAS(error_of([&] { tr.load_state(s); }), "inconsistent counters");
}

}  // namespace
}  // namespace mlalpha::test
