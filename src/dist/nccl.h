#pragma once
// NCCL for data-parallel training (docs/multi-gpu.md): the library loaded at run time, a communicator per process
// (one GPU each), the in-place gradient all-reduce (legal inside CUDA graph capture), and a bounded wait
// that turns a dead or hung peer into an error instead of a hang.
//
// NCCL is dlopen'ed ("libnccl.so.2"), never linked: single-GPU users and CI need no NCCL at all, and the
// error when it is missing says what to install. Its header (<nccl.h>, from the CUDA toolkit) stays out of
// this one; only nccl_gpu.cpp sees NCCL's types.
//
// Usage on every rank (one process per GPU; see dist/launch.h for --gpus N on one host):
//   const RankInfo r = rank_from_env(process_env());
//   Context ctx(r.local_rank);                                 // makes the rank's GPU current
//   auto nccl = std::make_shared<const NcclLib>();
//   Communicator comm = make_communicator(nccl, r, id_exchange_from_env(process_env(), r), {});
//   ... comm.all_reduce_sum(grads /* (n) */, n, ctx.stream());  // eagerly or while capturing a graph
//   ... comm.wait_or_abort(ctx.stream(), timeout, "the step 100 log");  // at sync points only
#include <cuda_runtime.h>

#include <chrono>
#include <memory>
#include <string>

#include "core/cuda_event.h"
#include "dist/bootstrap.h"

struct ncclComm;  // NCCL's opaque communicator (ncclComm_t is ncclComm*)

namespace mlalpha::dist {

// The NCCL shared library, open for this object's lifetime (dlclose on destruction, though NCCL's code
// stays mapped for the threads it leaves running); move-only. Before loading it sets NCCL_NVLS_ENABLE=0
// unless the variable is already set (see nccl_gpu.cpp for why), so the process's environment changes:
// construct it before starting threads that read the environment.
class NcclLib {
 public:
  // Throws Error naming `library`, dlerror()'s text and what to do (install NCCL, set LD_LIBRARY_PATH)
  // when it cannot be opened, naming the missing function when it is not NCCL, and naming both versions
  // when it is older than 2.14 (no non-blocking communicators, so no abortable init).
  explicit NcclLib(const std::string& library = "libnccl.so.2");
  ~NcclLib();
  NcclLib(NcclLib&& o) noexcept;
  NcclLib& operator=(NcclLib&& o) noexcept;
  NcclLib(const NcclLib&) = delete;
  NcclLib& operator=(const NcclLib&) = delete;

  // ncclGetVersion's code, e.g. 22809 for 2.28.9.
  int version() const { return version_; }
  // "2.28.9".
  std::string version_text() const;
  const std::string& library() const { return library_; }

  // A fresh unique id (ncclGetUniqueId; rank 0 makes it, bootstrap.h hands it to the others).
  UniqueId unique_id() const;

  struct Api;  // the resolved functions (nccl_gpu.cpp)
  const Api& api() const { return *api_; }

 private:
  void reset() noexcept;
  void* handle_ = nullptr;
  std::unique_ptr<Api> api_;
  std::string library_;
  int version_ = 0;
};

struct CommOptions {
  // How long initialisation, each wait for NCCL to enqueue work, and the destructor's finalisation may take
  // before the communicator is aborted (and, but for the destructor, an Error thrown).
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  // false (the default): a non-blocking communicator, so that every NCCL call returns at once and can be
  // abandoned (ncclCommAbort) when a peer never answers — NCCL's documented way to abort safely. true: a
  // blocking one, whose init and enqueues may hang on a dead peer; kept as a fallback only.
  bool blocking = false;
};

// One rank's membership in an NCCL communicator; destroyed (finalised, then freed) with its owner, or
// aborted when it failed; move-only. Bound to the CUDA device current at construction. Not thread-safe:
// one thread issues its calls.
class Communicator {
 public:
  // Joins the communicator `id` names as rank r.rank of r.world on the current device; every rank of the
  // world must call it with the same id. Throws Error (the call, the rank, NCCL's error string and last-error
  // text) when NCCL fails, and aborts and throws naming the timeout when init does not complete in time
  // (a peer that never joined).
  Communicator(std::shared_ptr<const NcclLib> lib, const UniqueId& id, const RankInfo& r, const CommOptions& o);
  ~Communicator();
  Communicator(Communicator&& o) noexcept;
  Communicator& operator=(Communicator&& o) noexcept;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int world() const { return world_; }
  bool aborted() const { return aborted_; }

  // buf (n) ← Σ over ranks of buf, in place, fp32, enqueued on `stream`. A collective: every rank calls it
  // with the same n, in the same order. It sums; a mean gradient needs a 1/world scale (e.g. folded into
  // the loss scale) on the caller's side. No host synchronisation: legal while `stream` is being captured
  // into a CUDA graph (every rank must capture it likewise, and replay the graph as a collective). Returns
  // once NCCL has enqueued the work (a non-blocking communicator is polled until then, at most the
  // timeout, host-side only).
  void all_reduce_sum(float* buf /* (n) */, size_t n, cudaStream_t stream);

  // Waits until `done` has completed, polling the event and NCCL's asynchronous error state. On an NCCL
  // error (a peer died, a network failure) or when `timeout` passes first (a peer hangs), aborts the
  // communicator — which also stops this rank's NCCL kernels — and throws Error naming this rank, `what`
  // was awaited and how long. Meant for the trainer's sync points (log, checkpoint), never inside capture.
  void wait_or_abort(cudaEvent_t done, std::chrono::milliseconds timeout, const std::string& what);
  // The same for all work enqueued on `stream` so far (records an event on it: not while capturing).
  void wait_or_abort(cudaStream_t stream, std::chrono::milliseconds timeout, const std::string& what);

  // Throws (after aborting) when NCCL reports an asynchronous error; cheap, never blocks.
  void check_async_error(const std::string& what);

  // Frees the communicator without waiting for peers (ncclCommAbort); later calls throw. Idempotent.
  void abort() noexcept;

 private:
  [[noreturn]] void fail(const std::string& call, int result, const std::string& detail);
  // Polls a non-blocking communicator until NCCL has finished the call it returned ncclInProgress for.
  void settle(const std::string& call, int result);
  void require_usable(const char* call) const;
  void reset() noexcept;

  std::shared_ptr<const NcclLib> lib_;
  ncclComm* comm_ = nullptr;
  int rank_ = 0, world_ = 1;
  bool aborted_ = false;
  CommOptions opts_;
  CudaEvent done_{cudaEventDisableTiming};  // for wait_or_abort(stream)
};

// How rank 0's unique id reaches the other ranks (dist/bootstrap.h): a file on a file system every rank
// sees, or TCP to rank 0's host and port. World size 1 needs neither.
struct IdExchange {
  std::string file;  // non-empty: exchange through this file
  std::string host;  // else: rank 0 listens on `port`, the others connect to host:port
  int port = 0;
};

// MLALPHA_DIST_ID_FILE (set by dist/launch.h) gives a file; else MASTER_ADDR and MASTER_PORT (torchrun's)
// give TCP. Throws naming the variables when a world of several has neither, or when the port is not an
// integer; a world of one gets an empty exchange.
IdExchange id_exchange_from_env(const EnvLookup& env, const RankInfo& r);

// Rank 0 makes the unique id and hands it to the others through `x`; then every rank joins. The waits for
// the id and for init are each bounded by o.timeout. World size 1: no exchange.
Communicator make_communicator(std::shared_ptr<const NcclLib> lib, const RankInfo& r, const IdExchange& x,
                               const CommOptions& o);

}  // namespace mlalpha::dist
