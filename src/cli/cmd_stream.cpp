// `ml-alpha stream`: rows (time, instrument, features) as CSV in, one prediction row per input row out as soon as
// its time step is complete (docs/data.md, "Streaming"). Parses the flags, reads the rows (data/csv_stream.h),
// calls the streaming predictor (mlalpha/stream.h) and prints.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <unordered_set>

#include "cli/commands.h"
#include "data/csv.h"
#include "data/csv_stream.h"
#include "data/csv_write.h"
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

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  require(bool(in), "--instruments-file " + path + ": cannot be read");
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) {
    const size_t a = line.find_first_not_of(" \t"), b = line.find_last_not_of(" \t\r");
    if (a != std::string::npos) out.push_back(line.substr(a, b - a + 1));
  }
  return out;
}

// The CSV columns the model reads: the data settings given, else the checkpoint's.
CsvStreamSpec column_spec(const DataConfig& d, const std::vector<std::string>& model_features) {
  CsvStreamSpec s;
  s.time_column = d.time_column;
  s.instrument_column = d.instrument_column;
  s.feature_columns = d.feature_columns.empty() ? model_features : d.feature_columns;
  require(!s.feature_columns.empty(), "stream: the checkpoint names no feature columns (it was trained on a panel "
                                      "without column names): give them, --set 'data.feature_columns=[\"a\", \"b\"]'");
  require(model_features.empty() || s.feature_columns == model_features,
          "stream: data.feature_columns differ from the columns the model was trained on");
  s.delimiter = csv_delimiter_from_string(d.delimiter, "data.delimiter");
  s.time_format = d.time_format;
  return s;
}

// Every time step of `path` (the warm-up history), read with the stream's rules.
std::vector<CsvStreamStep> read_history(const std::string& path, const CsvStreamSpec& spec) {
  std::ifstream in(path, std::ios::binary);
  require(bool(in), "--history " + path + ": cannot be read");
  CsvStreamReader reader(in, spec, path);
  std::vector<CsvStreamStep> steps;
  for (CsvStreamStep s; reader.next(s);) steps.push_back(s);
  require(!steps.empty(), "--history " + path + ": no rows after the header");
  return steps;
}

// One time step's rows as the predictor's bar: (I, F) features, NaN for instruments without a row.
std::vector<float> bar_of(const StreamPredictor& p, const CsvStreamStep& step) {
  std::vector<float> x(size_t(p.instruments()) * p.features(), NAN);
  for (const CsvStreamRow& r : step.rows)
    std::copy(r.x.begin(), r.x.end(), x.begin() + ptrdiff_t(size_t(p.index_of(r.instrument)) * p.features()));
  return x;
}

}  // namespace

int cmd_stream(const StreamArgs& a) {
  const PredictMode mode = parse_predict_mode(a.mode, "--mode");
  // The model: one checkpoint, or the members of a population's run folder.
  std::optional<Model> model;
  std::optional<Ensemble> ensemble;
  if (std::filesystem::is_directory(a.checkpoint))
    ensemble.emplace(Ensemble::load(a.checkpoint, EnsembleSelection::parse(a.members.empty() ? "all" : a.members), a.fold));
  else
    model.emplace(Model::load_weights(a.checkpoint));
  const Model& ref = model ? *model : ensemble->member(0);
  RunConfig cfg = load_run_config(a.config, a.overrides, a.settings);
  if (!cfg.was_given_in("data")) cfg.data = ref.data_config();
  const CsvStreamSpec spec = column_spec(cfg.data, ref.feature_names());
  const bool resume = !a.state.empty() && std::filesystem::exists(a.state);
  require(!(resume && !a.history.empty()), "--history warms up a new stream, but --state " + a.state +
                                               " exists and holds the stream's history already (remove --history)");

  // The instruments: the state's, or those listed, then those of the history.
  std::vector<std::string> names = a.instruments.empty() ? std::vector<std::string>{} : split_list(a.instruments);
  if (!a.instruments_file.empty())
    for (const std::string& n : read_lines(a.instruments_file)) names.push_back(n);
  std::vector<CsvStreamStep> history;
  if (!a.history.empty()) {
    history = read_history(a.history, spec);
    std::unordered_set<std::string> known(names.begin(), names.end());
    for (const CsvStreamStep& s : history)
      for (const CsvStreamRow& r : s.rows)
        if (known.insert(r.instrument).second) names.push_back(r.instrument);
  }
  require(resume || !names.empty() || a.new_instruments,
          "stream: no instruments: list them (--instruments a,b,c or --instruments-file), give a --history to warm up "
          "on, a --state to resume, or --new-instruments to take each one as it first appears");
  StreamOptions opt;
  opt.mode = mode;
  opt.device = cfg.run.device;
  opt.precision = cfg.train.precision;
  opt.threads = cfg.run.threads;
  opt.reference = cfg.cpu().reference;
  auto make = [&](const std::vector<std::string>& list) {
    return model ? StreamPredictor(*model, list, opt) : StreamPredictor(*ensemble, list, opt);
  };
  // Made now when the instruments are known; with --new-instruments alone, at the first time step.
  std::optional<StreamPredictor> p;
  if (resume) {
    p.emplace(make({"_"}));  // the state file names the instruments
    p->load(a.state);
    // Instruments listed with a state: the stream's become those (the state's keep their history).
    if (!names.empty() && names != p->instrument_names()) p->set_instruments(names);
  } else if (!names.empty()) {
    p.emplace(make(names));
  }
  for (const CsvStreamStep& s : history) p->step(bar_of(*p, s), {}, s.time_value);

  // The input, then the output (opened only once everything above is checked).
  std::ifstream file;
  if (a.input != "-") {
    file.open(a.input, std::ios::binary);
    require(bool(file), "--input " + a.input + ": cannot be read");
  }
  std::istream& in = a.input == "-" ? std::cin : file;
  CsvStreamReader reader(in, spec, a.input == "-" ? "<stdin>" : a.input);
  if (p && !std::isnan(p->last_time())) reader.set_last_time(p->last_time());
  std::ofstream out_file;
  if (a.output != "-") {
    out_file.open(a.output, std::ios::binary | std::ios::trunc);
    require(bool(out_file), "--output " + a.output + ": cannot be written");
  }
  std::ostream& out = a.output == "-" ? std::cout : out_file;
  std::string head = "time,instrument,context";
  for (int k = 0; k < ref.model_config().K; ++k)
    head.append(",").append(csv_cell(std::string("pred_").append(
        size_t(k) < ref.target_names().size() ? ref.target_names()[size_t(k)] : std::to_string(k))));
  out << head << "\n" << std::flush;

  int64_t steps = 0, rows = 0;
  for (CsvStreamStep step; reader.next(step);) {
    // Unknown instruments: refused before the bar, or (--new-instruments) added with no history.
    std::vector<std::string> added;
    for (const CsvStreamRow& r : step.rows)
      if (!p || p->index_of(r.instrument) < 0) {
        require(a.new_instruments, reader.name() + ":" + std::to_string(r.line) + ": instrument '" + r.instrument +
                                       "' is not one of the stream's " + std::to_string(p ? p->instruments() : 0) +
                                       " instruments (list it in --instruments, or pass --new-instruments)");
        added.push_back(r.instrument);
      }
    if (!p) {
      p.emplace(make(added));
    } else if (!added.empty()) {
      std::vector<std::string> all = p->instrument_names();
      all.insert(all.end(), added.begin(), added.end());
      p->set_instruments(all);
    }
    const std::vector<float> pred = p->step(bar_of(*p, step), {}, step.time_value);
    const std::vector<int> context = p->context();
    const size_t K = size_t(p->targets());
    std::string text;
    for (const CsvStreamRow& r : step.rows) {
      const size_t i = size_t(p->index_of(r.instrument));
      text += csv_cell(step.time) + "," + csv_cell(r.instrument) + "," + std::to_string(context[i]);
      for (size_t k = 0; k < K; ++k) {
        text += ",";
        if (!std::isnan(pred[i * K + k])) csv_append_float(text, pred[i * K + k]);  // no prediction: an empty cell
      }
      text += "\n";
    }
    out << text << std::flush;
    require(bool(out), "stream: writing the predictions failed (" + (a.output == "-" ? std::string("stdout") : a.output) + ")");
    // The state after the rows are out: a process killed in between repeats this step's rows, never skips one.
    if (!a.state.empty()) p->save(a.state);
    ++steps, rows += int64_t(step.rows.size());
  }
  std::fprintf(stderr, "stream: %lld time steps, %lld rows, %d instruments, mode %s%s%s\n", static_cast<long long>(steps),
               static_cast<long long>(rows), p ? p->instruments() : 0, to_string(mode).c_str(),
               a.state.empty() ? "" : "; state in ", a.state.c_str());
  return 0;
}

}  // namespace mlalpha
