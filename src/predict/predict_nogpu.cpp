// The predict layer's GPU entry points (predict.h, stream_engine.h) in a CPU-only build, where the GPU code is not
// built (docs/decisions.md, "A CPU-only build"). They are not reached: every caller asks its Compute first, whose
// resolve() refuses 'gpu' in such a build (mlalpha/compute.h); were one reached, it says so in the same sentence.
#include "core/device.h"
#include "core/error.h"
#include "model/model_step.h"
#include "predict/predict.h"
#include "predict/predict_session.h"
#include "predict/stream_engine.h"

namespace mlalpha {

std::vector<float> predict_gpu(const ModelLayout&, const std::vector<float>&, const Panel&, const WindowPlan&, int,
                               Precision) {
  throw Error(no_gpu_support("run.device = 'gpu'"));
}

std::unique_ptr<SessionGpu> make_session_gpu(const ModelLayout&, Precision) {
  throw Error(no_gpu_support("run.device = 'gpu'"));
}

std::unique_ptr<WindowRunner> make_gpu_window_runner(const StreamEngineSpec&, int) {
  throw Error(no_gpu_support("run.device = 'gpu'"));
}

std::unique_ptr<Stepper> make_gpu_stepper(const StreamEngineSpec&) { throw Error(no_gpu_support("run.device = 'gpu'")); }

std::shared_ptr<Context> make_gpu_context() { throw Error(no_gpu_support("run.device = 'gpu'")); }

}  // namespace mlalpha
