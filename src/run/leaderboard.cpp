// A population's leaderboard (leaderboard.h).
#include "run/leaderboard.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "core/atomic_file.h"
#include "data/csv_write.h"

namespace mlalpha {

namespace fs = std::filesystem;

Leaderboard rank_entries(const std::string& metric, std::vector<std::string> columns,
                         std::vector<LeaderboardEntry> entries, const std::vector<std::string>& ensemble) {
  const bool higher = higher_is_better(metric);
  std::stable_sort(entries.begin(), entries.end(), [&](const LeaderboardEntry& a, const LeaderboardEntry& b) {
    if (std::isnan(a.key) || std::isnan(b.key)) return !std::isnan(a.key) && std::isnan(b.key);
    return higher ? a.key > b.key : a.key < b.key;
  });
  Leaderboard board;
  board.columns = std::move(columns);
  for (size_t i = 0; i < entries.size(); ++i) {
    std::vector<std::string> row{std::to_string(i + 1)};
    row.insert(row.end(), entries[i].cells.begin(), entries[i].cells.end());
    board.rows.push_back(std::move(row));
  }
  if (!ensemble.empty()) {
    std::vector<std::string> row{""};
    row.insert(row.end(), ensemble.begin(), ensemble.end());
    board.rows.push_back(std::move(row));
  }
  return board;
}

void add_metric_cells(std::vector<std::string>& cells, bool has, const Metrics& m) {
  for (const MetricInfo& info : metric_table()) cells.push_back(has ? csv_number(m.*info.field) : "");
}

std::string write_leaderboard(const fs::path& dir, const Leaderboard& b) {
  std::string csv = csv_row(b.columns);
  for (const auto& r : b.rows) csv += csv_row(r);
  const std::string json = nlohmann::ordered_json{{"columns", b.columns}, {"rows", b.rows}}.dump(1) + "\n";
  const std::string path = (dir / "leaderboard.csv").string();
  AtomicFile csv_file(path), json_file((dir / "leaderboard.json").string());
  csv_file.write(csv.data(), csv.size());
  json_file.write(json.data(), json.size());
  csv_file.flush();
  json_file.flush();
  csv_file.commit();
  json_file.commit();
  return path;
}


std::string leaderboard_text(const Leaderboard& b, const std::vector<std::string>& columns, size_t top) {
  std::vector<size_t> at;
  for (const std::string& name : columns)
    for (size_t i = 0; i < b.columns.size(); ++i)
      if (b.columns[i] == name) at.push_back(i);
  std::vector<const std::vector<std::string>*> rows{&b.columns};
  for (size_t r = 0; r < b.rows.size(); ++r)
    if (r < top || b.rows[r][0].empty()) rows.push_back(&b.rows[r]);
  // The cells as shown (numbers to 5 significant digits, the ensemble named), then the widths.
  std::vector<std::vector<std::string>> shown;
  for (const auto* r : rows) {
    std::vector<std::string> line;
    for (size_t j = 0; j < at.size(); ++j) {
      std::string cell = (*r)[at[j]];
      char* end = nullptr;
      const double v = cell.empty() || r == &b.columns ? NAN : std::strtod(cell.c_str(), &end);
      if (!std::isnan(v) && end && *end == '\0' && cell.find('.') != std::string::npos) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.5g", v);
        cell = buf;
      }
      if (r != &b.columns && (*r)[0].empty() && j == 1) cell = "ensemble";
      line.push_back(cell);
    }
    shown.push_back(std::move(line));
  }
  std::vector<size_t> width(at.size(), 0);
  for (const auto& r : shown)
    for (size_t j = 0; j < at.size(); ++j) width[j] = std::max(width[j], r[j].size());
  std::string text;
  for (const auto& r : shown) {
    std::string line;
    for (size_t j = 0; j < at.size(); ++j) line += (j ? "  " : "") + r[j] + std::string(width[j] - r[j].size(), ' ');
    while (!line.empty() && line.back() == ' ') line.pop_back();
    text += "\n  " + line;
  }
  return text;
}

}  // namespace mlalpha
