// Trains a small model on the built-in synthetic panel through the public API, stops from the callback
// once validation IC passes a threshold (or at the last step), then reloads the best checkpoint and scores
// it on the test range.
//   train_synthetic OUT_DIR
#include <mlalpha/model.h>
#include <mlalpha/run.h>

#include <cstdio>
#include <exception>
#include <string>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  try {
    // Settings as in a TOML file; any key of docs/config.md can be set this way.
    mlalpha::RunConfig cfg = mlalpha::parse_run_config(R"(
[data]
instruments = 8
timesteps = 600
[model]
d_model = 16
layers = 1
head_dim = 8
d_state = 8
chunk = 16
[train]
batch = 8
seq_len = 32
steps = 120
warmup = 10
[run]
eval_every = 40
device = "auto"
)",
                                                       "example", {"run.out_dir=\"" + std::string(argv[1]) + "\""});
    mlalpha::RunOptions opt;
    opt.overwrite = true;
    opt.callback = [](const mlalpha::RunEvent& e) {
      if (e.kind == mlalpha::RunEvent::Kind::eval) {
        std::printf("step %lld: valid ic %.4f%s\n", static_cast<long long>(e.step), e.evaluation.metrics.mean.ic,
                    e.evaluation.best ? " (best)" : "");
        return e.evaluation.metrics.mean.ic < 0.99;  // false stops the run
      }
      return true;
    };
    const mlalpha::RunResult r = mlalpha::run_training(cfg, opt);
    const mlalpha::FoldResult& f = r.folds.at(0);
    std::printf("trained %lld steps on %s; best ic %.4f at step %lld\n", static_cast<long long>(f.steps),
                f.dir.c_str(), f.best_value, static_cast<long long>(f.best_step));

    const mlalpha::Model best = mlalpha::Model::load(f.dir + "/best.safetensors");
    const mlalpha::Panel panel = mlalpha::load_panel(best.data_config());  // the data it was trained on
    const mlalpha::TimeRange test = mlalpha::split_range(f.split, "test", panel.T);
    const mlalpha::MetricsResult m = best.evaluate(panel, test);
    std::printf("test [%d, %d): mse %.4f ic %.4f rank_ic %.4f (%lld points)\n", test.t0, test.t1, m.mean.mse, m.mean.ic,
                m.mean.rank_ic, static_cast<long long>(m.mean.points));
    return m.mean.points > 0 && m.mean.mse == m.mean.mse ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_synthetic: error: %s\n", e.what());
    return 1;
  }
}
