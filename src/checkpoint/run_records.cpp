// The records of a run folder (run_records.h).
#include "checkpoint/run_records.h"

#include <nlohmann/json.hpp>

#include "checkpoint/run_record.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "data/fileio.h"

namespace mlalpha {

namespace fs = std::filesystem;

namespace {

nlohmann::json read_json(const fs::path& path) {
  return nlohmann::json::parse(read_file_bytes(path.string()), nullptr, false);
}

bool is_int(const nlohmann::json& j, const char* key) { return j.contains(key) && j[key].is_number_integer(); }

}  // namespace

void write_run_record(const fs::path& out_dir, const RunConfig& cfg, bool described, uint64_t fingerprint,
                      bool population, bool complete) {
  const nlohmann::ordered_json j{{"format", 2},
                                 {"population", population},
                                 {"described", described},
                                 {"fingerprint", hex64(fingerprint)},
                                 {"complete", complete},
                                 {"config", to_toml(cfg)}};
  write_file_atomic((out_dir / kRunFile).string(), j.dump(1) + "\n");
}

std::optional<RunFolderRecord> read_run_record(const fs::path& out_dir) {
  std::error_code ec;
  const bool current = fs::exists(out_dir / kRunFile, ec);
  if (!current && !fs::exists(out_dir / kLegacyPopulationFile, ec)) return std::nullopt;
  const fs::path path = out_dir / (current ? kRunFile : kLegacyPopulationFile);
  const auto j = read_json(path);
  const int format = current ? 2 : 1;
  const std::string bad = path.string() + " is not a run record {format, config, described, fingerprint" +
                          (current ? ", population}" : "}");
  require(j.is_object() && j.value("format", 0) == format && j.contains("config") && j["config"].is_string() &&
              j.contains("described") && j["described"].is_boolean() && j.contains("fingerprint") &&
              j["fingerprint"].is_string() && (!current || (j.contains("population") && j["population"].is_boolean())),
          bad);
  RunFolderRecord r;
  r.format = format;
  r.config = parse_run_config(j["config"].get<std::string>(), path.string());
  r.config.given.clear();  // the record's keys are settings, not the caller's explicit choices
  r.described = j["described"].get<bool>();
  r.population = current ? j["population"].get<bool>() : true;
  const auto complete = j.find("complete");
  r.complete = complete == j.end() || !complete->is_boolean() || complete->get<bool>();
  const std::string fp = j["fingerprint"].get<std::string>();
  require(parse_hex64(fp, r.fingerprint), bad + " (fingerprint '" + fp + "')");
  return r;
}

bool holds_run_record(const fs::path& dir) {
  std::error_code ec;
  return fs::exists(dir / kRunFile, ec) || fs::exists(dir / kLegacyPopulationFile, ec);
}

std::string model_state_text(const ModelState& s) {
  nlohmann::ordered_json j{{"step", s.step},          {"metric", s.metric},       {"best_step", s.best_step},
                           {"best_value", nullptr},   {"bad_evals", s.bad_evals}, {"early_stopped", s.early_stopped}};
  if (s.best_step > 0 && std::isfinite(s.best_value)) j["best_value"] = s.best_value;
  return j.dump() + "\n";
}

void write_model_state(const fs::path& model_dir, const ModelState& s) {
  write_file_atomic((model_dir / kModelStateFile).string(), model_state_text(s));
}

ModelState read_model_state(const fs::path& model_dir) {
  ModelState s;
  std::error_code ec;
  const fs::path state = model_dir / kModelStateFile;
  if (fs::exists(state, ec)) {
    const auto j = read_json(state);
    require(j.is_object() && is_int(j, "step") && j.contains("metric") && j["metric"].is_string() &&
                is_int(j, "best_step") && j.contains("best_value") && is_int(j, "bad_evals") &&
                j.contains("early_stopped") && j["early_stopped"].is_boolean(),
            state.string() + " is not a model state {step, metric, best_step, best_value, bad_evals, early_stopped}");
    s.present = s.best_known = true;
    s.step = j["step"].get<int64_t>();
    s.metric = j["metric"].get<std::string>();
    s.best_step = j["best_step"].get<int64_t>();
    s.best_value = j["best_value"].is_number() ? j["best_value"].get<double>() : NAN;
    s.bad_evals = j["bad_evals"].get<int>();
    s.early_stopped = j["early_stopped"].get<bool>();
    return s;
  }
  // Format 1: member.json (a population member at the end of an invocation) and last.json (a periodic save).
  const fs::path member = model_dir / kLegacyMemberFile, last = model_dir / kLegacyLastFile;
  if (fs::exists(member, ec)) {
    const auto j = read_json(member);
    require(j.is_object() && is_int(j, "step") && j.contains("early_stopped") && j["early_stopped"].is_boolean() &&
                is_int(j, "bad_evals"),
            member.string() + " is not a member state {step, early_stopped, bad_evals}");
    s.present = true;
    s.step = j["step"].get<int64_t>();
    s.early_stopped = j["early_stopped"].get<bool>();
    s.bad_evals = j["bad_evals"].get<int>();
  }
  if (fs::exists(last, ec)) {
    const auto j = read_json(last);
    if (j.is_object() && is_int(j, "step") && j.contains("metric") && j["metric"].is_string() &&
        is_int(j, "best_step") && is_int(j, "bad_evals") && (!s.present || j["step"].get<int64_t>() == s.step)) {
      s.present = true;
      s.step = j["step"].get<int64_t>();
      s.best_known = true;
      s.metric = j["metric"].get<std::string>();
      s.best_step = j["best_step"].get<int64_t>();
      s.best_value = j.contains("best_value") && j["best_value"].is_number() ? j["best_value"].get<double>() : NAN;
      s.bad_evals = j["bad_evals"].get<int>();
    }
  }
  return s;
}

}  // namespace mlalpha
