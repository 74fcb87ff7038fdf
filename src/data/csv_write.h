#pragma once
// Writing CSV (RFC 4180), the one way every file the engine writes does it: panel.csv, prediction files,
// folds.csv and leaderboard.csv. Numbers in their shortest form that reads back to the same value
// (std::to_chars). The reader is csv.h.
#include <string>
#include <string_view>
#include <vector>

namespace mlalpha {

// The cell as written: quoted, its quotes doubled, when it holds a comma, a quote or a line break.
std::string csv_cell(std::string_view text);
// The shortest text that reads back as the same double; "" (a missing value) for NaN and ±Inf.
std::string csv_number(double v);
// Appends the shortest text that reads back as the same float ("0.1", "-3.25e-07", "nan", "inf").
void csv_append_float(std::string& out, float v);
// The cells (quoted as needed) joined by commas, and a line break.
std::string csv_row(const std::vector<std::string>& cells);

}  // namespace mlalpha
