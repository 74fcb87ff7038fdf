#pragma once
// `ml-alpha bench`: DESIGN section 5 configurations timed on the GPU.
#include <string>

namespace mlalpha {

struct BenchArgs {
  std::string configs = "S,M,L";  // which model configurations
  int warmup = 10;                // untimed steps after the first (eager) one
  int steps = 60;                 // timed steps (median reported)
  bool optimizer = true;          // also the AdamW + clip case over 25M and 100M parameters
  bool tf32 = false;              // every model configuration in tf32 (L always runs both)
};

int run_bench(const BenchArgs& a, double process_start_seconds);

}  // namespace mlalpha
