#pragma once
// Learning-rate schedule (DESIGN section 2): linear warm-up over `warmup` steps, then cosine decay to
// lr·min_lr_ratio at the last step, or constant. Host-device so the GPU step computes it from its own
// step counter and the CPU trainer gets the same value.
#include <cmath>
#include <cstdint>

#include "core/hd.h"
#include "mlalpha/config.h"

namespace mlalpha {

struct ScheduleParams {
  float lr = 1e-3f;
  float min_lr_ratio = 0.1f;
  int64_t warmup = 0;
  int64_t total = 1;
  bool cosine = true;
};

// The schedule a training config asks for (both trainers build it here, so they cannot disagree).
inline ScheduleParams schedule_params(const TrainConfig& tc) {
  return {tc.lr, tc.min_lr_ratio, tc.warmup, tc.steps, tc.schedule == Schedule::Cosine};
}

// step is 0-based: the lr used by the (step+1)-th update.
MLALPHA_HD float lr_at(const ScheduleParams& s, int64_t step) {
  if (step < s.warmup) return s.lr * float(step + 1) / float(s.warmup);
  if (!s.cosine) return s.lr;
  const int64_t span = s.total - s.warmup;
  const float frac = span <= 1 ? 1.0f : float(step - s.warmup) / float(span - 1);
  const float floor_lr = s.lr * s.min_lr_ratio;
  return floor_lr + 0.5f * (s.lr - floor_lr) * (1.0f + cosf(3.14159265358979f * (frac > 1.0f ? 1.0f : frac)));
}

}  // namespace mlalpha
