#pragma once
// One model's part of a stream (mlalpha/stream.h): what it keeps between bars and how a bar of processed rows
// becomes predictions, in the two modes of docs/data.md.
//   carry   the model's recurrent state (model/model_step.h): CpuStepper, or GpuStepper's captured bar.
//   window  each instrument's last C processed rows; a bar runs every present instrument's window through the
//           prediction path `predict` uses (predict_cpu / predict_gpu over a window plan), so a streamed
//           window is computed by the very code that computes that date in `predict`.
// The engine knows nothing of names, times or normalisation: the predictor (stream.cpp) processes the rows,
// keeps the bar count and each instrument's history and passes them in.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "data/panel.h"
#include "model/layout.h"
#include "mlalpha/config_types.h"
#include "mlalpha/compute.h"
#include "mlalpha/model.h"
#include "predict/window_plan.h"

namespace mlalpha {

class Context;
class Stepper;
namespace cpu {
class ThreadPool;
}

class StreamEngine {
 public:
  virtual ~StreamEngine() = default;
  // One bar: x (I, F) processed rows (finite), present (I), fill (F): the value of a row of an instrument with no
  // history at this bar; history (I): each instrument's rows behind this bar's window, this bar included (window
  // mode; carry ignores it); bar: the index of this bar since the stream began. out (I, K): NaN where absent.
  virtual void bar(const float* x, const uint8_t* present, const float* fill, const int* history, int64_t bar,
                   float* out) = 0;
  // Those instruments back to no history.
  virtual void reset(std::span<const int> which) = 0;
  // Instrument j ← from[j] (−1: a new one). `bars` bars have been stepped (window: a new instrument's past rows
  // are the fill of those bars).
  virtual void remap(std::span<const int> from, int64_t bars) = 0;
  // The state as named arrays for the state file (prefix + "conv", ...), and back. `bars` as in remap.
  virtual std::vector<LoadedTensor> state(const std::string& prefix, int64_t bars) const = 0;
  // Throws unless `file` holds this engine's arrays (named prefix + ...) for `instruments` instruments, of the
  // right shapes and finite; changes nothing.
  virtual void check(const SafetensorsFile& file, const std::string& prefix, int instruments) const = 0;
  // Takes the arrays (checked) and their instrument count.
  virtual void restore(const SafetensorsFile& file, const std::string& prefix, int instruments, int64_t bars) = 0;
};

struct StreamEngineSpec {
  const ModelLayout* layout = nullptr;
  const std::vector<float>* params = nullptr;  // the trained arena (table.total())
  TrainConfig train;                           // train.seq_len (C) and the batch (the prediction tile)
  PredictMode mode = PredictMode::carry;
  int instruments = 0;
  Context* ctx = nullptr;  // the GPU's context; null: the CPU
  Compute compute;         // CPU: the fast or the reference kernels; GPU (window mode): the precision
  cpu::ThreadPool* pool = nullptr;  // CPU: the stream's pool, shared by its members' engines (its threads)
};

std::unique_ptr<StreamEngine> make_stream_engine(const StreamEngineSpec& spec);

// The GPU's parts of the two engines (GPU code, stream_engine_gpu.cpp), made when spec.ctx is set.
// window: the present instruments' windows w (N, C, F) by `plan` through the model, tile windows a forward.
class WindowRunner {
 public:
  virtual ~WindowRunner() = default;
  virtual std::vector<float> run(const Panel& w, const WindowPlan& plan) = 0;
};
std::unique_ptr<WindowRunner> make_gpu_window_runner(const StreamEngineSpec& spec, int tile);
// carry: GpuStepper (model/model_step_gpu.h).
std::unique_ptr<Stepper> make_gpu_stepper(const StreamEngineSpec& spec);
// A stream's GPU context on GPU 0 (shared: the stream that holds it needs no GPU header to drop it).
std::shared_ptr<Context> make_gpu_context();

}  // namespace mlalpha
