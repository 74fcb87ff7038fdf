#pragma once
// The CUDA devices this process can use. Which device a run computes on, and how: mlalpha/compute.h.
#include <string>
#include <vector>

namespace mlalpha {

// Whether this build holds the GPU parts: false for a CPU-only build (cmake -DMLALPHA_CUDA=OFF, or built where there
// is no CUDA toolkit), which computes on the CPU and refuses device 'gpu'.
bool gpu_support_built();

// One line per device ("NVIDIA H200, sm_90, 132 SMs, 139.8 GiB"); empty without a GPU or driver.
std::vector<std::string> gpu_devices();

}  // namespace mlalpha
