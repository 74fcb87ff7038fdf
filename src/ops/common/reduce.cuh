#pragma once
// The fixed-order sums every kernel reduces with (DESIGN section 2: bit-reproducible, no atomics), for .cu
// files; T is any type the shuffles take (float, double, int). Every order depends on the block shape only:
//   warp_sum             the 32 lanes of a warp, an xor butterfly over offsets 16, 8, 4, 2, 1;
//   lane_group_sum<k>    each aligned group of k lanes, a butterfly over offsets 1, 2, …, k / 2;
//   warp_inclusive_scan  prefix sums over the lanes (Hillis–Steele);
//   put_warp_sum + sum_slots: per-warp sums through shared memory, then the warps in ascending order, which
//                        block_sum, block_sum2_first and the row teams (row_team.cuh) are built from.
// Every lane of a butterfly ends with the same bits.
namespace mlalpha::gpu {

// The member mask of every full-warp shuffle. A name no template parameter or local is likely to take:
// a shadowing `bool` would silently turn the mask into 0 or 1 (lanes missing from the mask: undefined).
constexpr unsigned kWarpMask = 0xffffffffu;

template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kWarpMask, v, o);
  return v;
}

// Σ over the kLanes lanes l with the same l / kLanes (kLanes a power of two ≤ 32). The whole warp calls it.
template <int kLanes, typename T>
__device__ __forceinline__ T lane_group_sum(T v) {
  static_assert(kLanes >= 1 && kLanes <= 32 && (kLanes & (kLanes - 1)) == 0, "a power of two up to 32");
#pragma unroll
  for (int o = 1; o < kLanes; o <<= 1) v += __shfl_xor_sync(kWarpMask, v, o);
  return v;
}

// Lane l gets v_0 + … + v_l (Hillis–Steele: five shuffle-up steps, a fixed order). Full warp only.
template <typename T>
__device__ __forceinline__ T warp_inclusive_scan(T v) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const T u = __shfl_up_sync(kWarpMask, v, o);
    if (lane >= o) v += u;
  }
  return v;
}

// Lane 0 of warp w stores the warp's sum in slots[w]. A __syncthreads() must follow before sum_slots.
template <typename T>
__device__ __forceinline__ void put_warp_sum(T v, T* slots) {
  v = warp_sum(v);
  if ((threadIdx.x & 31) == 0) slots[threadIdx.x >> 5] = v;
}
// init + slots[first] + slots[first + 1] + … + slots[first + kCount − 1], in that order.
template <int kCount, typename T>
__device__ __forceinline__ T sum_slots(const T* slots, int first = 0, T init = T(0)) {
  T s = init;
#pragma unroll
  for (int k = 0; k < kCount; ++k) s += slots[first + k];
  return s;
}

// Σ v over a block of kWarps warps; every thread gets the result. `slots` holds kWarps values; the block is
// synchronised on entry and exit, so the slots may be reused right after.
template <int kWarps, typename T>
__device__ inline T block_sum(T v, T* slots) {
  __syncthreads();
  put_warp_sum(v, slots);
  __syncthreads();
  const T s = sum_slots<kWarps>(slots);
  __syncthreads();
  return s;
}

// Two block sums (the same order and bits as block_sum) whose results only thread 0 needs: one barrier.
// su and sv hold kWarps values each that no thread touches around the call.
template <int kWarps, typename T, typename U>
__device__ inline void block_sum2_first(T& u, U& v, T* su, U* sv) {
  put_warp_sum(u, su);
  put_warp_sum(v, sv);
  __syncthreads();
  if (threadIdx.x == 0) u = sum_slots<kWarps>(su), v = sum_slots<kWarps>(sv);
}

}  // namespace mlalpha::gpu
