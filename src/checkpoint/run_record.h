#pragma once
// What a checkpoint records about its run (CheckpointMeta::data_json, metadata 'data_config'): the [data]
// and [split] settings as TOML, the walk-forward fold and the data's fingerprint, so a resume continues on
// the same data and eval / predict find it.
#include <cstdint>
#include <string>

#include "mlalpha/config.h"

namespace mlalpha {

struct RunRecord {
  bool present = false;    // false: the checkpoint predates the record
  bool described = false;  // settings.data loads the data (false: a panel built in memory)
  RunConfig settings;      // its data and split sections (the rest at their defaults)
  int fold = 0;
  uint64_t fingerprint = 0;
};

std::string encode_run_record(const RunConfig& c, bool described, int fold, uint64_t fingerprint);
// `path` names the checkpoint in messages; empty text gives a record with present = false.
RunRecord decode_run_record(const std::string& text, const std::string& path);
// A fingerprint as 16 hex digits, and back (false when `text` is not hex digits of a 64-bit value).
std::string hex64(uint64_t v);
bool parse_hex64(const std::string& text, uint64_t& v);

}  // namespace mlalpha
