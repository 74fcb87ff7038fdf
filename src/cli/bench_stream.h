#pragma once
// The streaming benchmark, `ml-alpha bench --stream` (docs/benchmarks.md, "Streaming"): per-bar time of the GPU
// stepper (graph replay, host step(), eager launches, graph without PDL, graph of the fused layers) and of the CPU stepper (1 thread and every
// thread), for the DESIGN section 5 S and M models and given instrument counts, beside the state floor: the bytes
// of state a bar reads and writes over the device-to-device copy bandwidth measured in the same run; then the same
// models stepped by PyTorch as mamba_ssm's Mamba2.step (bench/torch_reference.py stream) in the same run, and the
// ratios.
#include <memory>
#include <string>
#include <vector>

namespace mlalpha {

class Context;
struct ModelLayout;

struct StreamBenchOptions {
  std::vector<std::string> configs = {"S", "M"};
  std::vector<int> instruments = {1, 100, 5000};
  int gpu_bars = 200;        // bars per timed GPU repetition (5 repetitions, the median kept)
  double cpu_seconds = 2.0;  // timed CPU bars per case: until this much wall time has passed (1 to 50 bars, after one untimed)
  int cpu_threads = 0;       // the "all cores" CPU case; 0: every hardware thread
  bool gpu = true, cpu = true;
  int seed = 1;
  std::string torch_script = "bench/torch_reference.py";  // "": no PyTorch side
};

struct StreamBenchRow {
  std::string config;
  int instruments = 0;
  double state_mib = 0;       // SSM state + conv windows, all layers, MiB
  double floor_us = 0;        // 2 × state bytes / copy bandwidth
  double gpu_graph_us = 0;    // device time per bar, graph replays back to back (CUDA events)
  double gpu_step_us = 0;     // host wall time of GpuStepper::step (row in, bar, predictions out), median
  double gpu_eager_us = 0;    // device time per bar, the kernels launched one by one
  double gpu_nopdl_us = 0;    // device time per bar, graph without programmatic dependent launch
  double gpu_fused_us = 0;    // device time per bar, graph of the fused layers (GpuStepperOptions::fused)
  int kernels = 0, fused_kernels = 0;  // kernels a bar: the default stepper's, the fused one's (NL + 2 where it runs)
  double cpu1_us = 0, cpun_us = 0;  // CpuStepper::step wall time, 1 thread and cpu_threads, median
  double check_rel_l2 = -1;   // first bar from the zero state, GPU vs CPU stepper (a sanity check)
};

struct StreamBenchResult {
  std::string device;         // empty without a GPU
  double copy_gb_s = 0;       // device-to-device copy, bytes read + written per second / 1e9
  int cpu_threads = 0;
  std::vector<StreamBenchRow> rows;
};

StreamBenchResult run_stream_bench(const StreamBenchOptions& options);

// The GPU's part (GPU code, bench_stream_gpu.cpp): GPU 0 opened, its name and copy bandwidth in `res`; then, per
// model and instrument count, the row's GPU times (and its floor from copy_gb_s), `out` the first bar's predictions
// of x (I, F) from the zero state.
std::shared_ptr<Context> open_stream_bench_gpu(StreamBenchResult& res);
void time_gpu_stream(Context& ctx, const ModelLayout& lay, const std::vector<float>& params, const std::vector<float>& x,
                     const StreamBenchOptions& o, double copy_gb_s, StreamBenchRow& row, std::vector<float>& out);

// The result as a markdown table on stdout.
void print_stream_bench(const StreamBenchResult& r);

// PyTorch's rows (bench/torch_reference.py stream), per (model, instruments): µs per bar; 0 where not measured.
struct TorchStreamRow {
  std::string config;
  int instruments = 0;
  double gpu_eager_us = 0, gpu_eager_step_us = 0, gpu_graph_us = 0, gpu_graph_step_us = 0, cpu1_us = 0, cpun_us = 0;
};
// Runs `python3 <script> stream` with the options' models, instruments and timing, echoing its output, and reads
// its table; empty (with the reason on stdout) when the script, Python or PyTorch is missing or it fails.
std::vector<TorchStreamRow> run_torch_stream(const StreamBenchOptions& options, const std::string& script);
// ml-alpha over PyTorch, side by side: GPU graph vs graph, host step() vs step(), CPU 1 thread and all threads.
void print_stream_ratios(const StreamBenchResult& ours, const std::vector<TorchStreamRow>& torch);

}  // namespace mlalpha
