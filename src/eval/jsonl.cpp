// The JSONL metrics file (jsonl.h).
#include "eval/jsonl.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fault.h"

namespace mlalpha {

namespace {

// A value that is exactly a float (a loss, lr or norm read back from the device) is written with the
// shortest decimal that round-trips the float; other doubles keep their full precision. Non-finite → null.
nlohmann::ordered_json json_number(double v) {
  if (!std::isfinite(v)) return nullptr;
  const float f = float(v);
  if (double(f) != v) return v;
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, f);
  return std::strtod(std::string(buf, r.ptr).c_str(), nullptr);
}

// Compact, and a label with invalid UTF-8 is written with U+FFFD instead of throwing mid-run.
std::string dump(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

nlohmann::ordered_json metrics_json(const Metrics& m) {
  nlohmann::ordered_json j;
  for (const auto& name : metric_names()) j[name] = json_number(metric_by_name(m, name));
  auto& q = j["quantile_means"] = nlohmann::ordered_json::array();
  for (double v : m.quantile_means) q.push_back(json_number(v));
  j["points"] = m.points;
  j["steps"] = m.steps;
  j["portfolio_steps"] = m.portfolio_steps;
  return j;
}

}  // namespace

JsonlWriter::JsonlWriter(const std::filesystem::path& path, Mode mode) : path_(path) {
  fault_point(((mode == Mode::append ? "open to append " : "create ") + path.string()).c_str());
  f_ = std::fopen(path.c_str(), mode == Mode::append ? "a" : "w");
  if (!f_)
    throw Error("metrics log '" + path.string() + "': cannot open for writing: " + std::strerror(errno));
}

JsonlWriter::~JsonlWriter() {
  if (f_) std::fclose(f_);
}

void JsonlWriter::write_line(const std::string& line) {
  // One fputs per record plus a flush: the OS holds every finished line even if the process dies.
  fault_point(("append " + path_.string()).c_str());
  if (std::fputs(line.c_str(), f_) < 0 || std::fputc('\n', f_) == EOF || std::fflush(f_) != 0)
    throw Error("metrics log '" + path_.string() + "': write failed: " + std::strerror(errno));
}

void JsonlWriter::train(const TrainPoint& p) {
  nlohmann::ordered_json j;
  j["step"] = p.step;
  j["loss"] = json_number(p.loss);
  j["lr"] = json_number(p.lr);
  j["grad_norm"] = json_number(p.grad_norm);
  if (p.skipped) j["skipped"] = true;
  write_line(dump(j));
}

void JsonlWriter::metrics(int64_t step, std::string_view split, const MetricsResult& r) {
  nlohmann::ordered_json j;
  j["step"] = step;
  j["split"] = std::string(split);
  j.update(metrics_json(r.mean));
  if (r.per_target.size() > 1) {
    auto& arr = j["targets"] = nlohmann::ordered_json::array();
    for (const auto& m : r.per_target) arr.push_back(metrics_json(m));
  }
  write_line(dump(j));
}

void JsonlWriter::record(const std::vector<Field>& fields) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& [key, value] : fields) {
    std::visit(
        [&](const auto& v) {
          using V = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<V, double>)
            j[key] = json_number(v);
          else
            j[key] = v;
        },
        value);
  }
  write_line(dump(j));
}

}  // namespace mlalpha
