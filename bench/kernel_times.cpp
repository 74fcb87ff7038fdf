// ml-alpha-kernels: where the time of one GPU training step goes, kernel by kernel.
//
// Builds the trainer `ml-alpha bench` times (src/cli/bench.h, DESIGN section 5 configurations), runs the
// eager first step and warm-up graph replays, then traces N graph-replayed steps with the CUPTI Activity
// API (concurrent kernels, memcpy, memset) and prints the GPU time per kernel, sorted by total. CUDA events
// around the same N steps give the wall time, so wall − summed GPU time shows what launch gaps and idle
// cost. Kernels inside a CUDA graph come back as ordinary kernel records (graphId ≠ 0); the tool checks
// that they did and says so if not.
#include <CLI/CLI.hpp>
#include <cupti.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bench/kernel_names.h"
#include "cli/bench.h"
#include "cli/commands.h"
#include "core/context.h"
#include "core/cuda_event.h"
#include "core/error.h"
#include "data/panel.h"
#include "train/population_trainer.h"

#define MLALPHA_CUPTI_CHECK(call, hint)                                                              \
  do {                                                                                               \
    const CUptiResult mlalpha_r_ = (call);                                                           \
    if (mlalpha_r_ != CUPTI_SUCCESS) ::mlalpha::kprof::throw_cupti(mlalpha_r_, #call, (hint));       \
  } while (0)

namespace mlalpha::kprof {

[[noreturn]] void throw_cupti(CUptiResult r, const char* call, const char* hint) {
  const char* what = nullptr;
  if (cuptiGetResultString(r, &what) != CUPTI_SUCCESS || what == nullptr) what = "unknown CUPTI error";
  throw Error(std::string(call) + " failed: " + what + " (CUPTI result " + std::to_string(int(r)) + ")" +
              (hint && *hint ? std::string("; ") + hint : std::string()));
}

struct Row {
  std::string name;  // shortened for the table
  int64_t calls = 0;
  uint64_t ns = 0;
};

// What the activity buffers held. CUPTI hands buffers back on its own worker thread as well as inside
// cuptiActivityFlushAll, hence the mutex; it can also call back while the process exits, hence a
// collector that is never destroyed (see collector()).
struct Collector {
  std::mutex mu;
  bool counting = false;               // records outside the timed window are dropped
  std::map<std::string, Row> by_name;  // keyed by the full name, so variants of a template stay apart
  int64_t kernels = 0, graph_kernels = 0, memcpys = 0, memsets = 0, incomplete = 0;
  size_t dropped = 0;
  CUptiResult parse_error = CUPTI_SUCCESS;
};

Collector& collector() {
  static Collector* c = new Collector;  // intentionally leaked: CUPTI may call back after main returns
  return *c;
}

constexpr size_t kBufferBytes = size_t(8) << 20;  // ~40k kernel records; CUPTI asks again when full

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  // Records must be 8-byte aligned. A failed allocation makes CUPTI drop records, which is reported.
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(64, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

const char* memcpy_kind(uint8_t k) {
  switch (k) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "PtoP";
    default: return "other";
  }
}

void add(Collector& c, const std::string& key, uint64_t start, uint64_t end, bool shorten) {
  if (end <= start) {  // no timestamps: the record was flushed before it completed
    ++c.incomplete;
    return;
  }
  Row& r = c.by_name[key];
  if (r.calls == 0) r.name = shorten ? kernel_names::shorten(kernel_names::demangle(key.c_str())) : key;
  ++r.calls;
  r.ns += end - start;
}

// Never throws (it runs on CUPTI's thread): problems are stored and reported by the main thread.
void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t, size_t valid) {
  Collector& c = collector();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    CUpti_Activity* rec = nullptr;
    for (;;) {
      const CUptiResult r = cuptiActivityGetNextRecord(buffer, valid, &rec);
      if (r == CUPTI_ERROR_MAX_LIMIT_REACHED) break;  // end of the buffer
      if (r != CUPTI_SUCCESS) {
        c.parse_error = r;
        break;
      }
      if (!c.counting) continue;
      if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
        ++c.kernels;
        if (k->graphId != 0) ++c.graph_kernels;
        add(c, k->name ? k->name : "<unnamed kernel>", k->start, k->end, true);
      } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec);
        ++c.memcpys;
        add(c, std::string("[memcpy ") + memcpy_kind(m->copyKind) + "]", m->start, m->end, false);
      } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(rec);
        ++c.memsets;
        // by size, so a memset of ours (the gradient arena's) is told from a library's workspace reset
        add(c, "[memset " + std::to_string(m->bytes) + " B]", m->start, m->end, false);
      }
    }
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS) c.dropped += dropped;
  }
  std::free(buffer);
}

constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                         CUPTI_ACTIVITY_KIND_MEMSET};
constexpr const char* kEnableHint =
    "CUPTI activity tracing is unavailable: is another profiler (nsys, ncu, compute-sanitizer) attached, "
    "or libcupti from another CUDA version first on LD_LIBRARY_PATH?";

void enable_tracing() {
  for (CUpti_ActivityKind k : kKinds) MLALPHA_CUPTI_CHECK(cuptiActivityEnable(k), kEnableHint);
}

// Every record of work finished so far reaches buffer_completed before this returns.
void flush_all(Context& ctx) {
  ctx.synchronize();
  MLALPHA_CUPTI_CHECK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "");
}

// Milliseconds per step over `steps` steps, CUDA events around the whole run.
double time_steps(PopulationTrainer& tr, int steps) {
  cudaStream_t st = tr.context().stream();
  CudaEvent t0, t1;
  t0.record(st);
  for (int i = 0; i < steps; ++i) tr.step();
  t1.record(st);
  t1.synchronize();
  return double(elapsed_ms(t0, t1)) / steps;
}

struct Args {
  std::string config = "S";
  Precision precision = Precision::FP32;
  int steps = 20;
  int warmup = 10;
  bool trace_from_start = false;
  int models = 1;  // a population of this many members (seeds 1.., one captured step); 1 = the single model
  int batch = 0;   // windows per step instead of the configuration's B (0 = its B)
};

void print_table(const Collector& c, int steps, double wall_ms, double untraced_ms) {
  std::vector<Row> rows;
  uint64_t total_ns = 0;
  int64_t total_calls = 0;
  for (const auto& [key, r] : c.by_name) {
    rows.push_back(r);
    total_ns += r.ns;
    total_calls += r.calls;
  }
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.ns > b.ns; });
  // Distinct kernels can shorten to the same name (two cub::...<...> instances): number the repeats.
  std::map<std::string, int> seen;
  for (Row& r : rows)
    if (const int n = ++seen[r.name]; n > 1) r.name += " #" + std::to_string(n);
  const char* total_label = "total GPU time (kernels + memcpy + memset)";
  int w = int(std::string(total_label).size());
  for (const Row& r : rows) w = std::max(w, int(r.name.size()));
  const double per_step = 1.0 / steps;
  std::printf("| %-*s | calls/step |    µs/step |  µs/call | %% of GPU |\n", w, "kernel");
  std::printf("|%s|---:|---:|---:|---:|\n", std::string(size_t(w) + 2, '-').c_str());
  for (const Row& r : rows)
    std::printf("| %-*s | %10.2f | %10.1f | %8.2f | %7.2f%% |\n", w, r.name.c_str(), double(r.calls) * per_step,
                double(r.ns) * 1e-3 * per_step, double(r.ns) * 1e-3 / double(r.calls),
                100.0 * double(r.ns) / double(total_ns));
  const double gpu_ms = double(total_ns) * 1e-6 * per_step;
  std::printf("| %-*s | %10.2f | %10.1f | %8s | %7.2f%% |\n", w, total_label,
              double(total_calls) * per_step, gpu_ms * 1e3, "", 100.0);
  std::printf("\nwall %.3f ms/step (CUDA events over the same %d traced steps); GPU busy %.3f ms/step; "
              "gap (launch/idle) %.3f ms/step = %.1f%% of wall\n",
              wall_ms, steps, gpu_ms, wall_ms - gpu_ms, 100.0 * (wall_ms - gpu_ms) / wall_ms);
  if (untraced_ms > 0)
    std::printf("wall %.3f ms/step untraced (%d steps just before tracing): tracing added %.3f ms/step\n",
                untraced_ms, steps, wall_ms - untraced_ms);
  std::printf("records: %lld kernels (%lld from CUDA graphs), %lld memcpy, %lld memset, %lld incomplete, "
              "%zu dropped\n",
              (long long)c.kernels, (long long)c.graph_kernels, (long long)c.memcpys, (long long)c.memsets,
              (long long)c.incomplete, c.dropped);
}

int run(const Args& a) {
  BenchShape s = bench_shape(a.config);
  if (a.batch > 0) s.B = a.batch;
  require(a.steps >= 1 && a.warmup >= 0, "--steps must be >= 1 and --warmup >= 0");
  Context ctx(0);
  std::printf("ml-alpha-kernels: config %s (B %d, L %d, F %d, D %d, NL %d, N %d, P %d, Q %d), %s, %d model%s, on %s\n",
              s.name, s.B, s.L, s.F, s.D, s.NL, s.N, s.P, s.Q, to_string(a.precision).c_str(), a.models,
              a.models > 1 ? "s (a population in one step)" : "", cuda_device_summary(0).c_str());
  std::fflush(stdout);

  // Buffers are registered before the trainer exists, so CUPTI is attached to the process before the
  // step is captured as a graph, whether tracing starts now (--trace-from-start) or after warm-up.
  MLALPHA_CUPTI_CHECK(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed),
                      "could not initialise CUPTI (libcupti missing or older than the driver?)");
  if (a.trace_from_start) enable_tracing();

  const int64_t untraced = a.trace_from_start ? 0 : a.steps;
  // The trainer make_bench_trainer builds, as a population of a.models members (1: the same single model).
  const Panel data = bench_panel(s);
  std::vector<PopulationMember> members(size_t(a.models), {bench_train_config(s, 1 + a.warmup + untraced + a.steps), &data});
  for (int m = 0; m < a.models; ++m) {
    members[size_t(m)].train.seed = uint64_t(1 + m);
    members[size_t(m)].train.precision = a.precision;
  }
  PopulationTrainer tr(ctx, bench_model_config(s), members, {true, 0});
  tr.step();  // eager: creates the cuBLASLt plans; the next step is captured and replayed from then on
  for (int i = 0; i < a.warmup; ++i) tr.step();
  ctx.synchronize();
  // The same number of steps without tracing, for the cost CUPTI adds to the wall time below.
  const double untraced_ms = untraced > 0 ? time_steps(tr, a.steps) : 0.0;

  Collector& c = collector();
  if (a.trace_from_start) flush_all(ctx);  // deliver (and drop) the records of setup and warm-up
  {
    std::lock_guard<std::mutex> lock(c.mu);
    c.counting = true;
  }
  if (!a.trace_from_start) enable_tracing();
  const double wall_ms = time_steps(tr, a.steps);
  flush_all(ctx);
  {
    std::lock_guard<std::mutex> lock(c.mu);
    c.counting = false;
  }
  for (CUpti_ActivityKind k : kKinds) MLALPHA_CUPTI_CHECK(cuptiActivityDisable(k), "");

  std::lock_guard<std::mutex> lock(c.mu);
  if (a.trace_from_start)
    std::printf("%d graph-replayed steps traced after the eager step and %d warm-up steps (CUPTI enabled before "
                "graph capture)\n\n", a.steps, a.warmup);
  else
    std::printf("%d graph-replayed steps traced after the eager step, %d warm-up and %d untraced steps\n\n", a.steps,
                a.warmup, a.steps);
  if (c.parse_error != CUPTI_SUCCESS) {
    const char* what = "?";
    cuptiGetResultString(c.parse_error, &what);
    std::printf("warning: reading an activity buffer failed (%s); the table may miss records\n", what);
  }
  if (c.kernels == 0)
    throw Error("CUPTI recorded no kernels over " + std::to_string(a.steps) +
                " graph-replayed steps: kernels launched from the CUDA graph were not traced." +
                (a.trace_from_start ? "" : " Try --trace-from-start (tracing enabled before the graph is captured)."));
  print_table(c, a.steps, wall_ms, untraced_ms);
  if (c.graph_kernels == 0)
    std::printf("warning: no kernel record carries a graph id, although every traced step is a graph replay\n");
  if (c.dropped > 0) std::printf("warning: CUPTI dropped %zu records: the times above are lower bounds\n", c.dropped);
  if (c.kernels % a.steps != 0)
    std::printf("note: %lld kernel records are not a whole number per step\n", (long long)c.kernels);
  return 0;
}

}  // namespace mlalpha::kprof

int main(int argc, char** argv) {
  using namespace mlalpha;
  kprof::Args a;
  CLI::App app{"ml-alpha-kernels: GPU time per kernel of one training step (CUPTI activity tracing)"};
  app.add_option("--config", a.config, "DESIGN section 5 configuration")
      ->check(CLI::IsMember({"S", "M", "L", "W256", "W16K", "W64K"}))
      ->capture_default_str();
  std::string precision;
  bool tf32 = false;
  app.add_option("--precision", precision, kPrecisionHelp)->type_name("fp32|tf32|bf16");
  app.add_flag("--tf32", tf32, "the older spelling of --precision tf32");
  app.add_option("--models", a.models, "trace a population of this many members in one captured step")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--batch", a.batch, "windows per step instead of the configuration's B (0: its B)")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  app.add_option("--steps", a.steps, "graph-replayed steps traced")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("--warmup", a.warmup, "graph-replayed steps before tracing")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  app.add_flag("--trace-from-start", a.trace_from_start,
               "enable CUPTI before the step is captured as a CUDA graph (use if graph kernels go untraced)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    a.precision = precision_flag(precision, tf32).value_or(Precision::FP32);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ml-alpha-kernels: error: %s\n", e.what());
    return 1;
  }
  if (cuda_device_count() == 0) {
    std::fprintf(stderr, "ml-alpha-kernels: error: no CUDA device found; this tool times the GPU training step "
                         "and needs a GPU\n");
    return 1;
  }
  try {
    return kprof::run(a);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "ml-alpha-kernels: error: %s\n", e.what());
    return 1;
  }
}
