#include "dist/nccl.h"

#include <dlfcn.h>
#include <nccl.h>  // the CUDA toolkit's: types and signatures only; libnccl is dlopen'ed, never linked

#include <charconv>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>

#include "core/cuda_check.h"
#include "core/error.h"

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 14, 0)
// Non-blocking communicators and ncclCommFinalize, which this file relies on, came with 2.14.
#error "nccl.h is older than NCCL 2.14: point MLALPHA_NCCL_INCLUDE_DIR at a newer one"
#endif

namespace mlalpha::dist {

static_assert(sizeof(ncclUniqueId) == kUniqueIdBytes, "bootstrap.h's UniqueId must hold ncclUniqueId");

// Every function the engine calls, resolved by name; the pointer types come from <nccl.h> so a signature
// mismatch is a compile error, not a crash.
struct NcclLib::Api {
  decltype(&ncclGetVersion) get_version = nullptr;
  decltype(&ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&ncclCommInitRankConfig) comm_init_rank_config = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclCommGetAsyncError) comm_get_async_error = nullptr;
  decltype(&ncclCommFinalize) comm_finalize = nullptr;
  decltype(&ncclCommAbort) comm_abort = nullptr;
  decltype(&ncclCommDestroy) comm_destroy = nullptr;
  decltype(&ncclGetErrorString) get_error_string = nullptr;
  decltype(&ncclGetLastError) get_last_error = nullptr;
};

namespace {

using Clock = std::chrono::steady_clock;

// Non-blocking communicators and ncclCommFinalize came with NCCL 2.14.
constexpr int kMinVersion = NCCL_VERSION(2, 14, 0);

std::string ms_text(std::chrono::milliseconds t) { return std::to_string(t.count()) + " ms"; }

std::string version_string(int code) {
  // Codes since 2.9 are major·10000 + minor·100 + patch; before, major·1000 + minor·100 + patch.
  const int major = code < 10000 ? code / 1000 : code / 10000;
  const int minor = code < 10000 ? code / 100 % 10 : code / 100 % 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(code % 100);
}

template <class Fn>
void resolve(void* handle, const std::string& library, const char* name, Fn& out) {
  (void)dlerror();
  void* sym = dlsym(handle, name);
  const char* err = dlerror();
  require(sym != nullptr && err == nullptr,
          "NCCL: '" + library + "' was opened but has no " + name + " (" + (err ? err : "null symbol") +
              "): is it NCCL 2.14 or later?");
  out = reinterpret_cast<Fn>(sym);
}

// NVLink SHARP / multicast (NVLS) stays off unless the user chose otherwise: on the shared device machines
// this project runs on, a program using NVLink multicast can put the host's GPUs, which others share, out of
// service for a day or more, so those machines require NCCL_NVLS_ENABLE=0 (also for processes that build
// their own environment). Set before NCCL is loaded, since NCCL reads its variables once, at its first call.
void disable_nvls_unless_set() { ::setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0); }

}  // namespace

NcclLib::NcclLib(const std::string& library) : api_(std::make_unique<Api>()), library_(library) {
  disable_nvls_unless_set();
  // RTLD_LOCAL: NCCL's symbols stay out of the global namespace (nothing else should bind to them).
  // RTLD_NODELETE: dlclose must not unmap NCCL, whose threads outlive its calls (ncclGetUniqueId leaves a
  // bootstrap thread waiting for ranks, communicators leave proxy threads); unmapping their code under them
  // crashed the process in about a third of the runs of test_nccl.
  handle_ = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (handle_ == nullptr) {
    const char* err = dlerror();
    throw Error("NCCL: cannot load '" + library + "' (" + (err ? err : "no dlerror text") +
                "). Several GPUs need NCCL 2.14 or later: install it (e.g. the libnccl2 package, or NVIDIA's "
                "NCCL for your CUDA version) or add its folder to LD_LIBRARY_PATH. One GPU needs no NCCL.");
  }
  try {
    resolve(handle_, library_, "ncclGetVersion", api_->get_version);
    resolve(handle_, library_, "ncclGetUniqueId", api_->get_unique_id);
    resolve(handle_, library_, "ncclCommInitRankConfig", api_->comm_init_rank_config);
    resolve(handle_, library_, "ncclAllReduce", api_->all_reduce);
    resolve(handle_, library_, "ncclCommGetAsyncError", api_->comm_get_async_error);
    resolve(handle_, library_, "ncclCommFinalize", api_->comm_finalize);
    resolve(handle_, library_, "ncclCommAbort", api_->comm_abort);
    resolve(handle_, library_, "ncclCommDestroy", api_->comm_destroy);
    resolve(handle_, library_, "ncclGetErrorString", api_->get_error_string);
    resolve(handle_, library_, "ncclGetLastError", api_->get_last_error);
    const ncclResult_t rc = api_->get_version(&version_);
    require(rc == ncclSuccess, "NCCL: ncclGetVersion failed in '" + library_ + "': " + api_->get_error_string(rc));
    require(version_ >= kMinVersion, "NCCL: '" + library_ + "' is version " + version_string(version_) +
                                         "; 2.14 or later is needed (non-blocking communicators, so that a hung "
                                         "peer can be aborted): install a newer NCCL");
  } catch (...) {
    reset();
    throw;
  }
}

NcclLib::~NcclLib() { reset(); }

NcclLib::NcclLib(NcclLib&& o) noexcept
    : handle_(std::exchange(o.handle_, nullptr)), api_(std::move(o.api_)), library_(std::move(o.library_)),
      version_(std::exchange(o.version_, 0)) {}

NcclLib& NcclLib::operator=(NcclLib&& o) noexcept {
  if (this != &o) {
    reset();
    handle_ = std::exchange(o.handle_, nullptr);
    api_ = std::move(o.api_);
    library_ = std::move(o.library_);
    version_ = std::exchange(o.version_, 0);
  }
  return *this;
}

void NcclLib::reset() noexcept {
  if (handle_) (void)dlclose(handle_);  // drops the reference; NCCL stays mapped (RTLD_NODELETE, above)
  handle_ = nullptr;
}

std::string NcclLib::version_text() const { return version_string(version_); }

UniqueId NcclLib::unique_id() const {
  require(api_ && handle_, "NCCL: unique_id() on a moved-from NcclLib");
  ncclUniqueId id;
  const ncclResult_t rc = api_->get_unique_id(&id);
  if (rc != ncclSuccess)
    throw Error(std::string("NCCL: ncclGetUniqueId failed on rank 0: ") + api_->get_error_string(rc) + " (" +
                api_->get_last_error(nullptr) + ")");
  UniqueId out;
  std::memcpy(out.data(), &id, out.size());
  return out;
}

// ---- Communicator --------------------------------------------------------------------------------------

Communicator::Communicator(std::shared_ptr<const NcclLib> lib, const UniqueId& id, const RankInfo& r,
                           const CommOptions& o)
    : lib_(std::move(lib)), rank_(r.rank), world_(r.world), opts_(o) {
  require(lib_ != nullptr, "NCCL: Communicator needs a loaded NcclLib, got none");
  require(r.world >= 1 && r.rank >= 0 && r.rank < r.world,
          "NCCL: rank " + std::to_string(r.rank) + " is outside a world of " + std::to_string(r.world));
  require(o.timeout.count() > 0, "NCCL: the timeout must be positive, got " + ms_text(o.timeout));
  ncclUniqueId nid;
  std::memcpy(&nid, id.data(), id.size());
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = o.blocking ? 1 : 0;
  ncclComm_t comm = nullptr;
  const ncclResult_t rc = lib_->api().comm_init_rank_config(&comm, r.world, nid, r.rank, &config);
  comm_ = comm;  // a non-blocking init hands out the handle at once, so that it can be aborted
  if (rc != ncclSuccess && rc != ncclInProgress) fail("ncclCommInitRankConfig", rc, "");
  settle("ncclCommInitRankConfig (waiting for all " + std::to_string(world_) + " ranks to join)", rc);
}

Communicator::~Communicator() { reset(); }

Communicator::Communicator(Communicator&& o) noexcept
    : lib_(std::move(o.lib_)), comm_(std::exchange(o.comm_, nullptr)), rank_(o.rank_), world_(o.world_),
      aborted_(o.aborted_), opts_(o.opts_), done_(std::move(o.done_)) {}

Communicator& Communicator::operator=(Communicator&& o) noexcept {
  if (this != &o) {
    reset();
    lib_ = std::move(o.lib_);
    comm_ = std::exchange(o.comm_, nullptr);
    rank_ = o.rank_, world_ = o.world_, aborted_ = o.aborted_, opts_ = o.opts_;
    done_ = std::move(o.done_);
  }
  return *this;
}

// Orderly end: ncclCommFinalize flushes this rank's outstanding work (on a non-blocking communicator it
// returns at once and is polled, at most the timeout), then ncclCommDestroy frees locally. Anything else — a
// failed finalisation, an asynchronous error, the timeout — aborts instead: a peer may be gone, and waiting
// for it would hang the exit.
void Communicator::reset() noexcept {
  if (comm_ == nullptr) return;
  const auto& api = lib_->api();
  bool clean = !aborted_;
  if (clean) {
    ncclResult_t st = api.comm_finalize(comm_);
    const auto deadline = Clock::now() + opts_.timeout;
    while (st == ncclSuccess || st == ncclInProgress) {
      ncclResult_t state = ncclSuccess;
      if (api.comm_get_async_error(comm_, &state) != ncclSuccess) state = ncclInternalError;
      if (state != ncclInProgress) {
        st = state;
        break;
      }
      if (Clock::now() >= deadline) {
        st = ncclInProgress;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    clean = st == ncclSuccess;
  }
  if (clean) (void)api.comm_destroy(comm_);  // the destructor cannot report; abort is the fallback below
  else (void)api.comm_abort(comm_);
  comm_ = nullptr;
  aborted_ = true;
}

void Communicator::abort() noexcept {
  if (comm_ != nullptr && !aborted_) (void)lib_->api().comm_abort(comm_);  // nothing to do if it fails
  comm_ = nullptr;
  aborted_ = true;
}

void Communicator::fail(const std::string& call, int result, const std::string& detail) {
  const auto& api = lib_->api();
  const auto rc = static_cast<ncclResult_t>(result);
  // The last-error text first: ncclCommAbort frees what it describes.
  const char* last = api.get_last_error(comm_);
  const std::string last_text = last && *last ? std::string(" NCCL's last error: ") + last : "";
  abort();
  throw Error("NCCL: " + call + " failed on rank " + std::to_string(rank_) + " of " + std::to_string(world_) + ": " +
              api.get_error_string(rc) + (detail.empty() ? "" : " (" + detail + ")") + "." + last_text +
              " The communicator was aborted.");
}

void Communicator::settle(const std::string& call, int result) {
  if (result == ncclSuccess && opts_.blocking) return;
  // A non-blocking call returns ncclInProgress while NCCL does its work in the background; the communicator's
  // state says when that is done, and no other NCCL call may be made until then. Host-side polling only, so
  // this is also legal while a stream is being captured.
  const auto& api = lib_->api();
  const auto start = Clock::now();
  const auto deadline = start + opts_.timeout;
  for (;;) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t q = api.comm_get_async_error(comm_, &state);
    if (q != ncclSuccess) fail("ncclCommGetAsyncError after " + call, q, "");
    if (state == ncclSuccess) return;
    if (state != ncclInProgress) fail(call, state, "reported asynchronously");
    if (Clock::now() >= deadline)
      fail(call, ncclInProgress,
           "still in progress after " + ms_text(opts_.timeout) + ": a peer is dead, hung or never started");
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

void Communicator::require_usable(const char* call) const {
  require(comm_ != nullptr && !aborted_, std::string("NCCL: ") + call + " on rank " + std::to_string(rank_) +
                                             ": the communicator was aborted (or moved from) after an earlier "
                                             "error; make a new one");
}

void Communicator::all_reduce_sum(float* buf /* (n) */, size_t n, cudaStream_t stream) {
  require_usable("all_reduce_sum");
  if (n == 0) return;
  require(buf != nullptr, "NCCL: all_reduce_sum of " + std::to_string(n) + " floats got a null buffer");
  const ncclResult_t rc = lib_->api().all_reduce(buf, buf, n, ncclFloat, ncclSum, comm_, stream);
  const std::string call = "ncclAllReduce (sum of " + std::to_string(n) + " floats, in place)";
  if (rc != ncclSuccess && rc != ncclInProgress) fail(call, rc, "");
  settle(call, rc);
}

void Communicator::check_async_error(const std::string& what) {
  require_usable("check_async_error");
  ncclResult_t state = ncclSuccess;
  const ncclResult_t q = lib_->api().comm_get_async_error(comm_, &state);
  if (q != ncclSuccess) fail("ncclCommGetAsyncError (" + what + ")", q, "");
  if (state != ncclSuccess && state != ncclInProgress) fail(what, state, "an asynchronous NCCL error: a peer failed?");
}

void Communicator::wait_or_abort(cudaEvent_t done, std::chrono::milliseconds timeout, const std::string& what) {
  require_usable("wait_or_abort");
  const auto start = Clock::now();
  for (;;) {
    const cudaError_t q = cudaEventQuery(done);
    if (q == cudaSuccess) {
      check_async_error(what);  // an error raised by work that has just completed
      return;
    }
    if (q != cudaErrorNotReady) {
      // A CUDA fault on this rank: the peers would wait on it forever, so let them see an abort.
      abort();
      throw Error("NCCL: rank " + std::to_string(rank_) + " of " + std::to_string(world_) + " waiting for " + what +
                  ": cudaEventQuery failed: " + cudaGetErrorName(q) + " (" + cudaGetErrorString(q) +
                  "). The communicator was aborted.");
    }
    check_async_error(what);
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
    if (waited >= timeout) {
      abort();
      throw Error("NCCL: rank " + std::to_string(rank_) + " of " + std::to_string(world_) + " waited " +
                  ms_text(waited) + " for " + what + " (the limit is " + ms_text(timeout) +
                  "): a peer is dead or hung. The communicator was aborted.");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

void Communicator::wait_or_abort(cudaStream_t stream, std::chrono::milliseconds timeout, const std::string& what) {
  require_usable("wait_or_abort");
  done_.record(stream);
  wait_or_abort(done_.get(), timeout, what);
}

// ---- making one ----------------------------------------------------------------------------------------

IdExchange id_exchange_from_env(const EnvLookup& env, const RankInfo& r) {
  IdExchange x;
  if (r.world == 1) return x;
  if (const char* f = env("MLALPHA_DIST_ID_FILE"); f != nullptr && *f != '\0') {
    x.file = f;
    return x;
  }
  const char* host = env("MASTER_ADDR");
  const char* port = env("MASTER_PORT");
  require(host != nullptr && *host != '\0' && port != nullptr,
          "NCCL: a world of " + std::to_string(r.world) +
              " ranks needs a way to hand out rank 0's id: set MLALPHA_DIST_ID_FILE (a path every rank sees) or "
              "MASTER_ADDR and MASTER_PORT (rank 0's host and a free port)");
  x.host = host;
  const char* end = port + std::strlen(port);
  const auto [p, ec] = std::from_chars(port, end, x.port);
  require(ec == std::errc() && p == end && p != port && x.port >= 1 && x.port <= 65535,
          std::string("MASTER_PORT must be a port number in [1, 65535], got '") + port + "'");
  return x;
}

Communicator make_communicator(std::shared_ptr<const NcclLib> lib, const RankInfo& r, const IdExchange& x,
                               const CommOptions& o) {
  require(lib != nullptr, "NCCL: make_communicator needs a loaded NcclLib, got none");
  UniqueId id{};
  if (r.rank == 0) id = lib->unique_id();
  if (r.world > 1) {
    require(!x.file.empty() || !x.host.empty(),
            "NCCL: rank " + std::to_string(r.rank) + " of " + std::to_string(r.world) +
                " has no id exchange (neither a file nor host:port; see id_exchange_from_env)");
    id = !x.file.empty() ? exchange_via_file(x.file, r, id, o.timeout) : exchange_via_tcp(x.host, x.port, r, id, o.timeout);
  }
  return Communicator(std::move(lib), id, r, o);
}

}  // namespace mlalpha::dist
