// The seam's definitions in a CPU-only build (device.h): no GPU parts, so no device to use. Nothing else of the
// GPU code has a stand-in: the CPU code asks these before it would reach any (device.h), so it never does.
#include "core/device.h"
#include "core/error.h"

namespace mlalpha {

bool gpu_support_built() { return false; }

int cuda_device_count() { return 0; }

std::string cuda_device_summary(int device) {
  throw Error("GPU " + std::to_string(device) + ": " + no_gpu_support("a GPU was asked for"));
}

}  // namespace mlalpha
