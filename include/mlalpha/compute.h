#pragma once
// How and where the engine computes (DESIGN section 7, "Compute settings"): the device, the GPU's precision, the
// CPU's threads and the CPU's kernels, resolved and checked once where a run, a prediction or a stream starts
// (the command's flags and TOML, Python's arguments, a program's call), then passed down as one read-only
// Compute. No layer below re-reads or re-checks these settings.
//
//   ComputeRequest   the settings as given ("auto", "bf16", 0 threads), with the names the user gave them by
//   resolve()        the one place that checks them and decides: `auto` becomes the GPU when one is present,
//                    0 threads every CPU this process may use (at most kMaxThreads)
//   Compute          the decision, read-only
#include <string>

#include "mlalpha/precision.h"

namespace mlalpha {

enum class Device { cpu, gpu };
std::string to_string(Device d);  // "cpu" | "gpu"

// The CPU's kernels (run.cpu_kernels): the fast model (threads, BLAS), or the reference model (plain loops on one
// thread: the tests' oracle). The thread count changes no bit of any result; the reference computes the same
// function with other roundings.
enum class CpuKernels { fast, reference };
std::string to_string(CpuKernels k);  // "fast" | "reference"

// What each setting is called where it was given, for messages. The defaults are the TOML keys; the command line
// gives "--device", Python "device". `style` says how a value is quoted with its name: config "run.device = 'gpu'",
// argument "device='gpu'" (Python's keyword arguments), flag "--device gpu".
struct ComputeNames {
  enum class Style { config, argument, flag };
  Style style = Style::config;
  std::string device = "run.device", precision = "train.precision", threads = "run.threads",
              kernels = "run.cpu_kernels";
  // `name` with `value` in this style: "run.device = 'gpu'", "device='gpu'", "--device gpu".
  std::string with(const std::string& name, const std::string& value) const;
};

// The settings as given.
struct ComputeRequest {
  std::string device = "auto";      // auto | cpu | gpu
  std::string precision = "fp32";   // fp32 | tf32 | bf16 (the GPU's; the CPU computes fp32 whatever it says)
  int threads = 0;                  // the CPU's worker threads: 1 to kMaxThreads, 0 every CPU this process may use
  std::string kernels = "fast";     // the CPU's: fast | reference
  ComputeNames names = {};

  // The most CPU threads one model uses.
  static constexpr int kMaxThreads = 64;
  // Each value is one of its choices / in its range, without looking at the machine; an Error names the setting
  // as `names` says, the value and what was expected.
  void validate() const;
};

class Compute;
// The one decision: validate(), then `auto` → the GPU when this process sees one (else the CPU), `gpu` without a
// GPU an Error ("run.device = 'gpu' but no CUDA device was found (use 'auto' or 'cpu')", in the request's names),
// 0 threads → every CPU this process may use (its affinity mask and cgroup quota), at most kMaxThreads.
Compute resolve(const ComputeRequest& request);

// A resolved Compute: every field decided (never `auto`, never 0 threads), so a function that takes one takes
// settings already checked. resolve() makes it from settings; Compute{} is the one value made without them: the
// CPU, fast kernels, one thread, fp32 (complete and valid; for tests and tools that choose nothing).
class Compute {
 public:
  Compute() = default;
  Device device() const { return device_; }
  bool gpu() const { return device_ == Device::gpu; }
  Precision precision() const { return precision_; }
  int threads() const { return threads_; }  // 1 to kMaxThreads (1 for the reference kernels, which use one)
  CpuKernels kernels() const { return kernels_; }
  bool reference() const { return kernels_ == CpuKernels::reference; }
  // For logs: "gpu, bf16", "cpu, 8 threads", "cpu, reference model, 1 thread".
  std::string describe() const;

 private:
  friend Compute resolve(const ComputeRequest& request);
  Device device_ = Device::cpu;
  Precision precision_ = Precision::FP32;
  int threads_ = 1;
  CpuKernels kernels_ = CpuKernels::fast;
};

}  // namespace mlalpha
