#include "dist/bootstrap.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>
#include <utility>
#include <vector>

#include "core/atomic_file.h"
#include "core/error.h"
#include "dist/fd.h"

namespace mlalpha::dist {
namespace {

using Clock = std::chrono::steady_clock;

struct Launcher {
  const char* name;
  const char *rank, *world, *local;
};
// Checked in this order; the first whose rank variable is set is taken.
constexpr Launcher kLaunchers[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
    {"pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
};

int env_int(const EnvLookup& env, const char* key, const char* launcher) {
  const char* v = env(key);
  require(v != nullptr, std::string(key) + " is not set, but the other " + launcher +
                            " variables are: set it, or unset them all to run as one process");
  int out = 0;
  const char* end = v + std::strlen(v);
  const auto [p, ec] = std::from_chars(v, end, out);
  require(ec == std::errc() && p == end && p != v,
          std::string(key) + " must be an integer, got '" + v + "'");
  return out;
}

std::string ms_text(std::chrono::milliseconds t) { return std::to_string(t.count()) + " ms"; }

int ms_left(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : int(left < 1'000'000 ? left : 1'000'000);
}

// Waits until fd is ready for `events` (POLLIN / POLLOUT) or the deadline passes; false on timeout or error.
bool wait_for(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, ms_left(deadline));
    if (n > 0) return (p.revents & (events | POLLHUP)) != 0 && (p.revents & (POLLERR | POLLNVAL)) == 0;
    if (n == 0) return false;
    if (errno != EINTR) return false;
  }
}

bool send_all(int fd, const void* data, size_t bytes, Clock::time_point deadline) {
  const auto* p = static_cast<const unsigned char*>(data);
  while (bytes > 0) {
    if (!wait_for(fd, POLLOUT, deadline)) return false;
    const ssize_t n = ::send(fd, p, bytes, MSG_NOSIGNAL);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return false;
    p += n, bytes -= size_t(n);
  }
  return true;
}

bool recv_all(int fd, void* data, size_t bytes, Clock::time_point deadline) {
  auto* p = static_cast<unsigned char*>(data);
  while (bytes > 0) {
    if (!wait_for(fd, POLLIN, deadline)) return false;
    const ssize_t n = ::recv(fd, p, bytes, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return false;
    p += n, bytes -= size_t(n);
  }
  return true;
}

void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL, 0) | O_NONBLOCK); }

// What a rank sends first: the protocol tag, its rank and the world size it was started with, so that a
// stray connection or a rank of another run is turned away.
struct Hello {
  char tag[8] = {'m', 'l', 'a', 'l', 'p', 'h', 'a', '1'};
  int32_t rank = 0, world = 0;
};
bool valid_hello(const Hello& h, int world) {
  const Hello ref;
  return std::memcmp(h.tag, ref.tag, sizeof ref.tag) == 0 && h.world == world && h.rank >= 1 && h.rank < world;
}

struct AddrList {
  addrinfo* head = nullptr;
  ~AddrList() {
    if (head) ::freeaddrinfo(head);
  }
};

std::string where(const std::string& host, int port) { return host + ":" + std::to_string(port); }

UniqueId serve(int port, const RankInfo& r, const UniqueId& id, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  AddrList addrs;
  const int rc = ::getaddrinfo(nullptr, std::to_string(port).c_str(), &hints, &addrs.head);
  require(rc == 0, "bootstrap: cannot listen on port " + std::to_string(port) + ": " + ::gai_strerror(rc));
  Fd listener;
  std::string last_error = "no address";
  for (addrinfo* a = addrs.head; a && !listener; a = a->ai_next) {
    Fd s(::socket(a->ai_family, a->ai_socktype, a->ai_protocol));
    if (!s) continue;
    const int one = 1;
    ::setsockopt(s.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(s.get(), a->ai_addr, a->ai_addrlen) == 0 && ::listen(s.get(), r.world) == 0) listener = std::move(s);
    else last_error = std::strerror(errno);
  }
  require(bool(listener), "bootstrap: rank 0 cannot listen on port " + std::to_string(port) + ": " + last_error);
  set_nonblocking(listener.get());
  std::vector<bool> served(size_t(r.world), false);
  served[0] = true;
  int missing = r.world - 1;
  while (missing > 0) {
    if (!wait_for(listener.get(), POLLIN, deadline)) break;
    Fd c(::accept(listener.get(), nullptr, nullptr));
    if (!c) continue;
    set_nonblocking(c.get());
    // One connection may not hold the others up for long: it has a second (or what is left) to introduce itself.
    const auto conn_deadline = std::min(deadline, Clock::now() + std::chrono::seconds(1));
    Hello h;
    if (!recv_all(c.get(), &h, sizeof h, conn_deadline) || !valid_hello(h, r.world) || served[size_t(h.rank)]) continue;
    if (!send_all(c.get(), id.data(), id.size(), conn_deadline)) continue;
    served[size_t(h.rank)] = true;
    --missing;
  }
  if (missing > 0) {
    std::string ranks;
    int listed = 0;
    for (int k = 1; k < r.world && listed < 8; ++k)
      if (!served[size_t(k)]) ranks += (listed++ ? ", " : "") + std::to_string(k);
    if (missing > listed) ranks += ", …";
    throw Error("bootstrap: rank 0 waited " + ms_text(timeout) + " on port " + std::to_string(port) + " for " +
                std::to_string(missing) + " of " + std::to_string(r.world - 1) +
                " ranks that never connected (ranks " + ranks + "): did they start, with the same address and port?");
  }
  return id;
}

UniqueId fetch(const std::string& host, int port, const RankInfo& r, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  std::string last_error;
  while (Clock::now() < deadline) {
    AddrList addrs;
    const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &addrs.head);
    if (rc != 0) {
      last_error = ::gai_strerror(rc);
    } else {
      for (addrinfo* a = addrs.head; a; a = a->ai_next) {
        Fd s(::socket(a->ai_family, a->ai_socktype, a->ai_protocol));
        if (!s) continue;
        set_nonblocking(s.get());
        if (::connect(s.get(), a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
          last_error = std::strerror(errno);
          continue;
        }
        if (!wait_for(s.get(), POLLOUT, std::min(deadline, Clock::now() + std::chrono::milliseconds(500)))) continue;
        int err = 0;
        socklen_t len = sizeof err;
        ::getsockopt(s.get(), SOL_SOCKET, SO_ERROR, &err, &len);
        if (err != 0) {
          last_error = std::strerror(err);
          continue;
        }
        Hello h;
        h.rank = r.rank, h.world = r.world;
        UniqueId id{};
        if (send_all(s.get(), &h, sizeof h, deadline) && recv_all(s.get(), id.data(), id.size(), deadline)) return id;
        last_error = "the connection closed before the id came";
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // rank 0 may not listen yet
  }
  throw Error("bootstrap: rank " + std::to_string(r.rank) + " could not get the NCCL id from rank 0 at " +
              where(host, port) + " within " + ms_text(timeout) + (last_error.empty() ? "" : " (last: " + last_error + ")") +
              ": is rank 0 running, and are the address and port (MASTER_ADDR, MASTER_PORT) right?");
}

void check_rank(const RankInfo& r, const char* who) {
  require(r.world >= 1 && r.rank >= 0 && r.rank < r.world,
          std::string(who) + ": rank " + std::to_string(r.rank) + " is outside a world of " + std::to_string(r.world));
}

}  // namespace

EnvLookup process_env() {
  return [](const char* key) -> const char* { return std::getenv(key); };
}

RankInfo rank_from_env(const EnvLookup& env) {
  for (const Launcher& l : kLaunchers) {
    if (env(l.rank) == nullptr) continue;
    RankInfo r;
    r.source = l.name;
    r.rank = env_int(env, l.rank, l.name);
    r.world = env_int(env, l.world, l.name);
    require(r.world >= 1, std::string(l.world) + " must be >= 1, got " + std::to_string(r.world));
    require(r.rank >= 0 && r.rank < r.world, std::string(l.rank) + " = " + std::to_string(r.rank) + " is outside [0, " +
                                                 l.world + " = " + std::to_string(r.world) + ")");
    // One process needs no GPU index; with several, a missing one would put them all on GPU 0.
    r.local_rank = r.world == 1 && env(l.local) == nullptr ? 0 : env_int(env, l.local, l.name);
    require(r.local_rank >= 0, std::string(l.local) + " must be >= 0, got " + std::to_string(r.local_rank));
    return r;
  }
  return RankInfo{};
}

UniqueId exchange_via_file(const std::string& path, const RankInfo& r, const UniqueId& id,
                           std::chrono::milliseconds timeout) {
  check_rank(r, "exchange_via_file");
  namespace fs = std::filesystem;
  if (r.world == 1) return id;
  if (r.rank == 0) {
    require(!fs::exists(path), "bootstrap: the id file '" + path +
                                   "' already exists (left by an earlier run?): remove it or give a new path, "
                                   "so that no rank reads a stale id");
    AtomicFile f(path);
    f.write(id.data(), id.size());
    f.commit();
    return id;
  }
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    std::error_code ec;
    if (fs::file_size(path, ec) == kUniqueIdBytes && !ec) {  // renamed into place whole (AtomicFile)
      std::ifstream in(path, std::ios::binary);
      UniqueId got{};
      if (in.read(reinterpret_cast<char*>(got.data()), std::streamsize(got.size()))) return got;
    }
    if (Clock::now() >= deadline)
      throw Error("bootstrap: rank " + std::to_string(r.rank) + " waited " + ms_text(timeout) + " for rank 0's id file '" +
                  path + "': is rank 0 running, with the same path on a file system both see?");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

UniqueId exchange_via_tcp(const std::string& host, int port, const RankInfo& r, const UniqueId& id,
                          std::chrono::milliseconds timeout) {
  check_rank(r, "exchange_via_tcp");
  require(port >= 1 && port <= 65535, "bootstrap: the port must be in [1, 65535], got " + std::to_string(port));
  if (r.world == 1) return id;
  return r.rank == 0 ? serve(port, r, id, timeout) : fetch(host, port, r, timeout);
}

}  // namespace mlalpha::dist
