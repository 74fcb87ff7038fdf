#pragma once
// Which device this build can compute on (the GPU support it holds) and the CUDA devices it sees. Which device a run
// computes on is decided in one place: resolve() (mlalpha/compute.h), which asks these.
//
// The one seam between the CPU build and the GPU parts (docs/decisions.md, "A CPU-only build"): the functions
// below marked (seam) have two definitions, device_gpu.cpp in a CUDA build and device_nogpu.cpp in a CPU-only
// one (cmake -DMLALPHA_CUDA=OFF, or no CUDA compiler); the build links one. resolve() asks them, so a CPU-only
// build never reaches GPU code: `auto` picks the CPU, `gpu` is refused with no_gpu_support().
#include <string>

#include "mlalpha/device.h"

namespace mlalpha {

// (seam) gpu_support_built() (mlalpha/device.h): whether this build holds the GPU parts (the CUDA targets).
// (seam) Number of usable CUDA devices; 0 when there is no driver or no GPU, or the build has no GPU support
// (never throws).
int cuda_device_count();
// (seam) One line naming the device, e.g. "NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB)".
std::string cuda_device_summary(int device);

// The sentence for a GPU asked of a build without GPU support: `what` (e.g. "run.device = 'gpu'"), that this
// build has none and how to get one.
std::string no_gpu_support(const std::string& what);

}  // namespace mlalpha
