// dist/nccl.h without a GPU: a missing or wrong library is named with dlerror's text and what to do,
// NVLink multicast is switched off unless already set, the id exchange comes from the right variables,
// and, where libnccl.so.2 is installed, its functions resolve and report a usable version.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <map>
#include <string>

#include "core/error.h"
#include "dist/nccl.h"

namespace mlalpha::dist {
namespace {

std::string load_error(const std::string& library) {
  try {
    NcclLib lib(library);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

EnvLookup env_of(const std::map<std::string, std::string>& vars) {
  return [vars](const char* key) -> const char* {
    const auto it = vars.find(key);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST(Nccl, AMissingLibraryIsNamedWithWhatToDo) {
  const std::string what = load_error("libmlalpha-no-such-nccl.so.2");
  EXPECT_NE(what.find("cannot load 'libmlalpha-no-such-nccl.so.2'"), std::string::npos) << what;
  EXPECT_NE(what.find("cannot open shared object file"), std::string::npos) << what;  // dlerror()'s text
  EXPECT_NE(what.find("install it"), std::string::npos) << what;
  EXPECT_NE(what.find("LD_LIBRARY_PATH"), std::string::npos) << what;
}

TEST(Nccl, ALibraryThatIsNotNcclIsNamedWithTheMissingFunction) {
  const std::string what = load_error("libm.so.6");
  EXPECT_NE(what.find("'libm.so.6' was opened but has no ncclGetVersion"), std::string::npos) << what;
}

TEST(Nccl, NvlinkMulticastIsSwitchedOffUnlessSet) {
  ::unsetenv("NCCL_NVLS_ENABLE");
  (void)load_error("libmlalpha-no-such-nccl.so.2");
  ASSERT_NE(std::getenv("NCCL_NVLS_ENABLE"), nullptr);
  EXPECT_STREQ(std::getenv("NCCL_NVLS_ENABLE"), "0");
  ::setenv("NCCL_NVLS_ENABLE", "1", 1);  // the user's choice stands
  (void)load_error("libmlalpha-no-such-nccl.so.2");
  EXPECT_STREQ(std::getenv("NCCL_NVLS_ENABLE"), "1");
  ::unsetenv("NCCL_NVLS_ENABLE");
}

TEST(Nccl, TheInstalledLibraryResolvesWhenPresent) {
  std::unique_ptr<NcclLib> lib;
  try {
    lib = std::make_unique<NcclLib>();
  } catch (const Error& e) {
    GTEST_SKIP() << "no usable libnccl.so.2 here: " << e.what();
  }
  EXPECT_GE(lib->version(), 21400);
  EXPECT_EQ(lib->library(), "libnccl.so.2");
  const std::string v = lib->version_text();
  EXPECT_EQ(v.rfind(std::to_string(lib->version() / 10000) + ".", 0), 0u) << v;
  EXPECT_EQ(std::count(v.begin(), v.end(), '.'), 2) << v;
  // Rank 0's ids need no GPU, and each is fresh.
  const UniqueId a = lib->unique_id(), b = lib->unique_id();
  EXPECT_NE(a, b);
  EXPECT_NE(a, UniqueId{});
  // A move hands the open library over; the moved-from one refuses work instead of crashing.
  const int version = lib->version();
  NcclLib moved = std::move(*lib);
  EXPECT_EQ(moved.version(), version);
  EXPECT_EQ(lib->version(), 0);
  EXPECT_THROW(lib->unique_id(), Error);
}

// The id hand-over comes before anything touches a GPU, so its failures show here too.
TEST(Nccl, MakeCommunicatorNeedsAnExchangeAndWaitsForItWithinTheTimeout) {
  std::shared_ptr<const NcclLib> lib;
  try {
    lib = std::make_shared<const NcclLib>();
  } catch (const Error& e) {
    GTEST_SKIP() << "no usable libnccl.so.2 here: " << e.what();
  }
  RankInfo r1;
  r1.rank = 1, r1.world = 2;
  CommOptions o;
  o.timeout = std::chrono::milliseconds(100);
  const auto error_of = [&](const IdExchange& x) {
    try {
      make_communicator(lib, r1, x, o);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error_of({}).find("rank 1 of 2 has no id exchange"), std::string::npos);
  IdExchange file;
  file.file = "/nonexistent-mlalpha-dir/nccl-id";
  const std::string waited = error_of(file);
  EXPECT_NE(waited.find("rank 1 waited 100 ms for rank 0's id file '/nonexistent-mlalpha-dir/nccl-id'"),
            std::string::npos) << waited;
}

TEST(Nccl, TheIdExchangeComesFromTheLaunchersVariables) {
  RankInfo one;
  IdExchange x = id_exchange_from_env(env_of({{"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}}), one);
  EXPECT_TRUE(x.file.empty());
  EXPECT_TRUE(x.host.empty());  // a world of one exchanges nothing

  RankInfo two;
  two.world = 2;
  x = id_exchange_from_env(env_of({{"MLALPHA_DIST_ID_FILE", "/tmp/x/id"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}}), two);
  EXPECT_EQ(x.file, "/tmp/x/id");  // the launcher's file wins over torchrun's address
  x = id_exchange_from_env(env_of({{"MASTER_ADDR", "node7"}, {"MASTER_PORT", "29500"}}), two);
  EXPECT_TRUE(x.file.empty());
  EXPECT_EQ(x.host, "node7");
  EXPECT_EQ(x.port, 29500);

  const auto error_of = [&](const std::map<std::string, std::string>& vars) {
    try {
      id_exchange_from_env(env_of(vars), two);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const std::string none = error_of({});
  EXPECT_NE(none.find("a world of 2 ranks"), std::string::npos) << none;
  EXPECT_NE(none.find("MLALPHA_DIST_ID_FILE"), std::string::npos) << none;
  EXPECT_NE(none.find("MASTER_ADDR and MASTER_PORT"), std::string::npos) << none;
  EXPECT_NE(error_of({{"MASTER_ADDR", "h"}}).find("MASTER_ADDR and MASTER_PORT"), std::string::npos);
  EXPECT_NE(error_of({{"MASTER_ADDR", "h"}, {"MASTER_PORT", "29x"}}).find("MASTER_PORT must be a port number"),
            std::string::npos);
  EXPECT_NE(error_of({{"MASTER_ADDR", "h"}, {"MASTER_PORT", "70000"}}).find("got '70000'"), std::string::npos);
}

}  // namespace
}  // namespace mlalpha::dist
