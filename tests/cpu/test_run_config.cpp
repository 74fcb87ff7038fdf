// TOML run configuration: the shipped example parses to the documented values; unknown keys, wrong
// types and syntax errors are rejected naming the file, line and key.
#include <gtest/gtest.h>

#include "mlalpha/config.h"
#include "core/error.h"
#include "data/split.h"

namespace mlalpha {
namespace {

std::string error_of(const std::string& text) {
  try {
    parse_run_config(text, "cfg.toml");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(RunConfig, ExampleFileParses) {
  const RunConfig c = load_run_config(std::string(MLALPHA_SOURCE_DIR) + "/configs/example.toml");
  EXPECT_EQ(c.data.source, "synthetic");
  EXPECT_EQ(c.data.synth.N, 16);
  EXPECT_EQ(c.model.D, 32);
  EXPECT_EQ(c.train.B, 16);
  EXPECT_FLOAT_EQ(c.train.lr, 1e-3f);
  EXPECT_EQ(c.split.spec.train_end.kind, SplitPoint::Kind::fraction);
  EXPECT_DOUBLE_EQ(c.split.spec.valid_end.fraction, 0.85);
  EXPECT_EQ(c.run.metric, "ic");
  EXPECT_NO_THROW(c.validate());
}

TEST(RunConfig, ValuesAndBoundaryKinds) {
  const RunConfig c = parse_run_config(R"(
[split]
train_end = 1500
valid_end = "2021-06-30"
gap = 5
[model]
d_model = 64
[train]
lr = 3e-4
loss = "huber"
steps = 10
)",
                                       "x.toml");
  EXPECT_EQ(c.split.spec.train_end.kind, SplitPoint::Kind::index);
  EXPECT_EQ(c.split.spec.train_end.index, 1500);
  EXPECT_EQ(c.split.spec.valid_end.kind, SplitPoint::Kind::time);
  EXPECT_EQ(c.split.spec.valid_end.time, "2021-06-30");
  EXPECT_EQ(c.split.spec.gap, 5);
  EXPECT_EQ(c.model.D, 64);
  EXPECT_FLOAT_EQ(c.train.lr, 3e-4f);
  EXPECT_EQ(c.train.loss, LossKind::Huber);
  EXPECT_EQ(c.train.steps, 10);
}

// A split point written as an unquoted TOML date or date-time (a date value to TOML, not a string), in the file
// or through an override, is a time point like the quoted one, and splits a date axis at that date.
TEST(RunConfig, TomlDatesAreTimePoints) {
  const RunConfig c = parse_run_config("[split]\ntrain_end = 2015-01-01\nvalid_end = 2015-01-05T00:00:00\n", "x.toml");
  EXPECT_EQ(c.split.spec.train_end.kind, SplitPoint::Kind::time);
  EXPECT_EQ(c.split.spec.train_end.time, "2015-01-01");
  EXPECT_EQ(c.split.spec.valid_end.kind, SplitPoint::Kind::time);
  EXPECT_EQ(c.split.spec.valid_end.time, "2015-01-05T00:00:00");
  const std::vector<std::string> days = {"2014-12-30", "2014-12-31", "2015-01-02", "2015-01-05", "2015-01-06", "2015-01-07"};
  const Split s = make_split(c.split.spec, int(days.size()), days);
  EXPECT_EQ(s.train_end, 2);  // the first day at or after 2015-01-01
  EXPECT_EQ(s.valid_end, 3);

  // What `--set split.train_end=2016-01-01` sends, and a date-time with an offset.
  const RunConfig o = parse_run_config("", "cfg.toml", {"split.train_end=2016-01-01", "split.valid_end=2016-03-01T09:30:00Z"});
  EXPECT_EQ(o.split.spec.train_end.kind, SplitPoint::Kind::time);
  EXPECT_EQ(o.split.spec.train_end.time, "2016-01-01");
  EXPECT_EQ(o.split.spec.valid_end.time, "2016-03-01T09:30:00Z");

  // A time of day has no date to split at: refused, saying what is expected.
  const std::string e = error_of("[split]\ntrain_end = 09:30:00\n");
  EXPECT_NE(e.find("cfg.toml:2: split.train_end: expected a fraction (0.7), a time index (1500) or a time value "
                   "(2021-01-04 or \"2021-01-04\"), got a time of day without a date"),
            std::string::npos)
      << e;
}

TEST(RunConfig, UnknownKeyNamesItLineAndSuggestion) {
  const std::string e = error_of("[train]\nbatch = 4\nlerning_rate = 0.1\n");
  EXPECT_NE(e.find("cfg.toml:3: unknown key 'train.lerning_rate'"), std::string::npos) << e;
  const std::string e2 = error_of("[train]\nbach = 4\n");
  EXPECT_NE(e2.find("did you mean 'train.batch'?"), std::string::npos) << e2;
  EXPECT_NE(error_of("[optimizer]\nlr = 1\n").find("unknown section or top-level key 'optimizer'"), std::string::npos);
}

TEST(RunConfig, WrongTypesAndValues) {
  EXPECT_NE(error_of("[train]\nbatch = \"four\"\n").find("cfg.toml:2: train.batch: expected an integer"),
            std::string::npos);
  EXPECT_NE(error_of("[run]\ntf32 = 1\n").find("run.tf32: expected true or false"), std::string::npos);
  EXPECT_NE(error_of("[split]\ntrain_end = 1.5\n").find("a fraction must be in (0, 1]"), std::string::npos);
  EXPECT_NE(error_of("[train]\nloss = \"l1\"\n").find("'l1'"), std::string::npos);
  EXPECT_NE(error_of("[train\nbatch = 4\n").find("cfg.toml:1"), std::string::npos);  // syntax error with line
  RunConfig c = parse_run_config("[train]\nlr = -1.0\n", "cfg.toml");
  try {
    c.validate();
    FAIL() << "negative lr accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("train.lr must be a finite number > 0, got -1"), std::string::npos);
  }
}

// train.batch is an integer (windows) or "time" (cross-sections of train.dates × train.instruments); the IC
// loss needs the latter; to_toml writes both forms back.
TEST(RunConfig, BatchModeAndIcLoss) {
  const RunConfig w = parse_run_config("[train]\nbatch = 12\n", "cfg.toml");
  EXPECT_EQ(w.train.batch_mode, BatchMode::Windows);
  EXPECT_EQ(w.train.B, 12);
  EXPECT_EQ(w.train.windows_per_step(50), 12);
  EXPECT_EQ(w.train.cross_section(50), 0);
  const RunConfig t =
      parse_run_config("[train]\nbatch = \"time\"\ndates = 3\ninstruments = 20\nloss = \"ic\"\n", "cfg.toml");
  EXPECT_EQ(t.train.batch_mode, BatchMode::Time);
  EXPECT_EQ(t.train.dates, 3);
  EXPECT_EQ(t.train.instruments, 20);
  EXPECT_EQ(t.train.loss, LossKind::IC);
  EXPECT_EQ(t.train.cross_section(50), 20);
  EXPECT_EQ(t.train.cross_section(8), 8);  // the cap above N takes every instrument
  EXPECT_EQ(t.train.windows_per_step(50), 60);
  EXPECT_EQ(t.train.windows_per_step(8), 24);
  const RunConfig back = parse_run_config(to_toml(t), "back.toml");
  EXPECT_EQ(back.train.batch_mode, BatchMode::Time);
  EXPECT_EQ(back.train.dates, 3);
  EXPECT_EQ(back.train.instruments, 20);
  EXPECT_EQ(back.train.loss, LossKind::IC);
  EXPECT_EQ(parse_run_config(to_toml(w), "back.toml").train.B, 12);
  EXPECT_EQ(parse_run_config("", "cfg.toml", {"train.batch=time"}).train.batch_mode, BatchMode::Time);
  // Anything else names the key and both forms.
  for (const char* bad : {"batch = \"dates\"", "batch = 2.5", "batch = true"}) {
    const std::string e = error_of(std::string("[train]\n") + bad + "\n");
    EXPECT_NE(e.find("cfg.toml:2: train.batch: expected an integer"), std::string::npos) << e;
    EXPECT_NE(e.find("or the string \"time\""), std::string::npos) << e;
  }
  // Values are checked by RunConfig::validate (after overrides), not by the parser.
  auto invalid = [](const std::string& text) {
    try {
      parse_run_config(text, "cfg.toml").validate();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NO_THROW(t.validate());
  EXPECT_NE(invalid("[train]\nloss = \"ic\"\n").find("train.loss = 'ic' correlates predictions across the instruments"),
            std::string::npos);
  EXPECT_NE(invalid("[train]\nbatch = \"time\"\ndates = 0\n").find("train.dates must be >= 1"), std::string::npos);
  const std::string neg = invalid("[train]\nbatch = \"time\"\ninstruments = -1\n");
  EXPECT_NE(neg.find("cfg.toml:3: train.instruments"), std::string::npos) << neg;  // the parser's range check
  TrainConfig direct;
  direct.instruments = -1;
  try {
    direct.validate();
    ADD_FAILURE() << "train.instruments = -1 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("train.instruments must be >= 0"), std::string::npos) << e.what();
  }
}

// train.precision: its three values and the default, the message for anything else, run.tf32 = true as
// its older spelling (given as train.precision), a conflict between the two, and the value written back
// into the config text a run records (run.tf32 is never written).
TEST(RunConfig, Precision) {
  const RunConfig d = parse_run_config("", "cfg.toml");
  EXPECT_EQ(d.train.precision, Precision::FP32);
  EXPECT_FALSE(d.was_given("train.precision"));
  for (const auto& [name, p] : {std::pair{"fp32", Precision::FP32}, std::pair{"tf32", Precision::TF32},
                                std::pair{"bf16", Precision::BF16}}) {
    const RunConfig c = parse_run_config(std::string("[train]\nprecision = \"") + name + "\"\n", "cfg.toml");
    EXPECT_EQ(c.train.precision, p) << name;
    EXPECT_TRUE(c.was_given("train.precision"));
    EXPECT_EQ(to_string(p), name);
    EXPECT_EQ(parse_precision(name), p);
    const std::string text = to_toml(c);
    EXPECT_NE(text.find(std::string("precision = '") + name + "'"), std::string::npos) << text;
    EXPECT_EQ(text.find("tf32 ="), std::string::npos) << text;
    EXPECT_EQ(parse_run_config(text, "written.toml").train.precision, p) << text;
    // The same through an override, as --precision writes it.
    EXPECT_EQ(parse_run_config("", "cfg.toml", {std::string("train.precision=\"") + name + "\""}).train.precision, p);
  }
  const std::string bad = error_of("\n[train]\nprecision = \"fp16\"\n");
  EXPECT_NE(bad.find("cfg.toml:3: train.precision: must be one of 'fp32', 'tf32', 'bf16', got 'fp16'"),
            std::string::npos) << bad;
  EXPECT_NE(error_of("[train]\nprecision = \"BF16\"\n").find("got 'BF16'"), std::string::npos);  // case matters
  EXPECT_NE(error_of("[train]\nprecision = 16\n").find("cfg.toml:2: train.precision: expected a string"),
            std::string::npos);
  try {
    parse_precision("half", "--precision");
    ADD_FAILURE() << "'half' accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--precision must be 'fp32', 'tf32' or 'bf16', got 'half'");
  }

  // run.tf32: true is train.precision = "tf32", and counts as given under that key; false says nothing.
  const RunConfig old = parse_run_config("[run]\ntf32 = true\n", "cfg.toml");
  EXPECT_EQ(old.train.precision, Precision::TF32);
  EXPECT_TRUE(old.was_given("train.precision"));
  EXPECT_FALSE(old.was_given("run.tf32"));
  EXPECT_EQ(parse_run_config(to_toml(old), "written.toml").train.precision, Precision::TF32);
  const RunConfig off = parse_run_config("[run]\ntf32 = false\n", "cfg.toml");
  EXPECT_EQ(off.train.precision, Precision::FP32);
  EXPECT_FALSE(off.was_given("train.precision"));
  EXPECT_FALSE(off.was_given("run.tf32"));
  EXPECT_EQ(parse_run_config("[train]\nprecision = \"tf32\"\n[run]\ntf32 = true\n", "cfg.toml").train.precision,
            Precision::TF32);  // both spellings of the same
  EXPECT_EQ(parse_run_config("[train]\nprecision = \"bf16\"\n[run]\ntf32 = false\n", "cfg.toml").train.precision,
            Precision::BF16);
  const std::string conflict = error_of("[train]\nprecision = \"bf16\"\n[run]\ntf32 = true\n");
  EXPECT_NE(conflict.find("run.tf32 = true contradicts train.precision = \"bf16\": give only train.precision"),
            std::string::npos) << conflict;
  EXPECT_NE(error_of("[run]\ntf32 = \"yes\"\n").find("run.tf32: expected true or false"), std::string::npos);
  // What --precision bf16 sends wins over a file's run.tf32 = true (it resets the older spelling too).
  EXPECT_EQ(parse_run_config("[run]\ntf32 = true\n", "cfg.toml", {"train.precision=\"bf16\"", "run.tf32=false"})
                .train.precision,
            Precision::BF16);
}

TEST(RunConfig, OverridesUseTheSameRules) {
  const RunConfig c = parse_run_config("[train]\nlr = 1e-3\n", "cfg.toml",
                                       {"train.lr=2e-3", "data.source=npy", "run.tf32=true", "model.d_model=48"});
  EXPECT_FLOAT_EQ(c.train.lr, 2e-3f);
  EXPECT_EQ(c.data.source, "npy");
  EXPECT_EQ(c.train.precision, Precision::TF32);  // run.tf32 is the older spelling
  EXPECT_EQ(c.model.D, 48);
  try {
    parse_run_config("", "cfg.toml", {"train.lerning_rate=1"});
    FAIL() << "unknown override accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("override 'train.lerning_rate=1': unknown key 'train.lerning_rate'"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(parse_run_config("", "cfg.toml", {"lr=1"}), Error);
  EXPECT_THROW(parse_run_config("", "cfg.toml", {"train.batch=many"}), Error);  // a string where an integer goes
}

}  // namespace
}  // namespace mlalpha
