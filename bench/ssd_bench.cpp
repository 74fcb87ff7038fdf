// ml-alpha-ssd-bench: the SSD op alone on the model's layer shapes (DESIGN section 5 S, M, L), each GPU path
// (SsdAlgo: the chunk walks, the chunk-parallel kernels) and precision: forward and backward µs per layer call,
// and how far the two paths' outputs are apart. A developer's tool for the per-kernel predictions in
// docs/benchmarks.md; the training step's own per-kernel table is ml-alpha-kernels.
//
// Timing: 20 calls back to back between two CUDA events (the host enqueues faster than the calls run), the
// median over 7 such rounds after 3 untimed calls, divided by 20.
// --state: the forward carries a state as truncated BPTT does (SsdInputs::h0 in, h_last out; the backward asks
// for no dh0). --digest: no timing; a 64-bit FNV-1a hash of every output of one forward and backward (and of the
// causal conv on the layer's channels, W = 4) per shape, precision and path, so that two builds' stateless ops can
// be compared bit for bit (the same source of this tool built against each).
// --members E: a population's E members in one call (SsdParams::members, B windows each, member-major) against E
// calls of one member each on the same stream, forward and backward µs for all E, in the precision's default path.
#include <CLI/CLI.hpp>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "core/cuda_check.h"
#include "core/cuda_event.h"
#include "core/device_buffer.h"
#include "mlalpha/precision.h"
#include "ops/conv1d/conv1d.h"
#include "ops/ssd/ssd.h"

namespace {

using mlalpha::DeviceBuffer;
using mlalpha::Precision;
using mlalpha::SsdAlgo;
using mlalpha::SsdParams;

struct LayerShape {
  const char* name;
  SsdParams p;  // B, L, H, P, G, N, Q, ld (= conv_dim: d_inner + 2 G N)
};
const LayerShape kShapes[] = {
    {"S", {64, 256, 8, 32, 1, 64, 64, 384}},
    {"M", {32, 512, 8, 64, 1, 64, 128, 640}},
    {"L", {8, 2048, 32, 64, 1, 128, 256, 2304}},
};

std::vector<float> uniform(size_t n, uint64_t seed, float lo, float hi) {
  std::vector<float> v(n);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (float& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = lo + (hi - lo) * float((s >> 40) * (1.0 / double(1ull << 24)));
  }
  return v;
}
DeviceBuffer<float> upload(const std::vector<float>& h) {
  DeviceBuffer<float> d(h.size());
  d.upload(h);
  return d;
}
std::vector<float> download(const DeviceBuffer<float>& d) {
  std::vector<float> h(d.size());
  MLALPHA_CUDA_CHECK(cudaMemcpy(h.data(), d.data(), d.size() * sizeof(float), cudaMemcpyDeviceToHost));
  return h;
}

// One layer's inputs and outputs for SsdParams p (either path's buffer sizes).
struct Layer {
  SsdParams p;
  DeviceBuffer<float> xbc, delta, A_log, D, dy, y, saved, dxbc, ddelta, dA_log, dD, ws;
  DeviceBuffer<float> h0, h_last;  // (B, H, P, N) the carried state (--state)
  bool state = false;
  explicit Layer(SsdParams q, bool carry = false) : p(q), state(carry) {
    const size_t rows = size_t(p.B) * p.L;
    xbc = upload(uniform(rows * p.ld, 1, -1.f, 1.f));
    std::vector<float> dt = uniform(rows * p.H, 2, std::log(1e-3f), std::log(1e-1f));
    for (float& v : dt) v = std::exp(v);
    delta = upload(dt);
    std::vector<float> al = uniform(p.H, 3, 1.f, 16.f);
    for (float& v : al) v = std::log(v);
    A_log = upload(al);
    D = upload(uniform(p.H, 4, 0.5f, 1.5f));
    dy = upload(uniform(rows * p.H * p.P, 5, -1.f, 1.f));
    y = DeviceBuffer<float>(rows * p.H * p.P);
    SsdParams w = p, c = p;
    w.algo = SsdAlgo::kWalk, c.algo = SsdAlgo::kChunked;
    saved = DeviceBuffer<float>(std::max(mlalpha::gpu::ssd_saved_floats(w), mlalpha::gpu::ssd_saved_floats(c)));
    ws = DeviceBuffer<float>(std::max(mlalpha::gpu::ssd_bwd_workspace_floats(w),
                                      mlalpha::gpu::ssd_bwd_workspace_floats(c)));
    dxbc = DeviceBuffer<float>(rows * p.ld);
    ddelta = DeviceBuffer<float>(rows * p.H);
    dA_log = upload(std::vector<float>(p.H, 0.f));
    dD = upload(std::vector<float>(p.H, 0.f));
    if (state) {
      h0 = upload(uniform(size_t(p.B) * p.H * p.P * p.N, 6, -1.f, 1.f));
      h_last = DeviceBuffer<float>(h0.size());
    }
  }
  mlalpha::SsdInputs<float> in() {
    const int bo = p.H * p.P, co = bo + p.G * p.N;
    return {.x = xbc.data(), .delta = delta.data(), .A_log = A_log.data(), .Bm = xbc.data() + bo,
            .Cm = xbc.data() + co, .Dskip = D.data(), .h0 = state ? h0.data() : nullptr,
            .h_last = state ? h_last.data() : nullptr};
  }
  void fwd(const SsdParams& q) { mlalpha::gpu::ssd_fwd(q, in(), y.data(), saved.data(), nullptr); }
  void bwd(const SsdParams& q) {
    const int bo = p.H * p.P, co = bo + p.G * p.N;
    mlalpha::gpu::ssd_bwd(q, in(), saved.data(), dy.data(),
                          {.dx = dxbc.data(), .ddelta = ddelta.data(), .dA_log = dA_log.data(),
                           .dB = dxbc.data() + bo, .dC = dxbc.data() + co, .dD = dD.data()},
                          ws.data(), nullptr);
  }
};

// E members of B windows each: the layer holds E·B windows and E members' A_log, D (stride H); fwd/bwd run either
// all members in one call (SsdParams::members = E) or member by member (E calls of members = 1 on their slices).
struct MemberLayer {
  SsdParams one;  // one member's shape
  int E;
  Layer all;
  MemberLayer(SsdParams q, int members) : one(q), E(members), all(with_batch(q, q.B * members)) {
    std::vector<float> al = uniform(size_t(E) * q.H, 3, 1.f, 16.f);
    for (float& v : al) v = std::log(v);
    all.A_log = upload(al);
    all.D = upload(uniform(size_t(E) * q.H, 4, 0.5f, 1.5f));
    all.dA_log = upload(std::vector<float>(size_t(E) * q.H, 0.f));
    all.dD = upload(std::vector<float>(size_t(E) * q.H, 0.f));
    // Room for E slices of one member's saved buffer (either path; at least the batched call's own).
    SsdParams w = q, c = q;
    w.algo = SsdAlgo::kWalk, c.algo = SsdAlgo::kChunked;
    all.saved = DeviceBuffer<float>(size_t(E) * std::max(mlalpha::gpu::ssd_saved_floats(w),
                                                         mlalpha::gpu::ssd_saved_floats(c)));
  }
  static SsdParams with_batch(SsdParams q, int B) {
    q.B = B;
    return q;
  }
  SsdParams batched() const {
    SsdParams q = all.p;
    q.precision = one.precision, q.members = E, q.member_stride = size_t(one.H);
    return q;
  }
  // Member m's slice of every array, as a call of one member sees it.
  mlalpha::SsdInputs<float> in(int m) {
    const size_t rows = size_t(m) * one.B * one.L;
    const int bo = one.H * one.P, co = bo + one.G * one.N;
    return {.x = all.xbc.data() + rows * one.ld, .delta = all.delta.data() + rows * one.H,
            .A_log = all.A_log.data() + size_t(m) * one.H, .Bm = all.xbc.data() + rows * one.ld + bo,
            .Cm = all.xbc.data() + rows * one.ld + co, .Dskip = all.D.data() + size_t(m) * one.H};
  }
  size_t saved_of_one() const { return mlalpha::gpu::ssd_saved_floats(one); }
  void fwd_each() {
    for (int m = 0; m < E; ++m)
      mlalpha::gpu::ssd_fwd(one, in(m), all.y.data() + size_t(m) * one.B * one.L * one.H * one.P,
                            all.saved.data() + size_t(m) * saved_of_one(), nullptr);
  }
  void bwd_each() {
    const int bo = one.H * one.P, co = bo + one.G * one.N;
    for (int m = 0; m < E; ++m) {
      const size_t rows = size_t(m) * one.B * one.L;
      float* dx = all.dxbc.data() + rows * one.ld;
      mlalpha::gpu::ssd_bwd(one, in(m), all.saved.data() + size_t(m) * saved_of_one(),
                            all.dy.data() + rows * one.H * one.P,
                            {.dx = dx, .ddelta = all.ddelta.data() + rows * one.H,
                             .dA_log = all.dA_log.data() + size_t(m) * one.H, .dB = dx + bo, .dC = dx + co,
                             .dD = all.dD.data() + size_t(m) * one.H},
                            all.ws.data(), nullptr);
    }
  }
};

// µs per call of f: 20 calls between two events, median of 7 rounds after 3 untimed calls.
template <class F>
double us_per_call(F&& f) {
  constexpr int kCalls = 20;
  for (int i = 0; i < 3; ++i) f();
  MLALPHA_CUDA_CHECK(cudaDeviceSynchronize());
  mlalpha::CudaEvent e0, e1;
  std::vector<float> ms;
  for (int r = 0; r < 7; ++r) {
    e0.record(nullptr);
    for (int i = 0; i < kCalls; ++i) f();
    e1.record(nullptr);
    e1.synchronize();
    ms.push_back(mlalpha::elapsed_ms(e0, e1));
  }
  std::sort(ms.begin(), ms.end());
  return 1000.0 * ms[ms.size() / 2] / kCalls;
}

// 64-bit FNV-1a over the bytes of v.
uint64_t fnv1a(const std::vector<float>& v) {
  uint64_t h = 0xcbf29ce484222325ull;
  const unsigned char* b = reinterpret_cast<const unsigned char*>(v.data());
  for (size_t i = 0; i < v.size() * sizeof(float); ++i) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

// --digest: hashes of one stateless forward and backward per path, and of the causal conv (W = 4) over the
// layer's xBC channels.
void digest(const char* label, Layer& layer, Precision prec, const char* pname) {
  for (int k = 0; k < 2; ++k) {
    SsdParams q = layer.p;
    q.precision = prec;
    q.algo = k == 0 ? SsdAlgo::kChunked : SsdAlgo::kWalk;
    layer.dA_log.upload(std::vector<float>(q.H, 0.f));
    layer.dD.upload(std::vector<float>(q.H, 0.f));
    layer.fwd(q);
    layer.bwd(q);
    MLALPHA_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> states = download(layer.saved);
    states.resize(mlalpha::gpu::ssd_chunk_states_floats(q));
    std::printf("%-5s %-5s %-8s y %016llx states %016llx dxbc %016llx ddelta %016llx dA_log %016llx dD %016llx\n",
                label, pname, k == 0 ? "chunked" : "walk", (unsigned long long)fnv1a(download(layer.y)),
                (unsigned long long)fnv1a(states), (unsigned long long)fnv1a(download(layer.dxbc)),
                (unsigned long long)fnv1a(download(layer.ddelta)), (unsigned long long)fnv1a(download(layer.dA_log)),
                (unsigned long long)fnv1a(download(layer.dD)));
  }
}
void conv_digest(const char* label, const SsdParams& p) {
  const mlalpha::Conv1dParams c{p.B, p.L, p.ld, 4, p.ld};
  const size_t n = size_t(p.B) * p.L * p.ld;
  DeviceBuffer<float> x = upload(uniform(n, 11, -1.f, 1.f)), w = upload(uniform(size_t(c.C) * c.W, 12, -1.f, 1.f));
  DeviceBuffer<float> bias = upload(uniform(c.C, 13, -1.f, 1.f)), dy = upload(uniform(n, 14, -1.f, 1.f));
  DeviceBuffer<float> y(n), dx(n), dw = upload(std::vector<float>(size_t(c.C) * c.W, 0.f));
  DeviceBuffer<float> db = upload(std::vector<float>(c.C, 0.f));
  DeviceBuffer<float> ws(mlalpha::gpu::conv1d_silu_bwd_workspace_floats(c));
  const mlalpha::Conv1dInputs<float> in{.x = x.data(), .w = w.data(), .bias = bias.data()};
  mlalpha::gpu::conv1d_silu_fwd(c, in, y.data(), nullptr);
  mlalpha::gpu::conv1d_silu_bwd(c, in, dy.data(), {.dx = dx.data(), .dw = dw.data(), .dbias = db.data()}, ws.data(),
                                nullptr);
  MLALPHA_CUDA_CHECK(cudaDeviceSynchronize());
  std::printf("%-5s conv1d y %016llx dx %016llx dw %016llx dbias %016llx\n", label,
              (unsigned long long)fnv1a(download(y)), (unsigned long long)fnv1a(download(dx)),
              (unsigned long long)fnv1a(download(dw)), (unsigned long long)fnv1a(download(db)));
}

double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = double(a[i]) - double(b[i]);
    num += d * d, den += double(b[i]) * double(b[i]);
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ml-alpha-ssd-bench: the SSD op per layer shape, path and precision (forward, backward µs)"};
  std::string shapes = "S,M,L", precisions = "fp32,bf16";
  int batch = 0;
  bool clusters = false, state = false, digests = false;
  app.add_option("--shapes", shapes, "comma-separated of S, M, L");
  app.add_option("--batch", batch,
                 "windows B instead of the shape's own (0: the shape's): how the walks' (b, h) chains fill the SMs")
      ->check(CLI::Range(0, 4096));
  app.add_option("--precision", precisions, "comma-separated of fp32, tf32, bf16");
  app.add_flag("--clusters", clusters,
               "only print, per shape and precision, how many of the reverse walk's thread-block clusters of 8, 4 "
               "and 2 heads the GPU holds at once against the B·H / cluster it launches (no timing)");
  int force_cs = 0;
  app.add_option("--bwd-cluster-heads", force_cs,
                 "the reverse walk's heads a cluster: 0 the run-time choice (the largest of 8, 4, 2 dividing a group, "
                 "or 2 where those take two rounds and clusters of 2 one), else that size (the shape's or 2)")
      ->check(CLI::IsMember({0, 2, 4, 8}));
  app.add_flag("--state", state,
               "the forward carries a state (h0 in, h_last out), as truncated BPTT does; the backward asks no dh0");
  app.add_flag("--digest", digests,
               "no timing: print a hash of every output of the stateless ops (forward, backward, both paths, and "
               "the causal conv) to compare two builds bit for bit");
  int members = 0;
  app.add_option("--members", members,
                 "time E members of a population in one call (SsdParams::members) against E calls of one member")
      ->check(CLI::Range(0, 1024));
  CLI11_PARSE(app, argc, argv);
  mlalpha::gpu::ssd_walk_bwd_force_cluster_heads(force_cs);
  if (members > 0) {
    try {
      std::printf("%-8s %-5s %-8s %4s %12s %12s %12s %12s %8s\n", "shape", "prec", "path", "E", "fwd E calls",
                  "fwd batched", "bwd E calls", "bwd batched", "speedup");
      for (const LayerShape& s : kShapes) {
        if (shapes.find(s.name) == std::string::npos) continue;
        SsdParams shape = s.p;
        if (batch > 0) shape.B = batch;
        for (const char* pname : {"fp32", "tf32", "bf16"}) {
          if (precisions.find(pname) == std::string::npos) continue;
          shape.precision = std::string(pname) == "bf16"   ? Precision::BF16
                            : std::string(pname) == "tf32" ? Precision::TF32
                                                           : Precision::FP32;
          // The saved buffer and scratch of the batched call hold E members' (the members' calls use slices).
          MemberLayer ml(shape, members);
          const SsdParams q = ml.batched();
          const double fe = us_per_call([&] { ml.fwd_each(); }), be = us_per_call([&] { ml.bwd_each(); });
          const double fb = us_per_call([&] { ml.all.fwd(q); }), bb = us_per_call([&] { ml.all.bwd(q); });
          std::printf("%-8s %-5s %-8s %4d %12.1f %12.1f %12.1f %12.1f %7.2fx\n",
                      (std::string(s.name) + "/" + std::to_string(shape.B)).c_str(), pname,
                      mlalpha::gpu::ssd_uses_walk(shape) ? "walk" : "chunked", members, fe, fb, be, bb,
                      (fe + be) / (fb + bb));
          std::fflush(stdout);
        }
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ml-alpha-ssd-bench: %s\n", e.what());
      return 1;
    }
    return 0;
  }
  if (digests) {
    try {
      for (const LayerShape& s : kShapes) {
        if (shapes.find(s.name) == std::string::npos) continue;
        SsdParams shape = s.p;
        if (batch > 0) shape.B = batch;
        Layer layer(shape);
        for (const char* pname : {"fp32", "tf32", "bf16"}) {
          if (precisions.find(pname) == std::string::npos) continue;
          digest(s.name, layer, std::string(pname) == "bf16"   ? Precision::BF16
                                : std::string(pname) == "tf32" ? Precision::TF32
                                                               : Precision::FP32,
                 pname);
        }
        conv_digest(s.name, shape);
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ml-alpha-ssd-bench: %s\n", e.what());
      return 1;
    }
    return 0;
  }
  if (clusters) {
    try {
      for (const LayerShape& s : kShapes) {
        if (shapes.find(s.name) == std::string::npos) continue;
        SsdParams q = s.p;
        if (batch > 0) q.B = batch;
        for (const char* pname : {"fp32", "tf32", "bf16"}) {
          if (precisions.find(pname) == std::string::npos) continue;
          q.precision = std::string(pname) == "bf16"   ? Precision::BF16
                        : std::string(pname) == "tf32" ? Precision::TF32
                                                       : Precision::FP32;
          q.algo = SsdAlgo::kWalk;
          std::printf("%s/%d %s reverse walk, clusters at once / launched:", s.name, q.B, pname);
          for (const int cs : {8, 4, 2})
            if ((q.H / q.G) % cs == 0)
              std::printf("  %d heads %d / %d", cs, mlalpha::gpu::ssd_walk_bwd_max_active_clusters(q, cs),
                          q.B * q.H / cs);
          std::printf("  -> takes %d\n", mlalpha::gpu::ssd_walk_bwd_cluster_heads(q));
        }
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ml-alpha-ssd-bench: %s\n", e.what());
      return 1;
    }
    return 0;
  }
  try {
    std::printf("%-5s %-5s %-8s %10s %10s %10s   %s%s\n", "shape", "prec", "path", "fwd us", "bwd us", "total",
                "walk vs chunked rel-L2 (y, dxbc, ddelta)", state ? "   [--state: h0 in, h_last out]" : "");
    for (const LayerShape& s : kShapes) {
      if (shapes.find(s.name) == std::string::npos) continue;
      SsdParams shape = s.p;
      if (batch > 0) shape.B = batch;
      const std::string label = batch > 0 ? std::string(s.name) + "/" + std::to_string(batch) : s.name;
      Layer layer(shape, state);
      for (const char* pname : {"fp32", "tf32", "bf16"}) {
        if (precisions.find(pname) == std::string::npos) continue;
        const Precision prec = std::string(pname) == "bf16"   ? Precision::BF16
                               : std::string(pname) == "tf32" ? Precision::TF32
                                                              : Precision::FP32;
        std::vector<float> out[2][3];
        for (int k = 0; k < 2; ++k) {
          SsdParams q = shape;
          q.precision = prec;
          q.algo = k == 0 ? SsdAlgo::kChunked : SsdAlgo::kWalk;
          const double f = us_per_call([&] { layer.fwd(q); });
          const double b = us_per_call([&] { layer.bwd(q); });
          layer.fwd(q);
          layer.bwd(q);
          MLALPHA_CUDA_CHECK(cudaDeviceSynchronize());
          out[k][0] = download(layer.y), out[k][1] = download(layer.dxbc), out[k][2] = download(layer.ddelta);
          std::printf("%-5s %-5s %-8s %10.1f %10.1f %10.1f", label.c_str(), pname, k == 0 ? "chunked" : "walk", f, b,
                      f + b);
          if (k == 1)
            std::printf("   %.2e %.2e %.2e", rel_l2(out[1][0], out[0][0]), rel_l2(out[1][1], out[0][1]),
                        rel_l2(out[1][2], out[0][2]));
          std::printf("\n");
          std::fflush(stdout);
        }
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ml-alpha-ssd-bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
