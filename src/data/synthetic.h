#pragma once
// The built-in synthetic dataset: a panel whose targets are a known nonlinear function of past
// features plus noise, so a model that learns shows it (ml-alpha synth, and the default of train).
//   features: AR(1) per instrument, x_t,f = φ_f x_{t−1},f + sqrt(1 − φ_f²) ε  (φ_f from 0.2 to 0.95)
//   target k:  y_t = 0.8·tanh(1.5·m_t) + 0.5·x_t,a · x_{t−1},b + noise·ε,  m_t = EMA_0.2 of x_·,c
//   with a, b, c the features k, k+1, k+2 (mod F).
#include <cstdint>

#include "data/panel.h"
#include "mlalpha/config_types.h"  // SynthParams

namespace mlalpha {

Panel make_synthetic(const SynthParams& p);

}  // namespace mlalpha
