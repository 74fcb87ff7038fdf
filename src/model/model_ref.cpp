#include "model/model_ref.h"

#include <algorithm>

#include "core/error.h"
#include "model/layer_shapes.h"

namespace mlalpha {

template <typename T>
RefModel<T>::RefModel(const ModelLayout& layout, bool chunked_ssd) : lay_(layout), chunked_(chunked_ssd) {}

template <typename T>
const std::vector<T>& RefModel<T>::forward(const T* P, const T* x, int B, int L, const CarryState<T>* carry) {
  const ModelConfig& c = lay_.cfg;
  require(B >= 1 && L >= 1, "RefModel::forward: B and L must be >= 1");
  B_ = B;
  L_ = L;
  const LayerShapes s(c, B, L);
  const size_t nconv = carry_conv_floats(c, B), nssm = carry_ssm_floats(c, B);
  const bool conv_in = carry && carry->conv_in, ssm_in = carry && carry->ssm_in;
  conv_in_.assign(conv_in ? carry->conv_in : nullptr, conv_in ? carry->conv_in + c.NL * nconv : nullptr);
  ssm_in_.assign(ssm_in ? carry->ssm_in : nullptr, ssm_in ? carry->ssm_in + c.NL * nssm : nullptr);
  require(!carry || (carry->rows == nullptr) == (carry->dates == nullptr), "RefModel::forward: CarryState rows without dates");
  const bool mapped = carry && carry->rows;
  rows_.assign(mapped ? carry->rows : nullptr, mapped ? carry->rows + B : nullptr);
  dates_.assign(mapped ? carry->dates : nullptr, mapped ? carry->dates + size_t(s.M) : nullptr);
  const RowMap map{B, L, mapped ? rows_.data() : nullptr, mapped ? dates_.data() : nullptr};
  x_.assign(x, x + size_t(s.M) * c.F);
  h_.resize(size_t(s.M) * s.D);
  ref::linear_fwd<T>(s.input, {.x = x, .w = P + lay_.in_w, .b = P + lay_.in_b}, h_.data());
  acts_.resize(c.NL);
  for (int l = 0; l < c.NL; ++l) {
    const LayerOffsets& o = lay_.layers[l];
    LayerActs& a = acts_[l];
    a.h_in = h_;
    a.hn.resize(size_t(s.M) * s.D);
    a.rstd.resize(s.M);
    ref::rmsnorm_fwd<T>(s.norm, {.x = h_.data(), .w = P + o.norm_w}, a.hn.data(), a.rstd.data());
    a.zx.resize(size_t(s.M) * s.proj);
    ref::linear_fwd<T>(s.in_proj, {.x = a.hn.data(), .w = P + o.in_proj_w}, a.zx.data());
    const ZxCols<const T> zx = zx_cols<const T>(s, a.zx.data());
    a.xbc.resize(size_t(s.M) * s.cd);
    ref::conv1d_silu_fwd<T>(s.conv,
                            {.x = zx.xBC, .w = P + o.conv_w, .bias = P + o.conv_b,
                             .window0 = conv_in ? conv_in_.data() + l * nconv : nullptr,
                             .window_last = carry && carry->conv_out && !mapped ? carry->conv_out + l * nconv : nullptr},
                            a.xbc.data());
    a.delta.resize(size_t(s.M) * s.H);
    ref::dt_softplus_fwd<T>(s.dt, {.dt = zx.dt, .dt_bias = P + o.dt_bias}, a.delta.data());
    if (mapped) {  // padding rows: Δ = 0 moves no state; the conv's window ends at the last present row
      if (carry->conv_out)
        ref::window_tail<T>(s.conv, map, zx.xBC, conv_in ? conv_in_.data() + l * nconv : nullptr,
                            carry->conv_out + l * nconv);
      ref::mask_rows<T>(map, s.H, s.H, a.delta.data());
    }
    a.y.resize(size_t(s.M) * s.di);
    const XbcCols<const T> xbc = xbc_cols<const T>(s, a.xbc.data());
    (chunked_ ? ref::ssd_fwd_chunked<T> : ref::ssd_fwd_recurrent<T>)(
        s.ssd,
        {.x = xbc.x, .delta = a.delta.data(), .A_log = P + o.A_log, .Bm = xbc.B, .Cm = xbc.C, .Dskip = P + o.D,
         .h0 = ssm_in ? ssm_in_.data() + l * nssm : nullptr,
         .h_last = carry && carry->ssm_out ? carry->ssm_out + l * nssm : nullptr},
        a.y.data());
    a.gout.resize(size_t(s.M) * s.di);
    a.grstd.resize(size_t(s.M) * c.G);
    ref::gated_rmsnorm_fwd<T>(s.gnorm, {.y = a.y.data(), .z = zx.z, .w = P + o.gnorm_w}, a.gout.data(),
                              a.grstd.data());
    std::vector<T> mix(size_t(s.M) * s.D);
    ref::linear_fwd<T>(s.out_proj, {.x = a.gout.data(), .w = P + o.out_proj_w}, mix.data());
    for (size_t i = 0; i < mix.size(); ++i) h_[i] += mix[i];
  }
  hfn_.resize(size_t(s.M) * s.D);
  rstdf_.resize(s.M);
  ref::rmsnorm_fwd<T>(s.norm, {.x = h_.data(), .w = P + lay_.norm_f}, hfn_.data(), rstdf_.data());
  out_.resize(size_t(s.M) * c.K);
  ref::linear_fwd<T>(s.head, {.x = hfn_.data(), .w = P + lay_.head_w, .b = P + lay_.head_b}, out_.data());
  return out_;
}

template <typename T>
ref::LossResult<T> RefModel<T>::loss(const T* y, const LossParams& lp) {
  require(lp.B == B_ && lp.L == L_ && lp.K == lay_.cfg.K, "RefModel::loss: shape differs from the last forward");
  dout_.resize(out_.size());
  if (rows_.empty()) return ref::loss_fwd_bwd<T>(lp, {.out = out_.data(), .y = y}, dout_.data());
  // Present rows first: the loss sees the predictions at their dates (y's order), its gradient goes back.
  const RowMap map{B_, L_, rows_.data(), dates_.data()};
  std::vector<T> outd(out_.size()), doutd(out_.size());
  ref::rows_to_dates<T>(map, lay_.cfg.K, out_.data(), outd.data());
  const ref::LossResult<T> r = ref::loss_fwd_bwd<T>(lp, {.out = outd.data(), .y = y}, doutd.data());
  ref::dates_to_rows<T>(map, lay_.cfg.K, doutd.data(), dout_.data());
  return r;
}

template <typename T>
void RefModel<T>::backward(const T* P, T* Gr, T* dx) {
  const ModelConfig& c = lay_.cfg;
  require(dout_.size() == out_.size() && !out_.empty(), "RefModel::backward: call forward() and loss() first");
  const LayerShapes s(c, B_, L_);
  const size_t nconv = carry_conv_floats(c, B_), nssm = carry_ssm_floats(c, B_);
  std::vector<T> dhfn(size_t(s.M) * s.D), dh(size_t(s.M) * s.D), dg(size_t(s.M) * s.di), dy(size_t(s.M) * s.di);
  std::vector<T> dzx(size_t(s.M) * s.proj), dxbc(size_t(s.M) * s.cd), ddelta(size_t(s.M) * s.H),
      dhn(size_t(s.M) * s.D);
  ref::linear_bwd<T>(s.head, {.x = hfn_.data(), .w = P + lay_.head_w}, dout_.data(),
                     {.dx = dhfn.data(), .dw = Gr + lay_.head_w, .db = Gr + lay_.head_b});
  ref::rmsnorm_bwd<T>(s.norm, {.x = h_.data(), .w = P + lay_.norm_f}, rstdf_.data(), dhfn.data(),
                      {.dx = dh.data(), .dw = Gr + lay_.norm_f}, false);
  for (int l = c.NL - 1; l >= 0; --l) {
    const LayerOffsets& o = lay_.layers[l];
    const LayerActs& a = acts_[l];
    ref::linear_bwd<T>(s.out_proj, {.x = a.gout.data(), .w = P + o.out_proj_w}, dh.data(),
                       {.dx = dg.data(), .dw = Gr + o.out_proj_w});
    // The activations' column slices and the same slices of their gradient buffers.
    const ZxCols<const T> zx = zx_cols<const T>(s, a.zx.data());
    const ZxCols<T> gzx = zx_cols(s, dzx.data());
    const XbcCols<const T> xbc = xbc_cols<const T>(s, a.xbc.data());
    const XbcCols<T> gxbc = xbc_cols(s, dxbc.data());
    ref::gated_rmsnorm_bwd<T>(s.gnorm, {.y = a.y.data(), .z = zx.z, .w = P + o.gnorm_w}, a.grstd.data(), dg.data(),
                              {.dy = dy.data(), .dz = gzx.z, .dw = Gr + o.gnorm_w});
    ref::ssd_bwd<T>(
        s.ssd,
        {.x = xbc.x, .delta = a.delta.data(), .A_log = P + o.A_log, .Bm = xbc.B, .Cm = xbc.C, .Dskip = P + o.D,
         .h0 = ssm_in_.empty() ? nullptr : ssm_in_.data() + l * nssm},
        dy.data(),
        {.dx = gxbc.x, .ddelta = ddelta.data(), .dA_log = Gr + o.A_log, .dB = gxbc.B, .dC = gxbc.C,
         .dD = Gr + o.D});
    if (!rows_.empty()) ref::mask_rows<T>({B_, L_, rows_.data(), dates_.data()}, s.H, s.H, ddelta.data());
    ref::dt_softplus_bwd<T>(s.dt, {.dt = zx.dt, .dt_bias = P + o.dt_bias}, ddelta.data(),
                            {.ddt = gzx.dt, .ddt_bias = Gr + o.dt_bias});
    ref::conv1d_silu_bwd<T>(s.conv,
                            {.x = zx.xBC, .w = P + o.conv_w, .bias = P + o.conv_b,
                             .window0 = conv_in_.empty() ? nullptr : conv_in_.data() + l * nconv},
                            dxbc.data(),
                            {.dx = gzx.xBC, .dw = Gr + o.conv_w, .dbias = Gr + o.conv_b});
    ref::linear_bwd<T>(s.in_proj, {.x = a.hn.data(), .w = P + o.in_proj_w}, dzx.data(),
                       {.dx = dhn.data(), .dw = Gr + o.in_proj_w});
    ref::rmsnorm_bwd<T>(s.norm, {.x = a.h_in.data(), .w = P + o.norm_w}, a.rstd.data(), dhn.data(),
                        {.dx = dh.data(), .dw = Gr + o.norm_w}, true);
  }
  ref::linear_bwd<T>(s.input, {.x = x_.data(), .w = P + lay_.in_w}, dh.data(),
                     {.dx = dx, .dw = Gr + lay_.in_w, .db = Gr + lay_.in_b});
}

template class RefModel<float>;
template class RefModel<double>;

}  // namespace mlalpha
