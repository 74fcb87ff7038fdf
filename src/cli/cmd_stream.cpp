// `ml-alpha stream`: parses the flags, loads the checkpoint (or a population's members) and calls stream_csv
// (include/mlalpha/stream.h), which reads the rows, steps the streaming predictor and writes the predictions
// (docs/data.md, "Streaming"); prints its messages and summary on stderr.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>
#include <sstream>

#include "commands.h"
#include "mlalpha/error.h"
#include "mlalpha/stream.h"

namespace mlalpha {

namespace {

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    const size_t a = item.find_first_not_of(" \t"), b = item.find_last_not_of(" \t\r");
    if (a != std::string::npos) out.push_back(item.substr(a, b - a + 1));
  }
  return out;
}

}  // namespace

int cmd_stream(const StreamArgs& a) {
  const PredictMode mode = parse_predict_mode(a.mode, "--mode");
  // The model: one checkpoint, or the members of a population's run folder.
  std::optional<Model> model;
  std::optional<Ensemble> ensemble;
  if (std::filesystem::is_directory(a.checkpoint)) {
    ensemble.emplace(Ensemble::load(a.checkpoint, EnsembleSelection::parse(a.members.empty() ? "all" : a.members), a.fold));
  } else {
    require(a.members.empty() && a.fold < 0,
            std::string(a.members.empty() ? "--fold" : "--members") + " chooses among the members of a population's "
            "run folder; " + a.checkpoint + " is one checkpoint (give its run folder, or drop the flag)");
    model.emplace(Model::load_weights(a.checkpoint));
  }
  const Model& ref = model ? *model : ensemble->member(0);
  RunConfig cfg = load_run_config(a.config, a.overrides, a.settings);
  const Compute compute = resolve(cfg.compute());
  check_inference_settings(cfg, a, ref.data_config(), a.checkpoint, "the stream", false, compute);
  if (!cfg.was_given_in("data")) cfg.data = ref.data_config();
  for (const ConfigSetting& f : a.settings)
    require(f.key != "train.precision" || f.value == to_string(Precision::FP32) || mode == PredictMode::window,
            "--precision " + f.value + " does nothing in carry mode (the carried step computes in fp32): drop it, or "
            "stream in --mode window");
  CsvStreamSettings s;
  s.input = a.input, s.output = a.output;
  s.standard_input = &std::cin;
  // Standard output, checked at once so that the reason (ENOSPC on /dev/full, EPIPE) is the failed write's.
  s.write = [](const std::string& text) {
    errno = 0;
    std::cout << text << std::flush;
    const int err = errno;
    require(bool(std::cout), std::string("stream: writing the predictions to standard output failed") +
                                 (err ? std::string(": ") + std::strerror(err) : std::string()));
  };
  s.message = [](const std::string& line) { std::cerr << line << std::endl; };
  s.instruments = a.instruments.empty() ? std::vector<std::string>{} : split_list(a.instruments);
  s.instruments_file = a.instruments_file, s.history = a.history, s.state = a.state;
  s.new_instruments = a.new_instruments;
  s.checkpoint = a.checkpoint;
  s.data = cfg.data;
  s.options.mode = mode;
  s.options.compute = compute;
  s.options.source = a.checkpoint;
  const Predictor& predictor = model ? static_cast<const Predictor&>(*model) : *ensemble;
  const CsvStreamSummary done = stream_csv(predictor, s);
  std::fprintf(stderr, "stream: %lld time steps, %lld rows, %d instruments, mode %s%s%s\n",
               static_cast<long long>(done.steps), static_cast<long long>(done.rows), done.instruments,
               to_string(mode).c_str(), a.state.empty() ? "" : "; state in ", a.state.c_str());
  return 0;
}

}  // namespace mlalpha
