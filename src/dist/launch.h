#pragma once
// `--gpus N` on one host: N processes, one per GPU, exactly as on several hosts — NCCL's model,
// and the one the engine's communicator expects (one device per process; see docs/decisions.md). The
// launching process re-executes its own binary N times with the same arguments and the variables torchrun
// would set, waits for all of them, and stops the rest as soon as one fails.
//
// Output: rank 0 inherits the launcher's stdout and stderr, so a run looks as it does on one GPU; every
// other rank's stdout and stderr go to `<log_dir>/rank<k>.log` (truncated at start). When a rank fails, the
// error names its log and ends with the log's last lines.
//
// This file knows nothing of the command line: the CLI decides when to launch (is_launched_rank tells a
// child from the launcher) and passes argv through unchanged.
#include <chrono>
#include <string>
#include <vector>

#include "dist/bootstrap.h"

namespace mlalpha::dist {

struct LaunchOptions {
  int processes = 1;                   // N: ranks 0 .. N − 1, LOCAL_RANK = RANK (one host)
  std::string exe = "/proc/self/exe";  // what each child executes: by default this very binary
  std::vector<std::string> argv;       // the children's argv, argv[0] included (usually the launcher's own)
  std::string log_dir;                 // where ranks ≥ 1 write rank<k>.log; must exist
  // After one rank fails the others get SIGTERM, and SIGKILL if they are still alive after this long.
  std::chrono::milliseconds grace{std::chrono::seconds(10)};
};

// What each child finds in its environment, besides the launcher's own (which it inherits, these names
// replaced): RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE (read by rank_from_env as "torchrun"),
// MLALPHA_DIST_ID_FILE (a fresh path in a private temporary folder, for exchange_via_file; the folder is
// removed when launch_local returns) and MLALPHA_LAUNCHED=1.
constexpr const char* kLaunchedVar = "MLALPHA_LAUNCHED";

// True in a process started by launch_local: it is a rank and must not launch again.
bool is_launched_rank(const EnvLookup& env);

// Starts o.processes children (fork + execve), each set to die if the launcher dies (PR_SET_PDEATHSIG), and
// waits for all. Returns when every child exited with status 0. When one exits non-zero, is killed by a
// signal or cannot be executed, the others are stopped (SIGTERM, then SIGKILL after o.grace), all are
// reaped, and it throws Error naming the first failed rank, its exit status or signal, and its log. Blocks
// the calling thread throughout (which must outlive the children: the death signal follows the thread).
void launch_local(const LaunchOptions& o);

}  // namespace mlalpha::dist
