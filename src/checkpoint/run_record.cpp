#include "checkpoint/run_record.h"

#include <nlohmann/json.hpp>

#include <charconv>
#include <cstdio>

#include "core/error.h"

namespace mlalpha {

std::string hex64(uint64_t v) {
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

bool parse_hex64(const std::string& text, uint64_t& v) {
  const auto res = std::from_chars(text.data(), text.data() + text.size(), v, 16);
  return !text.empty() && res.ec == std::errc() && res.ptr == text.data() + text.size();
}

std::string encode_run_record(const RunConfig& c, bool described, int fold, uint64_t fingerprint) {
  return nlohmann::json{{"settings", to_toml(c, {"data", "split"})},
                        {"data_described", described},
                        {"fold", fold},
                        {"fingerprint", hex64(fingerprint)}}
      .dump();
}

RunRecord decode_run_record(const std::string& text, const std::string& path) {
  RunRecord r;
  if (text.empty()) return r;
  const auto j = nlohmann::json::parse(text, nullptr, false);
  const std::string bad = path + ": metadata 'data_config' is not a run record {settings, fold, fingerprint}";
  require(j.is_object() && j.contains("settings") && j["settings"].is_string() && j.contains("fold") &&
              j["fold"].is_number_integer() && j.contains("fingerprint") && j["fingerprint"].is_string(),
          bad);
  const std::string fp = j["fingerprint"].get<std::string>();
  require(parse_hex64(fp, r.fingerprint), bad + " (fingerprint '" + fp + "')");
  r.present = true;
  r.described = !j.contains("data_described") || (j["data_described"].is_boolean() && j["data_described"].get<bool>());
  r.settings = parse_run_config(j["settings"].get<std::string>(), path + " (recorded run settings)");
  r.fold = j["fold"].get<int>();
  return r;
}

}  // namespace mlalpha
