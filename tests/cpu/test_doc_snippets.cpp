// The C++ code blocks of README.md and docs/*.md, compiled and run as written: tests/CMakeLists.txt extracts
// each into build/doc_snippets/<page>_<k>.inc at configure time, and a test here includes it into a body that
// first makes what the page assumes (the repository's configs/, a run folder) in a temporary working folder.
// A block added to the docs without a test here fails the static_assert below.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "doc_snippets/count.h"
#include "mlalpha/model.h"
#include "mlalpha/run.h"
#include "test_files.h"

static_assert(MLALPHA_DOC_CPP_SNIPPETS == 2,
              "README.md or docs/ gained or lost a C++ code block: run each one in a test of test_doc_snippets.cpp");

namespace fs = std::filesystem;

namespace {

// A temporary working folder holding a link to the repository's configs/, the folder's own for the test's life.
class InTempFolder {
 public:
  InTempFolder() : before_(fs::current_path()) {
    fs::create_directory_symlink(fs::path(MLALPHA_SOURCE_DIR) / "configs", tmp_.path / "configs");
    fs::current_path(tmp_.path);
  }
  ~InTempFolder() { fs::current_path(before_); }

 private:
  mlalpha::test::TempDir tmp_;
  fs::path before_;
};

TEST(DocSnippets, TheReadmesLibraryExampleTrainsAndPredicts) {
  InTempFolder here;
  {
#include "doc_snippets/README_0.inc"
    ASSERT_EQ(pred.size(), size_t(panel.N) * panel.T * panel.K);
    size_t finite = 0;
    for (int i = 0; i < panel.N; ++i)
      for (int t = s.test_begin; t < s.test_end; ++t) finite += std::isfinite(pred[(size_t(i) * panel.T + t) * panel.K]);
    EXPECT_EQ(finite, size_t(panel.N) * (s.test_end - s.test_begin));
    EXPECT_TRUE(std::isnan(pred[0]));  // outside the range
    EXPECT_TRUE(fs::exists("runs/latest/best.safetensors"));  // configs/example.toml's run folder
  }
}

TEST(DocSnippets, CheckpointsLoadSaveAndResumeThroughThePublicApi) {
  InTempFolder here;
  // What the page assumes: a run folder runs/demo whose models stand at step 20.
  mlalpha::run_training(mlalpha::load_run_config(
      "", {"run.device=\"cpu\"", "data.instruments=4", "data.timesteps=300", "data.n_features=3", "model.d_model=16",
           "model.head_dim=8", "train.batch=4", "train.seq_len=32", "train.steps=20", "run.eval_every=10",
           "run.out_dir=\"runs/demo\""}));
  {
#include "doc_snippets/checkpoints_0.inc"
    EXPECT_EQ(m.step(), 20);
    EXPECT_TRUE(m.has_optimizer_state());
    EXPECT_FALSE(w.has_optimizer_state());
    EXPECT_EQ(w.step(), 20);
    ASSERT_EQ(r.folds.size(), 1u);
    EXPECT_EQ(r.folds[0].steps, 40);
    EXPECT_EQ(r.folds[0].history.front().step, 21);
    EXPECT_EQ(mlalpha::Model::load("runs/demo/last.safetensors").step(), 40);
  }
}

}  // namespace
