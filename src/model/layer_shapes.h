#pragma once
// The op parameters of the perception model for M = B·L rows, derived from the config in one place so
// the CPU reference and the GPU model cannot drift apart (DESIGN section 1 shapes).
#include <algorithm>

#include "mlalpha/config_types.h"
#include "ops/carry_rows/carry_rows.h"
#include "ops/conv1d/conv1d.h"
#include "ops/dt_softplus/dt_softplus.h"
#include "ops/gated_rmsnorm/gated_rmsnorm.h"
#include "ops/linear/linear.h"
#include "ops/loss/loss.h"
#include "ops/rmsnorm/rmsnorm.h"
#include "ops/ssd/ssd.h"

namespace mlalpha {

struct LayerShapes {
  int M, D, di, H, GN, cd, proj;  // rows, width, d_inner, heads, G·N, conv_dim, in_proj output width
  LinearParams input, head;       // x (M, F) → h (M, D);  h (M, D) → out (M, K)
  RmsNormParams norm;             // the pre-mixer and final RMSNorm
  LinearParams in_proj, out_proj;
  Conv1dParams conv;              // over the xBC columns of the in_proj output
  DtParams dt;                    // over its last H columns
  SsdParams ssd;                  // x, B, C inside the conv output (row stride conv_dim)
  GatedNormParams gnorm;          // z is the first d_inner columns of the in_proj output
  LayerShapes(const ModelConfig& c, int B, int L)
      : M(B * L), D(c.D), di(c.d_inner()), H(c.H()), GN(c.G * c.N), cd(c.conv_dim()), proj(c.in_proj_dim()),
        input{M, c.F, D},
        head{M, D, c.K},
        norm{M, D},
        in_proj{M, D, proj},
        out_proj{M, di, D},
        conv{B, L, cd, c.W, proj},
        dt{M, H, proj, c.dt_limit_lo, c.dt_limit_hi},
        ssd{B, L, H, c.P, c.G, c.N, c.Q, cd},
        gnorm{M, di, c.G, proj} {}
};

// A batch's carried states (stateful training, train.state = "carry"; docs/decisions.md "Stateful training"):
// per layer the conv window and the SSM state of each of the B windows, layer-major in the stream's layout
// (StepLayerState): conv (NL, B, W − 1, conv_dim) the last W − 1 pre-conv xBC rows, oldest first; ssm (NL, B, H,
// P, N). The in pointers are the states before the window's first row (the ops' window0 and h0), the out
// pointers receive the states after its last row (window_last, h_last); out may be in itself (the models copy
// the in states first: their backward recomputes from them). Gradients stop at
// the window's boundary: nothing flows into the in states (truncated backpropagation through time).
template <typename T>
struct CarryState {
  const T* conv_in = nullptr;  // (NL, B, W − 1, conv_dim)
  const T* ssm_in = nullptr;   // (NL, B, H, P, N)
  T* conv_out = nullptr;       // (NL, B, W − 1, conv_dim) written when non-null
  T* ssm_out = nullptr;        // (NL, B, H, P, N) written when non-null
  // Lanes with fewer rows than L (time batches over missing dates; ops/carry_rows/carry_rows.h): lane b's first
  // rows[b] rows are present, the rest padding that moves no state (Δ masked to 0 there, the out states taken
  // after the last present row), and loss() takes its targets in date order, the predictions moved to
  // dates[b, r] first. Both null (every lane full): the bits of a window without them. Device pointers on the GPU.
  const int* rows = nullptr;   // (B)
  const int* dates = nullptr;  // (B, L)
};
// Floats of one layer's conv window and SSM state for B windows.
inline size_t carry_conv_floats(const ModelConfig& c, int B) { return size_t(B) * (c.W - 1) * c.conv_dim(); }
inline size_t carry_ssm_floats(const ModelConfig& c, int B) { return size_t(B) * c.H() * c.P * c.N; }

// Named column slices of a layer's activations (or of their gradients: T = float or const float), so call
// sites never add column offsets themselves. Row r of a slice starts at base + r·ld.
// The in_proj output zx (M, proj): z (d_inner), xBC (conv_dim), dt (H), in that order (DESIGN section 1).
template <typename T>
struct ZxCols {
  T* z;    // (M, proj)→(d_inner) the gate of the gated RMSNorm
  T* xBC;  // (M, proj)→(conv_dim) the conv1d input
  T* dt;   // (M, proj)→(H)
  int ld;  // proj
};
template <typename T>
ZxCols<T> zx_cols(const LayerShapes& s, T* zx /* (M, proj) */) {
  return {zx, zx + s.di, zx + s.di + s.cd, s.proj};
}
// The conv output xbc (M, conv_dim): x (d_inner = H·P), B (G·N), C (G·N).
template <typename T>
struct XbcCols {
  T* x;    // (M, conv_dim)→(H, P)
  T* B;    // (M, conv_dim)→(G, N)
  T* C;    // (M, conv_dim)→(G, N)
  int ld;  // conv_dim
};
template <typename T>
XbcCols<T> xbc_cols(const LayerShapes& s, T* xbc /* (M, conv_dim) */) {
  return {xbc, xbc + s.di, xbc + s.di + s.GN, s.cd};
}

// The GPU backward's parameter-gradient partials (per-block sums over rows, ops/common/colsum.h), each op's
// in its own region of one buffer so that a single ColsumBatch launch at the end of the backward adds them
// all: per layer the RMSNorm's (dw), the gated norm's (dw), softplus's (ddt_bias) and conv's (dw, dbias), the
// SSD's (dA_log, dD over the windows: gpu::SsdParamDefer, used where the SSD takes the walks), then, in BF16,
// in_proj's and out_proj's dW K-split partials (gpu::linear_dw_partial_floats; 0 where the shape takes no split);
// after the layers the final norm's, the input and head biases', and (BF16) the input and head projections' dW
// partials. Offsets and sizes in floats.
struct GradPartials {
  size_t norm, gnorm, dt, conv, ssd, in_dw, out_dw, per_layer;  // one layer's regions, in this order
  size_t final_norm, input_db, head_db, input_dw, head_dw;  // offsets after the NL layers
  size_t total;
  GradPartials(const LayerShapes& s, int NL, Precision precision)
      : norm(gpu::rmsnorm_bwd_workspace_floats(s.norm)),
        gnorm(gpu::gated_rmsnorm_bwd_workspace_floats(s.gnorm)),
        dt(gpu::dt_softplus_bwd_workspace_floats(s.dt)),
        conv(gpu::conv1d_silu_bwd_workspace_floats(s.conv)),
        // rounded to 64 floats (256 bytes, the largest alignment a GEMM plan is keyed by: linear_gpu.cpp), so the
        // regions after it keep the alignment, and with it the cuBLASLt algorithm and bits, they had without it
        ssd((gpu::ssd_bwd_param_partials_floats(s.ssd) + 63) / 64 * 64),
        in_dw(precision == Precision::BF16 ? gpu::linear_dw_partial_floats(s.in_proj) : 0),
        out_dw(precision == Precision::BF16 ? gpu::linear_dw_partial_floats(s.out_proj) : 0),
        per_layer(norm + gnorm + dt + conv + ssd + in_dw + out_dw),
        final_norm(size_t(NL) * per_layer),
        input_db(final_norm + norm),
        head_db(input_db + gpu::linear_bwd_workspace_floats(s.input)),
        input_dw(head_db + gpu::linear_bwd_workspace_floats(s.head)),
        head_dw(input_dw + (precision == Precision::BF16 ? gpu::linear_dw_partial_floats(s.input) : 0)),
        total(head_dw + (precision == Precision::BF16 ? gpu::linear_dw_partial_floats(s.head) : 0)) {}
  size_t layer(int l) const { return size_t(l) * per_layer; }  // + 0, norm, norm + gnorm, … for each op
};

// Floats of the GPU model's shared op scratch (the SSD backward's and the loss's, used in turn), beside
// GradPartials; the model and the memory estimate both size it here.
inline size_t gpu_scratch_floats(const LayerShapes& s, int B, int L, int K) {
  return std::max({gpu::ssd_bwd_workspace_floats(s.ssd), gpu::loss_workspace_floats_any(B, L, K), size_t(1)});
}

}  // namespace mlalpha
