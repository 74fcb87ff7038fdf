// The CUDA devices (include/mlalpha/device.h) and the device a setting picks (device.h).
#include "core/device.h"

#include "core/context.h"
#include "core/error.h"
#include "mlalpha/device.h"

namespace mlalpha {

std::vector<std::string> gpu_devices() {
  std::vector<std::string> out;
  for (int i = 0, n = cuda_device_count(); i < n; ++i) out.push_back(cuda_device_summary(i));
  return out;
}

}  // namespace mlalpha
