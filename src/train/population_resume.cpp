// The records a population resume reads (population_resume.h).
#include "train/population_resume.h"

#include <nlohmann/json.hpp>

#include <charconv>

#include "core/error.h"
#include "data/fileio.h"
#include "train/run_config.h"
#include "train/run_record.h"

namespace mlalpha {

namespace fs = std::filesystem;

namespace {

bool name_starts(const fs::path& p, const char* prefix) { return p.filename().string().rfind(prefix, 0) == 0; }

bool same_path(const fs::path& a, const fs::path& b) {
  std::error_code ea, eb;
  const fs::path ca = fs::weakly_canonical(a, ea), cb = fs::weakly_canonical(b, eb);
  return !ea && !eb ? ca == cb : a.lexically_normal() == b.lexically_normal();
}

// How the data is processed: the run's even for a panel built in memory (the fingerprint covers the raw values).
bool is_processing_key(const std::string& key) {
  return key == "data.feature_norm" || key == "data.robust_clip" || key == "data.target_norm" || key == "data.nan_fill";
}

}  // namespace

void write_population_record(const fs::path& out_dir, const RunConfig& cfg, bool described, uint64_t fingerprint) {
  const nlohmann::json j{{"format", 1}, {"config", to_toml(cfg)}, {"described", described}, {"fingerprint", hex64(fingerprint)}};
  write_file_atomic((out_dir / kPopulationFile).string(), j.dump(1) + "\n");
}

PopulationRecord read_population_record(const fs::path& out_dir) {
  const fs::path path = out_dir / kPopulationFile;
  const auto j = nlohmann::json::parse(read_file_bytes(path.string()), nullptr, false);
  const std::string bad = path.string() + " is not a population record {format, config, described, fingerprint}";
  require(j.is_object() && j.value("format", 0) == 1 && j.contains("config") && j["config"].is_string() &&
              j.contains("described") && j["described"].is_boolean() && j.contains("fingerprint") &&
              j["fingerprint"].is_string(),
          bad);
  PopulationRecord r;
  r.config = parse_run_config(j["config"].get<std::string>(), path.string());
  r.described = j["described"].get<bool>();
  const std::string fp = j["fingerprint"].get<std::string>();
  const auto res = std::from_chars(fp.data(), fp.data() + fp.size(), r.fingerprint, 16);
  require(!fp.empty() && res.ec == std::errc() && res.ptr == fp.data() + fp.size(), bad + " (fingerprint '" + fp + "')");
  return r;
}

std::string population_dir_of(const std::string& resume) {
  const fs::path p(resume);
  std::error_code ec;
  if (fs::is_directory(p, ec)) {
    require(fs::exists(p / kPopulationFile, ec),
            "--resume " + resume + ": the folder holds no population run (no " + kPopulationFile +
                "); a population resumes from its run.out_dir, a solo run from its checkpoint (--resume " +
                (p / "last.safetensors").string() + ")");
    return p.string();
  }
  const fs::path member = p.parent_path();
  if (!name_starts(member, "member-")) return "";
  const fs::path up = member.parent_path();
  if (fs::exists(up / kPopulationFile, ec)) return up.string();
  if (name_starts(up, "fold-") && fs::exists(up.parent_path() / kPopulationFile, ec)) return up.parent_path().string();
  return "";
}

RunConfig resolve_population_resume(const RunConfig& config, const std::string& resume, const std::string& dir,
                                    std::vector<std::string>* changes) {
  const PopulationRecord rec = read_population_record(dir);
  RunConfig base = rec.config;
  if (!rec.described) {  // a panel built in memory: the caller's, processed as the run processed it
    DataConfig d = config.data;
    d.feature_norm = base.data.feature_norm;
    d.robust_clip = base.data.robust_clip;
    d.target_norm = base.data.target_norm;
    d.nan_fill = base.data.nan_fill;
    base.data = d;
  }
  base.run.out_dir = dir;
  base.run.stop_after = config.run.stop_after;  // this invocation's, as for a solo resume
  const auto want = run_config_values(config), have = run_config_values(base);
  std::vector<std::string> overrides;
  for (const std::string& key : config.given) {
    const std::string section = key.substr(0, key.find('.'));
    if (key == "run.out_dir") {
      require(same_path(config.run.out_dir, dir), "--resume " + resume + ": run.out_dir = '" + config.run.out_dir +
                                                      "' but the population's run folder is '" + dir +
                                                      "'; a population continues in its own folder (drop run.out_dir)");
      continue;
    }
    if (want.at(key) == have.at(key)) continue;
    if (section == "data" && !rec.described && !is_processing_key(key)) continue;
    const bool may = resume_may_change(key) || (section == "run" && key != "run.parallel_folds");
    require(may, "--resume " + resume + ": " + key + " = " + want.at(key) + " but the population was trained with " +
                     have.at(key) + " (" + (fs::path(dir) / kPopulationFile).string() +
                     "); a resume continues the population's members, model, data, split, batch and seeds "
                     "(drop that setting, or train a new run into another run.out_dir)");
    overrides.push_back(key + "=" + want.at(key));
    if (changes) changes->push_back(key + ": " + have.at(key) + " -> " + want.at(key) + " (set explicitly)");
  }
  RunConfig out = overrides.empty() ? base : parse_run_config(to_toml(base), (fs::path(dir) / kPopulationFile).string(), overrides);
  out.run.out_dir = dir;
  out.given = config.given;
  return out;
}

void write_member_state(const fs::path& member_dir, const MemberState& s) {
  const nlohmann::json j{{"step", s.step}, {"early_stopped", s.early_stopped}, {"bad_evals", s.bad_evals}};
  write_file_atomic((member_dir / kMemberStateFile).string(), j.dump() + "\n");
}

MemberState read_member_state(const fs::path& member_dir) {
  MemberState s;
  const fs::path path = member_dir / kMemberStateFile;
  std::error_code ec;
  if (!fs::exists(path, ec)) return s;
  const auto j = nlohmann::json::parse(read_file_bytes(path.string()), nullptr, false);
  require(j.is_object() && j.contains("step") && j["step"].is_number_integer() && j.contains("early_stopped") &&
              j["early_stopped"].is_boolean() && j.contains("bad_evals") && j["bad_evals"].is_number_integer(),
          path.string() + " is not a member state {step, early_stopped, bad_evals}");
  s.present = true;
  s.step = j["step"].get<int64_t>();
  s.early_stopped = j["early_stopped"].get<bool>();
  s.bad_evals = j["bad_evals"].get<int>();
  return s;
}

}  // namespace mlalpha
