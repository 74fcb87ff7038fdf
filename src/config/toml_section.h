#pragma once
// Reading one [section] of a run configuration's TOML table into RunConfig's fields, for the parser
// (parse.cpp): each get() converts a key's value with a message naming where it came from (file:line, or the
// override or flag that set it), and check_unknown() refuses a key no get() asked for, suggesting the nearest
// valid one. Host-only (toml++).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <initializer_list>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "config/toml.h"
#include "core/error.h"
#include "core/shortest.h"
#include "mlalpha/config.h"

namespace mlalpha::config_detail {

// The shortest text that reads back to v (0.1, 1.0000001), for messages.
template <typename F>
std::string shortest(F v) {
  return shortest_text(v);
}

// Where each value came from, for messages: "file:line", or the override's own text.
struct Origins {
  std::string src;                              // the file (or "defaults")
  std::map<std::string, std::string> override;  // "section.key" → what set it: "override 'k=v'", "flag '--lr 0.1'"
};

// Reads one section, remembering which keys were consumed so leftovers can be reported.
class Section {
 public:
  // keys (may be null) collects every valid "section.key" asked for.
  Section(const toml::table* t, std::string name, const Origins& origins, std::set<std::string>& given,
          std::vector<std::string>* keys)
      : t_(t), name_(std::move(name)), origins_(origins), given_(given), keys_(keys) {}

  template <typename T>
  void get(const char* key, T& out) {
    if (const toml::node* n = node(key)) convert(*n, key, out);
  }
  // A path, made absolute as it is read: relative ones written in the file resolve against `base` (the file's
  // folder), those of an override or setting (or of text without a folder) against the working directory. So a
  // run's records and checkpoints name its data wherever they are read from later.
  void get_path(const char* key, std::string& out, const std::string& base) {
    const toml::node* n = node(key);
    if (!n) return;
    convert(*n, key, out);
    if (out.empty()) return;
    std::filesystem::path p(out);
    if (p.is_relative() && !base.empty() && !from_override(key)) p = std::filesystem::path(base) / p;
    std::error_code ec;
    const std::filesystem::path abs = std::filesystem::absolute(p, ec);
    out = (ec ? p : abs).lexically_normal().string();
  }
  // A name from a fixed list (train.loss, run.device): anything else names the choices.
  void get_choice(const char* key, std::string& out, std::initializer_list<const char*> choices) {
    const toml::node* n = node(key);
    if (!n) return;
    convert(*n, key, out);
    std::string list;
    for (const char* c : choices) {
      if (out == c) return;
      list += std::string(list.empty() ? "" : ", ") + "'" + c + "'";
    }
    fail(*n, key, "must be one of " + list + ", got '" + out + "'");
  }
  void get_boundary(const char* key, SplitPoint& out) {
    const toml::node* n = node(key);
    if (!n) return;
    if (auto f = n->value_exact<double>()) {
      if (!(*f > 0 && *f <= 1)) fail(*n, key, "a fraction must be in (0, 1], got " + shortest(*f));
      out = SplitPoint::at_fraction(*f);
    } else if (auto i = n->value_exact<int64_t>()) {
      out = SplitPoint::at_index(*i);
    } else if (auto s = n->value_exact<std::string>()) {
      out = SplitPoint::at_time(*s);
    } else if (n->is_date() || n->is_date_time()) {
      // An unquoted TOML date (2021-01-04) or date-time: toml++ writes it back as ISO 8601, which the split
      // reads on any date axis, whatever data.time_format says.
      std::ostringstream iso;
      if (n->is_date()) iso << *n->value_exact<toml::date>();
      else iso << *n->value_exact<toml::date_time>();
      out = SplitPoint::at_time(iso.str());
    } else {
      fail(*n, key,
           "expected a fraction (0.7), a time index (1500) or a time value (2021-01-04 or \"2021-01-04\"), got " +
               std::string(n->is_time() ? "a time of day without a date" : "a value of another type"));
    }
  }
  // train.batch: an integer (windows per step) or the string "time" (cross-sectional batches).
  void get_batch(const char* key, int& windows, BatchMode& mode) {
    const toml::node* n = node(key);
    if (!n) return;
    const auto text = n->value_exact<std::string>();
    if (text && *text == "time") {
      mode = BatchMode::Time;
      return;
    }
    if (!n->value_exact<int64_t>())
      fail(*n, key,
           "expected an integer (windows per step, e.g. 16) or the string \"time\" (cross-sections of "
           "train.dates dates × train.instruments instruments), got " +
               (text ? "'" + *text + "'" : std::string("a value of another type")));
    convert(*n, key, windows);
    mode = BatchMode::Windows;
  }
  // A [sweep] list: an array of values (a single value is a list of one); an empty array is refused, as it
  // would sweep nothing. Each entry is converted as the train setting of the same name.
  template <typename T>
  void get_list(const char* key, std::vector<T>& out) {
    const toml::node* n = node(key);
    if (!n) return;
    out.clear();
    const toml::array* a = n->as_array();
    if (!a) {
      out.push_back(entry_value<T>(*n, key, std::string(key)));
      return;
    }
    if (a->empty())
      throw Error(where(*n, key) + ": " + name_ + "." + key + " = []: give at least one value or drop the key");
    for (size_t i = 0; i < a->size(); ++i)
      out.push_back(entry_value<T>(*a->get(i), key, std::string(key) + "[" + std::to_string(i) + "]"));
  }
  // After all get() calls: any key not asked for is a typo or unsupported.
  void check_unknown() const {
    if (!t_) return;
    for (const auto& [k, v] : *t_) {
      const std::string key(k.str());
      if (std::find(known_.begin(), known_.end(), key) != known_.end()) continue;
      std::string msg = where(v, key) + ": unknown key '" + name_ + "." + key + "'";
      if (const std::string best = suggest_run_config_key(name_ + "." + key); !best.empty())
        msg += "; did you mean '" + best + "'?";
      msg += " (valid keys in [" + name_ + "]:";
      for (const auto& c : known_) msg += " " + c;
      throw Error(msg + ")");
    }
  }

 private:
  const toml::node* node(const char* key) {
    known_.push_back(key);
    if (keys_) keys_->push_back(name_ + "." + key);
    if (!t_) return nullptr;
    const toml::node* n = t_->get(key);
    if (n) given_.insert(name_ + "." + key);
    return n;
  }
  bool from_override(const std::string& key) const { return origins_.override.count(name_ + "." + key) > 0; }
  std::string where(const toml::node& n, const std::string& key) const {
    if (auto it = origins_.override.find(name_ + "." + key); it != origins_.override.end())
      return it->second;
    return origins_.src + ":" + std::to_string(n.source().begin.line);
  }
  [[noreturn]] void fail(const toml::node& n, const char* key, const std::string& what) const {
    throw Error(where(n, key) + ": " + name_ + "." + key + ": " + what);
  }
  void convert(const toml::node& n, const char* key, std::string& out) {
    auto v = n.value_exact<std::string>();
    if (!v) fail(n, key, "expected a string");
    out = *v;
  }
  void convert(const toml::node& n, const char* key, bool& out) {
    auto v = n.value_exact<bool>();
    if (!v) fail(n, key, "expected true or false");
    out = *v;
  }
  template <typename I>
  std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>> convert(const toml::node& n, const char* key, I& out) {
    auto v = n.value_exact<int64_t>();
    if (!v) {
      const auto text = n.value_exact<std::string>();  // an override too long for TOML's int64 arrives as text
      const bool digits = text && !text->empty() &&
                          text->find_first_not_of("0123456789", (*text)[0] == '-' || (*text)[0] == '+') == std::string::npos;
      fail(n, key, digits ? "value " + *text + " is out of range for an integer" : std::string("expected an integer"));
    }
    // No integer setting takes a negative value (counts, sizes, intervals, seeds): a negative one is refused here,
    // where the file and line are known, whatever the setting's own check would say.
    if (*v < 0 || uint64_t(*v) > uint64_t(std::numeric_limits<I>::max()))
      fail(n, key, "value " + std::to_string(*v) + " is out of range" +
                       (*v < 0 ? std::string(": this setting takes no negative value")
                               : " (at most " + std::to_string(std::numeric_limits<I>::max()) + ")"));
    out = I(*v);
  }
  void convert(const toml::node& n, const char* key, float& out) {
    auto v = n.value<double>();  // integers are accepted where a number is expected
    if (!v) fail(n, key, "expected a number");
    if (std::isfinite(*v) && std::fabs(*v) > double(std::numeric_limits<float>::max()))
      fail(n, key, "value " + shortest(*v) + " is out of range for a 32-bit float");
    out = float(*v);
  }
  void convert(const toml::node& n, const char* key, double& out) {
    auto v = n.value<double>();  // integers are accepted where a number is expected
    if (!v) fail(n, key, "expected a number");
    out = *v;
  }
  void convert(const toml::node& n, const char* key, std::vector<std::string>& out) {
    const toml::array* a = n.as_array();
    if (!a) fail(n, key, "expected an array of strings");
    out.clear();
    for (const auto& e : *a) {
      auto s = e.value_exact<std::string>();
      if (!s) fail(e, key, "expected an array of strings");
      out.push_back(*s);
    }
  }

  // One entry of a list: a number (integers accepted) for a float, an integer for an integer. `label` is
  // the key with the entry's index ("lr[2]"); where() still locates the list's key.
  template <typename T>
  T entry_value(const toml::node& e, const char* key, const std::string& label) const {
    const std::string at = where(e, key) + ": " + name_ + "." + label + ": ";
    if constexpr (std::is_floating_point_v<T>) {
      const auto v = e.value<double>();
      if (!v || e.is_boolean()) throw Error(at + "expected a number");
      if (std::isfinite(*v) && std::fabs(*v) > double(std::numeric_limits<T>::max()))
        throw Error(at + "value " + shortest(*v) + " is out of range for a 32-bit float");
      return T(*v);
    } else {
      const auto v = e.value_exact<int64_t>();
      if (!v) throw Error(at + "expected an integer");
      return T(*v);
    }
  }

  const toml::table* t_;
  std::string name_;
  const Origins& origins_;
  std::set<std::string>& given_;
  std::vector<std::string>* keys_;
  std::vector<std::string> known_;
};

}  // namespace mlalpha::config_detail
