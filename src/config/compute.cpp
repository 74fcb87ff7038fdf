// The compute settings' one check and one decision (mlalpha/compute.h).
#include "mlalpha/compute.h"

#include <algorithm>

#include "core/device.h"
#include "core/error.h"
#include "cpu/thread_pool.h"

namespace mlalpha {

std::string to_string(Device d) { return d == Device::gpu ? "gpu" : "cpu"; }
std::string to_string(CpuKernels k) { return k == CpuKernels::reference ? "reference" : "fast"; }

std::string ComputeNames::with(const std::string& name, const std::string& value) const {
  switch (style) {
    case Style::argument: return name + "='" + value + "'";
    case Style::flag: return name + " " + value;
    case Style::config: break;
  }
  return name + " = '" + value + "'";
}

void ComputeRequest::validate() const {
  require(device == "auto" || device == "cpu" || device == "gpu",
          names.device + " must be 'auto', 'cpu' or 'gpu', got '" + device + "'");
  parse_precision(precision, names.precision);  // names the setting and the three values
  require(threads >= 0 && threads <= kMaxThreads, names.threads + " must be 0 (every CPU this process may use) or 1 to " +
                                                      std::to_string(kMaxThreads) + ", got " + std::to_string(threads));
  require(kernels == "fast" || kernels == "reference",
          names.kernels + " must be 'fast' or 'reference', got '" + kernels + "'");
}

// The one place that decides. A build without GPU support (a CPU-only build) makes `auto` the CPU and refuses `gpu`
// here, naming the build.
Compute resolve(const ComputeRequest& r) {
  r.validate();
  Compute c;
  c.precision_ = parse_precision(r.precision, r.names.precision);
  c.kernels_ = r.kernels == "reference" ? CpuKernels::reference : CpuKernels::fast;
  c.threads_ = r.threads > 0 ? r.threads : std::min(cpu::available_cpus(), ComputeRequest::kMaxThreads);
  if (r.device != "cpu") {
    const int gpus = cuda_device_count();
    // The alternatives: bare values after a config key ("use 'auto' or 'cpu'"), whole arguments or flags otherwise.
    const ComputeNames& n = r.names;
    auto other = [&](const char* v) {
      if (n.style != ComputeNames::Style::config) return n.with(n.device, v);
      std::string quoted(1, '\'');  // built in steps: GCC 12's -Wrestrict misfires on "'" + std::string(v) + "'"
      quoted.append(v).push_back('\'');
      return quoted;
    };
    require(r.device != "gpu" || gpu_support_built(), no_gpu_support(n.with(n.device, "gpu")));
    require(r.device != "gpu" || gpus > 0,
            n.with(n.device, "gpu") + " but no CUDA device was found (use " + other("auto") + " or " + other("cpu") + ")");
    if (gpus > 0) c.device_ = Device::gpu;
  }
  return c;
}

std::string Compute::describe() const {
  if (gpu()) return "gpu, " + to_string(precision_);
  return std::string("cpu, ") + (reference() ? "reference model, " : "") + std::to_string(threads_) +
         (threads_ == 1 ? " thread" : " threads");
}

}  // namespace mlalpha
