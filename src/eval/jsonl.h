#pragma once
// The JSONL metrics file a run writes (metrics.jsonl). Host-only (never include from .cu).
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "mlalpha/metrics.h"
#include "mlalpha/records.h"

namespace mlalpha {

// JSONL metrics file: one JSON object per line, flushed per line so a crash loses nothing already
// written. NaN and ±Inf are written as null (JSON has no NaN). float-born values are written with the
// shortest decimal that round-trips the float (0.1, not 0.10000000149011612).
//   {"step":100,"loss":0.0123,"lr":0.001,"grad_norm":0.51}
//   {"step":1000,"split":"valid","mse":0.98,"ic":0.045,"rank_ic":0.041,"icir":0.61,"dir_acc":0.52,
//    "ls_mean":0.002,"ls_std":0.01,"ls_sharpe":3.1,"turnover":0.4,"mse_zero":1.01,"mse_mean":1.0,
//    "quantile_means":[-0.001,...],"points":51200,"steps":200,"portfolio_steps":200}
class JsonlWriter {
 public:
  using Value = std::variant<int64_t, double, std::string, std::nullptr_t>;
  using Field = std::pair<std::string, Value>;
  enum class Mode { truncate, append };  // append when resuming a run

  JsonlWriter(const std::filesystem::path& path, Mode mode = Mode::truncate);
  ~JsonlWriter();
  JsonlWriter(const JsonlWriter&) = delete;
  JsonlWriter& operator=(const JsonlWriter&) = delete;

  void train(const TrainPoint& p);  // "skipped":true is added only for a skipped step
  // The mean metrics; with more than one target also "targets": [{per-target metrics}, ...].
  void metrics(int64_t step, std::string_view split, const MetricsResult& r);
  void record(const std::vector<Field>& fields);  // any flat record, fields in the given order
  const std::filesystem::path& path() const { return path_; }

 private:
  void write_line(const std::string& line);
  std::filesystem::path path_;
  std::FILE* f_ = nullptr;
};

}  // namespace mlalpha
