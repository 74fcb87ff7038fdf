// The seam's CUDA definitions (device.h): this build has the GPU parts; the devices come from the CUDA runtime.
#include <cuda_runtime.h>

#include <cstdio>

#include "core/cuda_check.h"
#include "core/device.h"

namespace mlalpha {

bool gpu_support_built() { return true; }

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error so later checks are not confused
    return 0;
  }
  return n;
}

std::string cuda_device_summary(int device) {
  cudaDeviceProp p{};
  MLALPHA_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  char buf[512];
  std::snprintf(buf, sizeof buf, "%s (sm_%d%d, %d SMs, %.1f GiB)", p.name, p.major, p.minor,
                p.multiProcessorCount, static_cast<double>(p.totalGlobalMem) / (1u << 30));
  return buf;
}

}  // namespace mlalpha
