// `ml-alpha stream`'s loop (mlalpha/stream.h, stream_csv): rows (time, instrument, features) as CSV in, one
// prediction row per input row out as soon as its time step is complete (docs/data.md, "Streaming"). It reads the
// rows (data/csv_stream.h), steps the streaming predictor and writes the rows; the command parses the flags, loads
// the checkpoint and prints what this returns and says.
//
// With a state the stream is crash-consistent: each complete step's rows are appended to the output and made
// durable, then the state is saved (atomically); a fault point precedes each of these effects (core/fault.h). A
// restart with the same command skips the input rows the state already holds, drops the output rows written
// after the state's last save (one step at most) and writes them again, so its output and state equal an
// uninterrupted stream's. A step that only the end of the input completes is not processed (more of its rows
// may come): the next run reads it again. Messages name the command's flags (--state, --output, --history, ...).
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <unordered_set>

#include "core/error.h"
#include "core/fault.h"
#include "core/shortest.h"
#include "data/csv.h"
#include "data/csv_stream.h"
#include "data/csv_write.h"
#include "data/fileio.h"
#include "data/line_reader.h"
#include "mlalpha/stream.h"

namespace mlalpha {

namespace {

namespace fs = std::filesystem;

// A line for the user (the command prints it on stderr).
void say(const CsvStreamSettings& s, const std::string& line) {
  if (s.message) s.message(line);
}

std::string number_text(double v) { return shortest_text(v); }

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  require(bool(in), "--instruments-file " + path + ": cannot be read");
  std::vector<std::string> out;
  LineEnd ended;
  // A bound on the names, as read_line bounds a line: a file that never ends (/dev/urandom, a FIFO left open)
  // is refused within seconds instead of filling the memory. No panel this tool trains on comes near it.
  constexpr size_t kMaxInstruments = size_t(1) << 20;
  for (std::string line; read_line(in, line, ended, "--instruments-file " + path, int64_t(out.size()) + 1);) {
    require(out.size() < kMaxInstruments, "--instruments-file " + path + ": more than " +
                                              std::to_string(kMaxInstruments) +
                                              " instruments (is it the file of names, one a line?)");
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

// The files the stream reads (each named as its flag) and the files it writes: none of the second may be one of
// the first (the same inode, through symbolic and hard links), nor the output the state. With the checkpoint
// count the files of its folder that a checkpoint is read with (sidecars, records, a population's leaderboard):
// .safetensors, .json and .toml files, leaderboard.csv and folds.csv (in a population's run folder, at any depth).
void check_no_clobber(const CsvStreamSettings& a, const std::string& lock) {
  ReadFiles read;
  if (a.input == "-")
    read.add("standard input", 0);
  else
    read.add("--input", a.input);
  if (!a.history.empty()) read.add("--history", a.history);
  if (!a.instruments_file.empty()) read.add("--instruments-file", a.instruments_file);
  std::error_code ec;
  const fs::path ck(a.checkpoint);
  const fs::path folder = ck.parent_path().empty() ? fs::path(".") : ck.parent_path();
  read.add("--checkpoint", a.checkpoint);
  auto read_with_checkpoint = [&](const fs::path& f) {
    const std::string ext = f.extension().string(), name = f.filename().string();
    if (ext == ".safetensors" || ext == ".json" || ext == ".toml" || name == "leaderboard.csv" || name == "folds.csv")
      read.add("the checkpoint's", f.string());
  };
  if (fs::is_directory(ck, ec)) {
    for (auto it = fs::recursive_directory_iterator(ck, fs::directory_options::skip_permission_denied, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
      if (it->is_regular_file(ec)) read_with_checkpoint(it->path());
  } else {
    for (auto it = fs::directory_iterator(folder, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
      if (it->is_regular_file(ec)) read_with_checkpoint(it->path());
  }
  auto refuse_overlap = [&](const std::string& what, const std::string& path) {
    if (const std::optional<std::string> same = read.which(path))
      throw Error(what + " " + path + " is the same file as " + *same +
                  ": the stream would write over a file it reads (give another " + what + ")");
  };
  if (a.output != "-") refuse_overlap("--output", a.output);
  if (!a.state.empty()) {
    refuse_overlap("--state", a.state);
    refuse_overlap("--state", lock);
    // The output and the state may not exist yet: then their paths tell.
    auto same = [](const std::string& x, const std::string& y) {
      const std::optional<FileId> ix = file_id(x), iy = file_id(y);
      if (ix && iy) return *ix == *iy;
      std::error_code e1, e2;
      return !ix && !iy && fs::weakly_canonical(x, e1) == fs::weakly_canonical(y, e2) && !e1 && !e2;
    };
    require(a.output == "-" || (!same(a.output, a.state) && !same(a.output, lock)),
            "--output " + a.output + " is the stream's state file (--state " + a.state +
                ") or its lock: give another --output");
  }
}

// The temporary files an atomic write of `path` leaves when the process is killed before its rename
// ("<path>.tmp-" and 16 hex digits, core/atomic_file.h): removed under the state's lock, where no other process
// writes them.
void remove_stale_temps(const std::string& path) {
  const fs::path p(path);
  const fs::path folder = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  const std::string prefix = p.filename().string() + ".tmp-";
  std::error_code ec;
  for (auto it = fs::directory_iterator(folder, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() != prefix.size() + 16 || name.compare(0, prefix.size(), prefix) != 0 ||
        name.find_first_not_of("0123456789abcdef", prefix.size()) != std::string::npos || !it->is_regular_file(ec))
      continue;
    fault_point(("remove " + it->path().string()).c_str());
    std::error_code rm;
    fs::remove(it->path(), rm);  // a file that cannot be removed stays: it is only clutter
  }
}

// The instruments of a resumed stream given a list: the state's, in its order (a restart with the same command
// leaves the state as it was), then the listed ones it lacks (with no history). A list that leaves out instruments
// of the state would drop their history: refused, naming them, unless --new-instruments (which adds the feed's
// instruments to the state unlisted) is given.
std::vector<std::string> resumed_instruments(std::vector<std::string> state, const std::vector<std::string>& listed,
                                             const CsvStreamSettings& a) {
  const std::unordered_set<std::string> in_list(listed.begin(), listed.end());
  std::vector<std::string> dropped;
  for (const std::string& n : state)
    if (!in_list.count(n)) dropped.push_back(n);
  if (!dropped.empty() && !a.new_instruments) {
    std::string text;
    for (size_t i = 0; i < dropped.size() && i < 10; ++i) text += (i ? ", " : "") + dropped[i];
    if (dropped.size() > 10) text += ", ... (" + std::to_string(dropped.size()) + " in all)";
    throw Error("--state " + a.state + " holds the history of instruments the stream's list leaves out: " + text +
                "; a restarted stream keeps every instrument of its state (list them too, or leave out "
                "--instruments to take the state's)");
  }
  const std::unordered_set<std::string> have(state.begin(), state.end());
  for (const std::string& n : listed)
    if (!have.count(n)) state.push_back(n);
  return state;
}

// The output file (none for "-"), its header written. A new stream writes it afresh. A resumed one appends: the
// rows already written are kept, those after the state's last time (a stream stopped before it saved its state)
// are dropped to be written again, and an output that is not this stream's is refused (csv_stream.h).
std::optional<AppendFile> open_output(const CsvStreamSettings& a, bool resume, const std::string& head,
                                      const std::string& time_format, double committed) {
  if (a.output == "-") return std::nullopt;
  std::error_code ec;
  // A device or FIFO (/dev/null, a pipe to a reader) cannot be read back nor truncated: the rows go on.
  if (fs::exists(a.output, ec) && !fs::is_regular_file(a.output, ec) && !fs::is_directory(a.output, ec)) {
    std::optional<AppendFile> out(std::in_place, a.output, AppendFile::Start::at_end);
    out->write(head);
    return out;
  }
  if (!resume || !fs::exists(a.output, ec)) {
    fault_point(("create " + a.output).c_str());
    std::optional<AppendFile> out(std::in_place, a.output, AppendFile::Start::empty);
    fault_point(("append " + a.output).c_str());
    out->write(head);
    return out;
  }
  require(fs::is_regular_file(a.output, ec), "--output " + a.output + " is a directory, expected a file");
  const StreamOutputTail tail = scan_stream_output(a.output, head.substr(0, head.size() - 1), time_format, committed);
  if (tail.keep < tail.size) {
    fault_point(("truncate " + a.output).c_str());
    fs::resize_file(a.output, tail.keep, ec);
    require(!ec, "--output " + a.output + ": cannot drop the rows written after the state's last save: " + ec.message());
    if (tail.rows_dropped > 0) {
      const std::string of_time = tail.time_dropped.empty() ? "" : " of time '" + tail.time_dropped + "'";
      say(a, "stream: --output " + a.output + ": dropped " + std::to_string(tail.rows_dropped) + " row(s)" + of_time +
                 " written after the state's last save (by a stream stopped before it saved); they are written again");
    }
  }
  std::optional<AppendFile> out(std::in_place, a.output, AppendFile::Start::at_end);
  if (tail.keep == 0) {  // empty, or a header cut short
    fault_point(("append " + a.output).c_str());
    out->write(head);
  }
  return out;
}

using MakeStream = std::function<StreamPredictor(const std::vector<std::string>&)>;

// The stream made by `make`; `ref`: its model, or its first member (the columns, the targets' names).
CsvStreamSummary run_stream(const Model& ref, const MakeStream& make, const CsvStreamSettings& s) {
  const CsvStreamSpec spec = column_spec(s.data, ref.feature_names());
  const std::string lock_path = s.state.empty() ? "" : s.state + ".lock";
  check_no_clobber(s, lock_path);
  // One stream on a state at a time: held until the process ends.
  std::optional<FileLock> lock;
  if (!s.state.empty()) {
    require(!fs::is_directory(s.state), "--state " + s.state + " is a directory, expected a state file (a new one is "
                                        "made when it does not exist)");
    lock.emplace(lock_path, "--state " + s.state);
    remove_stale_temps(s.state);
  }
  const bool resume = !s.state.empty() && std::filesystem::exists(s.state);

  // The instruments: the state's, or those listed, then those of the history.
  std::vector<std::string> names = s.instruments;
  if (!s.instruments_file.empty()) {
    const std::vector<std::string> listed = read_lines(s.instruments_file);
    require(!listed.empty(), "--instruments-file " + s.instruments_file +
                                 ": names no instrument (expected one name a line); leave the flag out to take the "
                                 "instruments from --instruments, the --history or the --state");
    names.insert(names.end(), listed.begin(), listed.end());
  }
  std::vector<CsvStreamStep> history;
  if (!s.history.empty()) history = read_history(s.history, spec);
  if (!resume) {  // a resumed stream's state holds its warm-up already (checked below)
    std::unordered_set<std::string> known(names.begin(), names.end());
    for (const CsvStreamStep& h : history)
      for (const CsvStreamRow& r : h.rows)
        if (known.insert(r.instrument).second) names.push_back(r.instrument);
  }
  require(resume || !names.empty() || s.new_instruments,
          "stream: no instruments: list them (--instruments a,b,c or --instruments-file), give a --history to warm up "
          "on, a --state to resume, or --new-instruments to take each one as it first appears");
  // Made now when the instruments are known; with --new-instruments alone, at the first time step.
  std::optional<StreamPredictor> p;
  if (resume) {
    p.emplace(make({"_"}));  // the state file names the instruments
    p->load(s.state);
    // The same command restarts a stream warmed up on --history: the state holds that warm-up.
    if (!history.empty()) {
      require(history.back().time_value <= p->last_time(),
              "--history " + s.history + " reaches time '" + history.back().time + "', after the last time of --state " +
                  s.state + " (" + number_text(p->last_time()) + "): a history warms up a new stream; send later "
                  "rows as the input");
      say(s, "stream: --history " + s.history + ": passed over (the state holds its warm-up)");
      history.clear();
    }
    if (!names.empty()) {
      const std::vector<std::string> all = resumed_instruments(p->instrument_names(), names, s);
      if (all != p->instrument_names()) p->set_instruments(all);
    }
  } else if (!names.empty()) {
    p.emplace(make(names));
  }
  for (const CsvStreamStep& h : history) p->step(bar_of(*p, h), {}, h.time_value);

  // The input: with a state, the rows it holds already are passed over (a restart resends them), and a final
  // line without a newline waits for the next run.
  std::ifstream file;
  if (s.input != "-") {
    file.open(s.input, std::ios::binary);
    require(bool(file), "--input " + s.input + ": cannot be read");
  }
  require(s.input != "-" || s.standard_input != nullptr, "stream: --input - but no standard input was given");
  std::istream& in = s.input == "-" ? *s.standard_input : file;
  CsvStreamReader reader(in, spec, s.input == "-" ? "<stdin>" : s.input);
  const double committed = p ? p->last_time() : NAN;
  if (!s.state.empty()) reader.hold_partial_input();
  if (resume && !std::isnan(committed)) reader.skip_through(committed);
  else if (p && !std::isnan(committed)) reader.set_last_time(committed);

  // The output, opened only once everything above is checked.
  std::string head = "time,instrument,context";
  for (int k = 0; k < ref.model_config().K; ++k)
    head.append(",").append(csv_cell(std::string("pred_").append(
        size_t(k) < ref.target_names().size() ? ref.target_names()[size_t(k)] : std::to_string(k))));
  head += "\n";
  std::optional<AppendFile> out_file = open_output(s, resume, head, spec.time_format, committed);
  // Standard output (output "-"): the caller's writer, which throws when the write fails.
  auto to_stdout = [&](const std::string& text) {
    require(bool(s.write), "stream: --output - but no writer for the rows was given");
    s.write(text);
  };
  if (!out_file) to_stdout(head);
  auto write_rows = [&](const std::string& text) {
    if (out_file) {
      fault_point(("append " + s.output).c_str());
      out_file->write(text);
      // On disk before the state that counts them: a power cut never leaves a state ahead of its output.
      if (!s.state.empty()) out_file->sync();
    } else {
      to_stdout(text);
    }
  };

  int64_t steps = 0, rows = 0;
  CsvStreamStep held;  // a step only the end of the input completed, with a state: left for the next run
  for (CsvStreamStep step; reader.next(step);) {
    // Unknown instruments: refused before the bar, or (--new-instruments) added with no history.
    std::vector<std::string> added;
    for (const CsvStreamRow& r : step.rows)
      if (!p || p->index_of(r.instrument) < 0) {
        require(s.new_instruments, reader.name() + ":" + std::to_string(r.line) + ": instrument '" + r.instrument +
                                       "' is not one of the stream's " + std::to_string(p ? p->instruments() : 0) +
                                       " instruments (list it in --instruments, or pass --new-instruments)");
        added.push_back(r.instrument);
      }
    if (step.ended_by_input_end && !s.state.empty()) {
      held = std::move(step);
      break;
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
    write_rows(text);
    // The state after the rows are out: a process stopped in between writes this step's rows again on restart
    // (dropping the first copy from its output), it never skips one.
    if (!s.state.empty()) {
      fault_point(("save " + s.state).c_str());
      p->save(s.state);
    }
    ++steps, rows += int64_t(step.rows.size());
  }
  if (reader.skipped_rows() > 0)
    say(s, "stream: passed over " + std::to_string(reader.skipped_rows()) + " input row(s) at or before the state's "
           "last time " + number_text(committed) + " (already in the state)");
  if (!held.rows.empty())
    say(s, "stream: the time step '" + held.time + "' (" + std::to_string(held.rows.size()) + " row(s) from line " +
           std::to_string(held.rows.front().line) + ") was completed only by the end of the input: not processed, as "
           "more of its rows may come; the next run reads it again (send it again, or end a complete step with a "
           "blank line)");
  if (reader.held_line() > 0)
    say(s, "stream: line " + std::to_string(reader.held_line()) + " of " + reader.name() + " has no newline (it may "
           "be cut short): not read; the next run reads it again");
  return {steps, rows, p ? p->instruments() : 0};
}

}  // namespace

CsvStreamSummary stream_csv(const Predictor& predictor, const CsvStreamSettings& s) {
  const std::vector<const Model*> models = predictor.models();
  require(!models.empty(), "stream: no model");
  return run_stream(*models.front(), [&](const std::vector<std::string>& list) {
    return StreamPredictor(predictor, list, s.options);
  }, s);
}

}  // namespace mlalpha
