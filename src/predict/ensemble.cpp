// Ensemble (include/mlalpha/ensemble.h): a finished population's members read back from its run folder,
// averaged with the run's own PredictionMean.
#include "mlalpha/ensemble.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <map>
#include <sstream>

#include "checkpoint/run_records.h"
#include "core/error.h"
#include "data/fileio.h"
#include "predict/model_parts.h"
#include "predict/prediction_mean.h"
#include "predict/predict_session.h"

namespace mlalpha {

namespace fs = std::filesystem;

namespace {

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// "fold-3" -> 3; -1 for any other name.
int fold_of_name(const std::string& name) {
  if (!starts_with(name, "fold-")) return -1;
  int k = -1;
  const char* b = name.data() + 5;
  const auto r = std::from_chars(b, name.data() + name.size(), k);
  return r.ec == std::errc() && r.ptr == name.data() + name.size() && k >= 0 ? k : -1;
}

// The folder's subfolders named prefix + a number, ordered by the number (member order, fold order).
std::vector<std::string> numbered_dirs(const fs::path& dir, const char* prefix) {
  std::vector<std::pair<long, std::string>> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!e.is_directory() || !starts_with(name, prefix)) continue;
    char* end = nullptr;
    const long n = std::strtol(name.c_str() + std::char_traits<char>::length(prefix), &end, 10);
    if (end && *end == '\0') found.emplace_back(n, name);
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

// Whether `dir` holds a population's run record (run.json of a population, or an older population.json).
bool holds_population(const fs::path& dir) {
  if (!holds_run_record(dir)) return false;
  const auto rec = read_run_record(dir);
  return rec && rec->population;
}

// The run folder and the folder that holds the members (itself, or fold-k/ of a walk-forward run).
struct Located {
  fs::path dir;
  int fold = 0;
};

Located locate(const std::string& run_dir, int fold) {
  fs::path p = fs::path(run_dir).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();  // "out/" names "out"
  std::error_code ec;
  require(fs::is_directory(p, ec), "ensemble: " + run_dir + " is not a folder");
  if (holds_population(p)) {
    const std::vector<std::string> folds = numbered_dirs(p, "fold-");
    if (folds.empty()) {
      require(fold <= 0, "ensemble: " + run_dir + " is a population of one split (fold 0), there is no fold " +
                             std::to_string(fold));
      return {p, 0};
    }
    require(fold >= 0, "ensemble: " + run_dir + " is a walk-forward population with " + std::to_string(folds.size()) +
                           " folds: choose one (a fold index, --fold K in the command, or the folder " +
                           (p / folds.back()).string() + ")");
    require(fold < int(folds.size()), "ensemble: " + run_dir + " has folds 0 to " + std::to_string(folds.size() - 1) +
                                          ", not fold " + std::to_string(fold));
    return {p / ("fold-" + std::to_string(fold)), fold};
  }
  const int k = fold_of_name(p.filename().string());
  if (k >= 0 && holds_population(p.parent_path())) {
    require(fold < 0 || fold == k, "ensemble: " + run_dir + " is fold " + std::to_string(k) + ", not fold " +
                                       std::to_string(fold));
    return {p, k};
  }
  throw Error("ensemble: " + run_dir + " holds no population run (no " + kRunFile +
              " of a population; a run of train.models > 1 or a [sweep] leaves one); for one model give its checkpoint (" +
              (p / "best.safetensors").string() + ")");
}

// One line of CSV with quoted cells ("a,""b""" -> a,"b").
std::vector<std::string> csv_cells(const std::string& line) {
  std::vector<std::string> cells(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char ch = line[i];
    if (quoted && ch == '"' && i + 1 < line.size() && line[i + 1] == '"') cells.back() += '"', ++i;
    else if (ch == '"') quoted = !quoted;
    else if (ch == ',' && !quoted) cells.emplace_back();
    else if (ch != '\r') cells.back() += ch;
  }
  return cells;
}

// The leaderboard's ranking: member name -> rank and cells, and the names best first (the ensemble's row,
// which has no rank, is left out).
struct Ranking {
  std::vector<std::string> header;
  std::map<std::string, int> rank;
  std::map<std::string, std::vector<std::string>> cells;
  std::vector<std::string> order;
};

// The ranking of its rows: rank and member columns, the ensemble's row (no rank) left out.
void rank_rows(Ranking& r, const std::vector<std::vector<std::string>>& rows, const std::string& file) {
  const auto col = [&](const char* name) {
    const auto it = std::find(r.header.begin(), r.header.end(), name);
    require(it != r.header.end(), file + " has no column '" + name + "'");
    return size_t(it - r.header.begin());
  };
  const size_t rc = col("rank"), mc = col("member");
  std::vector<std::pair<int, std::string>> ranked;
  for (const std::vector<std::string>& cells : rows) {
    if (cells.size() <= std::max(rc, mc) || cells[rc].empty()) continue;  // the ensemble's row
    int k = 0;
    const auto res = std::from_chars(cells[rc].data(), cells[rc].data() + cells[rc].size(), k);
    require(res.ec == std::errc() && k >= 1, file + ": rank '" + cells[rc] + "' of " + cells[mc] +
                                                 " is not a positive integer");
    ranked.emplace_back(k, cells[mc]);
    r.cells[cells[mc]] = cells;
  }
  std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [k, name] : ranked) r.rank[name] = k, r.order.push_back(name);
}

// leaderboard.csv of a run folder of an older ml-alpha (no leaderboard.json).
Ranking read_ranking_csv(const fs::path& file) {
  Ranking r;
  std::istringstream in(read_file_bytes(file.string()));
  std::string line;
  require(bool(std::getline(in, line)), file.string() + " is empty");
  r.header = csv_cells(line);
  std::vector<std::vector<std::string>> rows;
  while (std::getline(in, line)) rows.push_back(csv_cells(line));
  rank_rows(r, rows, file.string());
  return r;
}

// leaderboard.json (the table as data) or, in a run folder of an older ml-alpha, leaderboard.csv.
Ranking read_ranking(const fs::path& dir) {
  Ranking r;
  std::error_code ec;
  const fs::path json = dir / "leaderboard.json";
  if (fs::exists(json, ec)) {
    const auto j = nlohmann::json::parse(read_file_bytes(json.string()), nullptr, false);
    require(j.is_object() && j.contains("columns") && j["columns"].is_array() && j.contains("rows") && j["rows"].is_array(),
            json.string() + " is not a leaderboard {columns, rows}");
    std::vector<std::vector<std::string>> rows;
    try {
      r.header = j["columns"].get<std::vector<std::string>>();
      rows = j["rows"].get<std::vector<std::vector<std::string>>>();
    } catch (const nlohmann::json::exception&) {
      throw Error(json.string() + ": the columns and rows must be lists of strings");
    }
    rank_rows(r, rows, json.string());
    return r;
  }
  return read_ranking_csv(dir / "leaderboard.csv");
}

std::string list_text(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size(); ++i) s += (i ? ", " : "") + names[i];
  return s;
}

// The first setting in which `m` differs from `ref`, as "what: <m's> vs <ref's>"; empty when none does.
std::string difference(const Model& m, const Model& ref) {
  RunConfig a, b;
  a.model = m.model_config();
  b.model = ref.model_config();
  std::istringstream ta(to_toml(a, {"model"})), tb(to_toml(b, {"model"}));
  for (std::string la, lb; std::getline(ta, la) && std::getline(tb, lb);)
    if (la != lb) return "the model settings differ: '" + la + "' vs '" + lb + "'";
  if (a.model.F != b.model.F || a.model.K != b.model.K)
    return "F = " + std::to_string(a.model.F) + ", K = " + std::to_string(a.model.K) + " vs F = " +
           std::to_string(b.model.F) + ", K = " + std::to_string(b.model.K);
  if (m.feature_names() != ref.feature_names())
    return "the feature names differ: [" + list_text(m.feature_names()) + "] vs [" + list_text(ref.feature_names()) + "]";
  if (m.target_names() != ref.target_names())
    return "the target names differ: [" + list_text(m.target_names()) + "] vs [" + list_text(ref.target_names()) + "]";
  const DataConfig &da = m.data_config(), &db = ref.data_config();
  const std::pair<const char*, std::pair<std::string, std::string>> processing[] = {
      {"data.feature_norm", {da.feature_norm, db.feature_norm}},
      {"data.target_norm", {da.target_norm, db.target_norm}},
      {"data.nan_fill", {da.nan_fill, db.nan_fill}},
      {"data.robust_clip", {std::to_string(da.robust_clip), std::to_string(db.robust_clip)}}};
  for (const auto& [key, v] : processing)
    if (v.first != v.second) return std::string(key) + " = '" + v.first + "' vs '" + v.second + "'";
  if (m.fold() != ref.fold())
    return "trained in walk-forward fold " + std::to_string(m.fold()) + " vs fold " + std::to_string(ref.fold());
  return "";
}

bool same_stats(const Model& a, const Model& b) {
  return a.feature_stats().mean == b.feature_stats().mean && a.feature_stats().stdev == b.feature_stats().stdev;
}

}  // namespace

EnsembleSelection EnsembleSelection::parse(const std::string& text) {
  EnsembleSelection s;
  if (text == "all") return s;
  if (starts_with(text, "top:")) {
    int k = 0;
    const char* b = text.data() + 4;
    const auto r = std::from_chars(b, text.data() + text.size(), k);
    require(r.ec == std::errc() && r.ptr == text.data() + text.size() && k >= 1,
            "members: 'top:K' needs a whole number K >= 1, got '" + text + "'");
    s.kind = Kind::top;
    s.top = k;
    return s;
  }
  s.kind = Kind::names;
  std::string cell;
  std::istringstream in(text);
  while (std::getline(in, cell, ',')) {
    const size_t a = cell.find_first_not_of(' '), b = cell.find_last_not_of(' ');
    require(a != std::string::npos, "members: an empty name in '" + text + "' (all, top:K, or names such as member-00,member-03)");
    s.names.push_back(cell.substr(a, b - a + 1));
  }
  require(!s.names.empty(), "members: give all, top:K, or member names (member-00,member-03)");
  return s;
}

struct Ensemble::Impl {
  std::string dir, leaderboard;
  int fold = 0;
  std::vector<Model> models;
  std::vector<std::string> names, files;
  std::vector<int> ranks;
  Ranking ranking;

};

// Whether b's predictions can run in a session made for a: the same windows (train.seq_len) and tiles (the
// batch of a step on this panel). The members of one population always can; the check keeps any other mix right.
bool same_session(const Model& a, const Model& b, int N) {
  const TrainConfig &ta = a.train_config(), &tb = b.train_config();
  return ta.L == tb.L && ta.windows_per_step(N) == tb.windows_per_step(N);
}

Ensemble::Ensemble(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Ensemble::Ensemble(Ensemble&&) noexcept = default;
Ensemble& Ensemble::operator=(Ensemble&&) noexcept = default;
Ensemble::~Ensemble() = default;

Ensemble Ensemble::load(const std::string& run_dir, const EnsembleSelection& sel, int fold) {
  const Located at = locate(run_dir, fold);
  auto impl = std::make_unique<Impl>();
  impl->dir = at.dir.string();
  impl->fold = at.fold;
  const std::vector<std::string> all = numbered_dirs(at.dir, "member-");
  require(!all.empty(), "ensemble: " + impl->dir + " holds no member folders (member-00, ...)");
  std::error_code ec;
  const fs::path board = at.dir / "leaderboard.csv";
  Ranking& ranking = impl->ranking;
  if (fs::exists(board, ec) || fs::exists(at.dir / "leaderboard.json", ec)) {
    impl->leaderboard = board.string();
    ranking = read_ranking(at.dir);
  }

  std::vector<std::string> chosen;
  switch (sel.kind) {
    case EnsembleSelection::Kind::all: chosen = all; break;
    case EnsembleSelection::Kind::top:
      require(!impl->leaderboard.empty(), "ensemble: top:" + std::to_string(sel.top) + " ranks the members by " +
                                              board.string() + ", which is missing (the population did not finish)");
      require(sel.top <= int(ranking.order.size()),
              "ensemble: top:" + std::to_string(sel.top) + " but " + board.string() + " ranks " +
                  std::to_string(ranking.order.size()) + " members");
      chosen.assign(ranking.order.begin(), ranking.order.begin() + sel.top);
      break;
    case EnsembleSelection::Kind::names: chosen = sel.names; break;
  }
  for (size_t i = 0; i < chosen.size(); ++i) {
    require(std::find(all.begin(), all.end(), chosen[i]) != all.end(),
            "ensemble: " + impl->dir + " has no member '" + chosen[i] + "'; its members: " + list_text(all));
    require(std::find(chosen.begin(), chosen.begin() + long(i), chosen[i]) == chosen.begin() + long(i),
            "ensemble: member '" + chosen[i] + "' is named twice");
  }
  // Averaged in member order, as the run's ensemble: the sum's rounding does not depend on the selection.
  for (const std::string& name : all) {
    if (std::find(chosen.begin(), chosen.end(), name) == chosen.end()) continue;
    const fs::path d = at.dir / name;
    fs::path file = d / "best.safetensors";
    if (!fs::exists(file, ec)) file = d / "last.safetensors";
    require(fs::exists(file, ec), "ensemble: " + name + " has no checkpoint (neither best.safetensors nor "
                                  "last.safetensors in " + d.string() + ")");
    Model m = Model::load_weights(file.string());
    if (!impl->models.empty()) {
      const std::string diff = difference(m, impl->models.front());
      require(diff.empty(), "ensemble: " + name + " (" + file.string() + ") does not match " + impl->names.front() +
                                ": " + diff);
    }
    impl->models.push_back(std::move(m));
    impl->names.push_back(name);
    impl->files.push_back(file.string());
    const auto r = ranking.rank.find(name);
    impl->ranks.push_back(r == ranking.rank.end() ? 0 : r->second);
  }
  return Ensemble(std::move(impl));
}

size_t Ensemble::size() const { return impl_->models.size(); }
const Model& Ensemble::member(size_t i) const { return impl_->models.at(i); }
const std::string& Ensemble::name(size_t i) const { return impl_->names.at(i); }
const std::string& Ensemble::checkpoint(size_t i) const { return impl_->files.at(i); }
int Ensemble::rank(size_t i) const { return impl_->ranks.at(i); }
const std::string& Ensemble::dir() const { return impl_->dir; }
const std::string& Ensemble::leaderboard_file() const { return impl_->leaderboard; }
int Ensemble::fold() const { return impl_->fold; }
const std::vector<std::string>& Ensemble::leaderboard_columns() const { return impl_->ranking.header; }

std::string Ensemble::leaderboard_cell(size_t i, const std::string& column) const {
  const Ranking& r = impl_->ranking;
  const auto row = r.cells.find(name(i));
  const auto col = std::find(r.header.begin(), r.header.end(), column);
  if (row == r.cells.end() || col == r.header.end()) return "";
  const size_t c = size_t(col - r.header.begin());
  return c < row->second.size() ? row->second[c] : "";
}

std::vector<const Model*> Ensemble::models() const {
  std::vector<const Model*> out;
  for (const Model& m : impl_->models) out.push_back(&m);
  return out;
}

std::vector<float> predict_ensemble(const Ensemble& e, const Panel& raw, TimeRange range, const Compute& compute,
                                    PredictMode mode, Panel* first_norm, PredictStats* stats) {
  const std::vector<Model>& models = e.impl().models;
  require(0 <= range.t0 && range.t0 < range.t1 && range.t1 <= raw.T,
          "predict: the time range [" + std::to_string(range.t0) + ", " + std::to_string(range.t1) +
              ") is empty or outside the data's [0, " + std::to_string(raw.T) + ")");
  PredictionMean mean;
  Panel own, other;
  Panel& first = first_norm ? *first_norm : own;
  const Panel* norm = nullptr;                // the prepared panel the session has loaded
  std::unique_ptr<PredictSession> session;    // one model object and one loaded panel for the members
  const Model* session_of = nullptr;          // the member the session was made for
  for (size_t i = 0; i < models.size(); ++i) {
    const Model& m = models[i];
    bool load = false;
    // Members of one fold share their statistics: one prepared panel serves them all (the same bytes as each
    // member's own Model::prepare).
    if (i == 0) first = m.prepare(raw), norm = &first, load = true;
    else if (!same_stats(m, models[i - 1])) other = m.prepare(raw), norm = &other, load = true;
    if (!session || !same_session(*session_of, m, raw.N)) {
      session = std::make_unique<PredictSession>(compute, m.model_config(), m.train_config(), stats);
      session_of = &m, load = true;
    }
    if (load) session->load(*norm, range, mode);
    std::vector<float> pred = session->predict(model_params(m));
    unscale_predictions(pred, norm->K, m.feature_stats());  // data.target_scale: back to the targets' units
    mean.add(pred);
  }
  return mean.mean();
}

std::vector<float> Ensemble::do_predict(const Panel& raw, TimeRange range, const Compute& compute,
                                        PredictMode mode) const {
  return predict_ensemble(*this, raw, range, compute, mode);
}

MetricsResult Ensemble::do_evaluate(const Panel& raw, TimeRange range, const Compute& compute,
                                    const ScoreOptions& options, PredictMode mode) const {
  Panel norm;
  const std::vector<float> pred = predict_ensemble(*this, raw, range, compute, mode, &norm);
  return score(pred, norm, range, options);
}

bool is_population_dir(const std::string& path) {
  fs::path p = fs::path(path).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  std::error_code ec;
  if (!fs::is_directory(p, ec)) return false;
  return holds_population(p) || (fold_of_name(p.filename().string()) >= 0 && holds_population(p.parent_path()));
}

}  // namespace mlalpha
