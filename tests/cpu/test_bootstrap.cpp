// dist/bootstrap.h: ranks from each launcher's variables (and the errors for a half-set or inconsistent
// set), and the NCCL-id hand-over through a file and over TCP among threads standing in for ranks: every
// rank gets rank 0's bytes, stale files and strays are refused, and a rank with no partner fails within its
// timeout naming what it waited for.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "dist/bootstrap.h"

namespace mlalpha::dist {
namespace {

using namespace std::chrono_literals;

EnvLookup env_of(const std::map<std::string, std::string>& vars) {
  return [vars](const char* key) -> const char* {
    const auto it = vars.find(key);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

std::string error_of(const std::map<std::string, std::string>& vars) {
  try {
    rank_from_env(env_of(vars));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Bootstrap, RanksFromEachLauncher) {
  RankInfo r = rank_from_env(env_of({}));
  EXPECT_EQ(r.rank, 0);
  EXPECT_EQ(r.world, 1);
  EXPECT_EQ(r.local_rank, 0);
  EXPECT_EQ(r.source, "none");
  r = rank_from_env(env_of({{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}}));
  EXPECT_EQ(r.rank, 5);
  EXPECT_EQ(r.world, 8);
  EXPECT_EQ(r.local_rank, 1);
  EXPECT_EQ(r.source, "torchrun");
  r = rank_from_env(env_of({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                            {"OMPI_COMM_WORLD_LOCAL_RANK", "3"}}));
  EXPECT_EQ(r.source, "openmpi");
  EXPECT_EQ(r.rank, 3);
  r = rank_from_env(env_of({{"SLURM_PROCID", "9"}, {"SLURM_NTASKS", "16"}, {"SLURM_LOCALID", "1"}}));
  EXPECT_EQ(r.source, "slurm");
  EXPECT_EQ(r.rank, 9);
  EXPECT_EQ(r.world, 16);
  EXPECT_EQ(r.local_rank, 1);
  r = rank_from_env(env_of({{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}, {"MPI_LOCALRANKID", "0"}}));
  EXPECT_EQ(r.source, "pmi");
  // torchrun's variables win over a Slurm allocation's around them.
  r = rank_from_env(env_of({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}, {"SLURM_PROCID", "0"},
                            {"SLURM_NTASKS", "1"}}));
  EXPECT_EQ(r.source, "torchrun");
  EXPECT_EQ(r.rank, 1);
  // One process may leave its GPU index out.
  r = rank_from_env(env_of({{"RANK", "0"}, {"WORLD_SIZE", "1"}}));
  EXPECT_EQ(r.local_rank, 0);
}

TEST(Bootstrap, BadVariablesAreNamed) {
  EXPECT_NE(error_of({{"RANK", "1"}}).find("WORLD_SIZE is not set, but the other torchrun variables are"),
            std::string::npos);
  EXPECT_NE(error_of({{"RANK", "1"}, {"WORLD_SIZE", "2"}}).find("LOCAL_RANK is not set"), std::string::npos);
  EXPECT_NE(error_of({{"RANK", "x1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}})
                .find("RANK must be an integer, got 'x1'"),
            std::string::npos);
  EXPECT_NE(error_of({{"RANK", "2 "}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "0"}}).find("got '2 '"), std::string::npos);
  EXPECT_NE(error_of({{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}})
                .find("RANK = 2 is outside [0, WORLD_SIZE = 2)"),
            std::string::npos);
  EXPECT_NE(error_of({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "0"}, {"SLURM_LOCALID", "0"}})
                .find("SLURM_NTASKS must be >= 1"),
            std::string::npos);
  EXPECT_NE(error_of({{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}, {"MPI_LOCALRANKID", "-1"}})
                .find("MPI_LOCALRANKID must be >= 0"),
            std::string::npos);
}

UniqueId random_id(uint64_t seed) {
  std::mt19937_64 rng(seed);
  UniqueId id;
  for (auto& b : id) b = static_cast<unsigned char>(rng());
  return id;
}

std::filesystem::path fresh_dir() {
  const auto d = std::filesystem::temp_directory_path() /
                 ("mlalpha-bootstrap-" + std::to_string(::getpid()) + "-" + std::to_string(std::random_device{}()));
  std::filesystem::create_directories(d);
  return d;
}

TEST(Bootstrap, FileExchangeGivesEveryRankRankZerosId) {
  const auto dir = fresh_dir();
  const std::string path = (dir / "nccl.id").string();
  const int world = 4;
  const UniqueId id = random_id(1);
  std::vector<std::future<UniqueId>> others;
  for (int k = 1; k < world; ++k)  // the others start first and wait for the file
    others.push_back(std::async(std::launch::async, [&, k] {
      return exchange_via_file(path, {k, world, k, "test"}, random_id(100 + k), 5s);
    }));
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(exchange_via_file(path, {0, world, 0, "test"}, id, 5s), id);
  for (auto& f : others) EXPECT_EQ(f.get(), id);
  // A second run on the same path: rank 0 refuses the stale file.
  try {
    exchange_via_file(path, {0, world, 0, "test"}, random_id(2), 1s);
    ADD_FAILURE() << "rank 0 reused an existing id file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("already exists"), std::string::npos) << e.what();
  }
  // No rank 0: the others give up after their timeout, naming the file.
  const std::string none = (dir / "none.id").string();
  const auto t0 = std::chrono::steady_clock::now();
  try {
    exchange_via_file(none, {1, 2, 1, "test"}, id, 200ms);
    ADD_FAILURE() << "no error without rank 0";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("waited 200 ms for rank 0's id file '" + none + "'"), std::string::npos)
        << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
  // One process needs no exchange and writes nothing.
  EXPECT_EQ(exchange_via_file((dir / "one.id").string(), {0, 1, 0, "test"}, id, 1s), id);
  EXPECT_FALSE(std::filesystem::exists(dir / "one.id"));
  std::filesystem::remove_all(dir);
}

// A free port on this host (the kernel's pick; released before the test binds it again).
int free_port() {
  const int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(s);
  return ntohs(a.sin_port);
}

TEST(Bootstrap, TcpExchangeGivesEveryRankRankZerosIdAndIgnoresStrays) {
  const int port = free_port(), world = 5;
  const UniqueId id = random_id(7);
  std::vector<std::future<UniqueId>> others;
  for (int k = 1; k < world; ++k)  // they start before rank 0 listens and retry
    others.push_back(std::async(std::launch::async, [&, k] {
      return exchange_via_tcp("127.0.0.1", port, {k, world, 0, "test"}, UniqueId{}, 10s);
    }));
  // A stray connection that says nothing, and one from a run of another size: neither counts.
  auto strays = std::async(std::launch::async, [port] {
    std::this_thread::sleep_for(100ms);
    for (int attempt = 0; attempt < 2; ++attempt) {
      const int s = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = htons(uint16_t(port));
      if (::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && attempt == 1) {
        const char junk[16] = "mlalpha1\x01\0\0\0\x63\0\0";
        (void)::send(s, junk, sizeof junk, MSG_NOSIGNAL);
      }
      ::close(s);
    }
  });
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(exchange_via_tcp("127.0.0.1", port, {0, world, 0, "test"}, id, 10s), id);
  for (auto& f : others) EXPECT_EQ(f.get(), id);
  strays.get();
}

TEST(Bootstrap, TcpTimeoutsNameWhatWasMissing) {
  const int port = free_port();
  try {  // rank 0 alone: the others never come
    exchange_via_tcp("127.0.0.1", port, {0, 3, 0, "test"}, random_id(3), 300ms);
    ADD_FAILURE() << "no error without the other ranks";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("for 2 of 2 ranks that never connected (ranks 1, 2)"), std::string::npos)
        << e.what();
  }
  try {  // a rank with no rank 0
    exchange_via_tcp("127.0.0.1", free_port(), {1, 2, 0, "test"}, UniqueId{}, 300ms);
    ADD_FAILURE() << "no error without rank 0";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("could not get the NCCL id from rank 0 at 127.0.0.1:"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("within 300 ms"), std::string::npos) << e.what();
  }
  EXPECT_THROW(exchange_via_tcp("127.0.0.1", 0, {1, 2, 0, "test"}, UniqueId{}, 100ms), Error);
  EXPECT_THROW(exchange_via_tcp("127.0.0.1", port, {2, 2, 0, "test"}, UniqueId{}, 100ms), Error);
}

}  // namespace
}  // namespace mlalpha::dist
