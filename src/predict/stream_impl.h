#pragma once
// The streaming predictor's parts (mlalpha/stream.h): shared by stream.cpp (bars, instruments) and
// stream_state.cpp (the state file).
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "cpu/thread_pool.h"
#include "model/layout.h"
#include "mlalpha/stream.h"
#include "predict/stream_bar.h"
#include "predict/stream_engine.h"

namespace mlalpha {

struct StreamPredictor::Impl {
  // One model of the stream (an ensemble has several): its weights and settings, the processing of its rows
  // and its engine. Held by pointer: the engine keeps references to the layout and the weights.
  struct Member {
    ModelLayout layout;
    std::vector<float> params;
    TrainConfig train;
    DataConfig data;
    FeatureStats stats;
    std::unique_ptr<BarProcessor> proc;
    std::unique_ptr<StreamEngine> engine;
    std::vector<float> x, fill, out;  // scratch: (I, F), (F), (I, K)
    explicit Member(const ModelConfig& mc) : layout(mc) {}
  };

  StreamOptions opt;
  std::shared_ptr<Context> ctx;  // the GPU's, or null
  std::unique_ptr<cpu::ThreadPool> pool;  // the CPU's (null on the GPU): the members' engines share it; declared
                                          // before them, so it outlives them
  std::vector<std::unique_ptr<Member>> members;
  std::vector<std::string> names;  // (I)
  std::unordered_map<std::string, int> index;
  int F = 0, K = 0, C = 0;
  std::vector<std::string> feature_names, target_names;
  uint64_t hash = 0;       // of every member's weights and settings (the state file's binding)
  int64_t bars = 0;        // bars stepped since the stream began
  double last_time = NAN;  // the last bar's time (NaN: none given)
  // (I): window: the rows of each instrument's window (at most C); carry: its present rows since it started.
  std::vector<int> history;

  Impl(std::vector<const Model*> models, std::vector<std::string> list, const StreamOptions& o);
  int instruments() const { return int(names.size()); }
  // The index of every name (an Error naming the first unknown one).
  std::vector<int> indices(std::span<const std::string> which, const char* what) const;
  void set_names(std::vector<std::string> n);
  void remap(std::span<const int> from, std::vector<std::string> n);
};

// Throws unless the names are a valid instrument list: at least one, none empty, no name twice.
void check_instrument_names(const std::vector<std::string>& names);

}  // namespace mlalpha
