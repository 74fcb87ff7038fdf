// The CUDA devices (include/mlalpha/device.h) and the sentence for a GPU asked of a CPU-only build (device.h).
#include "core/device.h"

#include "core/error.h"
#include "mlalpha/device.h"

namespace mlalpha {

std::vector<std::string> gpu_devices() {
  std::vector<std::string> out;
  for (int i = 0, n = cuda_device_count(); i < n; ++i) out.push_back(cuda_device_summary(i));
  return out;
}

std::string no_gpu_support(const std::string& what) {
  return what + " but this build of ml-alpha has no GPU support (it was built without the CUDA toolkit): compute on "
                "the CPU (device 'auto' or 'cpu'), or get GPU support by building where the CUDA toolkit is installed "
                "(scripts/setup.sh installs it; cmake then finds nvcc) or by installing the CUDA wheel (docs/python.md)";
}

}  // namespace mlalpha
