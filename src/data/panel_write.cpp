// write_panel_files (include/mlalpha/panel.h): a panel as .npy arrays and a long-format CSV.
#include <charconv>
#include <filesystem>
#include <string>

#include "core/atomic_file.h"
#include "core/error.h"
#include "data/csv_write.h"
#include "data/fileio.h"
#include "data/npy.h"
#include "mlalpha/panel.h"

namespace mlalpha {

namespace {
std::string label(const std::vector<std::string>& names, size_t i, const char* prefix) {
  return i < names.size() ? names[i] : prefix + std::to_string(i);
}
}  // namespace

std::vector<std::string> write_panel_files(const Panel& p, const std::string& dir, const std::string& format,
                                           bool overwrite) {
  require(format == "npy" || format == "csv" || format == "both",
          "the format must be npy, csv or both, got '" + format + "'");
  p.validate();
  std::error_code ec;
  if (!overwrite) {
    std::vector<std::string> names;
    if (format != "csv") names = {"features.npy", "targets.npy"};
    if (format != "npy") names.push_back("panel.csv");
    for (const std::string& n : names) {
      const std::filesystem::path f = std::filesystem::path(dir) / n;
      require(!std::filesystem::exists(std::filesystem::symlink_status(f, ec)),
              f.string() + " already exists: a panel is not written over another (choose another folder, or "
                           "replace it with --overwrite)");
    }
  }
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
    // Streamed in chunks through an atomic file (a 10M-row panel is a gigabyte of text); values in their
    // shortest form that reads back to the same float (std::to_chars), NaN as "nan".
    AtomicFile file((d / "panel.csv").string());
    std::string buf;
    const auto num = [&](float v) {
      buf += ',';
      csv_append_float(buf, v);
    };
    buf += "time,instrument";
    for (int f = 0; f < p.F; ++f) buf.append(1, ',').append(csv_cell(label(p.feature_names, f, "f")));
    for (int k = 0; k < p.K; ++k) buf.append(1, ',').append(csv_cell(label(p.target_names, k, "y")));
    buf += '\n';
    for (int t = 0; t < p.T; ++t)
      for (int i = 0; i < p.N; ++i) {
        buf += csv_cell(label(p.times, t, ""));
        buf += ',';
        buf += csv_cell(label(p.instruments, i, "inst"));
        for (int f = 0; f < p.F; ++f) num(p.x[(size_t(i) * p.T + t) * p.F + f]);
        for (int k = 0; k < p.K; ++k) num(p.y[(size_t(i) * p.T + t) * p.K + k]);
        buf += '\n';
        if (buf.size() > (size_t(1) << 23)) file.write(buf.data(), buf.size()), buf.clear();
      }
    file.write(buf.data(), buf.size());
    file.commit();
    written.push_back((d / "panel.csv").string());
  }
  return written;
}

}  // namespace mlalpha
