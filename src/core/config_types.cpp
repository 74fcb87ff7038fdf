#include "mlalpha/config_types.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <sstream>

#include "core/error.h"
#include "core/shortest.h"

namespace mlalpha {
namespace {

std::string num(float v) { return shortest_text(v); }

template <typename T>
void positive(const char* name, T v) {
  std::ostringstream s;
  s << name << " must be >= 1, got " << v;
  require(v >= 1, s.str());
}

// Products of settings that size a dimension or a row count held in a 32-bit int (the parameter table's
// shapes, the kernels' row counts): refused with the settings named instead of wrapping to a negative size.
void fits_int(int64_t v, const std::string& what) {
  require(v <= std::numeric_limits<int>::max(),
          what + " = " + std::to_string(v) + " exceeds " + std::to_string(std::numeric_limits<int>::max()) +
              " (a dimension or row count must fit in 32 bits)");
}

}  // namespace

void ModelConfig::validate() const {
  positive("the data's feature count (model F)", F);
  positive("the data's target count (model K)", K);
  positive("model.d_model", D);
  positive("model.layers", NL);
  positive("model.expand", expand);
  positive("model.head_dim", P);
  positive("model.groups", G);
  positive("model.d_state", N);
  positive("model.conv_width", W);
  positive("model.chunk", Q);
  require(Q <= kMaxChunk, "model.chunk = " + std::to_string(Q) + " is beyond " + std::to_string(kMaxChunk) +
                              ": a chunk longer than the training window (train.seq_len) computes nothing more, and the "
                              "CPU's chunk scratch grows with chunk²; set model.chunk ≤ train.seq_len (e.g. 64)");
  const int64_t di = int64_t(expand) * D, gn2 = 2 * int64_t(G) * N;
  fits_int(di, "d_inner = model.expand × model.d_model = " + std::to_string(expand) + " × " + std::to_string(D));
  fits_int(2 * di + gn2 + di / P, "the in_proj width 2·d_inner + 2·model.groups·model.d_state + H");
  require(d_inner() % P == 0, "model.head_dim = " + std::to_string(P) + " must divide d_inner = model.expand × model.d_model = " +
                                  std::to_string(d_inner()) + " into whole heads");
  require(H() % G == 0, "model.groups = " + std::to_string(G) + " must divide the number of heads H = d_inner / model.head_dim = " +
                            std::to_string(H()));
  require(d_inner() % G == 0, "model.groups = " + std::to_string(G) + " must divide d_inner = " + std::to_string(d_inner()));
  require(dt_min > 0 && dt_max >= dt_min, "model.dt_min/dt_max must satisfy 0 < dt_min <= dt_max, got " +
                                              num(dt_min) + ", " + num(dt_max));
  require(dt_init_floor > 0, "model.dt_init_floor must be > 0, got " + num(dt_init_floor));
  require(dt_limit_lo >= 0 && dt_limit_hi > dt_limit_lo,
          "model.dt_limit_lo and model.dt_limit_hi must satisfy 0 <= dt_limit_lo < dt_limit_hi, got (" + num(dt_limit_lo) + ", " +
              num(dt_limit_hi) + ")");
}

void TrainConfig::validate() const {
  positive("train.batch", B);
  positive("train.seq_len", L);
  fits_int(int64_t(B) * L, "the rows per step train.batch × train.seq_len = " + std::to_string(B) + " × " + std::to_string(L));
  positive("train.steps", steps);
  require(steps <= kMaxSteps, "train.steps = " + std::to_string(steps) + " is beyond the supported " +
                                  std::to_string(kMaxSteps) + " (2^40)");
  require(std::isfinite(lr) && lr > 0, "train.lr must be a finite number > 0, got " + num(lr));
  require(min_lr_ratio >= 0 && min_lr_ratio <= 1, "train.min_lr_ratio must be in [0, 1], got " + num(min_lr_ratio));
  require(warmup >= 0, "train.warmup must be >= 0, got " + std::to_string(warmup));
  require(warmup < steps, "train.warmup = " + std::to_string(warmup) + " must be less than train.steps = " +
                              std::to_string(steps) + " (the learning rate would never reach train.lr): lower train.warmup (--warmup), "
                              "leave it unset (a tenth of the steps, at most 20) or raise train.steps");
  require(weight_decay >= 0, "train.weight_decay must be >= 0, got " + num(weight_decay));
  require(beta1 >= 0 && beta1 < 1, "train.beta1 must be in [0, 1), got " + num(beta1));
  require(beta2 >= 0 && beta2 < 1, "train.beta2 must be in [0, 1), got " + num(beta2));
  require(eps > 0, "train.eps must be > 0, got " + num(eps));
  require(std::isfinite(clip), "train.clip must be finite (<= 0 disables clipping), got " + num(clip));
  require(huber_delta > 0, "train.huber_delta must be > 0, got " + num(huber_delta));
  require(burn_in >= 0 && burn_in < L, "train.burn_in must be in [0, train.seq_len) = [0, " + std::to_string(L) + "), got " +
                                           std::to_string(burn_in));
  positive("train.log_every", log_every);
  require(models >= 1 && models <= kMaxPopulation, "train.models must be in [1, " + std::to_string(kMaxPopulation) +
                                                       "] (models trained together), got " + std::to_string(models));
  positive("train.dates", dates);
  require(instruments >= 0, "train.instruments must be >= 0 (0 = every instrument), got " + std::to_string(instruments));
  require(loss != LossKind::IC || batch_mode == BatchMode::Time,
          "train.loss = 'ic' correlates predictions across the instruments of one date, so it needs "
          "train.batch = \"time\" (cross-sectional batches), got train.batch = " + std::to_string(B));
}

int TrainConfig::cross_section(int N) const {
  if (batch_mode != BatchMode::Time) return 0;
  return instruments > 0 && instruments < N ? instruments : N;
}

int TrainConfig::windows_per_step(int N) const {
  if (batch_mode != BatchMode::Time) return B;
  const int64_t b = int64_t(dates) * cross_section(N);
  return b > std::numeric_limits<int>::max() ? std::numeric_limits<int>::max() : int(b);
}

std::string to_string(Precision p) { return p == Precision::FP32 ? "fp32" : p == Precision::TF32 ? "tf32" : "bf16"; }
Precision parse_precision(const std::string& s, const std::string& what) {
  if (s == "fp32") return Precision::FP32;
  if (s == "tf32") return Precision::TF32;
  if (s == "bf16") return Precision::BF16;
  throw Error(what + " must be 'fp32', 'tf32' or 'bf16', got '" + s + "'");
}

std::string to_string(LossKind k) { return k == LossKind::MSE ? "mse" : k == LossKind::Huber ? "huber" : "ic"; }
std::string to_string(BatchMode m) { return m == BatchMode::Time ? "time" : "windows"; }
std::string to_string(StateMode m) { return m == StateMode::Carry ? "carry" : "zero"; }
StateMode parse_state_mode(const std::string& s, const std::string& what) {
  if (s == "zero") return StateMode::Zero;
  if (s == "carry") return StateMode::Carry;
  throw Error(what + " must be 'zero' or 'carry', got '" + s + "'");
}
std::string to_string(Schedule s) { return s == Schedule::Cosine ? "cosine" : "constant"; }

LossKind parse_loss(const std::string& s) {
  if (s == "mse") return LossKind::MSE;
  if (s == "huber") return LossKind::Huber;
  if (s == "ic") return LossKind::IC;
  throw Error("train.loss must be 'mse', 'huber' or 'ic', got '" + s + "'");
}
Schedule parse_schedule(const std::string& s) {
  if (s == "cosine") return Schedule::Cosine;
  if (s == "constant") return Schedule::Constant;
  throw Error("train.schedule must be 'cosine' or 'constant', got '" + s + "'");
}

}  // namespace mlalpha
