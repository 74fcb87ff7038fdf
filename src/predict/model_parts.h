#pragma once
// What the predict layer's own parts (the stream) read of a Model beyond its public interface.
#include <vector>

#include "mlalpha/model.h"

namespace mlalpha {

// The trained weights in the arena layout of ModelLayout(model.model_config()) (table.total() floats).
const std::vector<float>& model_params(const Model& model);

}  // namespace mlalpha
