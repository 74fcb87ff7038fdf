// Where a resume continues and with which settings (resume.h).
#include "run/resume.h"

#include <algorithm>
#include <iterator>

#include "checkpoint/checkpoint.h"
#include "checkpoint/run_record.h"
#include "checkpoint/run_records.h"
#include "config/run_config.h"
#include "core/error.h"
#include "eval/folds.h"
#include "run/run_folder.h"

namespace mlalpha {

namespace fs = std::filesystem;

namespace {

bool same_path(const fs::path& a, const fs::path& b) {
  std::error_code ea, eb;
  const fs::path ca = fs::weakly_canonical(a, ea), cb = fs::weakly_canonical(b, eb);
  return !ea && !eb ? ca == cb : a.lexically_normal() == b.lexically_normal();
}

bool name_starts(const fs::path& p, const char* prefix) { return p.filename().string().rfind(prefix, 0) == 0; }

// How the data is processed: the run's even for a panel built in memory (the fingerprint covers the raw values).
bool is_processing_key(const std::string& key) {
  return key == "data.feature_norm" || key == "data.robust_clip" || key == "data.target_norm" || key == "data.nan_fill";
}

// Train settings a resume may change when the caller sets them explicitly; the rest must match.
const char* const kResumeMayChange[] = {"train.steps", "train.lr", "train.min_lr_ratio", "train.warmup",
                                        "train.schedule", "train.weight_decay", "train.clip", "train.log_every",
                                        "train.precision"};

// The [sweep] list that replaces `key` in every member, or null.
const void* swept(const RunConfig& c, const std::string& key) {
  if (key == "train.lr" && !c.sweep.lr.empty()) return &c.sweep.lr;
  if (key == "train.weight_decay" && !c.sweep.weight_decay.empty()) return &c.sweep.weight_decay;
  if (key == "train.clip" && !c.sweep.clip.empty()) return &c.sweep.clip;
  if (key == "train.warmup" && !c.sweep.warmup.empty()) return &c.sweep.warmup;
  return nullptr;
}

ResumeSource from_record(const fs::path& dir) {
  const auto rec = read_run_record(dir);
  ResumeSource s;
  s.dir = dir;
  s.format = rec->format;
  s.population = rec->population;
  s.complete = rec->complete;
  s.recorded = rec->config;
  s.described = rec->described;
  s.fingerprint = rec->fingerprint;
  s.record_file = (dir / (rec->format == 2 ? kRunFile : kLegacyPopulationFile)).string();
  return s;
}

}  // namespace

bool resume_may_change(const std::string& key) {
  return std::find(std::begin(kResumeMayChange), std::end(kResumeMayChange), key) != std::end(kResumeMayChange);
}

ResumeSource locate_resume(const std::string& resume) {
  const fs::path p(resume);
  std::error_code ec;
  if (fs::is_directory(p, ec)) {
    // First what a killed process left is finished, under the folder's lock, as the next start of any run in it
    // would: a kill while --overwrite moved the old run aside leaves run.json in the aside folder until then.
    {
      const RunLock lock(p);
      recover_run_folder(p);
      settle_old_runs(p);
    }
    require(holds_run_record(p), "--resume " + resume + ": the folder holds no run (no " + kRunFile +
                                     "; a population of an older ml-alpha has " + kLegacyPopulationFile +
                                     ", a solo run of an older ml-alpha resumes from its checkpoint, e.g. --resume " +
                                     (p / "last.safetensors").string() + ")");
    return from_record(p);
  }
  require(fs::exists(p, ec), "--resume " + resume + ": no such checkpoint or run folder");
  // A checkpoint in a run folder: out_dir/, out_dir/fold-k/, out_dir/[fold-k/]member-XX/.
  const fs::path folder = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  std::vector<fs::path> candidates{folder};
  if (name_starts(folder, "member-") || name_starts(folder, "fold-")) candidates.push_back(folder.parent_path());
  if (name_starts(folder, "member-") && name_starts(folder.parent_path(), "fold-"))
    candidates.push_back(folder.parent_path().parent_path());
  for (const fs::path& dir : candidates)
    if (holds_run_record(dir)) {
      require(p.filename() == "last.safetensors",
              "--resume " + resume + ": a run continues from where its models stand (their last.safetensors); give "
              "its run folder, --resume " + dir.string());
      return from_record(dir);
    }
  // A solo run of an older ml-alpha: its checkpoint records the data, the split and the fold.
  require(!name_starts(folder, "member-"), "--resume " + resume + ": " + folder.parent_path().string() +
                                               " holds no population record (" + kRunFile + " or " +
                                               kLegacyPopulationFile + ")");
  const CheckpointWeights ck = load_checkpoint_weights(resume);
  const RunRecord rec = decode_run_record(ck.meta.data_json, resume);
  ResumeSource s;
  s.format = 0;
  s.recorded.model = ck.meta.model;
  s.recorded.train = ck.meta.train;
  s.has_record = rec.present;
  if (rec.present) {
    s.recorded.data = rec.settings.data;
    s.recorded.split = rec.settings.split;
  }
  s.described = rec.present && rec.described;
  s.fingerprint = rec.fingerprint;
  s.record_file = "the checkpoint";
  s.checkpoint = resume;
  s.fold = rec.fold;
  s.step = ck.step;
  const bool walk_forward = rec.present && rec.settings.split.walk_forward_folds > 1;
  s.dir = walk_forward && folder.filename() == fold_dir_name(rec.fold) ? folder.parent_path() : folder;
  return s;
}

RunConfig resolve_resume(const RunConfig& config, const std::string& resume, const ResumeSource& src,
                         std::vector<std::string>* changes) {
  RunConfig base = src.recorded;
  if (src.format == 0) {  // the [run] settings were not recorded: the caller's; the data only when recorded
    base.run = config.run;
    base.sweep = config.sweep;
    if (!src.has_record) base.data = config.data, base.split = config.split;
  }
  if (!src.described) {  // a panel built in memory (or unrecorded): the caller's, processed as the run processed it
    const DataConfig recorded = base.data;
    base.data = config.data;
    if (src.has_record) {
      base.data.feature_norm = recorded.feature_norm;
      base.data.robust_clip = recorded.robust_clip;
      base.data.target_norm = recorded.target_norm;
      base.data.nan_fill = recorded.nan_fill;
    }
  }
  base.run.out_dir = src.dir.string();
  base.run.stop_after = config.run.stop_after;  // it ends one invocation
  const auto want = run_config_values(config), have = run_config_values(base);
  std::vector<std::string> overrides;
  for (const std::string& key : config.given) {
    const std::string section = key.substr(0, key.find('.'));
    if (key == "run.out_dir") {
      require(same_path(config.run.out_dir, src.dir),
              "--resume " + resume + ": run.out_dir = '" + config.run.out_dir + "' but the run is in '" +
                  src.dir.string() + "'; a resume continues in the run's own folder (drop run.out_dir / -o; to branch "
                  "a run, copy its folder and resume the copy)");
      continue;
    }
    if (want.at(key) == have.at(key)) continue;
    // The caller's data (a panel built in memory, or an unrecorded one: the fingerprint decides).
    if (section == "data" && !(src.has_record && (src.described || is_processing_key(key)))) continue;
    if (section == "split" && !src.has_record) continue;
    if (section == "run" && src.format == 0) continue;  // the caller's already
    if (swept(base, key))
      throw Error("--resume " + resume + ": " + key + " = " + want.at(key) + " but the population sweeps it (sweep." +
                  key.substr(6) + " = " + have.at("sweep." + key.substr(6)) +
                  "): each member keeps its own value, which a resume cannot change");
    const bool may = resume_may_change(key) || (section == "run" && key != "run.parallel_folds");
    require(may, "--resume " + resume + ": " + key + " = " + want.at(key) + " but the run was trained with " +
                     have.at(key) + " (" + src.record_file + "); a resume continues the run's model, data, split, " +
                     "batch and seeds (drop that setting, or train a new run into another run.out_dir)");
    overrides.push_back(key + "=" + want.at(key));
    if (changes) changes->push_back(key + ": " + have.at(key) + " -> " + want.at(key) + " (set explicitly)");
  }
  RunConfig out = overrides.empty() ? base : parse_run_config(to_toml(base), src.record_file, overrides);
  out.run.out_dir = src.dir.string();
  out.given = config.given;
  if (src.format == 0) {
    require(src.step < out.train.steps,
            "--resume " + resume + ": the checkpoint has trained " + std::to_string(src.step) + " of train.steps = " +
                std::to_string(out.train.steps) + " steps, so the run is finished; to train longer set train.steps " +
                "above " + std::to_string(src.step) + " explicitly (--steps N)");
    if (!src.described && changes)
      changes->push_back("the checkpoint does not record how to load its data: continuing on the given data");
  }
  return out;
}

}  // namespace mlalpha
