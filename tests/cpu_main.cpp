// main() of the CPU suite binaries. Several tests/cpu/test_*.cpp files link into one binary (tests/CMakeLists.txt:
// one link of the engine and OpenBLAS instead of one per file), and `--suite test_x` runs only the tests defined in
// tests/cpu/test_x.cpp: CTest runs each file that way as the test named after it, so a failure still names its
// file. An explicit --gtest_filter wins over --suite (test_launch re-executes its own binary with one).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>

// The suites (file stems) linked into this binary, ','-separated: a file tests/CMakeLists.txt writes per binary.
extern const char* const mlalpha_suites;

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  std::string suite;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--suite=", 8) == 0) {
      suite = argv[i] + 8;
    } else if (std::strcmp(argv[i], "--suite") == 0 && i + 1 < argc) {
      suite = argv[++i];
    } else {
      std::fprintf(stderr, "unknown argument '%s' (usage: %s [--suite test_x] [gtest flags])\n", argv[i], argv[0]);
      return 2;
    }
  }

  std::set<std::string> suites;
  std::istringstream list(mlalpha_suites);
  for (std::string s; std::getline(list, s, ',');) suites.insert(s);
  if (!suite.empty() && !suites.count(suite)) {
    std::fprintf(stderr, "%s is not linked into %s (its suites: %s)\n", suite.c_str(), argv[0], mlalpha_suites);
    return 2;
  }

  // Every test must come from one of the files linked here, or CTest would run it under no name.
  std::string filter;
  const testing::UnitTest* unit = testing::UnitTest::GetInstance();
  for (int i = 0; i < unit->total_test_suite_count(); ++i) {
    const testing::TestSuite* ts = unit->GetTestSuite(i);
    for (int j = 0; j < ts->total_test_count(); ++j) {
      const testing::TestInfo* t = ts->GetTestInfo(j);
      const std::string file = std::filesystem::path(t->file()).stem().string();
      if (!suites.count(file)) {
        std::fprintf(stderr, "%s.%s is defined in %s, which is no suite of this binary: define tests in "
                     "tests/cpu/test_*.cpp files only\n", ts->name(), t->name(), t->file());
        return 1;
      }
      if (file == suite) filter += std::string(filter.empty() ? "" : ":") + ts->name() + "." + t->name();
    }
  }
  if (!suite.empty() && GTEST_FLAG_GET(filter) == "*") {
    if (filter.empty()) {
      std::fprintf(stderr, "%s defines no tests\n", suite.c_str());
      return 1;
    }
    GTEST_FLAG_SET(filter, filter);
  }
  return RUN_ALL_TESTS();
}
