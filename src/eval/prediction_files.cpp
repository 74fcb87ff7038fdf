// Prediction files, <prefix>.npy and <prefix>.csv (include/mlalpha/eval.h).
#include <charconv>
#include <cmath>
#include <filesystem>

#include "core/atomic_file.h"
#include "core/error.h"
#include "data/csv_write.h"
#include "data/fileio.h"
#include "data/npy.h"
#include "mlalpha/eval.h"

namespace mlalpha {

namespace {
std::string label(const std::vector<std::string>& names, size_t i) {
  return i < names.size() ? names[i] : std::to_string(i);
}
}  // namespace

PredictionFiles write_predictions(const std::string& prefix, const Panel& p, const std::vector<float>& pred,
                                  TimeRange range, const std::vector<int>& fold_of_time, const std::vector<int>& context) {
  require(pred.size() == size_t(p.N) * p.T * p.K, "write_predictions: " + std::to_string(pred.size()) +
                                                      " predictions for a panel of N × T × K = " +
                                                      std::to_string(size_t(p.N) * p.T * p.K));
  require(fold_of_time.empty() || fold_of_time.size() == size_t(p.T),
          "write_predictions: fold_of_time has " + std::to_string(fold_of_time.size()) + " entries, expected T = " +
              std::to_string(p.T));
  require(context.empty() || context.size() == size_t(p.N) * p.T,
          "write_predictions: context has " + std::to_string(context.size()) + " entries, expected N × T = " +
              std::to_string(size_t(p.N) * p.T));
  require(0 <= range.t0 && range.t0 <= range.t1 && range.t1 <= p.T, "write_predictions: the range " +
                                                                       range_text(p, range) + " is outside [0, T)");
  for (const std::string& target : {prefix + ".npy", prefix + ".csv"}) {  // what the renames below replace
    std::error_code ec;
    const auto st = std::filesystem::symlink_status(target, ec);
    require(!std::filesystem::exists(st) || std::filesystem::is_regular_file(st),
            target + ": exists and is not a regular file; the predictions would not replace it");
  }
  const bool folds = !fold_of_time.empty();
  PredictionFiles out{prefix + ".npy", prefix + ".csv", 0};
  std::string csv = folds ? "time,instrument,fold,observed" : "time,instrument,observed";
  if (!context.empty()) csv += ",context";
  // Built with append: GCC 12 reports a false -Wrestrict on "literal" + std::string&&.
  for (int k = 0; k < p.K; ++k) csv.append(",").append(csv_cell(std::string("pred_").append(label(p.target_names, k))));
  for (int k = 0; k < p.K; ++k) csv.append(",").append(csv_cell(std::string("target_").append(label(p.target_names, k))));
  csv += "\n";
  for (int t = range.t0; t < range.t1; ++t)
    for (int i = 0; i < p.N; ++i) {
      const size_t base = (size_t(i) * p.T + t) * p.K;
      if (std::isnan(pred[base])) continue;
      csv += csv_cell(label(p.times, t)) + "," + csv_cell(label(p.instruments, i));
      if (folds) csv.append(",").append(std::to_string(fold_of_time[size_t(t)]));
      csv += input_row(p, i, t) != 0 ? ",1" : ",0";
      if (!context.empty()) csv.append(",").append(std::to_string(context[size_t(i) * p.T + t]));
      for (int k = 0; k < p.K; ++k) csv += ",", csv_append_float(csv, pred[base + k]);
      for (int k = 0; k < p.K; ++k) {
        csv += ",";
        if (!std::isnan(p.y[base + k])) csv_append_float(csv, p.y[base + k]);
      }
      csv += "\n";
      ++out.rows;
    }
  // A pair: both files are written to temporary files and flushed to disk before either replaces its
  // predecessor, so an error (a full disk) leaves the old pair or none of the new one, never a mixed pair.
  const int64_t shape[3] = {p.N, p.T, p.K};
  const std::string npy = encode_npy(pred, shape);
  AtomicFile npy_file(out.npy), csv_file(out.csv);
  npy_file.write(npy.data(), npy.size());
  csv_file.write(csv.data(), csv.size());
  npy_file.flush();
  csv_file.flush();
  npy_file.commit();
  csv_file.commit();
  return out;
}

}  // namespace mlalpha
