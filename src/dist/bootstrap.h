#pragma once
// Where this process stands in a multi-process run (docs/multi-gpu.md): its rank, the world size and its GPU on the
// host, read from the variables the usual launchers set; and the hand-over of NCCL's unique id (made by
// ncclGetUniqueId on rank 0, 128 opaque bytes) that every rank's ncclCommInitRank needs, through a shared
// file or over TCP. Nothing here calls NCCL or CUDA: the id is bytes, so all of it runs, and is tested,
// without a GPU.
#include <array>
#include <chrono>
#include <functional>
#include <string>

namespace mlalpha::dist {

struct RankInfo {
  int rank = 0;        // 0 .. world − 1
  int world = 1;       // processes in the run
  int local_rank = 0;  // this process's GPU on its host
  // Whose variables gave them: "torchrun" (RANK, WORLD_SIZE, LOCAL_RANK), "openmpi"
  // (OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK), "slurm" (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID), "pmi"
  // (PMI_RANK, PMI_SIZE, MPI_LOCALRANKID) or "none" (a single process).
  std::string source = "none";
};

// The environment as a lookup (null: unset), so tests need not touch the process's own.
using EnvLookup = std::function<const char*(const char*)>;
EnvLookup process_env();

// The first launcher whose rank variable is set gives all three numbers, in the order listed above. Throws
// Error naming the variable when one of its set is missing or not an integer, or when rank, world and local
// rank are inconsistent (rank outside [0, world), world < 1, local rank < 0). Nothing set: one process.
RankInfo rank_from_env(const EnvLookup& env);

constexpr size_t kUniqueIdBytes = 128;  // sizeof(ncclUniqueId)
using UniqueId = std::array<unsigned char, kUniqueIdBytes>;

// Rank 0 writes `id` to `path` atomically and returns it; it refuses a path that already exists (a file
// left by an earlier run would hand the other ranks a stale id), naming it. Every other rank waits for the
// file, polling, and returns its contents; after `timeout` it throws naming the path and the wait.
UniqueId exchange_via_file(const std::string& path, const RankInfo& r, const UniqueId& id,
                           std::chrono::milliseconds timeout);

// Rank 0 listens on `port` (every interface) and sends `id` to each of the world − 1 other ranks as it
// connects and names itself; the others connect to host:port, retrying until rank 0 listens, and read it.
// A connection that does not introduce itself as a rank of this run is dropped and does not count. Throws
// naming host:port, the ranks still missing (rank 0) and the timeout when the exchange does not complete
// within `timeout`.
UniqueId exchange_via_tcp(const std::string& host, int port, const RankInfo& r, const UniqueId& id,
                          std::chrono::milliseconds timeout);

}  // namespace mlalpha::dist
