// The CUDA devices (include/mlalpha/device.h) and the device a setting picks (device.h).
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

bool use_gpu(const std::string& device) {
  require(device == "auto" || device == "cpu" || device == "gpu",
          "run.device must be 'auto', 'cpu' or 'gpu', got '" + device + "'");
  if (device == "cpu") return false;
  require(device != "gpu" || gpu_support_built(), no_gpu_support("run.device = 'gpu'"));
  const int gpus = cuda_device_count();
  require(device != "gpu" || gpus > 0, "run.device = 'gpu' but no CUDA device was found (use 'auto' or 'cpu')");
  return gpus > 0;
}

}  // namespace mlalpha
