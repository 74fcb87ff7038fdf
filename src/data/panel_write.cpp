// write_panel_files (include/mlalpha/panel.h): a panel as .npy arrays and a long-format CSV.
#include <filesystem>
#include <sstream>

#include "core/error.h"
#include "data/fileio.h"
#include "data/npy.h"
#include "mlalpha/panel.h"

namespace mlalpha {

namespace {
std::string label(const std::vector<std::string>& names, size_t i, const char* prefix) {
  return i < names.size() ? names[i] : prefix + std::to_string(i);
}
}  // namespace

std::vector<std::string> write_panel_files(const Panel& p, const std::string& dir, const std::string& format) {
  require(format == "npy" || format == "csv" || format == "both",
          "the format must be npy, csv or both, got '" + format + "'");
  p.validate();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  require(!ec, dir + ": cannot create the folder: " + ec.message());
  const std::filesystem::path d(dir);
  std::vector<std::string> written;
  if (format != "csv") {
    const int64_t xs[3] = {p.N, p.T, p.F}, ys[3] = {p.N, p.T, p.K};
    write_npy((d / "features.npy").string(), p.x, xs);
    write_npy((d / "targets.npy").string(), p.y, ys);
    written.push_back((d / "features.npy").string());
    written.push_back((d / "targets.npy").string());
  }
  if (format != "npy") {
    std::ostringstream csv;
    csv.precision(9);
    csv << "time,instrument";
    for (int f = 0; f < p.F; ++f) csv << "," << label(p.feature_names, f, "f");
    for (int k = 0; k < p.K; ++k) csv << "," << label(p.target_names, k, "y");
    csv << "\n";
    for (int t = 0; t < p.T; ++t)
      for (int i = 0; i < p.N; ++i) {
        csv << label(p.times, t, "") << "," << label(p.instruments, i, "inst");
        for (int f = 0; f < p.F; ++f) csv << "," << p.x[(size_t(i) * p.T + t) * p.F + f];
        for (int k = 0; k < p.K; ++k) csv << "," << p.y[(size_t(i) * p.T + t) * p.K + k];
        csv << "\n";
      }
    write_file_atomic((d / "panel.csv").string(), csv.str());
    written.push_back((d / "panel.csv").string());
  }
  return written;
}

}  // namespace mlalpha
