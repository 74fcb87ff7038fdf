// The GPU benches' entry points (bench.h, bench_stream.h) in a CPU-only build, where they are not built
// (docs/decisions.md, "A CPU-only build"): `ml-alpha bench` without --device cpu says what this build lacks.
// The stream bench asks cuda_device_count() first (0 here), so it times the CPU alone and never calls the two
// stream functions.
#include "cli/bench.h"
#include "cli/bench_stream.h"
#include "core/device.h"
#include "core/error.h"

namespace mlalpha {

int run_bench(const BenchArgs&, double) { throw Error(no_gpu_support("ml-alpha bench on the GPU was asked for")); }
int run_population_bench(const BenchArgs&) { throw Error(no_gpu_support("ml-alpha bench --models was asked for")); }
int run_predict_bench(const BenchArgs&) { throw Error(no_gpu_support("ml-alpha bench --predict was asked for")); }

std::shared_ptr<Context> open_stream_bench_gpu(StreamBenchResult&) {
  throw Error(no_gpu_support("the stream bench on the GPU was asked for"));
}
void time_gpu_stream(Context&, const ModelLayout&, const std::vector<float>&, const std::vector<float>&,
                     const StreamBenchOptions&, double, StreamBenchRow&, std::vector<float>&) {
  throw Error(no_gpu_support("the stream bench on the GPU was asked for"));
}

}  // namespace mlalpha
