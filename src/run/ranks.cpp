// Data-parallel ranks for the command (mlalpha/run.h): the launcher's environment, --gpus's local launch and its
// log folder, over src/dist's bootstrap and launcher.
#include "core/temp_dir.h"
#include "dist/bootstrap.h"
#include "dist/launch.h"
#include "mlalpha/run.h"

namespace mlalpha {

RankEnvironment rank_environment() {
  const dist::EnvLookup env = dist::process_env();
  const dist::RankInfo r = dist::rank_from_env(env);
  return {r.rank, r.world, r.local_rank, r.source, dist::is_launched_rank(env)};
}

void launch_local_ranks(int processes, const std::vector<std::string>& argv, const std::string& log_dir) {
  dist::LaunchOptions o;
  o.processes = processes;
  o.argv = argv;
  o.log_dir = log_dir;
  dist::launch_local(o);
}

std::string make_temp_folder(const std::string& prefix, const std::string& what) {
  return make_temp_dir(prefix, what).string();
}

}  // namespace mlalpha
