#pragma once
// The built-in synthetic dataset: a panel whose targets are a known nonlinear function of past
// features plus noise, so a model that learns shows it (ml-alpha synth, and the default of train).
//   features: AR(1) per instrument, x_t,f = φ_f x_{t−1},f + sqrt(1 − φ_f²) ε  (φ_f from 0.2 to 0.95)
//   target k:  y_t = 0.8·tanh(1.5·m_t) + 0.5·x_t,a · x_{t−1},b + noise·ε,  m_t = EMA_0.2 of x_·,c
//   with a, b, c the features k, k+1, k+2 (mod F).
// The long-memory variant (SynthParams::memory = M > 0), the same features:
//   target k:  y_t = s·m_t + noise·ε,  m_t = (1 − α) m_{t−1} + α x_t,a,  α = 1/M,  m_{−1} = 0,  s = √((2 − α)/α)
//   (s makes m's variance about 1 for a white feature): a row t's target depends on the feature ~M rows back, so a
//   window of L < M rows from a zero state sees only a part of it (correlation √(1 − (1 − α)^(2L)) for a white
//   feature), a state carried from the series' start all of it.
#include <cstdint>

#include "data/panel.h"
#include "mlalpha/config_types.h"  // SynthParams

namespace mlalpha {

Panel make_synthetic(const SynthParams& p);

}  // namespace mlalpha
