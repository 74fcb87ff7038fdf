// The streaming predictor's state file (mlalpha/stream.h): safetensors (checkpoint/safetensors.h, CRC-checked),
// one set of arrays per member (its model state, `m<k>.conv`/`ssm` or `m<k>.window`/`window_fill`, and its
// forward-fill values `m<k>.last_values`), the rest in the metadata: the format, the checkpoint hash, the mode,
// the shapes, the instruments, each one's history count, the bar count and the last time; and, for `ml-alpha
// info` and the kernel check, the kernels that wrote it and the checkpoint's path.
#include <nlohmann/json.hpp>

#include <cmath>
#include <string>

#include "checkpoint/run_record.h"
#include "core/error.h"
#include "core/shortest.h"
#include "predict/stream_impl.h"

namespace mlalpha {

namespace {

constexpr const char* kFormat = "ml-alpha stream state";
constexpr const char* kVersion = "1";

std::string member_prefix(size_t k) { return std::string("m").append(std::to_string(k)).append("."); }

const std::string& meta(const SafetensorsFile& f, const std::string& key) {
  const auto it = f.metadata.find(key);
  require(it != f.metadata.end(), f.path + ": no '" + key + "' entry: not a complete stream state file");
  return it->second;
}

int64_t integer(const SafetensorsFile& f, const std::string& key) {
  const std::string& v = meta(f, key);
  size_t used = 0;
  long long n = 0;
  try {
    n = std::stoll(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  require(used == v.size() && !v.empty(), f.path + ": '" + key + "' is '" + v + "', expected an integer");
  return n;
}

std::string kernels_of(const StreamOptions& o, bool gpu) {
  return gpu ? "gpu" : o.compute.reference() ? "cpu-reference" : "cpu-fast";
}

// The metadata, checked: everything but the arrays.
StreamStateInfo parse_info(const SafetensorsFile& f) {
  const std::string& path = f.path;
  require(f.metadata.count("format") && f.metadata.at("format") == kFormat,
          path + ": not a stream state file (no format entry '" + std::string(kFormat) + "')");
  require(meta(f, "version") == kVersion, path + ": stream state version '" + meta(f, "version") +
                                              "', this build reads version " + kVersion);
  StreamStateInfo info;
  info.checkpoint_hash = meta(f, "checkpoint");
  info.mode = meta(f, "mode");
  if (const auto it = f.metadata.find("kernels"); it != f.metadata.end()) info.kernels = it->second;
  if (const auto it = f.metadata.find("source"); it != f.metadata.end()) info.source = it->second;
  info.members = int(integer(f, "members"));
  info.features = int(integer(f, "features"));
  info.targets = int(integer(f, "targets"));
  info.context_length = int(integer(f, "context_length"));
  info.bars = integer(f, "bars");
  require(info.bars >= 0, path + ": a negative bar count");
  const std::string& lt = meta(f, "last_time");
  if (!lt.empty()) {
    size_t used = 0;
    try {
      info.last_time = std::stod(lt, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    require(used == lt.size() && std::isfinite(info.last_time), path + ": last_time '" + lt + "' is not a number");
  }
  try {
    info.instruments = nlohmann::json::parse(meta(f, "instruments")).get<std::vector<std::string>>();
    info.history = nlohmann::json::parse(meta(f, "history")).get<std::vector<int>>();
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + ": the instruments or history entry is not a JSON list (" + e.what() + ")");
  }
  check_instrument_names(info.instruments);
  require(info.history.size() == info.instruments.size(),
          path + ": " + std::to_string(info.history.size()) + " history counts for " +
              std::to_string(info.instruments.size()) + " instruments");
  return info;
}

}  // namespace

bool is_stream_state(const std::string& path) {
  const SafetensorsFile f = load_safetensors(path);
  const auto it = f.metadata.find("format");
  return it != f.metadata.end() && it->second == kFormat;
}

StreamStateInfo read_stream_state_info(const std::string& path) { return parse_info(load_safetensors(path)); }

void StreamPredictor::save(const std::string& path) const {
  const Impl& s = *impl_;
  std::vector<LoadedTensor> arrays;
  for (size_t k = 0; k < s.members.size(); ++k) {
    const Impl::Member& m = *s.members[k];
    for (LoadedTensor& t : m.engine->state(member_prefix(k), s.bars)) arrays.push_back(std::move(t));
    arrays.push_back({member_prefix(k) + "last_values", {s.instruments(), s.F}, m.proc->last_values()});
  }
  std::vector<TensorView> views;
  for (const LoadedTensor& t : arrays) views.push_back({t.name, t.shape, t.data.data()});
  SafetensorsMetadata md;
  md["format"] = kFormat;
  md["version"] = kVersion;
  md["checkpoint"] = hex64(s.hash);
  md["mode"] = to_string(s.opt.mode);
  md["kernels"] = kernels_of(s.opt, s.ctx != nullptr);
  if (!s.opt.source.empty()) md["source"] = s.opt.source;
  md["members"] = std::to_string(s.members.size());
  md["features"] = std::to_string(s.F);
  md["targets"] = std::to_string(s.K);
  md["context_length"] = std::to_string(s.C);
  md["bars"] = std::to_string(s.bars);
  md["last_time"] = std::isnan(s.last_time) ? "" : shortest_text(s.last_time);
  md["instruments"] = nlohmann::json(s.names).dump();
  md["history"] = nlohmann::json(s.history).dump();
  save_safetensors(path, views, md);
}

void StreamPredictor::load(const std::string& path) {
  Impl& s = *impl_;
  const SafetensorsFile f = load_safetensors(path);
  // Every check first: a refused file leaves the stream as it was.
  StreamStateInfo info = parse_info(f);
  require(info.checkpoint_hash == hex64(s.hash),
          path + ": written for another checkpoint (hash " + info.checkpoint_hash + "; this stream's weights and "
                 "settings hash to " + hex64(s.hash) + "): a state only continues the model that wrote it");
  require(info.mode == to_string(s.opt.mode),
          path + ": a stream in mode '" + info.mode + "', this one is in mode '" + to_string(s.opt.mode) + "'");
  // A carried state continues bit-exactly only under the kernels that made it; the CPU's fast and reference
  // kernels differ in rounding. (A GPU state continuing on the CPU is allowed, to the GPU-vs-CPU bound.)
  const std::string kernels = kernels_of(s.opt, s.ctx != nullptr);
  require(s.opt.mode != PredictMode::carry || info.kernels.empty() || info.kernels == kernels ||
              info.kernels.rfind("cpu-", 0) != 0 || kernels.rfind("cpu-", 0) != 0,
          path + ": a carry state of the " + info.kernels + " kernels, this stream runs the " + kernels +
              " kernels (run.cpu_kernels = \"" + (info.kernels == "cpu-reference" ? "reference" : "fast") +
              "\" continues it; the two round differently)");
  require(info.members == int64_t(s.members.size()) && info.features == s.F && info.targets == s.K &&
              info.context_length == s.C,
          path + ": the members, features, targets or context length differ from this stream's");
  const int64_t bars = info.bars;
  const double last_time = info.last_time;
  std::vector<std::string> names = std::move(info.instruments);
  std::vector<int> history = std::move(info.history);
  const int I = int(names.size());
  for (int h : history)
    require(h >= 0 && (s.opt.mode == PredictMode::carry || h <= std::min<int64_t>(s.C, bars)),
            path + ": a history count of " + std::to_string(h) + " does not fit the bar count and context length");
  for (size_t k = 0; k < s.members.size(); ++k) {
    s.members[k]->engine->check(f, member_prefix(k), I);
    const LoadedTensor* lv = f.find(member_prefix(k) + "last_values");
    require(lv && lv->shape == std::vector<int64_t>{I, s.F}, path + ": no array '" + member_prefix(k) +
                                                                 "last_values' of shape (" + std::to_string(I) + ", " +
                                                                 std::to_string(s.F) + ")");
    for (float v : lv->data) require(!std::isinf(v), path + ": '" + member_prefix(k) + "last_values' holds an infinite value");
  }
  // Now the stream takes the file's state.
  for (size_t k = 0; k < s.members.size(); ++k) {
    Impl::Member& m = *s.members[k];
    m.proc = std::make_unique<BarProcessor>(m.data, m.stats, s.F, I);
    m.proc->set_last_values(f.find(member_prefix(k) + "last_values")->data);
    m.engine->restore(f, member_prefix(k), I, bars);
  }
  s.set_names(std::move(names));
  s.history = std::move(history);
  s.bars = bars;
  s.last_time = last_time;
}

}  // namespace mlalpha
