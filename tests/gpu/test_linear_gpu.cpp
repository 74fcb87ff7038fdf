// gpu::linear_fwd / linear_fwd_add / linear_bwd (in fp32 our 3xTF32 kernel where sizes and pointers are
// multiples of 4 floats / 16 bytes, else cuBLASLt's fp32 GEMM; in tf32 cuBLASLt; our bias kernels) against
// the CPU reference in double: M = 1, odd IN / OUT, K = 1 heads, F = 7 inputs, M = 16384 rows, partial
// tiles in every dimension, K split or not, with and without bias / dx / db, pointers aligned only to 4
// bytes; the residual forward out of place
// (r ≠ y, as the model's out_proj) and in place; dw, db accumulated onto random values. Plus bitwise
// determinism and plan reuse, and on an H200 the offline algorithm table (linear_algos_gpu.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "../gpu_util.h"
#include "../test_util.h"
#include "../tolerances.h"
#include "core/bf16.h"
#include "core/context.h"
#include "ops/linear/linear.h"

namespace mlalpha {
namespace {

using test::cast_vec;
using test::from_device;
using test::random_vec;
using test::rel_l2_close_to_terms;

std::vector<double> abs_of(const std::vector<float>& v) {
  std::vector<double> a(v.size());
  for (size_t i = 0; i < v.size(); ++i) a[i] = std::abs(double(v[i]));
  return a;
}

// A device copy of h starting `off` floats into a poisoned allocation (off = 1 gives 4-byte alignment).
struct DevAt {
  DeviceBuffer<float> buf;
  int off = 0;
  float* ptr() { return buf.data() + off; }
  std::vector<float> get() const {
    const auto all = from_device(buf);
    return std::vector<float>(all.begin() + off, all.end());
  }
};
DevAt upload_at(const std::vector<float>& h, int off) {
  DevAt d{DeviceBuffer<float>(h.size() + off), off};
  d.buf.fill_bytes(0xFF);
  if (!h.empty()) d.buf.upload(h.data(), h.size(), off);
  return d;
}
DevAt poisoned_at(size_t n, int off) {
  DevAt d{DeviceBuffer<float>(n + off), off};
  d.buf.fill_bytes(0xFF);
  return d;
}

struct Case {
  int M, IN, OUT;
  bool bias = true;  // forward bias and db
  bool dx = true;    // compute dx
  int off = 0;       // pointer offset in floats (alignment)
};

// All launches go to the legacy default stream, which is ordered with the uploads and poisoning.
void check_case(gpu::Gemm& g, const Case& c, uint64_t salt) {
  SCOPED_TRACE("M=" + std::to_string(c.M) + " IN=" + std::to_string(c.IN) + " OUT=" + std::to_string(c.OUT) +
               " bias=" + std::to_string(c.bias) + " dx=" + std::to_string(c.dx) + " off=" + std::to_string(c.off) +
               (g.tf32() ? " tf32" : " fp32"));
  const LinearParams p{c.M, c.IN, c.OUT};
  const size_t nx = size_t(c.M) * c.IN, ny = size_t(c.M) * c.OUT, nw = size_t(c.OUT) * c.IN;
  auto rng = test::make_rng(salt);
  const auto x = random_vec<float>(nx, rng), w = random_vec<float>(nw, rng), b = random_vec<float>(c.OUT, rng);
  const auto dy = random_vec<float>(ny, rng), dw0 = random_vec<float>(nw, rng), db0 = random_vec<float>(c.OUT, rng);
  const auto r = random_vec<float>(ny, rng);  // the residual input of linear_fwd_add
  const double gemm_tol = g.tf32() ? tol::kGpuTf32RelL2 : tol::kGpuReduceRelL2;

  // reference (double) and term magnitudes (the reference on absolute values)
  const auto xd = cast_vec<double>(x), wd = cast_vec<double>(w), bd = cast_vec<double>(b), dyd = cast_vec<double>(dy);
  const auto xa = abs_of(x), wa = abs_of(w), ba = abs_of(b), dya = abs_of(dy);
  std::vector<double> y_ref(ny), y_mag(ny);
  ref::linear_fwd<double>(p, {.x = xd.data(), .w = wd.data(), .b = c.bias ? bd.data() : nullptr}, y_ref.data());
  ref::linear_fwd<double>(p, {.x = xa.data(), .w = wa.data(), .b = c.bias ? ba.data() : nullptr}, y_mag.data());
  const auto rd = cast_vec<double>(r), ra = abs_of(r);
  std::vector<double> ya_ref(ny), ya_mag(ny);
  ref::linear_fwd_add<double>(p, {.x = xd.data(), .w = wd.data(), .b = c.bias ? bd.data() : nullptr}, rd.data(),
                              ya_ref.data());
  ref::linear_fwd_add<double>(p, {.x = xa.data(), .w = wa.data(), .b = c.bias ? ba.data() : nullptr}, ra.data(),
                              ya_mag.data());
  std::vector<double> dx_ref(nx), dx_mag(nx), dw_ref = cast_vec<double>(dw0), dw_mag = abs_of(dw0);
  std::vector<double> db_ref = cast_vec<double>(db0), db_mag = abs_of(db0);
  ref::linear_bwd<double>(p, {.x = xd.data(), .w = wd.data()}, dyd.data(),
                          {.dx = dx_ref.data(), .dw = dw_ref.data(), .db = db_ref.data()});
  ref::linear_bwd<double>(p, {.x = xa.data(), .w = wa.data()}, dya.data(),
                          {.dx = dx_mag.data(), .dw = dw_mag.data(), .db = db_mag.data()});

  // GPU
  auto x_g = upload_at(x, c.off), w_g = upload_at(w, c.off), b_g = upload_at(b, c.off), dy_g = upload_at(dy, c.off);
  auto y_g = poisoned_at(ny, c.off), dx_g = poisoned_at(nx, c.off);
  auto dw_g = upload_at(dw0, c.off), db_g = upload_at(db0, c.off);
  auto ws = test::poisoned(gpu::linear_bwd_workspace_floats(p));  // must not rely on zeroed scratch
  gpu::linear_fwd(g, p, {.x = x_g.ptr(), .w = w_g.ptr(), .b = c.bias ? b_g.ptr() : nullptr}, y_g.ptr(), nullptr);
  gpu::linear_bwd(g, p, {.x = x_g.ptr(), .w = w_g.ptr()}, dy_g.ptr(),
                  {.dx = c.dx ? dx_g.ptr() : nullptr, .dw = dw_g.ptr(), .db = c.bias ? db_g.ptr() : nullptr},
                  c.bias ? ws.data() : nullptr, nullptr);
  // residual forward: out of place into a poisoned y (r must stay unchanged), and in place (y = r)
  auto r_g = upload_at(r, c.off), ya_g = poisoned_at(ny, c.off), yi_g = upload_at(r, c.off);
  gpu::linear_fwd_add(g, p, {.x = x_g.ptr(), .w = w_g.ptr(), .b = c.bias ? b_g.ptr() : nullptr}, r_g.ptr(), ya_g.ptr(),
                      nullptr);
  gpu::linear_fwd_add(g, p, {.x = x_g.ptr(), .w = w_g.ptr(), .b = c.bias ? b_g.ptr() : nullptr}, yi_g.ptr(), yi_g.ptr(),
                      nullptr);

  EXPECT_TRUE(rel_l2_close_to_terms(y_g.get(), y_ref, y_mag, gemm_tol, "y"));
  EXPECT_TRUE(rel_l2_close_to_terms(ya_g.get(), ya_ref, ya_mag, gemm_tol, "y = r + x·Wᵀ (out of place)"));
  EXPECT_TRUE(rel_l2_close_to_terms(yi_g.get(), ya_ref, ya_mag, gemm_tol, "y = r + x·Wᵀ (in place)"));
  const auto r_after = r_g.get();
  EXPECT_EQ(0, std::memcmp(r_after.data(), r.data(), r.size() * sizeof(float))) << "linear_fwd_add changed r";
  if (c.dx) {
    EXPECT_TRUE(rel_l2_close_to_terms(dx_g.get(), dx_ref, dx_mag, gemm_tol, "dx"));
  } else {  // dx == nullptr: the buffer is left alone (still poisoned)
    const auto untouched = dx_g.get();
    for (size_t i = 0; i < untouched.size(); ++i) ASSERT_TRUE(std::isnan(untouched[i])) << "dx[" << i << "] written";
  }
  EXPECT_TRUE(rel_l2_close_to_terms(dw_g.get(), dw_ref, dw_mag, gemm_tol, "dw"));
  // db is our own fp32 reduction in both precisions
  const auto db_got = db_g.get();
  if (c.bias) {
    EXPECT_TRUE(rel_l2_close_to_terms(db_got, db_ref, db_mag, tol::kGpuReduceRelL2, "db"));
  } else {
    EXPECT_EQ(0, std::memcmp(db_got.data(), db0.data(), db0.size() * sizeof(float))) << "db changed with db = null";
  }
}

const Case kCases[] = {
    {1, 1, 1},                    // everything degenerate
    {1, 7, 64},                   // B = L = 1, F = 7 input projection
    {1, 64, 1, true, false},      // K = 1 head, one row, no dx
    {3, 1, 5},                    // IN = 1
    {37, 7, 129},                 // odd everything
    {513, 64, 1},                 // K = 1 head over many rows
    {513, 33, 77, false, true},   // no bias (in_proj / out_proj style)
    {300, 31, 45, true, true, 1}, // 4-byte-aligned pointers
    {2048, 7, 128, true, false},  // input projection, F = 7, dx not needed
    {4096, 128, 576, false},      // in_proj-like
    {16384, 128, 64},             // M = 8·2048 (split-K candidate for dw)
    {16384, 64, 1, true, true, 1},
    // multiples of 4 (the 3xTF32 kernel in fp32): partial tiles in M, N and K, 16-byte-aligned offsets,
    // dW with and without a split of K (K = rows >= 1024), with a partial last slice
    {4096, 128, 648},             // 'S' in_proj-like: N = 648 = 5·128 + 8
    {1000, 36, 100, true, true, 4},
    {2052, 260, 196, false, true, 8},
    {8192, 64, 136, true, false},
};

TEST(LinearGpu, MatchesReferenceFp32) {
  Context ctx;
  gpu::Gemm g(ctx, Precision::FP32);
  uint64_t salt = 1;
  for (const Case& c : kCases) check_case(g, c, salt++);
}

TEST(LinearGpu, MatchesReferenceTf32) {
  Context ctx;
  gpu::Gemm g(ctx, Precision::TF32);
  uint64_t salt = 100;
  for (const Case& c : kCases) check_case(g, c, salt++);
}

// In fp32 the GEMMs whose sizes, strides and pointers are multiples of 4 floats / 16 bytes run on the 3xTF32
// kernel (gemm_3xtf32.cu), the others on cuBLASLt; in tf32 all on cuBLASLt. The plan descriptions say which.
// bf16: x, w, dy rounded to bf16 on the host; the GPU gets those bf16 values, the reference their exact
// doubles (kGpuBf16SameInputsRelL2: only the fp32 accumulation differs) and the unrounded inputs
// (kGpuBf16RelL2: the bf16 rounding itself). db stays our fp32 reduction of the fp32 dy.
void check_case_bf16(gpu::Gemm& g, const Case& c, uint64_t salt) {
  SCOPED_TRACE("bf16 M=" + std::to_string(c.M) + " IN=" + std::to_string(c.IN) + " OUT=" + std::to_string(c.OUT) +
               " bias=" + std::to_string(c.bias) + " dx=" + std::to_string(c.dx));
  const LinearParams p{c.M, c.IN, c.OUT};
  const size_t nx = size_t(c.M) * c.IN, ny = size_t(c.M) * c.OUT, nw = size_t(c.OUT) * c.IN;
  auto rng = test::make_rng(salt);
  const auto x = random_vec<float>(nx, rng), w = random_vec<float>(nw, rng), b = random_vec<float>(c.OUT, rng);
  const auto dy = random_vec<float>(ny, rng), dw0 = random_vec<float>(nw, rng), db0 = random_vec<float>(c.OUT, rng);
  const auto r = random_vec<float>(ny, rng);
  auto rounded = [](const std::vector<float>& v) {
    std::vector<double> o(v.size());
    for (size_t i = 0; i < v.size(); ++i) o[i] = double(bf16_round(v[i]));
    return o;
  };
  auto to_bf16 = [](const std::vector<float>& v) {
    DeviceBuffer<__nv_bfloat16> d(v.size());
    std::vector<__nv_bfloat16> h(v.size());
    for (size_t i = 0; i < v.size(); ++i) h[i] = __float2bfloat16_rn(v[i]);
    d.upload(h);
    return d;
  };
  struct Ref {
    std::vector<double> y, ya, dx, dw, db;
  };
  auto reference = [&](const std::vector<double>& xd, const std::vector<double>& wd, const std::vector<double>& dyd) {
    Ref o{std::vector<double>(ny), std::vector<double>(ny), std::vector<double>(nx), cast_vec<double>(dw0),
          cast_vec<double>(db0)};
    const auto bd = cast_vec<double>(b), rd = cast_vec<double>(r);
    ref::linear_fwd<double>(p, {.x = xd.data(), .w = wd.data(), .b = c.bias ? bd.data() : nullptr}, o.y.data());
    ref::linear_fwd_add<double>(p, {.x = xd.data(), .w = wd.data(), .b = c.bias ? bd.data() : nullptr}, rd.data(),
                                o.ya.data());
    ref::linear_bwd<double>(p, {.x = xd.data(), .w = wd.data()}, dyd.data(), {.dx = o.dx.data(), .dw = o.dw.data()});
    const auto dyf = cast_vec<double>(dy);  // db from the fp32 dy
    std::vector<double> unused(nw);
    ref::linear_bwd<double>(p, {.x = xd.data(), .w = wd.data()}, dyf.data(), {.dw = unused.data(), .db = o.db.data()});
    return o;
  };
  const Ref same = reference(rounded(x), rounded(w), rounded(dy));
  const Ref exact = reference(cast_vec<double>(x), cast_vec<double>(w), cast_vec<double>(dy));
  const auto xa = abs_of(x), wa = abs_of(w), dya = abs_of(dy), ba = abs_of(b), ra = abs_of(r);
  Ref mag{std::vector<double>(ny), std::vector<double>(ny), std::vector<double>(nx), abs_of(dw0), abs_of(db0)};
  ref::linear_fwd<double>(p, {.x = xa.data(), .w = wa.data(), .b = c.bias ? ba.data() : nullptr}, mag.y.data());
  ref::linear_fwd_add<double>(p, {.x = xa.data(), .w = wa.data(), .b = c.bias ? ba.data() : nullptr}, ra.data(),
                              mag.ya.data());
  ref::linear_bwd<double>(p, {.x = xa.data(), .w = wa.data()}, dya.data(),
                          {.dx = mag.dx.data(), .dw = mag.dw.data(), .db = mag.db.data()});

  auto x16 = to_bf16(x), w16 = to_bf16(w), dy16 = to_bf16(dy);
  auto b_g = upload_at(b, 0), dy_g = upload_at(dy, 0), r_g = upload_at(r, 0);
  auto y_g = poisoned_at(ny, 0), ya_g = poisoned_at(ny, 0), dx_g = poisoned_at(nx, 0);
  auto dw_g = upload_at(dw0, 0), db_g = upload_at(db0, 0);
  auto ws = test::poisoned(gpu::linear_bwd_workspace_floats(p));
  const gpu::LinearInputsBf16 in{x16.data(), w16.data(), c.bias ? b_g.ptr() : nullptr};
  gpu::linear_fwd(g, p, in, y_g.ptr(), nullptr);
  gpu::linear_fwd_add(g, p, in, r_g.ptr(), ya_g.ptr(), nullptr);
  gpu::linear_bwd(g, p, in, {dy16.data(), dy_g.ptr()},
                  {.dx = c.dx ? dx_g.ptr() : nullptr, .dw = dw_g.ptr(), .db = c.bias ? db_g.ptr() : nullptr},
                  c.bias ? ws.data() : nullptr, nullptr);
  const auto y = y_g.get(), ya = ya_g.get(), dxv = dx_g.get(), dwv = dw_g.get();
  for (const auto& [ref, tol, what] : {std::tuple{&same, tol::kGpuBf16SameInputsRelL2, " (same bf16 inputs)"},
                                       std::tuple{&exact, tol::kGpuBf16RelL2, " (fp32 inputs)"}}) {
    EXPECT_TRUE(rel_l2_close_to_terms(y, ref->y, mag.y, tol, std::string("y") + what));
    EXPECT_TRUE(rel_l2_close_to_terms(ya, ref->ya, mag.ya, tol, std::string("y = r + x·Wᵀ") + what));
    if (c.dx) EXPECT_TRUE(rel_l2_close_to_terms(dxv, ref->dx, mag.dx, tol, std::string("dx") + what));
    EXPECT_TRUE(rel_l2_close_to_terms(dwv, ref->dw, mag.dw, tol, std::string("dw") + what));
  }
  if (c.bias) EXPECT_TRUE(rel_l2_close_to_terms(db_g.get(), same.db, mag.db, tol::kGpuReduceRelL2, "db"));
}

// Every case of kCases with bf16 operands (cuBLASLt's bf16 GEMMs), and bitwise-equal repeats.
TEST(LinearGpu, MatchesReferenceBf16) {
  Context ctx;
  gpu::Gemm g(ctx, Precision::BF16);
  uint64_t salt = 500;
  for (const Case& c : kCases) check_case_bf16(g, c, salt++);
  for (const std::string& d : g.plan_descriptions()) EXPECT_NE(d.find("bf16"), std::string::npos) << d;
  // The model's S in_proj shapes twice in fresh engines: the same bits.
  const LinearParams p{16384, 128, 648};
  auto rng = test::make_rng(77);
  const auto x = random_vec<float>(size_t(p.M) * p.IN, rng), w = random_vec<float>(size_t(p.OUT) * p.IN, rng);
  std::vector<__nv_bfloat16> xh(x.size()), wh(w.size());
  for (size_t i = 0; i < x.size(); ++i) xh[i] = __float2bfloat16_rn(x[i]);
  for (size_t i = 0; i < w.size(); ++i) wh[i] = __float2bfloat16_rn(w[i]);
  DeviceBuffer<__nv_bfloat16> xd(xh.size()), wd(wh.size());
  xd.upload(xh);
  wd.upload(wh);
  std::vector<float> first;
  for (int run = 0; run < 2; ++run) {
    gpu::Gemm e(ctx, Precision::BF16);
    auto y = test::poisoned(size_t(p.M) * p.OUT);
    gpu::linear_fwd(e, p, gpu::LinearInputsBf16{xd.data(), wd.data(), nullptr}, y.data(), nullptr);
    const auto got = from_device(y);
    if (run == 0) first = got;
    else EXPECT_EQ(0, std::memcmp(first.data(), got.data(), got.size() * sizeof(float))) << "bf16 GEMM not bitwise repeatable";
  }
}

// The bf16 weight gradient on our K split (linear_dw_splits: a strided-batched GEMM over slices of the M rows
// writing fp32 partials, summed in order by a ColsumBatch job) on the S model's four dW shapes (16 slices each):
// against the CPU reference in double with the bf16 GEMM tolerances, accumulated onto random values; the partials'
// buffer poisoned first (padding never read); deferred: dw untouched until the batch runs, then the bits of the
// immediate form; a fresh engine gives the same bits; the plan takes no split-K of cuBLASLt's.
TEST(LinearGpu, Bf16DwSplitMatchesReferenceAndRepeats) {
  Context ctx;
  const LinearParams shapes[] = {{16384, 128, 648}, {16384, 256, 128}, {16384, 32, 128}, {16384, 128, 1}};
  uint64_t salt = 900;
  for (const LinearParams& p : shapes) {
    SCOPED_TRACE("bf16 dW split M=" + std::to_string(p.M) + " IN=" + std::to_string(p.IN) + " OUT=" +
                 std::to_string(p.OUT));
    const int splits = gpu::linear_dw_splits(p);
    ASSERT_GT(splits, 1) << "this shape should take the split";
    ASSERT_EQ(p.M % splits, 0);
    EXPECT_GE(gpu::linear_dw_partial_floats(p), size_t(splits) * p.OUT * p.IN);
    const size_t nx = size_t(p.M) * p.IN, ny = size_t(p.M) * p.OUT, nw = size_t(p.OUT) * p.IN;
    auto rng = test::make_rng(salt++);
    const auto x = random_vec<float>(nx, rng), dy = random_vec<float>(ny, rng), dw0 = random_vec<float>(nw, rng);
    std::vector<__nv_bfloat16> xh(nx), dyh(ny);
    std::vector<double> xd(nx), dyd(ny), xa(nx), dya(ny);
    for (size_t i = 0; i < nx; ++i)
      xh[i] = __float2bfloat16_rn(x[i]), xd[i] = double(bf16_round(x[i])), xa[i] = std::abs(double(x[i]));
    for (size_t i = 0; i < ny; ++i)
      dyh[i] = __float2bfloat16_rn(dy[i]), dyd[i] = double(bf16_round(dy[i])), dya[i] = std::abs(double(dy[i]));
    // dw_ref = dw0 + dyᵀ·x on the bf16 values (same inputs) and on the fp32 values; magnitudes for the scale
    std::vector<double> same = cast_vec<double>(dw0), exact = cast_vec<double>(dw0), mag = abs_of(dw0);
    const auto xf = cast_vec<double>(x), dyf = cast_vec<double>(dy);
    for (int m = 0; m < p.M; ++m)
      for (int o = 0; o < p.OUT; ++o) {
        const size_t r = size_t(m) * p.OUT + size_t(o);
        const double a = dyd[r], af = dyf[r], am = dya[r];
        const double *xr = &xd[size_t(m) * p.IN], *xfr = &xf[size_t(m) * p.IN], *xar = &xa[size_t(m) * p.IN];
        double *sr = &same[size_t(o) * p.IN], *er = &exact[size_t(o) * p.IN], *mr = &mag[size_t(o) * p.IN];
        for (int i = 0; i < p.IN; ++i) sr[i] += a * xr[i], er[i] += af * xfr[i], mr[i] += am * xar[i];
      }
    DeviceBuffer<__nv_bfloat16> x_g(nx), dy_g(ny);
    x_g.upload(xh);
    dy_g.upload(dyh);
    auto run = [&](gpu::Gemm& g, bool deferred) {
      auto dw = test::to_device(dw0);
      auto part = test::poisoned(gpu::linear_dw_partial_floats(p));
      gpu::ColsumBatch batch;
      gpu::linear_bwd(g, p, {x_g.data(), nullptr, nullptr}, {dy_g.data(), nullptr}, {.dw = dw.data()}, nullptr,
                      nullptr, deferred ? &batch : nullptr, part.data());
      if (deferred) {
        EXPECT_EQ(batch.pending(), 1u);
        EXPECT_EQ(0, std::memcmp(from_device(dw).data(), dw0.data(), nw * sizeof(float))) << "dw written before run()";
        batch.run(nullptr);
      }
      return from_device(dw);
    };
    gpu::Gemm g1(ctx, Precision::BF16), g2(ctx, Precision::BF16);
    const auto got = run(g1, false);
    EXPECT_TRUE(rel_l2_close_to_terms(got, same, mag, tol::kGpuBf16SameInputsRelL2, "dw (same bf16 inputs)"));
    EXPECT_TRUE(rel_l2_close_to_terms(got, exact, mag, tol::kGpuBf16RelL2, "dw (fp32 inputs)"));
    const auto again = run(g1, true), fresh = run(g2, true);
    EXPECT_EQ(0, std::memcmp(got.data(), again.data(), nw * sizeof(float))) << "deferred differs from immediate";
    EXPECT_EQ(0, std::memcmp(got.data(), fresh.data(), nw * sizeof(float))) << "a fresh engine gives other bits";
    ASSERT_EQ(g1.num_plans(), 1u);
    const std::string d = g1.plan_descriptions()[0];
    std::printf("  plan: %s\n", d.c_str());  // the algorithm cuBLASLt gives the slices (for the benchmark notes)
    EXPECT_NE(d.find(std::to_string(splits) + " slices"), std::string::npos) << d;
    EXPECT_NE(d.find("splitk 1 "), std::string::npos) << "cuBLASLt split the slices again: " << d;
  }
  // A shape whose rows do not split (M = 1000: slices below 512 rows) takes cuBLASLt's plain plan and no partials.
  EXPECT_EQ(gpu::linear_dw_splits({1000, 128, 648}), 1);
  EXPECT_EQ(gpu::linear_dw_partial_floats({1000, 128, 648}), 0u);
  // L's in_proj has 280 output tiles of 128×128 already: no split; M's in_proj (20 tiles) takes 4 slices
  EXPECT_EQ(gpu::linear_dw_splits({16384, 1024, 4384}), 1);
  EXPECT_EQ(gpu::linear_dw_splits({16384, 256, 1160}), 4);
}

TEST(LinearGpu, EngineChoice) {
  Context ctx;
  auto rng = test::make_rng(5);
  auto run = [&](gpu::Gemm& g, const LinearParams& p, int off) {
    auto x = upload_at(random_vec<float>(size_t(p.M) * p.IN, rng), off);
    auto w = upload_at(random_vec<float>(size_t(p.OUT) * p.IN, rng), off);
    auto dy = upload_at(random_vec<float>(size_t(p.M) * p.OUT, rng), off);
    auto y = poisoned_at(size_t(p.M) * p.OUT, off), dx = poisoned_at(size_t(p.M) * p.IN, off);
    auto dw = upload_at(random_vec<float>(size_t(p.OUT) * p.IN, rng), off);
    gpu::linear_fwd(g, p, {.x = x.ptr(), .w = w.ptr()}, y.ptr(), nullptr);
    gpu::linear_bwd(g, p, {.x = x.ptr(), .w = w.ptr()}, dy.ptr(), {.dx = dx.ptr(), .dw = dw.ptr()}, nullptr, nullptr);
  };
  auto count = [](const gpu::Gemm& g, const char* what) {
    int n = 0;
    for (const std::string& d : g.plan_descriptions()) n += d.find(what) != std::string::npos;
    return n;
  };
  {
    gpu::Gemm g(ctx, Precision::FP32);
    run(g, {2048, 128, 648}, 0);  // three plans, all on the kernel
    EXPECT_EQ(3, count(g, "3xTF32 kernel"));
    // dW (K = 2048 rows, a 648 × 128 output: at most 11 tiles) splits K wherever its tiles fill at most
    // half the SMs, so on any GPU with 22 SMs or more
    int dev = 0, sms = 0;
    ASSERT_EQ(cudaSuccess, cudaGetDevice(&dev));
    ASSERT_EQ(cudaSuccess, cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    if (sms >= 22) EXPECT_EQ(1, count(g, "K split"));
    run(g, {2048, 128, 1}, 0);  // OUT = 1: cuBLASLt
    run(g, {2048, 128, 648}, 1);  // 4-byte-aligned pointers: cuBLASLt
    EXPECT_EQ(3, count(g, "3xTF32 kernel"));
    EXPECT_EQ(9u, g.num_plans());
    for (const std::string& d : g.plan_descriptions()) std::cout << "  " << d << "\n";
  }
  {
    gpu::Gemm g(ctx, Precision::TF32);
    run(g, {2048, 128, 648}, 0);
    EXPECT_EQ(0, count(g, "3xTF32"));
    EXPECT_EQ(3u, g.num_plans());
  }
}

// M = 0 is a no-op; a shape cuBLASLt cannot take is rejected with a message, not a crash.
TEST(LinearGpu, DegenerateShapes) {
  Context ctx;
  gpu::Gemm g(ctx);
  const LinearParams empty{0, 5, 3};
  EXPECT_EQ(0u, gpu::linear_bwd_workspace_floats(empty));
  EXPECT_NO_THROW(gpu::linear_fwd(g, empty, LinearInputs<float>{}, nullptr, nullptr));
  EXPECT_NO_THROW(gpu::linear_bwd(g, empty, LinearInputs<float>{}, nullptr, {}, nullptr, nullptr));
  EXPECT_THROW(gpu::linear_fwd(g, LinearParams{4, 0, 3}, LinearInputs<float>{}, nullptr, nullptr), Error);
  EXPECT_NO_THROW(gpu::linear_fwd_add(g, empty, LinearInputs<float>{}, nullptr, nullptr, nullptr));
  // r and y partly overlapping is rejected before any GEMM runs (in place, r == y, is allowed)
  DeviceBuffer<float> buf(64);
  EXPECT_THROW(gpu::linear_fwd_add(g, LinearParams{4, 4, 4}, {.x = buf.data(), .w = buf.data()}, buf.data(),
                                   buf.data() + 1, nullptr),
               Error);
  EXPECT_EQ(0u, g.num_plans());
}

// Same inputs twice (same Gemm, then a fresh Gemm that re-runs the heuristic): bitwise-identical outputs
// and gradients; repeated calls reuse the cached plans.
TEST(LinearGpu, Deterministic) {
  Context ctx;
  const LinearParams shapes[] = {{16384, 64, 64}, {16384, 256, 1}, {4096, 128, 576}};
  for (bool tf32 : {false, true})
    for (const LinearParams& p : shapes) {
      SCOPED_TRACE("M=" + std::to_string(p.M) + " IN=" + std::to_string(p.IN) + " OUT=" + std::to_string(p.OUT) +
                   (tf32 ? " tf32" : " fp32"));
      const size_t nx = size_t(p.M) * p.IN, ny = size_t(p.M) * p.OUT, nw = size_t(p.OUT) * p.IN;
      auto rng = test::make_rng(1000 + p.IN + p.OUT + tf32);
      const auto x = random_vec<float>(nx, rng), w = random_vec<float>(nw, rng), b = random_vec<float>(p.OUT, rng);
      const auto dy = random_vec<float>(ny, rng), dw0 = random_vec<float>(nw, rng), db0 = random_vec<float>(p.OUT, rng);
      auto run = [&](gpu::Gemm& g) {
        auto x_g = test::to_device(x), w_g = test::to_device(w), b_g = test::to_device(b), dy_g = test::to_device(dy);
        auto dw_g = test::to_device(dw0), db_g = test::to_device(db0);
        auto y_g = test::poisoned(ny), dx_g = test::poisoned(nx), ya_g = test::poisoned(ny);
        auto ws = test::poisoned(gpu::linear_bwd_workspace_floats(p));
        gpu::linear_fwd(g, p, {.x = x_g.data(), .w = w_g.data(), .b = b_g.data()}, y_g.data(), nullptr);
        gpu::linear_bwd(g, p, {.x = x_g.data(), .w = w_g.data()}, dy_g.data(),
                        {.dx = dx_g.data(), .dw = dw_g.data(), .db = db_g.data()}, ws.data(), nullptr);
        // the residual forward as the model runs it: no bias, r = the forward's y, out of place
        gpu::linear_fwd_add(g, p, {.x = x_g.data(), .w = w_g.data()}, y_g.data(), ya_g.data(), nullptr);
        return std::vector<std::vector<float>>{from_device(y_g), from_device(dx_g), from_device(dw_g),
                                               from_device(db_g), from_device(ya_g)};
      };
      const Precision pr = tf32 ? Precision::TF32 : Precision::FP32;
      gpu::Gemm g1(ctx, pr), g2(ctx, pr);
      const auto a = run(g1);
      const size_t plans = g1.num_plans();
      EXPECT_EQ(4u, plans);  // forward, dx, dw, residual forward
      const auto b1 = run(g1);
      EXPECT_EQ(plans, g1.num_plans()) << "a repeated shape created a new plan";
      const auto b2 = run(g2);
      const char* names[] = {"y", "dx", "dw", "db", "y_add"};
      for (size_t i = 0; i < a.size(); ++i) {
        ASSERT_EQ(a[i].size(), b1[i].size());
        EXPECT_EQ(0, std::memcmp(a[i].data(), b1[i].data(), a[i].size() * sizeof(float))) << names[i] << " (same Gemm)";
        EXPECT_EQ(0, std::memcmp(a[i].data(), b2[i].data(), a[i].size() * sizeof(float))) << names[i] << " (new Gemm)";
      }
    }
}

// The offline algorithm table (linear_algos_gpu.cpp) was measured on an H200: there, the listed GEMMs must run
// the listed algorithms. If this fails after a cuBLAS update, the heuristic no longer offers them: re-run
// ml-alpha-gemm-sweep and update the table. Also checks that those algorithms give finite results.
TEST(LinearGpu, OfflineAlgorithmTable) {
  int dev = 0, sms = 0, major = 0, minor = 0;
  ASSERT_EQ(cudaSuccess, cudaGetDevice(&dev));
  ASSERT_EQ(cudaSuccess, cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  ASSERT_EQ(cudaSuccess, cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  ASSERT_EQ(cudaSuccess, cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  if (sms != 132 || major != 9 || minor != 0)
    GTEST_SKIP() << "the table lists H200 algorithms (132 SMs, sm_90); this GPU has " << sms << " SMs, sm_" << major
                 << minor;
  Context ctx;
  gpu::Gemm g(ctx, Precision::TF32);
  // The 'L' out_proj (residual forward, dW) and in_proj (dx) GEMMs: M = 8·2048 tokens.
  const LinearParams out_proj{16384, 2048, 1024}, in_proj{16384, 1024, 4384};
  auto rng = test::make_rng(77);
  {
    const LinearParams& p = out_proj;
    auto x = test::to_device(random_vec<float>(size_t(p.M) * p.IN, rng));
    auto w = test::to_device(random_vec<float>(size_t(p.OUT) * p.IN, rng));
    auto r = test::to_device(random_vec<float>(size_t(p.M) * p.OUT, rng));
    auto y = test::poisoned(size_t(p.M) * p.OUT);
    auto dw = test::to_device(random_vec<float>(size_t(p.OUT) * p.IN, rng));
    gpu::linear_fwd_add(g, p, {.x = x.data(), .w = w.data()}, r.data(), y.data(), nullptr);
    gpu::linear_bwd(g, p, {.x = x.data(), .w = w.data()}, r.data(), {.dw = dw.data()}, nullptr, nullptr);
    for (const auto& v : {from_device(y), from_device(dw)})
      for (float f : v) ASSERT_TRUE(std::isfinite(f));
  }
  {
    const LinearParams& p = in_proj;
    auto w = test::to_device(random_vec<float>(size_t(p.OUT) * p.IN, rng));
    auto dy = test::to_device(random_vec<float>(size_t(p.M) * p.OUT, rng));
    auto dx = test::poisoned(size_t(p.M) * p.IN);
    gpu::linear_bwd(g, p, {.w = w.data()}, dy.data(), {.dx = dx.data()}, nullptr, nullptr);
    for (float f : from_device(dx)) ASSERT_TRUE(std::isfinite(f));
  }
  const auto plans = g.plan_descriptions();
  ASSERT_EQ(3u, plans.size());
  for (const std::string& d : plans) {
    std::cout << "  " << d << "\n";
    EXPECT_NE(std::string::npos, d.find("(offline table)")) << d;
  }
}

}  // namespace
}  // namespace mlalpha
