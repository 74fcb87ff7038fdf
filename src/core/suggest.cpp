#include "core/suggest.h"

#include <algorithm>
#include <cctype>

namespace mlalpha {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> d(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) d[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t prev = d[0];
    d[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cur = d[j];
      d[j] = std::min({d[j] + 1, d[j - 1] + 1, prev + (a[i - 1] == b[j - 1] ? 0 : 1)});
      prev = cur;
    }
  }
  return d[b.size()];
}

// "lerning_rate" → "lr"; a single word has no initials ("").
std::string initials(const std::string& s) {
  std::string out;
  bool start = true;
  size_t words = 0;
  for (char c : s) {
    if (c == '_' || c == '-' || c == ' ') {
      start = true;
      continue;
    }
    if (start) out += c, ++words;
    start = false;
  }
  return words >= 2 ? out : "";
}

void split_section(const std::string& s, std::string& section, std::string& key) {
  const size_t dot = s.rfind('.');
  section = dot == std::string::npos ? "" : s.substr(0, dot);
  key = dot == std::string::npos ? s : s.substr(dot + 1);
}

}  // namespace

double name_similarity(const std::string& a_in, const std::string& b_in) {
  std::string sa, ka, sb, kb;
  split_section(lower(a_in), sa, ka);
  split_section(lower(b_in), sb, kb);
  if (ka.empty() || kb.empty()) return 0;
  double s = 1.0 - double(edit_distance(ka, kb)) / double(std::max(ka.size(), kb.size()));
  if (initials(ka) == kb || initials(kb) == ka) s = std::max(s, 0.85);
  const std::string& shorter = ka.size() < kb.size() ? ka : kb;
  const std::string& longer = ka.size() < kb.size() ? kb : ka;
  if (shorter.size() >= 3 && longer.find(shorter) != std::string::npos) s = std::max(s, 0.75);
  if (!sa.empty() && !sb.empty() && sa != sb) s *= 0.85;
  return s;
}

std::string closest_name(const std::string& word, const std::vector<std::string>& candidates,
                         const std::map<std::string, std::string>& aliases, double min_score) {
  std::string best;
  double best_score = min_score;
  auto consider = [&](const std::string& name, const std::string& target) {
    const double s = name_similarity(word, name);
    if (s > best_score || (best.empty() && s >= best_score)) best_score = s, best = target;
  };
  for (const auto& c : candidates) consider(c, c);
  for (const auto& [alias, target] : aliases) consider(alias, target);
  return best;
}

}  // namespace mlalpha
