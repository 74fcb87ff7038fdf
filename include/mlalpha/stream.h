#pragma once
// The streaming predictor (DESIGN section 7, "Streaming"; docs/data.md, "Streaming"): a checkpoint, or a
// population's mean-ensemble, advanced one bar at a time for a fixed list of instruments. Each bar takes one
// raw row per instrument (the checkpoint's feature columns, unprocessed), processes it exactly as `predict`
// processes that date of a panel (the recorded data settings and statistics: per-date cross-sectional
// normalisation, global statistics, the forward-fill state, the fill) and returns one prediction per
// instrument. The predictions equal `predict` in the same mode on the whole history given so far (to the
// fp32 tolerance; bitwise where both run the same code, tests/cpu/test_stream.cpp):
//   carry   (the default) per layer and instrument the conv window and the SSM state (fp32) carried from the
//           instrument's first row: O(1) per bar. A bar where an instrument is absent leaves its state as it
//           is and gives it no prediction (NaN).
//   window  each instrument's last C = train.seq_len processed rows are kept and every bar runs the window
//           ending at it from a zero state, the trained context exactly (C times the work of carry). An absent
//           instrument's row still enters its window as the panel's fill would, and it gets no prediction.
// Rows and the NaN rule: an instrument is present at a bar when its row has at least one finite feature (and
// `present`, when given, is not 0 for it); NaN cells of a present row are processed and filled as the panel's
// NaN cells are; ±Inf anywhere in a row is refused (an Error naming the instrument and the feature) before
// anything changes. A refused bar never changes the state.
// State: save() writes everything (the model states or windows, the forward-fill state, the bar count, the last
// time, the instruments) to one file atomically, bound to the checkpoint by a hash of its weights and settings;
// load() into a predictor of the same checkpoint and mode resumes the stream bit-exactly, in another process
// too. GPU: the carry bar is one captured CUDA graph whose only host traffic is the row in and the predictions
// out, through pinned memory (model/model_step_gpu.h).
#include <cmath>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "mlalpha/ensemble.h"
#include "mlalpha/model.h"
#include "mlalpha/panel.h"

namespace mlalpha {

struct StreamOptions {
  PredictMode mode = PredictMode::carry;
  // Where and how (mlalpha/compute.h): the device; on the CPU the threads (instruments are split over them) and the
  // kernels (the reference: the tests' oracle); on the GPU the precision, in window mode only (the carry bar is
  // fp32). The default resolves the defaults: the GPU when one is present, every CPU thread.
  Compute compute = resolve({});
  std::string source;           // the checkpoint's path, recorded in state files for `ml-alpha info` ("": none)
};

// What a state file written by StreamPredictor::save says of itself, read without a model (`ml-alpha info`).
struct StreamStateInfo {
  std::string checkpoint_hash;  // 16 hex digits
  std::string source;           // the checkpoint's path as the writer gave it ("": not recorded)
  std::string mode;             // carry | window
  std::string kernels;          // cpu-fast | cpu-reference | gpu ("": not recorded)
  int members = 0, features = 0, targets = 0, context_length = 0;
  int64_t bars = 0;
  double last_time = NAN;       // NaN: no time given yet
  std::vector<std::string> instruments;
  std::vector<int> history;     // (I): the rows behind each instrument's state
};
// Whether `path` is a stream state file (a safetensors file with the state's format entry); false for anything
// else, a checkpoint included. Errors only when it cannot be read.
bool is_stream_state(const std::string& path);
// The state file's description; an Error naming the file when it is not a complete state file.
StreamStateInfo read_stream_state_info(const std::string& path);

class StreamPredictor {
 public:
  // A stream of `predictor` for these instruments (names, unique, at least one): a Model's, or for an Ensemble the
  // mean of its members' streams, summed in double in member order and rounded once (as Ensemble::predict).
  StreamPredictor(const Predictor& predictor, std::vector<std::string> instruments, const StreamOptions& options = {});
  StreamPredictor(StreamPredictor&&) noexcept;
  StreamPredictor& operator=(StreamPredictor&&) noexcept;
  ~StreamPredictor();

  int instruments() const;
  const std::vector<std::string>& instrument_names() const;
  // The instrument's index, or -1.
  int index_of(const std::string& name) const;
  int features() const;  // F
  int targets() const;   // K
  const std::vector<std::string>& feature_names() const;  // the checkpoint's (may be empty)
  const std::vector<std::string>& target_names() const;
  PredictMode mode() const;
  int context_length() const;  // C = train.seq_len
  bool on_gpu() const;
  int64_t bars() const;        // bars stepped since the stream began (warm-up and restored bars included)
  double last_time() const;    // the last bar's time (NaN: none given yet)
  std::string checkpoint_hash() const;  // 16 hex digits: the weights and settings the state files are bound to

  // One bar. x (I, F): raw features, instruments in this stream's order. present (I) or empty: 0 marks an
  // instrument absent whatever its row holds. time: the bar's time (a number, or seconds since the epoch for
  // dates); when given (not NaN) it must be after the last bar's, or the bar is refused. Returns (I, K), NaN for
  // absent instruments.
  std::vector<float> step(std::span<const float> x, std::span<const uint8_t> present = {}, double time = NAN);
  // The rows of history behind each instrument's last prediction (I): window: min(C, its rows in the window);
  // carry: its present rows since it started. Under C in window mode: a shorter context than trained.
  std::vector<int> context() const;

  // Every instrument, or the named ones, back to no history (zero state, empty window, no forward-fill value).
  void reset();
  void reset(std::span<const std::string> names);
  // The stream's instruments become `names`: those kept keep their state, new ones start with none (in window
  // mode their past bars read as the fill, as a panel's missing rows), those left out are dropped.
  void set_instruments(std::vector<std::string> names);
  // Steps every time step of `history` (its rows matched to this stream's instruments by name: an instrument the
  // stream does not have is an error, one the history does not have is absent) and discards the predictions.
  // Its parsed times (Panel::time_values), when it has them, are the bars' times.
  void warm_up(const Panel& history);

  // The whole state to `path` (atomically: the old file stays until the new one is complete).
  void save(const std::string& path) const;
  // Restores a state written by save() for the same checkpoint (its hash), mode and model: the instruments,
  // the bar count and the last time come from the file. Checked whole before anything changes.
  void load(const std::string& path);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// `ml-alpha stream` as a call (docs/data.md, "Streaming"; the command parses its flags into this and prints): rows
// (time, instrument, features) as CSV in, one prediction row per input row out ("time,instrument,context,pred_<k>")
// as soon as its time step is complete. With `state` it is crash-consistent: each complete step's rows are appended
// to the output and made durable, then the state is saved atomically; a restart with the same settings skips the
// input rows the state holds, drops the output rows written after its last save and writes them again, so its
// output and state equal an uninterrupted stream's; a step only the end of the input completes waits for the next
// run. No file written is one read (the input, the history, the instruments file, the checkpoint's files). Errors
// and messages name the command's flags (--input, --output, --state, --history, --instruments-file).
struct CsvStreamSettings {
  std::string input = "-";                 // a CSV file, or "-": standard_input
  std::istream* standard_input = nullptr;  // what input "-" reads (the command's std::cin)
  std::string output = "-";                // a CSV file (appended to when resuming), or "-": `write`
  std::function<void(const std::string&)> write;    // output "-": the header, then each step's rows; throws to stop
  std::function<void(const std::string&)> message;  // a line for the user (the command's stderr)
  std::vector<std::string> instruments;    // listed (--instruments)
  std::string instruments_file;            // one name a line ("": none)
  std::string history;                     // a CSV of earlier rows to warm a new stream up on ("": none)
  std::string state;                       // resumed from when it exists, written after every time step ("": none)
  bool new_instruments = false;            // an instrument seen for the first time joins the stream
  std::string checkpoint;                  // the checkpoint or run folder the model was read from (never written)
  DataConfig data;                         // the columns: time, instrument, features (the model's when empty),
                                           // delimiter, time format
  StreamOptions options;                   // the mode, the compute settings, the source recorded in the state
};
struct CsvStreamSummary {
  int64_t steps = 0, rows = 0;  // time steps and rows predicted by this call
  int instruments = 0;          // the stream's instruments at the end
};
// The stream of one checkpoint (a Model), or of a population's mean-ensemble (an Ensemble).
CsvStreamSummary stream_csv(const Predictor& predictor, const CsvStreamSettings& settings);

}  // namespace mlalpha
