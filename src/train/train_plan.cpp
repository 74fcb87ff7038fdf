#include "train/train_plan.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <string>

#include "core/error.h"
#include "data/carry_sampler.h"
#include "model/model_cpu.h"
#include "train/optim_cpu.h"
#include "model/layer_shapes.h"
#include "model/layout.h"
#include "ops/loss/loss.h"
#include "predict/predict.h"

namespace mlalpha {

void validate_training(const ModelConfig& mc, const TrainConfig& tc, const Panel& data, TrainRange range) {
  mc.validate();
  tc.validate();
  data.validate();
  require(data.F == mc.F, "dataset has F = " + std::to_string(data.F) + " features but model.F = " + std::to_string(mc.F));
  require(data.K == mc.K, "dataset has K = " + std::to_string(data.K) + " targets but model.K = " + std::to_string(mc.K));
  const int end = range.end_of(data);
  require(0 <= range.begin && range.begin < end && end <= data.T,
          "the training range [" + std::to_string(range.begin) + ", " + std::to_string(end) + ") is not inside the " +
              std::to_string(data.T) + " time steps of the data");
  require(tc.L <= end - range.begin, "train.seq_len = " + std::to_string(tc.L) + " exceeds the series length T = " +
                                         std::to_string(end - range.begin));
  // Carry with windows: some instrument must have a whole window of present rows in the range (the sampler's own
  // check, made here before anything is written). Time batches walk the range's dates, of which it has L.
  if (tc.state == StateMode::Carry && tc.batch_mode == BatchMode::Windows)
    CarrySampler::check_range(data, range.begin, end, tc.L);
  if (tc.batch_mode == BatchMode::Time) {
    const int64_t B = int64_t(tc.dates) * tc.cross_section(data.N);
    require(B * tc.L * std::max(mc.F, mc.K) <= std::numeric_limits<int>::max(),
            "train.batch = \"time\": train.dates × instruments × train.seq_len × max(F, K) = " +
                std::to_string(tc.dates) + " × " + std::to_string(tc.cross_section(data.N)) + " × " +
                std::to_string(tc.L) + " × " + std::to_string(std::max(mc.F, mc.K)) +
                " exceeds 2^31 − 1 floats per batch: lower train.dates or set train.instruments");
  }
}

std::string batch_text(const TrainConfig& tc, int N) {
  if (tc.batch_mode != BatchMode::Time) return "train.batch = " + std::to_string(tc.B);
  return "train.batch = \"time\" (" + std::to_string(tc.dates) + " train.dates × " +
         std::to_string(tc.cross_section(N)) + " instruments)";
}

GatherParams gather_params(const TrainConfig& tc, int N, int T, int F, int K) {
  GatherParams p{N, T, F, K, tc.windows_per_step(N), tc.L, tc.seed};
  if (tc.batch_mode == BatchMode::Time) p.dates = tc.dates, p.G = tc.cross_section(N);
  return p;
}

Member plan_member(const ModelConfig& mc, const TrainConfig& tc, const Panel& data, TrainRange range) {
  validate_training(mc, tc, data, range);
  Member m;
  m.mc_ = mc, m.tc_ = tc, m.panel_ = &data, m.range_ = range;
  m.batch_ = tc.windows_per_step(data.N);
  m.gather_ = gather_params(tc, data, range);
  return m;
}

Member Member::on(const Panel& p) const {
  const Panel& was = *panel_;
  require(p.N == was.N && p.T == was.T && p.F == was.F && p.K == was.K,
          "a member checked on a panel of " + std::to_string(was.N) + " × " + std::to_string(was.T) + " × " +
              std::to_string(was.F) + " (K = " + std::to_string(was.K) + ") cannot train on one of " +
              std::to_string(p.N) + " × " + std::to_string(p.T) + " × " + std::to_string(p.F) + " (K = " +
              std::to_string(p.K) + ")");
  Member m = *this;  // the plan depends on the shape alone
  m.panel_ = &p;
  return m;
}

GatherParams gather_params(const TrainConfig& tc, const Panel& data, TrainRange range) {
  GatherParams p = gather_params(tc, data.N, range.end_of(data) - range.begin, data.F, data.K);
  p.t_begin = range.begin;
  p.row_stride = data.T;
  return p;
}

namespace {

constexpr double kFloat = sizeof(float);

}  // namespace

// What forward saves for backward (per layer: h_in, hn, rstd, zx, xbc, delta, y, gout, grstd; then h, hfn, rstdf, out) and backward's
// gradients of activations (dout, dhfn, dh, dg, dy, dzx, dxbc, ddelta, dhn), as GpuModel allocates them.
// bf16 (a half float each): hn, gout, hfn and dzx are stored only in bf16 (GEMM operands and nothing else), zx
// (in_proj's output) and dg (out_proj's dx) only in bf16 (GEMM outputs that only element-wise ops read), y (the
// SSD's output, read by the gated norm alone) only in bf16, and the GEMM operands x, dout and dh get bf16 copies;
// where the SSD takes the walks (xbc16) xbc and dy too (the walks' staged inputs, read by them alone).
double activation_floats_per_row(const ModelConfig& c, Precision precision, bool xbc16) {
  const double D = c.D, di = c.d_inner(), H = c.H(), cd = c.conv_dim(), proj = c.in_proj_dim();
  const double h = precision == Precision::BF16 ? 0.5 : 1.0;  // hn, zx, y, gout, hfn; dg, dzx
  const double hx = precision == Precision::BF16 && xbc16 ? 0.5 : 1.0;  // xbc and dy: bf16 on the walks only
  const double per_layer = D + h * D + 1 + h * proj + hx * cd + H + h * di + h * di + c.G;
  const double head = D + h * D + 1 + c.K;
  double grads = c.K + D + D + h * di + hx * di + h * proj + cd + H + D;
  if (precision == Precision::BF16) grads += 0.5 * (c.F + c.K + D);
  return c.NL * per_layer + head + grads;
}

MemoryEstimate estimate_cpu_training(const ModelConfig& mc, const TrainConfig& tc, int N, const Compute& compute) {
  const ModelLayout layout(mc);
  const double total = double(layout.table.total());
  const int B = tc.windows_per_step(N);
  const double M = double(B) * tc.L;
  MemoryEstimate e;
  e.params = total * (4 * kFloat + 1);
  e.batch = M * (mc.F + mc.K) * kFloat;
  // train.state = "carry": the lanes' states in the trainer and the model's copy of the in states (the sampler's
  // row lists, one int per present row of the range, are smaller than the panel they index and not counted).
  if (tc.state == StateMode::Carry)
    e.other += 2.0 * mc.NL * double(carry_conv_floats(mc, B) + carry_ssm_floats(mc, B)) * kFloat;
  if (compute.reference()) {
    // RefModel<float> keeps the same saved activations and backward gradients as the GPU model, and a copy of x.
    e.activations = M * (activation_floats_per_row(mc, Precision::FP32) + mc.F) * kFloat;
    return e;
  }
  // Every buffer the fast model sizes for this batch (its forward cache, backward buffers and per-thread SSD
  // scratch), and the global norm's partials.
  e.activations = double(cpu::CpuModel::floats_needed(mc, B, tc.L, compute.threads(), true)) * kFloat;
  // Mode carry's validation grows the model's forward buffers to a tile of carry_tile_rows rows (predict.h).
  if (tc.state == StateMode::Carry) {
    const int rows = int(carry_tile_rows(tc, N));
    e.prediction = double(cpu::CpuModel::floats_needed(mc, 1, rows, compute.threads(), false)) * kFloat;
  }
  e.other += double(cpu::norm_blocks(layout.table.total())) * sizeof(double);
  return e;
}

std::string format_bytes(double b) {
  char buf[64];
  if (b >= double(1ull << 30)) std::snprintf(buf, sizeof buf, "%.1f GiB", b / double(1ull << 30));
  else if (b >= double(1u << 20)) std::snprintf(buf, sizeof buf, "%.1f MiB", b / double(1u << 20));
  else if (b >= 1024.0) std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
  else std::snprintf(buf, sizeof buf, "%.0f B", b);
  return buf;
}

void check_memory(const MemoryEstimate& need, const TrainConfig& tc, int N, int T, double available,
                  const char* what, const char* where) {
  if (need.total() <= available) return;
  std::ostringstream m;
  m << what << " needs " << format_bytes(need.total()) << " (activations " << format_bytes(need.activations)
    << " for " << batch_text(tc, N) << " × train.seq_len = " << tc.L << ", parameters and AdamW state "
    << format_bytes(need.params);
  if (need.dataset > 0) m << ", dataset " << format_bytes(need.dataset) << " for " << N << " instruments × " << T << " steps";
  if (need.workspaces > 0) m << ", workspaces " << format_bytes(need.workspaces);
  if (need.prediction > 0) m << ", predictions " << format_bytes(need.prediction);
  m << "), " << where << " has " << format_bytes(available) << (std::string(where) == "the GPU" ? " free" : " available")
    << "; ";
  const double biggest = std::max({need.activations + need.batch, need.params, need.dataset});
  if (biggest == need.dataset) m << "train on fewer instruments or a shorter range of time steps";
  else if (biggest == need.params) m << "reduce model.d_model or model.layers";
  else if (tc.batch_mode == BatchMode::Time) m << "reduce train.dates, train.instruments or train.seq_len";
  else m << "reduce train.batch or train.seq_len";
  throw Error(m.str());
}

namespace {

// The first number in a file ("max" or a missing file: none).
std::optional<double> number_in(const char* path) {
  std::ifstream f(path);
  double v = 0;
  if (f >> v) return v;
  return std::nullopt;
}

double physical_available_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  double kb = 0;
  std::string unit;
  while (f >> key >> kb) {
    std::getline(f, unit);
    if (key == "MemAvailable:") return kb * 1024.0;
  }
  const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  // Unknown: no limit is claimed, so the check passes and the allocation itself reports.
  return pages > 0 && page > 0 ? double(pages) * double(page) : std::numeric_limits<double>::infinity();
}

}  // namespace

double host_available_bytes() {
  double avail = physical_available_bytes();
  // ulimit -v: the address space left to this process (its current size from /proc/self/statm, in pages).
  rlimit as{};
  if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) {
    const auto pages = number_in("/proc/self/statm");
    const double used = pages ? *pages * double(sysconf(_SC_PAGESIZE)) : 0.0;
    avail = std::min(avail, std::max(0.0, double(as.rlim_cur) - used));
  }
  // A container's memory limit: cgroup v2's memory.max, else v1's memory.limit_in_bytes, less what it uses.
  const auto v2 = number_in("/sys/fs/cgroup/memory.max");
  const auto v1 = v2 ? std::nullopt : number_in("/sys/fs/cgroup/memory/memory.limit_in_bytes");
  if (const auto limit = v2 ? v2 : v1) {
    const auto used = number_in(v2 ? "/sys/fs/cgroup/memory.current" : "/sys/fs/cgroup/memory/memory.usage_in_bytes");
    avail = std::min(avail, std::max(0.0, *limit - used.value_or(0.0)));
  }
  return avail;
}

}  // namespace mlalpha
