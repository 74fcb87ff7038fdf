// The members of a population (src/config/members.h, docs/config.md "Populations"): the [sweep] lists'
// product times train.models seeds, once per fold when the folds train together.
#include "config/members.h"

#include <algorithm>
#include <charconv>
#include <functional>
#include <type_traits>

#include "core/error.h"

namespace mlalpha {
namespace {

// The shortest text that reads back to v, without an exponent when that costs at most 4 more characters
// ("0.0003" rather than "3e-04"; "1e-08" stays); integers as they are ("20").
template <typename T>
std::string shortest(T v) {
  char buf[64];
  const std::string plain(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
  if constexpr (std::is_floating_point_v<T>) {
    const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed);
    if (r.ec == std::errc() && size_t(r.ptr - buf) <= plain.size() + 4) return std::string(buf, r.ptr);
  }
  return plain;
}

// One varied setting: its name in MemberSpec::settings, how many values it takes, and how value i is set
// on a member's TrainConfig and written.
struct Axis {
  std::string key;
  std::string what;  // for the size message: "sweep.lr (3 values)"
  int64_t size = 1;
  std::function<void(TrainConfig&, int64_t)> set;
  std::function<std::string(int64_t)> text;
};

template <typename T>
Axis sweep_axis(const char* key, const std::vector<T>& values, T TrainConfig::*field) {
  Axis a;
  a.key = key;
  a.what = "sweep." + a.key + " (" + std::to_string(values.size()) + " values)";
  a.size = int64_t(values.size());
  a.set = [&values, field](TrainConfig& t, int64_t i) { t.*field = values[size_t(i)]; };
  a.text = [&values](int64_t i) { return shortest(values[size_t(i)]); };
  return a;
}

// "member-03 (lr = 0.0003, seed = 2)", for a member's messages.
std::string describe(const MemberSpec& m) {
  std::string s;
  for (const auto& [k, v] : m.settings) s += (s.empty() ? "" : ", ") + k + " = " + v;
  return s.empty() ? m.name : m.name + " (" + s + ")";
}

}  // namespace

bool is_population(const RunConfig& cfg) {
  return cfg.train.models > 1 || !cfg.sweep.empty() || (cfg.run.parallel_folds && cfg.split.walk_forward_folds > 1);
}

std::vector<MemberSpec> expand_population(const RunConfig& cfg, int folds) {
  const TrainConfig& base = cfg.train;
  require(base.models >= 1 && base.models <= kMaxPopulation, "train.models must be in [1, " +
                                                                 std::to_string(kMaxPopulation) + "], got " +
                                                                 std::to_string(base.models));
  require(folds >= 0, "expand_population: folds must be >= 0, got " + std::to_string(folds));
  cfg.sweep.validate(base);

  // Outermost first: the fold, the swept settings in the order of [sweep], the seed.
  const SweepConfig& sw = cfg.sweep;
  std::vector<Axis> axes;
  if (!sw.lr.empty()) axes.push_back(sweep_axis("lr", sw.lr, &TrainConfig::lr));
  if (!sw.weight_decay.empty()) axes.push_back(sweep_axis("weight_decay", sw.weight_decay, &TrainConfig::weight_decay));
  if (!sw.clip.empty()) axes.push_back(sweep_axis("clip", sw.clip, &TrainConfig::clip));
  if (!sw.warmup.empty()) axes.push_back(sweep_axis("warmup", sw.warmup, &TrainConfig::warmup));
  const int64_t seeds = base.models;
  const int64_t fold_count = cfg.run.parallel_folds && folds > 1 ? folds : 1;

  // The size before anything is built, in double so a product of long lists cannot wrap.
  double total = double(seeds) * double(fold_count);
  std::string product = "train.models (" + std::to_string(seeds) + ")";
  for (const Axis& a : axes) {
    total *= double(a.size);
    product += " × " + a.what;
  }
  if (fold_count > 1) product += " × " + std::to_string(fold_count) + " folds (run.parallel_folds)";
  require(total <= double(kMaxPopulation),
          "the population has " + shortest(total) + " members: " + product + "; at most " +
              std::to_string(kMaxPopulation) + " train together (drop sweep values, lower train.models" +
              (fold_count > 1 ? ", or set run.parallel_folds = false to train the folds in turn)" : ")"));

  const int64_t combos = int64_t(total) / (seeds * fold_count);
  const int64_t n = int64_t(total);
  // Names count within a fold: a member keeps its name (and folder) in every fold, so its folds pool.
  const size_t width = std::max<size_t>(2, std::to_string(combos * seeds - 1).size());

  std::vector<MemberSpec> members;
  members.reserve(size_t(n));
  for (int64_t fold = 0; fold < fold_count; ++fold)
    for (int64_t c = 0; c < combos; ++c)
      for (int64_t r = 0; r < seeds; ++r) {
        MemberSpec m;
        m.index = int(members.size());
        const std::string idx = std::to_string(c * seeds + r);
        m.name = "member-" + std::string(width - idx.size(), '0') + idx;
        m.train = base;
        m.train.models = 1;
        m.train.seed = base.seed + uint64_t(r);
        m.fold = int(fold);
        // c in mixed radix over the axes, the last axis fastest.
        std::vector<int64_t> digit(axes.size());
        for (int64_t rest = c, a = int64_t(axes.size()) - 1; a >= 0; --a) {
          digit[size_t(a)] = rest % axes[size_t(a)].size;
          rest /= axes[size_t(a)].size;
        }
        for (size_t a = 0; a < axes.size(); ++a) {
          axes[a].set(m.train, digit[a]);
          m.settings.emplace_back(axes[a].key, axes[a].text(digit[a]));
        }
        if (seeds > 1) m.settings.emplace_back("seed", std::to_string(m.train.seed));
        try {
          m.train.validate();
        } catch (const Error& e) {
          throw Error(describe(m) + ": " + e.what());
        }
        members.push_back(std::move(m));
      }
  return members;
}

}  // namespace mlalpha
