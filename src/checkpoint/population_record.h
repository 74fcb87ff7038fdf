#pragma once
// What lets a population continue (docs/populations.md, "Resume and run.stop_after"): out_dir/population.json
// records the run's settings, so a resume rebuilds the same member list, and each member's member.json
// records where it stood (its last step, whether run.patience froze it, the evaluations since its best), so
// a resumed member continues exactly as the uninterrupted run would have.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "mlalpha/config.h"

namespace mlalpha {

// out_dir/population.json: {"format", "config": the run's settings as TOML (to_toml), "described": the data
// settings load the data (false: a panel built in memory), "fingerprint": the data's}.
struct PopulationRecord {
  RunConfig config;
  bool described = false;
  uint64_t fingerprint = 0;
};
constexpr const char* kPopulationFile = "population.json";
void write_population_record(const std::filesystem::path& out_dir, const RunConfig& cfg, bool described,
                             uint64_t fingerprint);
PopulationRecord read_population_record(const std::filesystem::path& out_dir);

// The population run folder `resume` names: the folder itself when it holds population.json, or for a
// member's checkpoint (out_dir/member-XX/*.safetensors, out_dir/fold-k/member-XX/*.safetensors) the run
// folder above it. Empty when `resume` belongs to no population; a folder without population.json is an
// error saying it holds no population.
std::string population_dir_of(const std::string& resume);

// member-XX/member.json: where a member stood at the end of an invocation.
struct MemberState {
  bool present = false;    // false: the member has not trained in this folder yet
  int64_t step = 0;        // the last step it trained
  bool early_stopped = false;  // run.patience froze it at `step`
  int bad_evals = 0;       // evaluations since its best (run.patience's count)
};
constexpr const char* kMemberStateFile = "member.json";
void write_member_state(const std::filesystem::path& member_dir, const MemberState& s);
MemberState read_member_state(const std::filesystem::path& member_dir);

}  // namespace mlalpha
