#pragma once
// Model and training configuration (DESIGN sections 1 and 2). validate() rejects impossible values
// with a message naming the field, the value and what was expected.
#include <cstdint>
#include <limits>
#include <string>

namespace mlalpha {

struct ModelConfig {
  int F = 8;        // input features
  int K = 1;        // targets
  int D = 32;       // model width
  int NL = 2;       // layers
  int expand = 2;   // d_inner = expand * D
  int P = 16;       // head dim
  int G = 1;        // groups for B, C (and the gated norm)
  int N = 16;       // state size
  int W = 4;        // conv width
  int Q = 64;       // SSD chunk length
  float dt_min = 1e-3f, dt_max = 1e-1f, dt_init_floor = 1e-4f;  // dt_bias initialisation
  float dt_limit_lo = 0.0f;                                     // clamp of delta (0, inf = none)
  float dt_limit_hi = std::numeric_limits<float>::infinity();

  int d_inner() const { return expand * D; }
  int H() const { return d_inner() / P; }
  int conv_dim() const { return d_inner() + 2 * G * N; }
  int in_proj_dim() const { return 2 * d_inner() + 2 * G * N + H(); }
  void validate() const;
};

enum class LossKind { MSE, Huber };
enum class Schedule { Cosine, Constant };

struct TrainConfig {
  int B = 16;             // windows per batch
  int L = 64;             // window length
  int64_t steps = 300;
  float lr = 1e-3f;
  float min_lr_ratio = 0.1f;  // cosine floor as a fraction of lr
  int64_t warmup = 20;        // linear warm-up steps
  Schedule schedule = Schedule::Cosine;
  float weight_decay = 0.01f;
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
  float clip = 1.0f;          // global-norm clip; <= 0 disables
  LossKind loss = LossKind::MSE;
  float huber_delta = 1.0f;
  int burn_in = 0;            // positions t < burn_in carry no loss
  uint64_t seed = 1;
  int64_t log_every = 25;
  void validate() const;
};

std::string to_string(LossKind k);
std::string to_string(Schedule s);
LossKind parse_loss(const std::string& s);
Schedule parse_schedule(const std::string& s);

}  // namespace mlalpha
