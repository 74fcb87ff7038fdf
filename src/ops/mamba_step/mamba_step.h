#pragma once
// One bar of the perception model in its recurrent (`carry`) form, for I instruments at once (DESIGN
// section 1, section 7 "Streaming"). Per layer and instrument the state is
//   the conv window  (W − 1, conv_dim): the last W − 1 pre-conv xBC rows, oldest first (zeros before the first);
//   the SSM state    (H, P, N).
// A bar advances both exactly as the full-sequence forward does at its next position:
//   xBC_t ← SiLU(bias + Σ_{k<W−1} w[c,k]·window[k,c] + w[c,W−1]·xBC_t[c]),  window ← (window[1:], xBC_t)
//   s_t = exp(Δ_t A) s_{t−1} + Δ_t x_t B_tᵀ,   y_t = s_t C_t + D x_t
// and the rest of the layer (norms, projections) is row-wise. A row whose `commit` flag is 0 (an instrument
// absent at this bar) is computed but leaves its window and state untouched.
//
// CPU: mamba_step_ref.cpp (the new recurrent pieces; the row-wise ops are the existing references).
// GPU: step_proj.cu (input, in_proj + conv + softplus, out_proj + residual, head), step_ssd.cu (the state step);
// or step_fused.cu, a whole layer as one kernel (a thread-block cluster of the H heads per tile of instruments).
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/cuda_fwd.h"

namespace mlalpha {

// The model's dimensions for a bar of I instruments (model/model_step.h builds it from a ModelConfig).
struct StepDims {
  int I = 0;             // instruments (rows of every activation)
  int F = 0, K = 0;      // features, targets
  int D = 0;             // model width
  int di = 0;            // d_inner = H·P
  int H = 0, P = 0;      // heads, head dim
  int G = 1, N = 0;      // groups of B, C (and of the gated norm), state size
  int W = 4;             // conv width (the window holds W − 1 rows)
  int cd = 0;            // conv_dim = d_inner + 2·G·N
  int proj = 0;          // in_proj width = 2·d_inner + 2·G·N + H: z (di) | xBC (cd) | dt (H)
  float dt_lo = 0.0f, dt_hi = 0.0f;  // clamp of Δ (hi = +inf: none)
  // GPU, programmatic dependent launch: each kernel lets the next one of the bar be scheduled as soon as it
  // starts (true: small bars, where the next kernel's blocks find free SMs and load their weights meanwhile) or
  // only when it has done its work (false: large bars, whose grids would otherwise share the SMs with the next
  // one's waiting blocks). Either way every kernel waits for its predecessor's completion before reading its
  // results: the bits are the same.
  bool early_dependents = false;
  size_t conv_floats() const { return size_t(W - 1) * cd; }      // one instrument's window, one layer
  size_t ssm_floats() const { return size_t(H) * P * N; }         // one instrument's SSM state, one layer
};

// ---- CPU references of the recurrent pieces (T = float or double) ----
namespace ref {

// xnew (M, ld_x)→(C): this bar's pre-conv row; w (C, W); bias (C); window (M, W−1, C) read, and shifted to
// take xnew where commit[m] != 0 (commit null: every row); y (M, C) = SiLU(conv) written.
// The sum is the reference conv's (conv1d_ref.cpp): bias, then the taps oldest first.
template <typename T>
void conv_step(int M, int C, int W, int ld_x, const T* xnew, const T* w, const T* bias, T* window, T* y,
               const uint8_t* commit);

// x (M, ld)→(H, P), Bm, Cm (M, ld)→(G, N) (head h reads group ⌊h·G/H⌋); delta (M, H); A_log, Dskip (H);
// state (M, H, P, N) advanced where commit[m] != 0 (null: every row); y (M, H, P) written from the advanced
// state either way. The arithmetic is ssd_fwd_recurrent's at one step (ssd_ref.cpp).
template <typename T>
void ssd_step(const StepDims& d, int M, int ld, const T* x, const T* delta, const T* A_log, const T* Bm,
              const T* Cm, const T* Dskip, T* state, T* y, const uint8_t* commit);

}  // namespace ref

// ---- GPU ----
// Device pointers of one layer's weights inside the trained fp32 arena (model/layout.h offsets).
struct StepLayerWeights {
  const float* norm_w = nullptr;      // (D)
  const float* in_proj_w = nullptr;   // (proj, D)
  const float* conv_w = nullptr;      // (cd, W)
  const float* conv_b = nullptr;      // (cd)
  const float* dt_bias = nullptr;     // (H)
  const float* A_log = nullptr;       // (H)
  const float* Dskip = nullptr;       // (H)
  const float* gnorm_w = nullptr;     // (di)
  const float* out_proj_w = nullptr;  // (D, di)
  // The fused layer's copies of in_proj and out_proj, per head (pack_fused_weights); null on the unfused path.
  // Each is head h's slice as tensor-core A tiles in fragment order, zero-padded (step_fused.cu).
  const float* in_proj_fused = nullptr;   // (H, ⌈nc/16⌉, ⌈D/8⌉, 32, 4): head h's nc in_proj columns × D
  const float* out_proj_fused = nullptr;  // (H, ⌈D/16⌉, ⌈P/8⌉, 32, 4): out_proj's D rows × head h's P columns
};

// One layer's state (device).
struct StepLayerState {
  float* conv = nullptr;  // (I, W−1, cd)
  float* ssm = nullptr;   // (I, H, P, N)
};

// The bar's activations (device), allocated once for I instruments.
struct StepBuffers {
  float* h = nullptr;           // (I, D) the residual stream
  float* zxo = nullptr;         // (I, proj): z (raw) | SiLU(conv(xBC)) | Δ, the in_proj columns after their epilogue
  float* v = nullptr;           // (I, di): y ⊙ SiLU(z) ⊙ gnorm_w (the gated norm before its 1/rms)
  float* ss = nullptr;          // (I, H): Σ_p (y ⊙ SiLU(z))² per head (the gated norm's sums, per head)
  uint8_t* present = nullptr;   // (I): 1 where the instrument has a row at this bar
};

namespace gpu {

// How the bar's kernels are launched: pdl = programmatic dependent launch (sm_90+: a kernel's blocks are
// scheduled while its predecessor drains; each waits with griddepcontrol.wait before touching its inputs).
struct StepLaunch {
  cudaStream_t stream = nullptr;
  bool pdl = false;
};

// x (I, F), mask (I) (may be host-mapped memory): present[i] = mask[i] != 0 and some feature of row i is
// finite; non-finite features count as 0 (the NaN fill); h (I, D) = x·W_inᵀ + b. w_inT (F, D) is input_proj.weight
// transposed.
void step_input(const StepDims& d, const float* x, const uint8_t* mask, const float* w_inT, const float* b_in,
                const StepBuffers& buf, StepLaunch launch);

// One Mamba2 layer with its residual: h ← h + Mamba2(RMSNorm(h)) for every row; the layer's window and SSM
// state advance where present. Three kernels: RMSNorm + in_proj + conv step + softplus, the SSM step + gate,
// the gated norm's 1/rms + out_proj + residual.
void step_layer(const StepDims& d, const StepLayerWeights& w, const StepLayerState& s, const StepBuffers& buf,
                StepLaunch launch);

// The same layer as ONE kernel (step_fused.cu): a thread-block cluster of H blocks, one per head, per tile of 8
// instruments (4 on bars of fewer than 256); the heads exchange B|C, Σu² and their out_proj partials through distributed shared memory. w's
// in_proj_fused / out_proj_fused must hold pack_fused_weights' layout. Within fp32 rounding of step_layer, not
// its bits; an instrument's bits do not depend on the instrument count either way.
void step_layer_fused(const StepDims& d, const StepLayerWeights& w, const StepLayerState& s, const StepBuffers& buf,
                      StepLaunch launch);
// Why the fused layer cannot run this model on this device (empty: it can): more than 8 heads, head_dim > 64,
// d_state > 128, no cluster launch, or a cluster that does not fit. Checks every CUDA call it makes.
std::string fused_step_unsupported(const StepDims& d, int device);
// Host: the packed weights of one layer, from its in_proj (proj, D) and out_proj (D, di) weights.
size_t fused_in_proj_floats(const StepDims& d);
size_t fused_out_proj_floats(const StepDims& d);
void pack_fused_weights(const StepDims& d, const float* in_proj_w, const float* out_proj_w, float* in_pack,
                        float* out_pack);

// out (I, K) (may be host-mapped memory) = RMSNorm_f(h)·W_headᵀ + b_head where present, NaN elsewhere.
void step_head(const StepDims& d, const float* norm_f, const float* w_head, const float* b_head,
               const StepBuffers& buf, float* out, StepLaunch launch);

}  // namespace gpu

}  // namespace mlalpha
