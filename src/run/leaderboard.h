#pragma once
// A population's leaderboard: the members ranked by run.metric, the mean-ensemble's row last, written for
// people (leaderboard.csv) and for programs (leaderboard.json, what Ensemble reads; the same cells), and shown
// as aligned text.
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "mlalpha/metric_table.h"
#include "mlalpha/run.h"

namespace mlalpha {

// One member's line before ranking: the value it is ranked by, then its cells (without the rank).
struct LeaderboardEntry {
  double key = NAN;
  std::vector<std::string> cells;
};
// Ranks the entries by key on `metric` (best first, NaN last; ties keep member order) and adds the ensemble's
// cells (may be empty) with an empty rank.
Leaderboard rank_entries(const std::string& metric, std::vector<std::string> columns,
                         std::vector<LeaderboardEntry> entries, const std::vector<std::string>& ensemble);
// Appends one cell per scalar metric (metric_table()): the value, or empty cells without metrics.
void add_metric_cells(std::vector<std::string>& cells, bool has, const Metrics& m);
// <dir>/leaderboard.csv and <dir>/leaderboard.json, as a pair (both written before either replaces its old
// file). Returns the CSV's path.
std::string write_leaderboard(const std::filesystem::path& dir, const Leaderboard& board);
// The board's first `top` rows and the ensemble as aligned text, in the columns a reader compares first.
std::string leaderboard_text(const Leaderboard& board, const std::vector<std::string>& columns, size_t top);

}  // namespace mlalpha
