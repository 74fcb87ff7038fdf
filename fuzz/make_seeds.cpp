// Writes the seed corpora for the fuzz targets: a few small valid files of each kind, so the fuzzer starts
// from inputs that reach deep into the parsers. Usage: make_seeds <dir>  (creates <dir>/npy, <dir>/csv,
// <dir>/safetensors and <dir>/toml; scripts/fuzz.sh adds configs/*.toml to the last).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "checkpoint/config_json.h"
#include "checkpoint/safetensors.h"
#include "data/npy.h"

namespace {

void put(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
}

// Same layout as encode_npy, for dtypes and versions it does not write.
std::string npy(const std::string& dict, const std::string& data, int major) {
  const size_t prefix = major == 1 ? 10 : 12;
  std::string h = dict;
  while ((prefix + h.size() + 1) % 64 != 0) h += ' ';
  h += '\n';
  std::string out = "\x93NUMPY";
  out += char(major);
  out += char(0);
  for (size_t i = 0; i < (major == 1 ? 2u : 4u); ++i) out += char((h.size() >> (8 * i)) & 0xff);
  return out + h + data;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <dir>\n", argv[0]);
    return 2;
  }
  namespace fs = std::filesystem;
  const fs::path npy_dir = fs::path(argv[1]) / "npy", csv_dir = fs::path(argv[1]) / "csv";
  const fs::path st_dir = fs::path(argv[1]) / "safetensors", toml_dir = fs::path(argv[1]) / "toml";
  for (const fs::path& d : {npy_dir, csv_dir, st_dir, toml_dir}) fs::create_directories(d);

  const std::vector<float> f = {1.5f, -2.0f, 0.25f, 3.0f, 4.0f, -5.5f};
  const std::vector<double> d = {1.0 / 3, -2.0, 1e-300, 1e300, 0.5, 6.0};
  const std::string f_raw(reinterpret_cast<const char*>(f.data()), f.size() * 4);
  const std::string d_raw(reinterpret_cast<const char*>(d.data()), d.size() * 8);
  const std::vector<int64_t> s23 = {2, 3}, s6 = {6}, s123 = {1, 2, 3};
  put(npy_dir / "f4_2x3.npy", mlalpha::encode_npy(f, s23));
  put(npy_dir / "f4_6.npy", mlalpha::encode_npy(f, s6));
  put(npy_dir / "f4_1x2x3.npy", mlalpha::encode_npy(f, s123));
  put(npy_dir / "f8_v2.npy", npy("{'descr': '<f8', 'fortran_order': False, 'shape': (3, 2), }", d_raw, 2));
  put(npy_dir / "f4_v3_dq.npy", npy("{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (6L,)}", f_raw, 3));
  put(npy_dir / "scalar.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (), }", f_raw.substr(0, 4), 1));
  // A features + targets pair in one input (the first byte picks the cut; 0x80 ≈ the middle).
  const std::string x = mlalpha::encode_npy(f, s123), y = mlalpha::encode_npy(std::vector<float>(f.begin(), f.begin() + 2),
                                                                                 std::vector<int64_t>{1, 2});
  const size_t cut_byte = (x.size() * 256 + x.size() + y.size() - 1) / (x.size() + y.size());
  put(npy_dir / "pair.bin", std::string(1, char(cut_byte)) + x + y);

  // CSV: first byte = dialect (0: ',' with id, 1: tab with id, 3: ',' without id).
  put(csv_dir / "basic.csv", std::string(1, '\0') + "t,id,a,b,y\n1,A,1.5,2,0.1\n2,A,,NaN,0.2\n1,B,3,4,nan\n");
  put(csv_dir / "quoted_crlf.csv",
      std::string(1, '\0') + "id,t,x,a,b,y\r\n\"A,1\",2024-01-02,\"q\"\"q\",1e-3,-2,NA\r\n\"A,1\",2024-01-01,z,+4,5,6");
  put(csv_dir / "tab.csv", std::string(1, '\1') + "t\tid\ta\tb\ty\n10\tX\t1\t2\t3\n9\tY\t4\t5\t6\n100\tX\t7\t8\t9\n");
  put(csv_dir / "series.csv", std::string(1, '\3') + "\xEF\xBB\xBFt,a,b,y\n1.0,1,2,3\n2,4,5,\n\n3,7,8,9\n");
  put(csv_dir / "semicolon.csv", std::string(1, '\2') + "t;id;a;b;y\n2024-01-02;A;1;2;3\n2024-01-03;\"B;C\";4;;6\n");

  // safetensors: plain tensors, a scalar and an empty tensor, and a checkpoint-like metadata set.
  const std::vector<mlalpha::TensorView> views = {{"w", {2, 3}, f.data()}, {"b", {3}, f.data() + 3}, {"s", {}, f.data()},
                                                  {"e", {0, 4}, f.data()}};
  put(st_dir / "plain.safetensors", mlalpha::encode_safetensors(views, {}));
  mlalpha::ModelConfig mc;
  mc.F = 2, mc.K = 1;
  const mlalpha::FeatureStats stats{{0.5f, -1.0f}, {1.0f, 2.0f}};
  put(st_dir / "meta.safetensors",
      mlalpha::encode_safetensors(views, {{"format", "ml-alpha.weights"},
                                          {"format_version", "1"},
                                          {"step", "10"},
                                          {"model_config", mlalpha::to_json(mc)},
                                          {"train_config", mlalpha::to_json(mlalpha::TrainConfig{})},
                                          {"feature_stats", mlalpha::to_json(stats)},
                                          {"feature_names", mlalpha::to_json(std::vector<std::string>{"a", "b"})}}));

  // TOML: every section with boundaries of the three kinds, and overrides after a "--" line.
  put(toml_dir / "sections.toml",
      "[data]\nsource = \"csv\"\ncsv = \"d.csv\"\nfeature_columns = [\"a\", \"b\"]\ntarget_columns = [\"y\"]\n"
      "[split]\ntrain_end = \"2020-01-01\"\nvalid_end = 900\ngap = 2\nwalk_forward_folds = 3\n"
      "[model]\nd_model = 16\nhead_dim = 8\ndt_limit_hi = inf\n[train]\nloss = \"huber\"\nlr = 2e-3\n"
      "[run]\ndevice = \"cpu\"\nmetric = \"rank_ic\"\n");
  put(toml_dir / "overrides.toml", "[train]\nsteps = 5\n\n--\ntrain.lr=3e-3\ndata.source=npy\nsplit.train_end=0.5\n");
  return 0;
}
