#pragma once
// MLALPHA_HD marks small inline functions shared by host code and CUDA kernels (RNG, schedule, sampler)
// so both backends compute bit-identical values from one definition.
#if defined(__CUDACC__)
#define MLALPHA_HD __host__ __device__ __forceinline__
#else
#define MLALPHA_HD inline
#endif
