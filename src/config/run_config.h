#pragma once
// RunConfig ↔ text beyond the public parser (include/mlalpha/config.h): a checkpoint records the data and
// split settings of its run as TOML, and a resume compares settings key by key.
#include <map>
#include <string>
#include <vector>

#include "mlalpha/config.h"

namespace mlalpha {

// Every key of the file ("train.lr") with its value as TOML text ("0.001").
std::map<std::string, std::string> run_config_values(const RunConfig& c);

}  // namespace mlalpha
