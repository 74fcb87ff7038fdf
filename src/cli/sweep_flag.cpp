// --sweep KEY=V1,V2,... as the override sweep.KEY = [V1, V2, ...] (commands.h).
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <string>
#include <vector>

#include "commands.h"
#include "mlalpha/config.h"
#include "mlalpha/error.h"

namespace mlalpha {

namespace {

// One value of a --sweep list, written back as TOML: the number as read (shortest form), so text that
// std::from_chars takes but TOML does not (".5", "5.") still parses.
std::string sweep_value(const std::string& part, bool integer, const std::string& arg) {
  const char* b = part.data() + (!part.empty() && part[0] == '+');
  const char* e = part.data() + part.size();
  require(!part.empty(), "'" + arg + "' has an empty value (two commas, or a comma at either end)");
  char buf[40];
  if (integer) {
    int64_t v = 0;
    const auto r = std::from_chars(b, e, v);
    require(r.ec != std::errc::result_out_of_range, "'" + part + "' in '" + arg + "' is out of range for an integer");
    require(r.ec == std::errc() && r.ptr == e, "'" + part + "' in '" + arg + "' is not an integer");
    return std::string(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
  }
  double v = 0;
  const auto r = std::from_chars(b, e, v);
  require(r.ec == std::errc() && r.ptr == e, "'" + part + "' in '" + arg + "' is not a number");
  // Without an exponent where that is about as short ("0.0003", not "3e-04").
  const std::string plain(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
  const auto f = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed);
  return f.ec == std::errc() && size_t(f.ptr - buf) <= plain.size() + 4 ? std::string(buf, f.ptr) : plain;
}

}  // namespace

std::string sweep_override(const std::string& arg) {
  static const char* kKeys[] = {"lr", "weight_decay", "clip", "warmup"};
  const size_t eq = arg.find('=');
  require(eq != std::string::npos && eq > 0,
          "expected KEY=V1,V2,... (KEY one of lr, weight_decay, clip, warmup; e.g. lr=1e-3,3e-4), got '" + arg + "'");
  const std::string key = arg.substr(0, eq);
  if (std::find(std::begin(kKeys), std::end(kKeys), key) == std::end(kKeys)) {
    std::string msg = "unknown key '" + key + "' in '" + arg + "'";
    const std::string best = suggest_run_config_key("sweep." + key);
    if (best.rfind("sweep.", 0) == 0) msg += "; did you mean '" + best.substr(6) + "'?";
    throw Error(msg + " (KEY is one of lr, weight_decay, clip, warmup)");
  }
  std::string list;
  for (size_t at = eq + 1;;) {
    const size_t comma = arg.find(',', at);
    const std::string part = arg.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    list += (list.empty() ? "" : ", ") + sweep_value(part, key == "warmup", arg);
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return "sweep." + key + "=[" + list + "]";
}

std::vector<std::string> sweep_overrides(const std::vector<std::string>& args) {
  std::vector<std::string> out, keys;
  for (const std::string& a : args) {
    const std::string ov = sweep_override(a);
    const std::string key = ov.substr(6, ov.find('=') - 6);
    require(std::find(keys.begin(), keys.end(), key) == keys.end(),
            "--sweep " + key + " is given twice; list all its values in one: --sweep " + key + "=V1,V2,...");
    keys.push_back(key);
    out.push_back(ov);
  }
  return out;
}

}  // namespace mlalpha
