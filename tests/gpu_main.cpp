// main() of the GPU test binaries: without a CUDA device they print why and exit 77, which CTest
// reports as "skipped" (SKIP_RETURN_CODE), never as a silent pass.
#include <gtest/gtest.h>

#include <cstdio>

#include "core/context.h"

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  if (mlalpha::cuda_device_count() == 0) {
    std::printf("no CUDA device: skipping %d GPU tests\n", testing::UnitTest::GetInstance()->total_test_count());
    return 77;
  }
  return RUN_ALL_TESTS();
}
