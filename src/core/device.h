#pragma once
// Which device a setting picks (run.device, --device).
#include <string>

namespace mlalpha {

// True for device "gpu" (which requires one: an error otherwise) and for "auto" with a GPU present.
bool use_gpu(const std::string& device);

}  // namespace mlalpha
