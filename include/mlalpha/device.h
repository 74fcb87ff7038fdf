#pragma once
// The CUDA devices this process can use, and how the CPU backend computes.
#include <string>
#include <vector>

namespace mlalpha {

// The CPU backend's settings (run.threads, run.cpu_kernels; docs/config.md): the fast CPU model on `threads`
// worker threads, 0 meaning every CPU this process may use (its affinity mask and cgroup quota), at most 64;
// or, with `reference`, the reference model (plain loops on one thread: the tests' oracle). The thread count
// changes no bit of any result; the reference computes the same function with other roundings.
struct CpuSettings {
  int threads = 0;
  bool reference = false;
};

// One line per device ("NVIDIA H200, sm_90, 132 SMs, 139.8 GiB"); empty without a GPU or driver.
std::vector<std::string> gpu_devices();

}  // namespace mlalpha
