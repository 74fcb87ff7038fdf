// The configuration of a population resume (population_resume.h).
#include "run/population_resume.h"

#include <filesystem>

#include "checkpoint/population_record.h"
#include "config/run_config.h"
#include "core/error.h"

namespace mlalpha {

namespace fs = std::filesystem;

namespace {

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

}  // namespace mlalpha
