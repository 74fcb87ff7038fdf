// The compute settings (include/mlalpha/compute.h): one check and one decision, with messages in the words of
// where each setting was given (a TOML key, a Python argument, a flag), and RunConfig's request.
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "core/device.h"
#include "mlalpha/compute.h"
#include "mlalpha/config.h"
#include "test_util.h"

namespace mlalpha {
namespace {

using test::contains;
using test::error_of;

ComputeNames python_names() {
  ComputeNames n;
  n.style = ComputeNames::Style::argument;
  n.device = "device", n.precision = "precision", n.threads = "threads";
  return n;
}

TEST(Compute, ResolvesEverySetting) {
  const Compute c = resolve({.device = "cpu", .precision = "bf16", .threads = 3, .kernels = "reference"});
  EXPECT_EQ(c.device(), Device::cpu);
  EXPECT_FALSE(c.gpu());
  EXPECT_EQ(c.precision(), Precision::BF16);  // kept as given: the CPU computes fp32 whatever it says
  EXPECT_EQ(c.threads(), 3);
  EXPECT_TRUE(c.reference());
  EXPECT_EQ(c.describe(), "cpu, reference model, 3 threads");
  // 0 threads: every CPU this process may use, at most 64.
  const Compute all = resolve({.device = "cpu"});
  EXPECT_GE(all.threads(), 1);
  EXPECT_LE(all.threads(), ComputeRequest::kMaxThreads);
  EXPECT_EQ(all.kernels(), CpuKernels::fast);
  EXPECT_EQ(resolve({.device = "cpu", .threads = 1}).describe(), "cpu, 1 thread");
  // auto: the GPU exactly when this process sees one.
  EXPECT_EQ(resolve({}).gpu(), cuda_device_count() > 0);
  // Compute{}: the one value made without settings.
  EXPECT_EQ(Compute{}.describe(), "cpu, 1 thread");
}

TEST(Compute, RefusalsNameTheSettingWhereItWasGiven) {
  EXPECT_EQ(error_of([] { resolve({.device = "tpu"}); }), "run.device must be 'auto', 'cpu' or 'gpu', got 'tpu'");
  EXPECT_EQ(error_of([] { resolve({.precision = "fp16"}); }), "train.precision must be 'fp32', 'tf32' or 'bf16', got 'fp16'");
  EXPECT_EQ(error_of([] { resolve({.threads = 65}); }),
            "run.threads must be 0 (every CPU this process may use) or 1 to 64, got 65");
  EXPECT_EQ(error_of([] { resolve({.threads = -1}); }),
            "run.threads must be 0 (every CPU this process may use) or 1 to 64, got -1");
  EXPECT_EQ(error_of([] { resolve({.kernels = "slow"}); }), "run.cpu_kernels must be 'fast' or 'reference', got 'slow'");
  // Python's arguments.
  EXPECT_EQ(error_of([] { resolve({.device = "tpu", .names = python_names()}); }),
            "device must be 'auto', 'cpu' or 'gpu', got 'tpu'");
  EXPECT_EQ(error_of([] { resolve({.threads = 100, .names = python_names()}); }),
            "threads must be 0 (every CPU this process may use) or 1 to 64, got 100");
  EXPECT_EQ(error_of([] { resolve({.precision = "x", .names = python_names()}); }),
            "precision must be 'fp32', 'tf32' or 'bf16', got 'x'");
  // validate() alone (RunConfig::validate's) looks at no machine.
  EXPECT_NO_THROW((ComputeRequest{.device = "gpu"}.validate()));
}

TEST(Compute, AGpuThatIsNotThereIsRefusedInTheCallersWords) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a GPU is present: device gpu is valid";
  if (!gpu_support_built()) GTEST_SKIP() << "a CPU-only build: AGpuOfACpuOnlyBuildIsRefusedSayingSo";
  EXPECT_EQ(error_of([] { resolve({.device = "gpu"}); }),
            "run.device = 'gpu' but no CUDA device was found (use 'auto' or 'cpu')");
  EXPECT_EQ(error_of([] { resolve({.device = "gpu", .names = python_names()}); }),
            "device='gpu' but no CUDA device was found (use device='auto' or device='cpu')");
  ComputeNames flag;
  flag.style = ComputeNames::Style::flag;
  flag.device = "--device";
  EXPECT_EQ(error_of([&] { resolve({.device = "gpu", .names = flag}); }),
            "--device gpu but no CUDA device was found (use --device auto or --device cpu)");
  EXPECT_EQ(resolve({}).device(), Device::cpu);  // auto without a GPU: the CPU
}

TEST(Compute, AGpuOfACpuOnlyBuildIsRefusedSayingSo) {
  if (gpu_support_built()) GTEST_SKIP() << "a build with GPU support: AGpuThatIsNotThereIsRefusedInTheCallersWords";
  const std::string tail = " but this build of ml-alpha has no GPU support (it was built without the CUDA toolkit)";
  EXPECT_EQ(error_of([] { resolve({.device = "gpu"}); }).rfind("run.device = 'gpu'" + tail, 0), 0u);
  EXPECT_EQ(error_of([] { resolve({.device = "gpu", .names = python_names()}); }).rfind("device='gpu'" + tail, 0), 0u);
  EXPECT_EQ(resolve({}).device(), Device::cpu);  // auto in a CPU-only build: the CPU
}

TEST(Compute, TheRunConfigurationsRequest) {
  const RunConfig c = parse_run_config(
      "[run]\ndevice = \"cpu\"\nthreads = 2\ncpu_kernels = \"reference\"\n[train]\nprecision = \"tf32\"\n", "t");
  const ComputeRequest r = c.compute();
  EXPECT_EQ(r.device, "cpu");
  EXPECT_EQ(r.precision, "tf32");
  EXPECT_EQ(r.threads, 2);
  EXPECT_EQ(r.kernels, "reference");
  EXPECT_EQ(r.names.device, "run.device");
  const Compute k = resolve(r);
  EXPECT_EQ(k.precision(), Precision::TF32);
  EXPECT_EQ(k.threads(), 2);
  EXPECT_TRUE(k.reference());
  // RunConfig::validate checks the same settings through the same code.
  EXPECT_EQ(error_of([] { parse_run_config("", "t", {"run.threads=65"}).validate(); }),
            "run.threads must be 0 (every CPU this process may use) or 1 to 64, got 65");
}

}  // namespace
}  // namespace mlalpha
