// `ml-alpha bench --stream`'s tables and its PyTorch side (bench_stream.h).
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>

#include "cli/bench_stream.h"

namespace mlalpha {

namespace {

std::string us(double v) {
  char b[32];
  if (v <= 0) return "-";
  std::snprintf(b, sizeof b, v >= 1e4 ? "%.0f" : "%.1f", v);
  return b;
}

std::string ratio(double num, double den) {
  char b[32];
  if (num <= 0 || den <= 0) return "-";
  std::snprintf(b, sizeof b, "%.2f", num / den);
  return b;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + v[i];
  return s;
}

// The cells of a markdown row "| a | b | c |", trimmed.
std::vector<std::string> cells(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream in(line);
  std::string c;
  std::getline(in, c, '|');  // before the first bar
  while (std::getline(in, c, '|')) {
    const size_t a = c.find_first_not_of(' '), b = c.find_last_not_of(" \r\n");
    out.push_back(a == std::string::npos ? "" : c.substr(a, b - a + 1));
  }
  if (!out.empty() && out.back().empty()) out.pop_back();
  return out;
}

double number(const std::string& s) {
  try {
    return s == "-" ? 0.0 : std::stod(s);
  } catch (const std::exception&) {
    return 0.0;
  }
}

}  // namespace

void print_stream_bench(const StreamBenchResult& r) {
  if (r.device.empty())
    std::printf("ml-alpha stream bench: no GPU; CPU %d threads\n", r.cpu_threads);
  else
    std::printf("ml-alpha stream bench: %s; copy %.0f GB/s (read + write); CPU %d threads\n", r.device.c_str(),
                r.copy_gb_s, r.cpu_threads);
  std::printf("| model | instruments | state MiB | floor us | GPU graph us | x floor | kernels | GPU step() us | "
              "GPU eager us | GPU no-PDL us | GPU fused us | fused kernels | CPU 1 thread us | CPU %d threads us | "
              "check rel-L2 |\n"
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
              r.cpu_threads);
  for (const auto& w : r.rows) {
    char check[32] = "-";  // GPU vs CPU: only with both
    if (w.check_rel_l2 >= 0) std::snprintf(check, sizeof check, "%.1e", w.check_rel_l2);
    std::printf("| %s | %d | %.1f | %s | %s | %s | %d | %s | %s | %s | %s | %d | %s | %s | %s |\n", w.config.c_str(),
                w.instruments, w.state_mib, us(w.floor_us).c_str(), us(w.gpu_graph_us).c_str(),
                ratio(w.gpu_graph_us, w.floor_us).c_str(), w.kernels, us(w.gpu_step_us).c_str(), us(w.gpu_eager_us).c_str(),
                us(w.gpu_nopdl_us).c_str(), us(w.gpu_fused_us).c_str(), w.fused_kernels, us(w.cpu1_us).c_str(),
                us(w.cpun_us).c_str(), check);
  }
  std::fflush(stdout);
}

std::vector<TorchStreamRow> run_torch_stream(const StreamBenchOptions& o, const std::string& script) {
  // The default path is relative to the source folder: say so rather than blame PyTorch when it is not here.
  std::error_code ec;
  if (!std::filesystem::is_regular_file(script, ec)) {
    std::printf("\n(no PyTorch side: '%s' not found; run from the source folder or pass --torch-script PATH)\n",
                script.c_str());
    return {};
  }
  std::vector<std::string> inst;
  for (int n : o.instruments) inst.push_back(std::to_string(n));
  char cpu_seconds[32];
  std::snprintf(cpu_seconds, sizeof cpu_seconds, "%g", o.cpu_seconds);
  const std::string cmd = "python3 '" + script + "' stream --configs " + join(o.configs) + " --instruments " +
                          join(inst) + " --bars " + std::to_string(o.gpu_bars) + " --cpu-seconds " + cpu_seconds +
                          " --cpu-threads " + std::to_string(o.cpu_threads) + (o.cpu ? "" : " --no-cpu") +
                          (o.gpu ? "" : " --no-gpu") + " 2>&1";
  std::printf("\nPyTorch, stepped as mamba_ssm's Mamba2.step: %s\n", cmd.c_str());
  std::fflush(stdout);
  std::vector<TorchStreamRow> rows;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) {
    std::printf("(the PyTorch side did not start)\n");
    return rows;
  }
  char buf[4096];
  while (std::fgets(buf, sizeof buf, pipe)) {
    std::fputs(buf, stdout);
    const std::string line(buf);
    if (line.rfind("| torch | ", 0) != 0) continue;
    const std::vector<std::string> c = cells(line);  // torch, model, instruments, 4 GPU, 2 CPU
    if (c.size() < 9 || c[2].find_first_not_of("0123456789") != std::string::npos) continue;
    rows.push_back({c[1], std::stoi(c[2]), number(c[3]), number(c[4]), number(c[5]), number(c[6]), number(c[7]),
                    number(c[8])});
  }
  const int status = pclose(pipe);
  std::fflush(stdout);
  if (status != 0) std::printf("(the PyTorch side ended with status %d: is PyTorch installed?)\n", status);
  return rows;
}

void print_stream_ratios(const StreamBenchResult& ours, const std::vector<TorchStreamRow>& torch) {
  if (torch.empty()) return;  // the PyTorch side did not run (said where it failed): no table of nothing
  std::printf("\nPyTorch's time over ml-alpha's, per bar (> 1: ml-alpha is faster); targets (issue 31): GPU graph >= 10, "
              "CPU >= 2\n| model | instruments | GPU graph | GPU step() | CPU 1 thread | CPU %d threads |\n"
              "|---|---|---|---|---|---|\n",
              ours.cpu_threads);
  for (const StreamBenchRow& w : ours.rows)
    for (const TorchStreamRow& t : torch)
      if (t.config == w.config && t.instruments == w.instruments)
        std::printf("| %s | %d | %s | %s | %s | %s |\n", w.config.c_str(), w.instruments,
                    ratio(t.gpu_graph_us, w.gpu_graph_us).c_str(), ratio(t.gpu_graph_step_us, w.gpu_step_us).c_str(),
                    ratio(t.cpu1_us, w.cpu1_us).c_str(), ratio(t.cpun_us, w.cpun_us).c_str());
  std::fflush(stdout);
}

}  // namespace mlalpha
