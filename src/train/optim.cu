// Global gradient norm (two phases, no atomics), clip scale + schedule, and AdamW reading everything
// from device memory: DESIGN section 2, steps 5-7.
#include "core/cuda_check.h"
#include "core/error.h"
#include "ops/common/bf16_pack.cuh"
#include "train/optim.h"

namespace mlalpha::gpu {

namespace {

constexpr int kNormThreads = 256;
constexpr int kNormMaxBlocks = 1024;

// Block-wide sum in a fixed order: xor-shuffle within warps, then warp 0 over the warp sums.
template <typename T>
__device__ T block_sum(T v) {
  __shared__ T warp_sums[32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  const int nwarps = (blockDim.x + 31) >> 5;
  v = lane < nwarps ? warp_sums[lane] : T(0);
  if (warp == 0)
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;  // valid in thread 0
}

// Grid (blocks, members): block (b, m) reduces its stride of member m's slice.
__global__ void grad_norm_sq_phase1_kernel(const float4* __restrict__ g, size_t n4, float* __restrict__ partials) {
  const float4* gm = g + blockIdx.y * n4;
  float acc = 0.0f;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n4; i += size_t(gridDim.x) * blockDim.x) {
    const float4 x = gm[i];
    acc += x.x * x.x + x.y * x.y + x.z * x.z + x.w * x.w;
  }
  acc = block_sum(acc);
  if (threadIdx.x == 0) partials[blockIdx.y * gridDim.x + blockIdx.x] = acc;
}

// Block m: Σ of member m's partials in double, in a fixed order (valid in thread 0).
__device__ __forceinline__ double member_norm_sq(const float* __restrict__ partials, int blocks) {
  const float* pm = partials + size_t(blockIdx.x) * blocks;
  double acc = 0.0;
  for (int i = threadIdx.x; i < blocks; i += blockDim.x) acc += double(pm[i]);
  return block_sum(acc);
}

// Grid (members): block m sums member m's partials.
__global__ void grad_norm_sq_phase2_kernel(const float* __restrict__ partials, int blocks, DeviceStepState* state) {
  const double acc = member_norm_sq(partials, blocks);
  if (threadIdx.x == 0) state[blockIdx.x].norm_sq = acc;
}

// Member mi's clip scale, skip flag, lr, bias corrections and counters from its norm², and its ring record.
__device__ void clip_member(int mi, const MemberOptim* __restrict__ opt, DeviceStepState* state, const float* loss,
                            const int* frozen, StepRecord* ring, int ring_size) {
  DeviceStepState* st = state + mi;
  if (frozen && frozen[mi]) {  // an early-stopped member: no update, counters kept
    st->skip = 1;
    return;
  }
  const ClipParams p = opt[mi].clip;
  const ClipResult c = clip_scale(st->norm_sq, p.max_norm);
  st->clip_scale = c.scale;
  st->skip = c.skip;
  st->lr = lr_at(p.schedule, st->step);
  if (!c.skip) {
    const long long t = ++st->adam_step;
    st->bc1 = 1.0f - powf(p.beta1, float(t));
    st->bc2_sqrt = sqrtf(1.0f - powf(p.beta2, float(t)));
  } else {
    ++st->skipped_total;
  }
  const long long step = ++st->step;
  if (ring) {
    StepRecord r;
    r.step = step;
    r.loss = loss ? loss[mi] : 0.0f;
    r.grad_norm = float(sqrt(st->norm_sq));
    r.clip_scale = c.scale;
    r.lr = st->lr;
    r.skipped = c.skip;
    r.pad_ = 0;
    ring[size_t(mi) * ring_size + (step - 1) % ring_size] = r;
  }
}

__global__ void grad_clip_scale_kernel(const MemberOptim* __restrict__ opt, int members, DeviceStepState* state,
                                       const float* loss, const int* frozen, StepRecord* ring, int ring_size) {
  const int mi = blockIdx.x * blockDim.x + threadIdx.x;
  if (mi < members) clip_member(mi, opt, state, loss, frozen, ring, ring_size);
}

// Phase 2 and the clip in one launch: block m sums member m's partials as grad_norm_sq_phase2_kernel does (the
// same bits), then its thread 0 runs member m's clip as grad_clip_scale_kernel does.
__global__ void grad_norm_clip_kernel(const float* __restrict__ partials, int blocks,
                                      const MemberOptim* __restrict__ opt, DeviceStepState* state, const float* loss,
                                      const int* frozen, StepRecord* ring, int ring_size) {
  const double acc = member_norm_sq(partials, blocks);
  if (threadIdx.x == 0) {
    state[blockIdx.x].norm_sq = acc;
    clip_member(int(blockIdx.x), opt, state, loss, frozen, ring, ring_size);
  }
}

// Grid (blocks, members): block (b, m) updates its stride of member m's slices. kBf16: also stores the new
// weights rounded to bf16 into p16 (the bf16 mode's GEMM operands), in the same pass.
template <bool kBf16>
__global__ void adamw_kernel(float4* __restrict__ p, const float4* __restrict__ g, float4* __restrict__ m,
                             float4* __restrict__ v, const uchar4* __restrict__ decay, size_t n4,
                             const MemberOptim* __restrict__ opt, const DeviceStepState* __restrict__ state,
                             uint2* __restrict__ p16 /* (members, n4) quads of bf16, or null */) {
  const DeviceStepState* st = state + blockIdx.y;
  if (st->skip) return;  // a skipped step leaves weights and moments untouched
  const AdamWConfig cfg = opt[blockIdx.y].adam;
  const AdamWParams a{st->lr, cfg.beta1, cfg.beta2, cfg.eps, cfg.weight_decay, 0};
  const float scale = st->clip_scale, bc1 = st->bc1, bc2 = st->bc2_sqrt;
  const size_t base = blockIdx.y * n4;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n4; i += size_t(gridDim.x) * blockDim.x) {
    const size_t j = base + i;
    float4 pp = p[j], mm = m[j], vv = v[j];
    const float4 gg = g[j];
    const uchar4 d = decay[i];
    adamw_update(pp.x, mm.x, vv.x, gg.x * scale, d.x != 0, a, bc1, bc2);
    adamw_update(pp.y, mm.y, vv.y, gg.y * scale, d.y != 0, a, bc1, bc2);
    adamw_update(pp.z, mm.z, vv.z, gg.z * scale, d.z != 0, a, bc1, bc2);
    adamw_update(pp.w, mm.w, vv.w, gg.w * scale, d.w != 0, a, bc1, bc2);
    p[j] = pp;
    m[j] = mm;
    v[j] = vv;
    if constexpr (kBf16) {
      p16[j] = pack_bf16x4(pp.x, pp.y, pp.z, pp.w);
    }
  }
}

void require_vec4(const void* ptr, size_t n, const char* what) {
  require(n % 4 == 0 && reinterpret_cast<uintptr_t>(ptr) % 16 == 0,
          std::string(what) + ": arena length must be a multiple of 4 and 16-byte aligned");
}

}  // namespace

int grad_norm_blocks(size_t n) {
  const size_t n4 = n / 4;
  const size_t want = (n4 + kNormThreads - 1) / kNormThreads;
  return int(want < 1 ? 1 : (want > size_t(kNormMaxBlocks) ? size_t(kNormMaxBlocks) : want));
}

static void require_members(int members, const char* what) {
  require(members >= 1 && members <= 65535, std::string(what) + ": members must be in [1, 65535]");
}

namespace {
__global__ void scale_kernel(float* __restrict__ x, size_t n, float s) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) x[i] *= s;
}
}  // namespace

void scale_inplace(float* x, size_t n, float s, cudaStream_t stream) {
  if (n == 0) return;
  require(x != nullptr, "scale_inplace: x is null");
  const size_t want = (n + 255) / 256;
  scale_kernel<<<unsigned(want < 4096 ? want : 4096), 256, 0, stream>>>(x, n, s);
  MLALPHA_CHECK_LAUNCH(stream);
}

void grad_norm_sq_phase1(const float* g, size_t n, int members, float* partials, cudaStream_t stream) {
  require_vec4(g, n, "grad_norm_sq_phase1");
  require_members(members, "grad_norm_sq_phase1");
  grad_norm_sq_phase1_kernel<<<dim3(grad_norm_blocks(n), unsigned(members)), kNormThreads, 0, stream>>>(
      reinterpret_cast<const float4*>(g), n / 4, partials);
  MLALPHA_CHECK_LAUNCH(stream);
}

void grad_norm_sq_phase2(const float* partials, int blocks, int members, DeviceStepState* state, cudaStream_t stream) {
  require_members(members, "grad_norm_sq_phase2");
  grad_norm_sq_phase2_kernel<<<unsigned(members), kNormThreads, 0, stream>>>(partials, blocks, state);
  MLALPHA_CHECK_LAUNCH(stream);
}

void grad_clip_scale(const MemberOptim* opt, int members, DeviceStepState* state, const float* loss, const int* frozen,
                     StepRecord* ring, int ring_size, cudaStream_t stream) {
  require(ring == nullptr || ring_size > 0, "grad_clip_scale: ring_size must be > 0");
  require_members(members, "grad_clip_scale");
  const int threads = members < 128 ? members : 128;
  grad_clip_scale_kernel<<<unsigned((members + threads - 1) / threads), unsigned(threads), 0, stream>>>(
      opt, members, state, loss, frozen, ring, ring_size);
  MLALPHA_CHECK_LAUNCH(stream);
}

void grad_norm_sq_phase2_clip(const float* partials, int blocks, const MemberOptim* opt, int members,
                              DeviceStepState* state, const float* loss, const int* frozen, StepRecord* ring,
                              int ring_size, cudaStream_t stream) {
  require(ring == nullptr || ring_size > 0, "grad_norm_sq_phase2_clip: ring_size must be > 0");
  require_members(members, "grad_norm_sq_phase2_clip");
  grad_norm_clip_kernel<<<unsigned(members), kNormThreads, 0, stream>>>(partials, blocks, opt, state, loss, frozen,
                                                                        ring, ring_size);
  MLALPHA_CHECK_LAUNCH(stream);
}

void adamw_step_devscale(float* params, const float* grads, float* m, float* v, const unsigned char* decay, size_t n,
                         int members, const MemberOptim* opt, const DeviceStepState* state, cudaStream_t stream,
                         __nv_bfloat16* params16) {
  require_vec4(params, n, "adamw_step_devscale");
  require(reinterpret_cast<uintptr_t>(params16) % 8 == 0, "adamw_step_devscale: params16 must be 8-byte aligned");
  require_members(members, "adamw_step_devscale");
  const size_t n4 = n / 4;
  const int threads = 256;
  const size_t want = (n4 + threads - 1) / threads;
  const int blocks = int(want < 1 ? 1 : (want > 4096 ? 4096 : want));
  const auto launch = [&](auto kernel) {
    kernel<<<dim3(unsigned(blocks), unsigned(members)), threads, 0, stream>>>(
        reinterpret_cast<float4*>(params), reinterpret_cast<const float4*>(grads), reinterpret_cast<float4*>(m),
        reinterpret_cast<float4*>(v), reinterpret_cast<const uchar4*>(decay), n4, opt, state,
        reinterpret_cast<uint2*>(params16));
  };
  if (params16)
    launch(adamw_kernel<true>);
  else
    launch(adamw_kernel<false>);
  MLALPHA_CHECK_LAUNCH(stream);
}

}  // namespace mlalpha::gpu
