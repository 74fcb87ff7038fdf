#include "mlalpha/device.h"

#include "core/context.h"

namespace mlalpha {

std::vector<std::string> gpu_devices() {
  std::vector<std::string> out;
  for (int i = 0, n = cuda_device_count(); i < n; ++i) out.push_back(cuda_device_summary(i));
  return out;
}

}  // namespace mlalpha
