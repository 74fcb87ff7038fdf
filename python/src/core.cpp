// mlalpha._core: the engine's public API (include/mlalpha/) for Python. Thin by design: configs go through
// parse_run_config, training through run_training, models through mlalpha::Model, metrics through
// compute_metrics; this file only converts arrays and results. The GIL is released while the engine
// works and taken back inside the run callback to call Python.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <atomic>
#include <cstdint>
#include <cmath>
#include <csignal>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <mlalpha/config.h>
#include <mlalpha/ensemble.h>
#include <mlalpha/error.h>
#include <mlalpha/metrics.h>
#include <mlalpha/model.h>
#include <mlalpha/panel.h>
#include <mlalpha/run.h>
#include <mlalpha/stream.h>

namespace nb = nanobind;
using namespace nb::literals;

namespace {

using FloatArray = nb::ndarray<const float, nb::c_contig, nb::device::cpu>;
using OutArray = nb::ndarray<nb::numpy, float>;

// A float32 numpy array owning `v` (moved to the heap, freed with the array).
OutArray to_numpy(std::vector<float>&& v, const std::vector<size_t>& shape) {
  auto* heap = new std::vector<float>(std::move(v));
  nb::capsule owner(heap, [](void* p) noexcept { delete static_cast<std::vector<float>*>(p); });
  return OutArray(heap->data(), shape.size(), shape.data(), owner);
}

std::string shape_text(const FloatArray& a) {
  std::string s = "(";
  for (size_t d = 0; d < a.ndim(); ++d) s += (d ? ", " : "") + std::to_string(a.shape(d));
  return s + (a.ndim() == 1 ? ",)" : ")");
}

// The first ±Inf of `a` as "[i, j, k] is +inf", or "" when there is none (NaN is allowed: docs/data.md).
std::string find_inf(const FloatArray& a) {
  const float* d = a.data();
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isinf(d[i])) continue;
    std::string idx;
    size_t rest = i;
    for (size_t k = a.ndim(); k-- > 0;) {
      idx = std::to_string(rest % a.shape(k)) + (idx.empty() ? "" : ", ") + idx;
      rest /= a.shape(k);
    }
    return "[" + idx + "] is " + (d[i] > 0 ? "+inf" : "-inf");
  }
  return "";
}

// A FloatValues that reads `a` in place. The last copy of the panel may be dropped on a thread that
// does not hold the GIL (inside fit), so releasing the array's reference takes the GIL.
mlalpha::FloatValues borrow(const FloatArray& a) {
  std::shared_ptr<const void> owner(new FloatArray(a), [](const FloatArray* held) {
    nb::gil_scoped_acquire gil;
    delete held;
  });
  return mlalpha::FloatValues::borrow(a.data(), a.size(), std::move(owner));
}

// (T, F) / (N, T, F) features with (T,) / (T, K) / (N, T) / (N, T, K) targets, with the shape rules and
// messages of the .npy reader (docs/data.md). The panel borrows the arrays' memory (no copy); the owner
// keeps a reference to each array for as long as any copy of the panel lives.
mlalpha::Panel panel_from_arrays(FloatArray x, FloatArray y, std::vector<std::string> times,
                                 std::vector<std::string> instruments, std::vector<std::string> feature_names,
                                 std::vector<std::string> target_names, const std::string& time_format) {
  const size_t rx = x.ndim(), ry = y.ndim();
  if (rx != 2 && rx != 3)
    throw mlalpha::Error("x: features must have shape (T, F) for one series or (N, T, F) for a panel, got " +
                         shape_text(x));
  const bool panel = rx == 3;
  if (ry != rx - 1 && ry != rx)
    throw mlalpha::Error(std::string("y: targets must have shape ") + (panel ? "(N, T) or (N, T, K)" : "(T,) or (T, K)") +
                         " for features of shape " + shape_text(x) + ", got " + shape_text(y));
  for (size_t d = 0; d < rx; ++d)
    if (x.shape(d) < 1 || x.shape(d) > size_t(INT32_MAX))
      throw mlalpha::Error("x: every dimension must be in [1, 2147483647], got shape " + shape_text(x));
  for (size_t d = 0; d < ry; ++d)
    if (y.shape(d) < 1 || y.shape(d) > size_t(INT32_MAX))
      throw mlalpha::Error("y: every dimension must be in [1, 2147483647], got shape " + shape_text(y));
  const size_t N = panel ? x.shape(0) : 1, T = x.shape(rx - 2), F = x.shape(rx - 1);
  const size_t Ny = panel ? y.shape(0) : 1, Ty = y.shape(panel ? 1 : 0), K = ry == rx ? y.shape(ry - 1) : 1;
  if (N != Ny || T != Ty)
    throw mlalpha::Error("features x of shape " + shape_text(x) + " and targets y of shape " + shape_text(y) +
                         " disagree on " +
                         (N != Ny ? "N (" + std::to_string(N) + " vs " + std::to_string(Ny) + ")"
                                  : "T (" + std::to_string(T) + " vs " + std::to_string(Ty) + ")"));
  if (const std::string at = find_inf(x); !at.empty())
    throw mlalpha::Error("x: feature value at " + at + " (or outside the float32 range); values must be finite or NaN");
  if (const std::string at = find_inf(y); !at.empty())
    throw mlalpha::Error("y: target value at " + at + " (or outside the float32 range); values must be finite or NaN");
  mlalpha::Panel p;
  p.N = int(N), p.T = int(T), p.F = int(F), p.K = int(K);
  // (T, F) and (N, T, F) in C order are the panel's (N, T, F) layout; likewise the targets.
  p.x = borrow(x);
  p.y = borrow(y);
  p.times = std::move(times);
  p.instruments = std::move(instruments);
  p.feature_names = std::move(feature_names);
  p.target_names = std::move(target_names);
  p.validate();
  mlalpha::parse_panel_times(p, time_format);  // numbers, ISO dates or the layout: date splits and the periods per year
  return p;
}

// The CSV reader's time parser (mlalpha::parse_times) for Panel.from_frame and metrics on frames: the labels'
// values and whether they are dates, so Python orders a frame's times exactly as a CSV file's.
nb::tuple parse_times(const std::vector<std::string>& labels, const std::string& time_format, const std::string& what) {
  mlalpha::TimeValues t;
  {
    nb::gil_scoped_release release;
    t = mlalpha::parse_times(labels, time_format, what);
  }
  return nb::make_tuple(t.values, t.are_dates);
}

nb::dict metrics_dict(const mlalpha::Metrics& m) {
  nb::dict d;
  for (const std::string& name : mlalpha::metric_names()) d[name.c_str()] = mlalpha::metric_by_name(m, name);
  nb::list q;
  for (double v : m.quantile_means) q.append(v);
  d["quantile_means"] = q;
  d["points"] = m.points, d["steps"] = m.steps, d["portfolio_steps"] = m.portfolio_steps;
  return d;
}

nb::dict metrics_result_dict(const mlalpha::MetricsResult& r) {
  nb::dict d = metrics_dict(r.mean);
  nb::list per;
  for (const mlalpha::Metrics& m : r.per_target) per.append(metrics_dict(m));
  d["per_target"] = per;
  return d;
}

nb::dict split_dict(const mlalpha::Split& s) {
  nb::dict d;
  d["train"] = nb::make_tuple(s.train_begin, s.train_end);
  d["valid"] = nb::make_tuple(s.valid_begin, s.valid_end);
  d["test"] = nb::make_tuple(s.test_begin, s.test_end);
  return d;
}

nb::dict point_dict(const mlalpha::TrainPoint& p) {
  nb::dict d;
  d["step"] = p.step, d["loss"] = p.loss, d["lr"] = p.lr, d["grad_norm"] = p.grad_norm, d["skipped"] = p.skipped;
  return d;
}

nb::dict evaluation_dict(const mlalpha::Evaluation& e) {
  nb::dict d;
  d["step"] = e.step, d["value"] = e.value, d["best"] = e.best;
  d["metrics"] = metrics_result_dict(e.metrics);
  return d;
}

const char* kind_name(mlalpha::RunEvent::Kind k) {
  switch (k) {
    case mlalpha::RunEvent::Kind::start: return "start";
    case mlalpha::RunEvent::Kind::fold_start: return "fold_start";
    case mlalpha::RunEvent::Kind::log: return "log";
    case mlalpha::RunEvent::Kind::eval: return "eval";
    case mlalpha::RunEvent::Kind::message: return "message";
    case mlalpha::RunEvent::Kind::fold_end: return "fold_end";
  }
  return "message";
}

nb::dict event_dict(const mlalpha::RunEvent& e) {
  nb::dict d;
  d["kind"] = kind_name(e.kind), d["fold"] = e.fold, d["folds"] = e.folds, d["step"] = e.step;
  switch (e.kind) {
    case mlalpha::RunEvent::Kind::start:
      d["N"] = e.N, d["T"] = e.T, d["F"] = e.F, d["K"] = e.K, d["read_seconds"] = e.read_seconds;
      break;
    case mlalpha::RunEvent::Kind::fold_start:
      d["split"] = split_dict(e.split), d["device"] = e.device, d["params"] = e.params, d["start_step"] = e.start_step;
      break;
    case mlalpha::RunEvent::Kind::log: {
      nb::list pts;
      for (const mlalpha::TrainPoint& p : e.points) pts.append(point_dict(p));
      d["points"] = pts;
      break;
    }
    case mlalpha::RunEvent::Kind::eval: d["evaluation"] = evaluation_dict(e.evaluation); break;
    default: break;
  }
  d["message"] = e.message;
  d["member"] = e.member, d["member_name"] = e.member_name;
  return d;
}

nb::dict fold_dict(const mlalpha::FoldResult& f) {
  nb::dict d;
  d["fold"] = f.fold, d["split"] = split_dict(f.split), d["dir"] = f.dir, d["steps"] = f.steps;
  d["best_step"] = f.best_step, d["best_value"] = f.best_value, d["early_stopped"] = f.early_stopped;
  d["stopped"] = f.stopped, d["paused"] = f.paused, d["has_test"] = f.has_test;
  if (f.has_test) d["test"] = metrics_result_dict(f.test);
  else d["test"] = nb::none();
  nb::list hist, evals;
  for (const mlalpha::TrainPoint& p : f.history) hist.append(point_dict(p));
  for (const mlalpha::Evaluation& e : f.evaluations) evals.append(evaluation_dict(e));
  d["history"] = hist, d["evaluations"] = evals;
  return d;
}

nb::dict member_dict(const mlalpha::MemberResult& m) {
  nb::dict d;
  d["name"] = m.name, d["fold"] = m.fold, d["dir"] = m.dir, d["steps"] = m.steps;
  nb::dict settings;
  for (const auto& [k, v] : m.settings) settings[k.c_str()] = v;
  d["settings"] = settings;
  d["best_step"] = m.best_step, d["best_value"] = m.best_value, d["early_stopped"] = m.early_stopped;
  d["has_test"] = m.has_test;
  if (m.has_test) d["test"] = metrics_result_dict(m.test);
  else d["test"] = nb::none();
  if (m.has_oos) d["oos"] = metrics_result_dict(m.oos), d["oos_file"] = m.oos_file;
  else d["oos"] = nb::none(), d["oos_file"] = nb::none();
  return d;
}

// SIGINT during a run sets the engine's stop flag, so Ctrl-C ends the run after the current step with
// `last` saved (as the command line does); the previous handler is restored when the run returns.
std::atomic<bool>& interrupt_flag() {
  static std::atomic<bool> flag{false};
  return flag;
}
extern "C" void on_interrupt(int) { interrupt_flag().store(true); }

struct SigintGuard {
  struct sigaction previous {};
  bool active = false;
  explicit SigintGuard(bool install) {
    if (!install) return;
    struct sigaction sa {};
    sa.sa_handler = on_interrupt;
    sigemptyset(&sa.sa_mask);
    active = sigaction(SIGINT, &sa, &previous) == 0;
  }
  ~SigintGuard() {
    if (active) sigaction(SIGINT, &previous, nullptr);
  }
  SigintGuard(const SigintGuard&) = delete;
  SigintGuard& operator=(const SigintGuard&) = delete;
};

// Trains on `panel`. callback: None or a callable taking an event dict; a False return stops the run.
// Returns (the results as a dict, the config as run, whether Ctrl-C stopped it). An exception raised by
// the callback stops the run and is raised again once the engine has returned.
nb::tuple fit(const mlalpha::RunConfig& config, const mlalpha::Panel& panel, nb::object callback, bool overwrite,
              const std::string& resume, bool catch_sigint) {
  std::unique_ptr<nb::python_error> callback_error;
  mlalpha::RunOptions opt;
  opt.overwrite = overwrite;
  opt.resume = resume;
  interrupt_flag().store(false);
  opt.stop = &interrupt_flag();
  opt.callback = [&](const mlalpha::RunEvent& e) -> bool {
    nb::gil_scoped_acquire gil;
    if (callback_error) return false;
    if (PyErr_CheckSignals() != 0) {  // a signal whose Python handler raised (e.g. SIGINT outside the guard)
      callback_error = std::make_unique<nb::python_error>();
      return false;
    }
    if (callback.is_none()) return true;
    try {
      nb::object r = callback(event_dict(e));
      return r.is_none() || nb::cast<bool>(r);
    } catch (nb::python_error& err) {
      callback_error = std::make_unique<nb::python_error>(std::move(err));
    } catch (const std::exception& err) {
      PyErr_SetString(PyExc_RuntimeError, (std::string("run callback: ") + err.what()).c_str());
      callback_error = std::make_unique<nb::python_error>();
    }
    return false;
  };
  std::optional<mlalpha::RunResult> result;
  {
    SigintGuard guard(catch_sigint);
    nb::gil_scoped_release release;
    result = mlalpha::run_training(config, panel, opt);
  }
  if (callback_error) throw nb::python_error(std::move(*callback_error));
  nb::dict out;
  nb::list folds;
  for (const mlalpha::FoldResult& f : result->folds) folds.append(fold_dict(f));
  out["folds"] = folds;
  out["stopped"] = result->stopped;
  // Walk-forward: the pooled out-of-sample metrics and the mean / std over folds of each test metric.
  if (result->has_oos) out["oos"] = metrics_result_dict(result->oos), out["oos_file"] = result->oos_file;
  else out["oos"] = nb::none(), out["oos_file"] = nb::none();
  out["fold_test_mean"] = metrics_dict(result->fold_test_mean);
  out["fold_test_std"] = metrics_dict(result->fold_test_std);
  // Populations: every trained member, the leaderboard file and the mean-ensemble's metrics.
  nb::list members;
  for (const mlalpha::MemberResult& m : result->members) members.append(member_dict(m));
  out["members"] = members;
  out["leaderboard_file"] = result->leaderboard_file;
  // The leaderboard as data (the run's own table; leaderboard.csv is its copy for people).
  nb::dict board;
  board["columns"] = result->leaderboard.columns;
  board["rows"] = result->leaderboard.rows;
  out["leaderboard"] = board;
  out["dir"] = result->run_dir;
  if (result->has_ensemble) out["ensemble"] = metrics_result_dict(result->ensemble);
  else out["ensemble"] = nb::none();
  return nb::make_tuple(out, result->config, interrupt_flag().load());
}

// metrics(pred, y) over (N, T, K) arrays of one shape, time steps [t0, t1); train_mean (K) or empty, and
// periods_per_year NaN for none. Adds "long_short": per target, the long-short series of [t0, t1) (NaN
// where a time step formed no portfolios).
nb::dict metrics(FloatArray pred, FloatArray y, int t0, int t1, int min_pairs, int quantiles, double periods_per_year,
                 std::vector<double> train_mean) {
  if (pred.ndim() != 3 || y.ndim() != 3)
    throw mlalpha::Error("metrics: pred and y must be (N, T, K) arrays, got " + shape_text(pred) + " and " + shape_text(y));
  for (size_t d = 0; d < 3; ++d)
    if (pred.shape(d) != y.shape(d))
      throw mlalpha::Error("metrics: pred " + shape_text(pred) + " and y " + shape_text(y) + " differ in shape");
  mlalpha::MetricsInput in;
  in.pred = {pred.data(), pred.size()};
  in.y = {y.data(), y.size()};
  in.N = int(pred.shape(0)), in.T = int(pred.shape(1)), in.K = int(pred.shape(2));
  in.t0 = t0, in.t1 = t1, in.min_pairs = min_pairs;
  in.quantiles = quantiles, in.periods_per_year = periods_per_year, in.train_mean = train_mean;
  mlalpha::MetricsResult r;
  {
    nb::gil_scoped_release release;
    r = mlalpha::compute_metrics(in);
  }
  nb::dict d = metrics_result_dict(r);
  nb::list ls;
  for (const mlalpha::PortfolioSeries& ps : r.portfolios) {
    nb::list one;
    for (double v : ps.long_short) one.append(v);
    ls.append(one);
  }
  d["long_short"] = ls;
  return d;
}

std::string model_toml(const mlalpha::Model& m) {
  mlalpha::RunConfig c;
  c.model = m.model_config();
  c.train = m.train_config();
  return mlalpha::to_toml(c, {"model", "train"});
}

// device=, precision=, threads= of predict and stream, resolved once (mlalpha/compute.h): its messages name the
// Python arguments ("device='gpu' but no CUDA device was found (use device='auto' or device='cpu')").
// device: "auto" | "cpu" | "gpu"; precision: "fp32" | "tf32" | "bf16"; threads: the CPU's (0: every CPU).
mlalpha::Compute compute_of(const std::string& device, const std::string& precision, int threads) {
  mlalpha::ComputeRequest r;
  r.device = device, r.precision = precision, r.threads = threads;
  r.names.style = mlalpha::ComputeNames::Style::argument;
  r.names.device = "device", r.names.precision = "precision", r.names.threads = "threads";
  return mlalpha::resolve(r);
}

// Model::predict or Ensemble::predict (t1 < 0: the panel's end) as a (N, T, K) array, without the GIL.
// mode: "window" | "carry" (mlalpha/model.h). P: Model or Ensemble (a Predictor; the template gives nanobind the
// class it binds the method to).
template <typename P>
OutArray predict_of(const P& m, const mlalpha::Panel& p, int t0, int t1, const std::string& device,
                    const std::string& precision, const std::string& mode, int threads) {
  const mlalpha::Compute compute = compute_of(device, precision, threads);
  const mlalpha::PredictMode pm = mlalpha::parse_predict_mode(mode, "mode");
  std::vector<float> pred;
  {
    nb::gil_scoped_release release;
    pred = m.predict(p, {t0, t1 < 0 ? p.T : t1}, compute, pm);
  }
  return to_numpy(std::move(pred), {size_t(p.N), size_t(p.T), size_t(p.K)});
}

// (N, T) ints as a numpy array.
nb::ndarray<nb::numpy, int32_t> int_array(std::vector<int>&& v, const std::vector<size_t>& shape) {
  auto* heap = new std::vector<int32_t>(v.begin(), v.end());
  nb::capsule owner(heap, [](void* q) noexcept { delete static_cast<std::vector<int32_t>*>(q); });
  return nb::ndarray<nb::numpy, int32_t>(heap->data(), shape.size(), shape.data(), owner);
}

using MaskArray = nb::ndarray<const uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

mlalpha::StreamOptions stream_options(const std::string& mode, const std::string& device, int threads,
                                      const std::string& precision) {
  mlalpha::StreamOptions o;
  o.mode = mlalpha::parse_predict_mode(mode, "mode");
  o.compute = compute_of(device, precision, threads);
  return o;
}

// StreamPredictor::step: x (I, F) float32, present (I) uint8 or None, time (NaN: none) → (I, K), without the GIL.
OutArray stream_step(mlalpha::StreamPredictor& s, FloatArray x, std::optional<MaskArray> present, double time) {
  if (x.ndim() != 2 || x.shape(0) != size_t(s.instruments()) || x.shape(1) != size_t(s.features()))
    throw mlalpha::Error("step: x must have shape (instruments, features) = (" + std::to_string(s.instruments()) + ", " +
                         std::to_string(s.features()) + "), got " + shape_text(x));
  std::span<const uint8_t> mask;
  if (present) mask = {present->data(), present->size()};
  std::vector<float> out;
  {
    nb::gil_scoped_release release;
    out = s.step({x.data(), x.size()}, mask, time);
  }
  return to_numpy(std::move(out), {size_t(s.instruments()), size_t(s.targets())});
}

mlalpha::Ensemble ensemble_load(const std::string& run_dir, const std::string& members, int fold) {
  nb::gil_scoped_release release;
  return mlalpha::Ensemble::load(run_dir, mlalpha::EnsembleSelection::parse(members), fold);
}

// One of the ensemble's per-member values for every member, in averaging order.
template <typename Get>
auto per_member(const mlalpha::Ensemble& e, Get get) {
  std::vector<std::decay_t<decltype(get(e, size_t(0)))>> out;
  for (size_t i = 0; i < e.size(); ++i) out.push_back(get(e, i));
  return out;
}

}  // namespace

NB_MODULE(_core, m) {
  m.doc() = "ml-alpha's C++/CUDA engine (include/mlalpha/); use the mlalpha package, not this module";
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const mlalpha::Error& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });

  nb::class_<mlalpha::RunConfig>(m, "RunConfig")
      .def("to_toml", [](const mlalpha::RunConfig& c, const std::vector<std::string>& s) { return mlalpha::to_toml(c, s); },
           "sections"_a = std::vector<std::string>{})
      .def("validate", &mlalpha::RunConfig::validate)
      .def_prop_ro("given", [](const mlalpha::RunConfig& c) { return std::vector<std::string>(c.given.begin(), c.given.end()); })
      .def_prop_ro("device", [](const mlalpha::RunConfig& c) { return c.run.device; })
      .def_prop_ro("out_dir", [](const mlalpha::RunConfig& c) { return c.run.out_dir; });
  m.def(
      "parse_run_config",
      [](const std::string& text, const std::string& source, const std::vector<std::string>& overrides,
         const std::string& base_dir) { return mlalpha::parse_run_config(text, source, overrides, base_dir); },
      "text"_a, "source_name"_a, "overrides"_a, "base_dir"_a);
  m.def(
      "load_run_config",
      [](const std::string& path, const std::vector<std::string>& overrides) {
        return mlalpha::load_run_config(path, overrides);
      },
      "path"_a, "overrides"_a);
  m.def("run_config_keys", &mlalpha::run_config_keys);
  m.def("suggest_run_config_key", &mlalpha::suggest_run_config_key, "key"_a);

  nb::class_<mlalpha::Panel>(m, "Panel")
      .def_ro("N", &mlalpha::Panel::N)
      .def_ro("T", &mlalpha::Panel::T)
      .def_ro("F", &mlalpha::Panel::F)
      .def_ro("K", &mlalpha::Panel::K)
      .def_ro("times", &mlalpha::Panel::times)
      .def_ro("instruments", &mlalpha::Panel::instruments)
      .def_ro("feature_names", &mlalpha::Panel::feature_names)
      .def_ro("target_names", &mlalpha::Panel::target_names)
      .def("x", [](const mlalpha::Panel& p) { return to_numpy(p.x.to_vector(), {size_t(p.N), size_t(p.T), size_t(p.F)}); })
      .def("y", [](const mlalpha::Panel& p) { return to_numpy(p.y.to_vector(), {size_t(p.N), size_t(p.T), size_t(p.K)}); })
      // Where the engine reads the features and targets: the tests compare it with the array handed in.
      .def_prop_ro("x_address", [](const mlalpha::Panel& p) { return reinterpret_cast<uintptr_t>(p.x.data()); })
      .def_prop_ro("y_address", [](const mlalpha::Panel& p) { return reinterpret_cast<uintptr_t>(p.y.data()); })
      .def_prop_ro("times_are_dates", [](const mlalpha::Panel& p) { return p.times_are_dates; })
      .def_prop_ro("borrowed", [](const mlalpha::Panel& p) { return p.x.borrowed() && p.y.borrowed(); });
  m.def("panel_from_arrays", &panel_from_arrays, "x"_a, "y"_a, "times"_a, "instruments"_a, "feature_names"_a,
        "target_names"_a, "time_format"_a = "");
  m.def("parse_times", &parse_times, "labels"_a, "time_format"_a, "what"_a);

  nb::class_<mlalpha::Model>(m, "Model")
      .def_static("load", &mlalpha::Model::load, "path"_a)
      .def("save", &mlalpha::Model::save, "path"_a)
      .def("predict", &predict_of<mlalpha::Model>, "panel"_a, "t0"_a, "t1"_a, "device"_a, "precision"_a,
           "mode"_a = "window", "threads"_a = 0)
      .def("context",
           [](const mlalpha::Model& md, const mlalpha::Panel& p, const std::string& mode) {
             return int_array(md.context(md.prepare(p), mlalpha::parse_predict_mode(mode, "mode")),
                              {size_t(p.N), size_t(p.T)});
           },
           "panel"_a, "mode"_a)
      .def_prop_ro("seq_len", [](const mlalpha::Model& md) { return md.train_config().L; })
      .def("check_panel", &mlalpha::Model::check_panel, "panel"_a, "what"_a)
      .def("config_toml", &model_toml)
      .def_prop_ro("step", &mlalpha::Model::step)
      .def_prop_ro("parameters", &mlalpha::Model::parameters)
      .def_prop_ro("fold", &mlalpha::Model::fold)
      .def_prop_ro("F", [](const mlalpha::Model& md) { return md.model_config().F; })
      .def_prop_ro("K", [](const mlalpha::Model& md) { return md.model_config().K; })
      .def_prop_ro("feature_names", &mlalpha::Model::feature_names)
      .def_prop_ro("target_names", &mlalpha::Model::target_names)
      .def_prop_ro("has_optimizer_state", &mlalpha::Model::has_optimizer_state);

  nb::class_<mlalpha::Ensemble>(m, "Ensemble")
      .def_static("load", &ensemble_load, "run_dir"_a, "members"_a, "fold"_a)
      .def("predict", &predict_of<mlalpha::Ensemble>, "panel"_a, "t0"_a, "t1"_a, "device"_a, "precision"_a,
           "mode"_a = "window", "threads"_a = 0)
      .def("member", &mlalpha::Ensemble::member, "i"_a, nb::rv_policy::reference_internal)
      .def_prop_ro("size", &mlalpha::Ensemble::size)
      .def_prop_ro("names", [](const mlalpha::Ensemble& e) { return per_member(e, [](auto& x, size_t i) { return x.name(i); }); })
      .def_prop_ro("checkpoints",
                   [](const mlalpha::Ensemble& e) { return per_member(e, [](auto& x, size_t i) { return x.checkpoint(i); }); })
      .def_prop_ro("ranks", [](const mlalpha::Ensemble& e) { return per_member(e, [](auto& x, size_t i) { return x.rank(i); }); })
      .def_prop_ro("dir", &mlalpha::Ensemble::dir)
      .def_prop_ro("fold", &mlalpha::Ensemble::fold);

  nb::class_<mlalpha::StreamPredictor>(m, "Stream")
      .def("__init__",
           [](mlalpha::StreamPredictor* self, const mlalpha::Model& model, std::vector<std::string> instruments,
              const std::string& mode, const std::string& device, int threads, const std::string& precision) {
             const mlalpha::StreamOptions o = stream_options(mode, device, threads, precision);
             nb::gil_scoped_release release;
             new (self) mlalpha::StreamPredictor(model, std::move(instruments), o);
           },
           "model"_a, "instruments"_a, "mode"_a, "device"_a, "threads"_a, "precision"_a)
      .def_static(
          "of_ensemble",
          [](const mlalpha::Ensemble& e, std::vector<std::string> instruments, const std::string& mode,
             const std::string& device, int threads, const std::string& precision) {
            const mlalpha::StreamOptions o = stream_options(mode, device, threads, precision);
            nb::gil_scoped_release release;
            return mlalpha::StreamPredictor(e, std::move(instruments), o);
          },
          "ensemble"_a, "instruments"_a, "mode"_a, "device"_a, "threads"_a, "precision"_a)
      .def("step", &stream_step, "x"_a, "present"_a.none(), "time"_a)
      .def("context", [](const mlalpha::StreamPredictor& s) {
        return int_array(s.context(), {size_t(s.instruments())});
      })
      .def("reset", [](mlalpha::StreamPredictor& s) { s.reset(); })
      .def("reset_names", [](mlalpha::StreamPredictor& s, const std::vector<std::string>& names) { s.reset(names); },
           "names"_a)
      .def("set_instruments", &mlalpha::StreamPredictor::set_instruments, "names"_a)
      .def("warm_up",
           [](mlalpha::StreamPredictor& s, const mlalpha::Panel& p) {
             nb::gil_scoped_release release;
             s.warm_up(p);
           },
           "panel"_a)
      .def("save", &mlalpha::StreamPredictor::save, "path"_a)
      .def("load", &mlalpha::StreamPredictor::load, "path"_a)
      .def("index_of", &mlalpha::StreamPredictor::index_of, "name"_a)
      .def_prop_ro("instruments", &mlalpha::StreamPredictor::instrument_names)
      .def_prop_ro("F", &mlalpha::StreamPredictor::features)
      .def_prop_ro("K", &mlalpha::StreamPredictor::targets)
      .def_prop_ro("feature_names", &mlalpha::StreamPredictor::feature_names)
      .def_prop_ro("target_names", &mlalpha::StreamPredictor::target_names)
      .def_prop_ro("mode", [](const mlalpha::StreamPredictor& s) { return mlalpha::to_string(s.mode()); })
      .def_prop_ro("context_length", &mlalpha::StreamPredictor::context_length)
      .def_prop_ro("on_gpu", &mlalpha::StreamPredictor::on_gpu)
      .def_prop_ro("bars", &mlalpha::StreamPredictor::bars)
      .def_prop_ro("last_time", &mlalpha::StreamPredictor::last_time)
      .def_prop_ro("checkpoint_hash", &mlalpha::StreamPredictor::checkpoint_hash);

  m.def("fit", &fit, "config"_a, "panel"_a, "callback"_a.none(), "overwrite"_a, "resume"_a, "catch_sigint"_a);
  m.def("metrics", &metrics, "pred"_a, "y"_a, "t0"_a, "t1"_a, "min_pairs"_a, "quantiles"_a, "periods_per_year"_a,
        "train_mean"_a);
  m.def("metric_names", &mlalpha::metric_names);
}
