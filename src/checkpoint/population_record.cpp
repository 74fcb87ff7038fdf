// The records a population resume reads (population_record.h).
#include "checkpoint/population_record.h"

#include <nlohmann/json.hpp>

#include <charconv>

#include "checkpoint/run_record.h"
#include "config/run_config.h"
#include "core/error.h"
#include "data/fileio.h"

namespace mlalpha {

namespace fs = std::filesystem;

namespace {

bool name_starts(const fs::path& p, const char* prefix) { return p.filename().string().rfind(prefix, 0) == 0; }

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
