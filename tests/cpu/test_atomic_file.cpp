// AtomicFileSet and recover_file_sets (src/core/atomic_file.h): files that become current together, through a
// journal renamed last; a journal a kill left is completed at the next start and stray temporary files removed;
// a set that is never committed leaves the old files and no temporary file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "core/atomic_file.h"
#include "core/error.h"

namespace fs = std::filesystem;

namespace mlalpha {
namespace {

class AtomicFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mlalpha_atomic_" + std::to_string(std::random_device{}()));
    fs::create_directories(dir_ / "sub");
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string p(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

std::string text_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void put(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

size_t entries(const fs::path& d) {
  size_t n = 0;
  for (auto it = fs::recursive_directory_iterator(d); it != fs::recursive_directory_iterator(); ++it)
    n += it->is_regular_file() ? 1 : 0;
  return n;
}

TEST_F(AtomicFiles, ASetBecomesCurrentTogetherAndLeavesNothingElse) {
  put(p("a"), "old a");
  put(p("sub/b"), "old b");
  {
    AtomicFileSet set(p("x.journal"));
    set.add(p("a")).write("new a", 5);
    set.add(p("sub/b")).write("new b", 5);
    EXPECT_EQ(text_of(p("a")), "old a");  // nothing is current before the commit
    set.commit();
  }
  EXPECT_EQ(text_of(p("a")), "new a");
  EXPECT_EQ(text_of(p("sub/b")), "new b");
  EXPECT_EQ(entries(dir_), 2u);  // no journal, no temporary file
  EXPECT_TRUE(recover_file_sets(dir_.string()).empty());
}

TEST_F(AtomicFiles, AnUncommittedSetLeavesTheOldFiles) {
  put(p("a"), "old a");
  {
    AtomicFileSet set(p("x.journal"));
    set.add(p("a")).write("new a", 5);
    set.add(p("c")).write("new c", 5);
  }
  EXPECT_EQ(text_of(p("a")), "old a");
  EXPECT_FALSE(fs::exists(p("c")));
  EXPECT_EQ(entries(dir_), 1u);
}

TEST_F(AtomicFiles, AFileOutsideTheJournalsFolderIsRefused) {
  AtomicFileSet set(p("sub/x.journal"));
  EXPECT_THROW(set.add(p("a")), Error);
}

// The state a kill after the journal's rename leaves: one file already renamed, the other still temporary, and
// a stray temporary file of a write that was never committed.
TEST_F(AtomicFiles, RecoveryCompletesAJournalAndRemovesStrayTemporaryFiles) {
  put(p("a"), "new a");  // renamed before the kill
  put(p("sub/b"), "old b");
  put(p("sub/b.tmp-0001"), "new b");
  put(p("x.journal"), "a.tmp-0000\ta\nsub/b.tmp-0001\tsub/b\n");
  put(p("run.json.tmp-0002"), "half");
  const std::vector<std::string> done = recover_file_sets(dir_.string());
  EXPECT_EQ(done.size(), 3u);  // sub/b renamed, the journal and the stray file removed
  EXPECT_EQ(text_of(p("a")), "new a");
  EXPECT_EQ(text_of(p("sub/b")), "new b");
  EXPECT_FALSE(fs::exists(p("x.journal")));
  EXPECT_FALSE(fs::exists(p("run.json.tmp-0002")));
  EXPECT_EQ(entries(dir_), 2u);
  // A journal that is not one is an error naming it, and nothing changes.
  put(p("y.journal"), "garbage");
  try {
    recover_file_sets(dir_.string());
    ADD_FAILURE() << "a malformed journal was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("y.journal' is not a list"), std::string::npos) << e.what();
  }
  EXPECT_EQ(text_of(p("a")), "new a");
}

}  // namespace
}  // namespace mlalpha
