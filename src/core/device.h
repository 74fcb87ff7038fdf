#pragma once
// Which device a setting picks (run.device, --device), and the GPU support this build has.
//
// The one seam between the CPU build and the GPU parts (docs/decisions.md, "A CPU-only build"): the functions
// below marked (seam) have two definitions, device_gpu.cpp in a CUDA build and device_nogpu.cpp in a CPU-only
// one (cmake -DMLALPHA_CUDA=OFF, or no CUDA compiler); the build links one. Everything that decides whether
// to compute on a GPU asks them, so a CPU-only build never reaches GPU code: `auto` picks the CPU, `gpu` is
// refused where it is resolved, with no_gpu_support().
#include <string>

namespace mlalpha {

// (seam) Whether this build holds the GPU parts (the CUDA targets).
bool gpu_support_built();
// (seam) Number of usable CUDA devices; 0 when there is no driver or no GPU, or the build has no GPU support
// (never throws).
int cuda_device_count();
// (seam) One line naming the device, e.g. "NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB)".
std::string cuda_device_summary(int device);

// The sentence for a GPU asked of a build without GPU support: `what` (e.g. "run.device = 'gpu'"), that this
// build has none and how to get one.
std::string no_gpu_support(const std::string& what);

// True for device "gpu" (which requires one: an error otherwise, and in a build without GPU support
// no_gpu_support's) and for "auto" with a GPU present.
bool use_gpu(const std::string& device);

}  // namespace mlalpha
