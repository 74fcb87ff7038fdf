// The fault sweep (docs/testing.md, "The fault sweep"; DESIGN section 7): a run is killed (SIGKILL, through
// MLALPHA_FAULT_AT, core/fault.h) just before its k-th durable effect, for every k the uninterrupted run has (a
// stride for the longer scenarios), then continued as a user would (--resume when the folder holds a run record,
// else the same command again) and must end bitwise as the uninterrupted run: every tensor of every checkpoint and
// optimizer sidecar, every metadata entry but the random save_id, and every other file byte for byte (metrics.jsonl,
// state.json, best.json, folds.csv, oos_pred.csv, the leaderboard, run.json) but the plots. Right after each kill,
// every checkpoint in the folder must load with its sidecar (nothing torn, no pair mixed from two saves). For
// --overwrite, after each kill the old run must be complete (in place, or in the aside folder the next start
// moves back) unless the new run already has a complete checkpoint.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>

#include "checkpoint/checkpoint.h"
#include "checkpoint/safetensors.h"

namespace fs = std::filesystem;

namespace mlalpha {
namespace {

struct Exit {
  bool killed = false;  // by SIGKILL (the fault point)
  int code = -1;
  std::string out;
};

class FaultSweep : public ::testing::Test {
 public:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mlalpha_fault_" + std::to_string(std::random_device{}()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }

  Exit run(const std::string& args, const std::string& env = "") {
    const std::string log = (dir_ / "cmd.log").string();
    const std::string cmd = "exec env " + env + " " + std::string(MLALPHA_BIN) + " " + args + " > " + log + " 2>&1";
    const int status = std::system(cmd.c_str());
    std::ifstream in(log);
    std::stringstream ss;
    ss << in.rdbuf();
    Exit e;
    e.out = ss.str();
    // `sh -c "exec ..."`: the shell is replaced, so a SIGKILL shows as the child's signal (or 128 + 9).
    e.killed = (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) ||
               (WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGKILL);
    e.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return e;
  }

  // The fault points of `args` run uninterrupted into `out`.
  long count_points(const std::string& args) {
    const fs::path log = dir_ / "faults.log";
    fs::remove(log);
    const Exit e = run(args, "MLALPHA_FAULT_LOG=" + log.string());
    EXPECT_EQ(e.code, 0) << e.out;
    std::ifstream in(log);
    long n = 0;
    for (std::string line; std::getline(in, line);) ++n;
    return n;
  }

  fs::path dir_;
};

// Every file of a run folder by its path relative to it: the lock and the plots aside (a resumed model's
// curves.svg starts from the resume), hidden aside folders too.
std::map<std::string, fs::path> files_of(const fs::path& root) {
  std::map<std::string, fs::path> out;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    const std::string name = it->path().filename().string();
    if (it->is_directory() && name.rfind('.', 0) == 0) {
      it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file() || name == "run.lock" || it->path().extension() == ".svg") continue;
    out[it->path().lexically_relative(root).string()] = it->path();
  }
  return out;
}

std::string bytes_of(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// `text` with the reference folder's path written as the tested folder's (run.json and the checkpoints' records
// name their folder).
std::string as_in(std::string text, const fs::path& want, const fs::path& got) {
  const std::string from = want.string(), to = got.string();
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

// `got` ends as `want`: the same files; safetensors the same tensors bitwise and metadata but the save id.
void expect_same_run(const fs::path& want, const fs::path& got, const std::string& what) {
  const auto a = files_of(want), b = files_of(got);
  std::string la, lb;
  for (const auto& [k, v] : a) la += k + " ";
  for (const auto& [k, v] : b) lb += k + " ";
  ASSERT_EQ(la, lb) << what << ": the run folder holds other files than the uninterrupted run's";
  for (const auto& [rel, pa] : a) {
    const fs::path& pb = b.at(rel);
    if (pa.extension() != ".safetensors") {
      EXPECT_EQ(as_in(bytes_of(pa), want, got), bytes_of(pb)) << what << ": " << rel << " differs";
      continue;
    }
    const SafetensorsFile x = load_safetensors(pa.string()), y = load_safetensors(pb.string());
    auto mx = x.metadata, my = y.metadata;
    mx.erase("save_id"), my.erase("save_id");
    for (auto& [key, value] : mx) value = as_in(value, want, got);
    EXPECT_EQ(mx, my) << what << ": " << rel << " metadata differs";
    ASSERT_EQ(x.tensors.size(), y.tensors.size()) << what << ": " << rel;
    for (size_t i = 0; i < x.tensors.size(); ++i) {
      EXPECT_EQ(x.tensors[i].name, y.tensors[i].name) << what << ": " << rel;
      EXPECT_EQ(x.tensors[i].data, y.tensors[i].data) << what << ": " << rel << " tensor " << x.tensors[i].name;
    }
  }
}

// Right after a kill: every checkpoint's weights load (predict reads them alone), and with its optimizer
// sidecar as one save's pair unless a journal (a commit the kill interrupted after it became current) names it:
// the next start completes that commit (core/atomic_file.h, AtomicFileSet).
void expect_checkpoints_whole(const fs::path& root, const std::string& what) {
  std::vector<fs::path> journals;
  for (const auto& [rel, p] : files_of(root))
    if (p.extension() == ".journal") journals.push_back(p);
  for (const auto& [rel, p] : files_of(root)) {
    const std::string name = p.filename().string();
    if (name != "last.safetensors" && name != "best.safetensors") continue;
    try {
      EXPECT_GT(load_checkpoint_weights(p.string()).params.size(), 0u);
    } catch (const std::exception& e) {
      ADD_FAILURE() << what << ": " << rel << " does not load after the kill: " << e.what();
    }
    bool pending = false;
    for (const fs::path& j : journals)
      pending = pending || bytes_of(j).find("\t" + p.lexically_relative(j.parent_path()).string() + "\n") !=
                               std::string::npos;
    if (pending) continue;
    try {
      const Checkpoint c = load_checkpoint(p.string());
      EXPECT_GT(c.state.params.size(), 0u);
    } catch (const std::exception& e) {
      ADD_FAILURE() << what << ": " << rel << " does not load with its sidecar after the kill: " << e.what();
    }
  }
}

// Right after a kill: every metrics.jsonl holds the uninterrupted run's first records (a torn last line aside):
// what was written before the kill is what the run writes, and nothing before it was damaged.
void expect_records_a_prefix(const fs::path& ref, const fs::path& root, const std::string& what) {
  for (const auto& [rel, p] : files_of(root)) {
    if (p.filename() != "metrics.jsonl") continue;
    const std::string got = bytes_of(p), want = bytes_of(ref / rel);
    const std::string whole = got.substr(0, got.rfind('\n') == std::string::npos ? 0 : got.rfind('\n') + 1);
    EXPECT_EQ(want.substr(0, whole.size()), whole) << what << ": " << rel << " is not a prefix of the uninterrupted run's";
  }
}

// Tiny runs: a model of a few hundred weights, one thread, few steps; --save-every and --eval-every put
// checkpoint and best saves in the middle.
const std::string kTiny =
    "train --device cpu --threads 1 --instruments 4 --features 3 --d-model 8 --layers 1 --d-state 4 "
    "--head-dim 4 -B 4 -L 16 --warmup 2 --steps 12 --log-every 2 --eval-every 4 --save-every 4 ";

// Kills `args` (writing `out`) at every stride-th fault point, continues it and compares with `ref`.
void sweep(FaultSweep& t, const std::string& args, const fs::path& ref, const fs::path& work, long points, long stride) {
  for (long k = 1; k <= points; k += stride) {
    const std::string what = "killed at fault point " + std::to_string(k) + " of " + std::to_string(points);
    fs::remove_all(work);
    const Exit killed = t.run(args + "-o " + work.string(), "MLALPHA_FAULT_AT=" + std::to_string(k));
    ASSERT_TRUE(killed.killed) << what << ": the run was not killed (code " << killed.code << ")\n" << killed.out;
    expect_checkpoints_whole(work, what);
    expect_records_a_prefix(ref, work, what);
    const bool recorded = fs::exists(work / "run.json");
    const Exit again = recorded ? t.run("train --device cpu --threads 1 --resume " + work.string(), "")
                                : t.run(args + "-o " + work.string(), "");
    ASSERT_EQ(again.code, 0) << what << (recorded ? ", then --resume" : ", then the same command") << ":\n"
                             << again.out;
    expect_same_run(ref, work, what);
    if (::testing::Test::HasFailure()) return;
  }
}

TEST_F(FaultSweep, SoloRunEveryPoint) {
  const std::string args = kTiny + "--timesteps 160 ";
  const fs::path ref = dir_ / "ref";
  const long points = count_points(args + "-o " + ref.string());
  EXPECT_GT(points, 20);  // run.json, checkpoints, best saves, metrics lines
  std::printf("solo run: %ld fault points, every one swept\n", points);
  sweep(*this, args, ref, dir_ / "run", points, 1);
}

TEST_F(FaultSweep, PopulationStride) {
  const std::string args = kTiny + "--timesteps 160 --models 2 ";
  const fs::path ref = dir_ / "ref";
  const long points = count_points(args + "-o " + ref.string());
  ASSERT_TRUE(fs::exists(ref / "member-01" / "last.safetensors"));
  std::printf("population: %ld fault points, every 4th swept\n", points);
  sweep(*this, args, ref, dir_ / "run", points, 4);
}

TEST_F(FaultSweep, WalkForwardStride) {
  const std::string args = kTiny + "--timesteps 240 --set split.walk_forward_folds=2 ";
  const fs::path ref = dir_ / "ref";
  const long points = count_points(args + "-o " + ref.string());
  ASSERT_TRUE(fs::exists(ref / "fold-1" / "last.safetensors"));
  ASSERT_TRUE(fs::exists(ref / "folds.csv"));
  std::printf("walk-forward: %ld fault points, every 4th swept\n", points);
  sweep(*this, args, ref, dir_ / "run", points, 4);
}

// --overwrite over a finished run of other settings: after every kill the old run is whole (in place or aside)
// unless the new one has saved a checkpoint; the same command again ends as the new run alone.
TEST_F(FaultSweep, OverwriteStride) {
  const fs::path old = dir_ / "old", ref = dir_ / "ref", work = dir_ / "run";
  ASSERT_EQ(run(kTiny + "--timesteps 160 --seed 7 -o " + old.string()).code, 0);
  const auto old_files = files_of(old);
  const std::string args = kTiny + "--timesteps 160 --overwrite ";
  ASSERT_EQ(run(args + "-o " + ref.string()).code, 0);  // the new run alone
  fs::copy(old, work, fs::copy_options::recursive);
  const long points = count_points(args + "-o " + work.string());
  std::printf("--overwrite: %ld fault points, every 3rd swept\n", points);
  for (long k = 1; k <= points; k += 3) {
    const std::string what = "--overwrite killed at fault point " + std::to_string(k);
    fs::remove_all(work);
    fs::copy(old, work, fs::copy_options::recursive);
    const Exit killed = run(args + "-o " + work.string(), "MLALPHA_FAULT_AT=" + std::to_string(k));
    ASSERT_TRUE(killed.killed) << what << ": the run was not killed (code " << killed.code << ")\n" << killed.out;
    expect_checkpoints_whole(work, what);
    // The old run: each file in place or in an aside folder, bytewise; or the new run has a complete checkpoint.
    bool new_saved = fs::exists(work / "state.json") && bytes_of(work / "state.json") != bytes_of(old / "state.json");
    std::vector<fs::path> asides;
    for (const auto& e : fs::directory_iterator(work))
      if (e.is_directory() && e.path().filename().string().rfind('.', 0) == 0) asides.push_back(e.path());
    if (!new_saved)
      for (const auto& [rel, p] : old_files) {
        bool found = fs::exists(work / rel) && bytes_of(work / rel) == bytes_of(p);
        for (const fs::path& a : asides) found = found || (fs::exists(a / rel) && bytes_of(a / rel) == bytes_of(p));
        EXPECT_TRUE(found) << what << ": the old run's " << rel << " is lost";
      }
    const Exit again = run(args + "-o " + work.string());
    ASSERT_EQ(again.code, 0) << what << ", then the same command:\n" << again.out;
    expect_same_run(ref, work, what);
    for (const auto& e : fs::directory_iterator(work))
      EXPECT_NE(e.path().filename().string().rfind('.', 0), 0u) << what << ": " << e.path() << " is left behind";
    if (HasFailure()) return;
  }
}

}  // namespace
}  // namespace mlalpha
