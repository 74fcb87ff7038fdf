// ml-alpha-stream-bench: the streaming benchmark (bench/stream_bench.h) as a command; prints a markdown table.
//   ml-alpha-stream-bench [--configs S,M] [--instruments 1,100,5000] [--gpu-bars 200] [--cpu-seconds 2]
//                         [--cpu-threads 0] [--no-cpu] [--no-gpu]
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <sstream>
#include <string>
#include <vector>

#include "bench/stream_bench.h"

namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

int usage(const char* why) {
  std::fprintf(stderr, "ml-alpha-stream-bench: %s\nusage: ml-alpha-stream-bench [--configs S,M] "
                       "[--instruments 1,100,5000] [--gpu-bars N] [--cpu-seconds X] [--cpu-threads N] [--no-cpu] "
                       "[--no-gpu]\n", why);
  return 2;
}

std::string us(double v) {
  char b[32];
  if (v <= 0) return "-";
  std::snprintf(b, sizeof b, v >= 1e4 ? "%.0f" : "%.1f", v);
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  mlalpha::StreamBenchOptions o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--no-cpu") o.cpu = false;
    else if (a == "--no-gpu") o.gpu = false;
    else if (!has_value) return usage(("missing value after " + a).c_str());
    else if (a == "--configs") o.configs = split(argv[++i]);
    else if (a == "--instruments") {
      o.instruments.clear();
      for (const std::string& v : split(argv[++i])) o.instruments.push_back(std::atoi(v.c_str()));
    } else if (a == "--gpu-bars") o.gpu_bars = std::atoi(argv[++i]);
    else if (a == "--cpu-seconds") o.cpu_seconds = std::atof(argv[++i]);
    else if (a == "--cpu-threads") o.cpu_threads = std::atoi(argv[++i]);
    else return usage(("unknown option " + a).c_str());
  }
  try {
    const mlalpha::StreamBenchResult r = mlalpha::run_stream_bench(o);
    std::printf("ml-alpha stream bench: %s; copy %.0f GB/s (read + write); CPU %d threads\n",
                r.device.empty() ? "no GPU" : r.device.c_str(), r.copy_gb_s, r.cpu_threads);
    std::printf("| model | instruments | state MiB | floor us | GPU graph us | x floor | GPU step() us | GPU eager us "
                "| GPU no-PDL us | CPU 1 thread us | CPU %d threads us | check rel-L2 |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n",
                r.cpu_threads);
    for (const auto& w : r.rows)
      std::printf("| %s | %d | %.1f | %s | %s | %s | %s | %s | %s | %s | %s | %.1e |\n", w.config.c_str(),
                  w.instruments, w.state_mib, us(w.floor_us).c_str(), us(w.gpu_graph_us).c_str(),
                  w.floor_us > 0 ? (std::to_string(w.gpu_graph_us / w.floor_us).substr(0, 5)).c_str() : "-",
                  us(w.gpu_step_us).c_str(), us(w.gpu_eager_us).c_str(), us(w.gpu_nopdl_us).c_str(),
                  us(w.cpu1_us).c_str(), us(w.cpun_us).c_str(), w.check_rel_l2);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ml-alpha-stream-bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
