#pragma once
// Vector code generation for the fast CPU path's loops. The project's other code is built for the x86-64
// baseline; the hot loops here are compiled for AVX2 + FMA (x86-64-v3, every x86 server CPU since 2013)
// by bracketing them with MLALPHA_CPU_KERNELS_BEGIN / _END *after* all #includes, so that no inline
// function shared with the rest of the library (std::vector's, say) is ever emitted with AVX2 code.
// CpuModel checks the CPU at construction (cpu_supported()) and refuses one without AVX2/FMA by name.
// GEMMs go through OpenBLAS, which picks its kernels for the CPU at run time.
#include <cstdint>
#include <cstring>

#if defined(__x86_64__) && !defined(MLALPHA_CPU_NO_AVX2)
#define MLALPHA_CPU_KERNELS_BEGIN _Pragma("GCC push_options") _Pragma("GCC target(\"avx2,fma\")")
#define MLALPHA_CPU_KERNELS_END _Pragma("GCC pop_options")
#else
#define MLALPHA_CPU_KERNELS_BEGIN
#define MLALPHA_CPU_KERNELS_END
#endif

namespace mlalpha::cpu {

// True when this CPU runs the kernels above (AVX2 and FMA on x86-64; always elsewhere).
inline bool cpu_supported() {
#if defined(__x86_64__) && !defined(MLALPHA_CPU_NO_AVX2)
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return true;
#endif
}

}  // namespace mlalpha::cpu
