#pragma once
// ModelConfig / TrainConfig / FeatureStats ↔ JSON text, as stored in a checkpoint's metadata. Every
// field round-trips exactly: floats are written in their shortest exact decimal form (non-finite ones as
// the strings "inf", "-inf", "nan"), integers as integers, enums by name. Reading rejects a missing,
// unknown or ill-typed field, naming it and `where` (e.g. "checkpoint 'run/best.safetensors'").
// Host-only: the .cpp uses nlohmann-json; this header does not.
#include <string>
#include <vector>

#include "data/panel.h"
#include "mlalpha/config.h"

namespace mlalpha {

std::string to_json(const ModelConfig& c);
std::string to_json(const TrainConfig& c);
std::string to_json(const FeatureStats& s);            // {"mean": [...], "stdev": [...]}
std::string to_json(const std::vector<std::string>& names);  // ["a", "b"]

ModelConfig model_config_from_json(const std::string& text, const std::string& where);
TrainConfig train_config_from_json(const std::string& text, const std::string& where);
FeatureStats feature_stats_from_json(const std::string& text, const std::string& where);
std::vector<std::string> names_from_json(const std::string& text, const std::string& where);

// The fields in which two model configs differ, as "D = 32 vs 64" entries (empty when equal; floats
// compared bitwise).
std::vector<std::string> model_config_differences(const ModelConfig& a, const ModelConfig& b);

}  // namespace mlalpha
