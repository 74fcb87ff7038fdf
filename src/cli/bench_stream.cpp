#include "cli/bench_stream.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <random>
#include <thread>

#include "core/device.h"
#include "core/error.h"
#include "model/layout.h"
#include "model/model_step.h"

namespace mlalpha {

namespace {

// DESIGN section 5's S and M models (K = 1).
ModelConfig bench_model(const std::string& name) {
  ModelConfig c;
  if (name == "S") {
    c.F = 32, c.D = 128, c.NL = 4, c.P = 32, c.N = 64;
  } else if (name == "M") {
    c.F = 64, c.D = 256, c.NL = 6, c.P = 64, c.N = 64;
  } else {
    throw Error("stream bench: unknown model '" + name + "' (expected S or M)");
  }
  c.K = 1, c.G = 1, c.W = 4;
  return c;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double e = double(a[i]) - double(b[i]);
    num += e * e, den += double(b[i]) * double(b[i]);
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

}  // namespace

StreamBenchResult run_stream_bench(const StreamBenchOptions& o) {
  StreamBenchResult res;
  res.cpu_threads = o.cpu_threads > 0 ? o.cpu_threads : int(std::max(1u, std::thread::hardware_concurrency()));
  const bool gpu = o.gpu && cuda_device_count() > 0;
  std::shared_ptr<Context> ctx;
  if (gpu) ctx = open_stream_bench_gpu(res);
  for (const std::string& name : o.configs) {
    const ModelLayout lay(bench_model(name));
    const ModelConfig& c = lay.cfg;
    const std::vector<float> params = init_params(lay, o.seed);
    for (const int I : o.instruments) {
      StreamBenchRow row;
      row.config = name, row.instruments = I;
      const StepDims d = step_dims(c, I);
      const double bytes = double(c.NL) * I * double(d.ssm_floats() + d.conv_floats()) * sizeof(float);
      row.state_mib = bytes / double(1 << 20);
      std::mt19937_64 rng(o.seed * 1000003ull + I);
      std::normal_distribution<float> nd;
      std::vector<float> x(size_t(I) * c.F), out(size_t(I) * c.K), ref(out.size());
      for (float& v : x) v = nd(rng);
      if (gpu) time_gpu_stream(*ctx, lay, params, x, o, res.copy_gb_s, row, out);
      if (o.cpu) {
        for (const int threads : {1, res.cpu_threads}) {
          CpuStepper st(lay, params, I, {.threads = threads});
          st.step(x.data(), nullptr, ref.data());  // the first bar from the zero state
          if (gpu && threads == res.cpu_threads) row.check_rel_l2 = rel_l2(out, ref);
          std::vector<double> wall;
          const auto start = std::chrono::steady_clock::now();
          while (wall.empty() || (wall.size() < 50 && seconds_since(start) < o.cpu_seconds)) {
            const auto t0 = std::chrono::steady_clock::now();
            st.step(x.data(), nullptr, ref.data());
            wall.push_back(seconds_since(t0) * 1e6);
          }
          (threads == 1 ? row.cpu1_us : row.cpun_us) = median(wall);
        }
      }
      res.rows.push_back(row);
    }
  }
  return res;
}

}  // namespace mlalpha
