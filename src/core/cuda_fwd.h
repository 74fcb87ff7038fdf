#pragma once
// The CUDA types the CPU-visible headers name in their GPU declarations (a stream handle, the bf16 element,
// the cuBLASLt handle, the int4 of a window table), declared as the toolkit declares them, so that a header's
// CPU part (Params, ref::, shapes) compiles where the toolkit is not installed: a CPU-only build (cmake option
// MLALPHA_CUDA, docs/decisions.md "A CPU-only build"). Like <iosfwd>: a `.cu` or GPU `.cpp` file that calls the
// GPU functions includes <cuda_runtime.h> / <cuda_bf16.h> / <cublasLt.h> itself; repeating these declarations
// there is allowed (the same typedef, a forward declaration of the same struct).
struct CUstream_st;
typedef struct CUstream_st* cudaStream_t;            // <driver_types.h>
struct __nv_bfloat16;                                // <cuda_bf16.h> declares it so too, before defining it
struct cublasLtContext;
typedef struct cublasLtContext* cublasLtHandle_t;    // <cublasLt.h>
struct int4;                                         // <vector_types.h>
