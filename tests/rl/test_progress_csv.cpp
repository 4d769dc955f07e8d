// <prefix>_progress.csv: header once, whole rows, exact numbers, and the resume rule (rows
// past the checkpoint and a partial line cut, missing rows restored from the checkpoint).
#include <algorithm>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>
#include <catch2/catch.hpp>

#include "herd/core/error.hpp"
#include "herd/io/checkpoint.hpp"
#include "herd/rl/progress_csv.hpp"
#include "herd/rl/trainer.hpp"

namespace fs = std::filesystem;
using herd::rl::ProgressCsv;
using herd::rl::ProgressRow;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

fs::path fresh(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("herd_progress_test_" + std::to_string(::getpid())) / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

ProgressRow row(int it) {
  ProgressRow r;
  for (std::size_t c = 0; c < r.size(); ++c) r[c] = 0.1 * it + static_cast<double>(c) / 3.0;
  r[0] = it;
  r[1] = 128.0 * it;
  r[3] = 5.0 * it;
  return r;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

}  // namespace

TEST_CASE("ProgressCsv: the documented header, integers as integers, values that read back exactly", "[rl]") {
  CHECK(herd::rl::progress_csv_header() ==
        "iteration,env_steps,wall_time_s,episodes,return_mean,return_min,return_max,length_mean,length_min,"
        "length_max,policy_loss,value_loss,entropy,approx_kl,clip_fraction,explained_variance,learning_rate,"
        "sample_steps_per_s,train_steps_per_s\n");
  ProgressCsv csv("unused.csv", {"approx_kl", "clip_fraction"});
  ProgressRow r = row(7);
  r[4] = std::nan("");
  const std::string line = csv.format(r);
  REQUIRE(line.back() == '\n');
  std::vector<std::string> f;
  std::stringstream ss(line.substr(0, line.size() - 1));
  for (std::string x; std::getline(ss, x, ',');) f.push_back(x);
  if (line[line.size() - 2] == ',') f.push_back("");
  REQUIRE(f.size() == herd::rl::kProgressColumns.size());
  CHECK(f[0] == "7");
  CHECK(f[1] == "896");
  CHECK(f[3] == "35");
  CHECK(f[4] == "nan");
  CHECK(f[13].empty());  // approx_kl: blank for this algorithm
  CHECK(f[14].empty());
  for (std::size_t c : {2u, 5u, 10u, 12u, 18u}) CHECK(std::stod(f[c]) == r[c]);  // exact round trip
  CHECK_THROWS_AS(ProgressCsv("x.csv", {"no_such_column"}), herd::InputError);
}

TEST_CASE("ProgressCsv::resume keeps rows up to the checkpoint, cuts the rest, restores missing rows", "[rl]") {
  const fs::path d = fresh("resume");
  const std::string p = (d / "run_progress.csv").string();
  std::vector<ProgressRow> ckpt;  // the checkpoint's curve: iterations 1..4
  for (int i = 1; i <= 4; ++i) ckpt.push_back(row(i));
  {
    ProgressCsv csv(p);
    csv.start();
    for (int i = 1; i <= 6; ++i) csv.append(row(i));  // the killed run got to iteration 6
  }
  const std::string six = slurp(p);
  std::ofstream(p, std::ios::app) << "7,896,0.5";  // and was killed inside a row (a short write)
  std::string expected;
  {
    ProgressCsv csv(p);
    csv.resume(ckpt);
    csv.append(row(5));
    expected = slurp(p);
  }
  auto l = lines(expected);
  REQUIRE(l.size() == 6u);  // header + 5 rows
  CHECK(l[0] + "\n" == herd::rl::progress_csv_header());
  CHECK(expected == six.substr(0, six.find("6,768")));  // rows 1..5 byte-identical to the first run's
  // A file that lost its last rows (or every row) gets them back from the checkpoint.
  {
    const std::string three = six.substr(0, six.find("4,512"));
    std::ofstream(p, std::ios::trunc) << three;
    ProgressCsv csv(p);
    csv.resume(ckpt);
    csv.append(row(5));
  }
  CHECK(slurp(p) == expected);
  // A missing file, or one with other columns, is written anew.
  fs::remove(p);
  {
    ProgressCsv csv(p);
    csv.resume(ckpt);
    csv.append(row(5));
  }
  CHECK(slurp(p) == expected);
  std::ofstream(p, std::ios::trunc) << "a,b\n1,2\n";
  {
    ProgressCsv csv(p);
    csv.resume(ckpt);
    csv.append(row(5));
  }
  CHECK(slurp(p) == expected);
  // Rows out of order after the header (not this run's) are cut at the first one.
  std::ofstream(p, std::ios::trunc) << herd::rl::progress_csv_header() << "1,128\n3,384\n";
  {
    ProgressCsv csv(p);
    csv.resume(ckpt);
  }
  l = lines(slurp(p));
  REQUIRE(l.size() == 5u);
  CHECK(l[1] == "1,128");
  CHECK(l[2].rfind("2,256,", 0) == 0);
}

TEST_CASE("Trainer::progress_row maps the curve's columns to the CSV's", "[rl]") {
  herd::rl::CurveRow c;
  for (std::size_t k = 0; k < c.size(); ++k) c[k] = static_cast<double>(k);
  const ProgressRow p = herd::rl::Trainer::progress_row(c);
  auto at = [&](const char* name) {
    for (std::size_t k = 0; k < herd::rl::kCurveColumns.size(); ++k)
      if (std::string(herd::rl::kCurveColumns[k]) == name) return static_cast<double>(k);
    return -1.0;
  };
  const char* curve_names[] = {"iteration",
                               "env_steps",
                               "wall_seconds",
                               "episodes",
                               "return_mean",
                               "return_min",
                               "return_max",
                               "episode_length",
                               "episode_length_min",
                               "episode_length_max",
                               "policy_loss",
                               "value_loss",
                               "entropy",
                               "approx_kl",
                               "clip_fraction",
                               "explained_variance",
                               "learning_rate",
                               "sample_steps_per_second",
                               "train_steps_per_second"};
  for (std::size_t k = 0; k < p.size(); ++k) {
    INFO(herd::rl::kProgressColumns[k]);
    CHECK(p[k] == at(curve_names[k]));
  }
}

namespace {
herd::rl::TrainConfig small_config(const fs::path& dir, std::string* text, std::vector<std::string> extra = {}) {
  std::vector<std::string> sets = {"total_steps=512", "sampler.num_envs=4", "sampler.num_steps=32",
                                   "output_prefix=" + (dir / "run").string()};
  // PPO's epochs and minibatches (A2C reads neither).
  if (std::find(extra.begin(), extra.end(), "algorithm=a2c") == extra.end())
    sets.insert(sets.end(), {"algo.epochs=1", "algo.minibatch_size=64"});
  sets.insert(sets.end(), extra.begin(), extra.end());
  return herd::rl::load_train_config("", sets, text);
}
}  // namespace

TEST_CASE("Trainer::run: an interrupt stops after the current iteration with a checkpoint", "[rl]") {
  const fs::path d = fresh("interrupt");
  std::string text;
  const auto c = small_config(d, &text);  // 4 iterations
  volatile std::sig_atomic_t flag = 1;    // set before the first iteration ends
  {
    herd::rl::Trainer t(c, text);
    CHECK(t.run(nullptr, -1, &flag) == herd::rl::RunEnd::kInterrupted);
    CHECK(t.interrupted_by() == 1);
    CHECK(t.iteration() == 1);
    CHECK(fs::exists(t.checkpoint_path()));
    CHECK_FALSE(fs::exists(t.output_path()));
    CHECK(lines(slurp(t.progress_path())).size() == 2u);
  }
  {
    // Resumed, it continues the CSV; an interrupt in the last iteration lets the run complete.
    herd::rl::Trainer t(c, text);
    t.load_checkpoint(t.checkpoint_path());
    CHECK(t.run(nullptr, 2) == herd::rl::RunEnd::kStopped);
    CHECK(t.iteration() == 3);
    CHECK(t.run(nullptr, -1, &flag) == herd::rl::RunEnd::kDone);
    CHECK(t.iteration() == 4);
    CHECK(fs::exists(t.output_path()));
    const auto l = lines(slurp(t.progress_path()));
    REQUIRE(l.size() == 5u);
    for (int i = 1; i <= 4; ++i) CHECK(l[static_cast<std::size_t>(i)].rfind(std::to_string(i) + ",", 0) == 0);
  }
}

TEST_CASE("Trainer: a checkpoint of the 16-column curve (no curve_columns) resumes", "[rl]") {
  const fs::path d = fresh("legacy");
  std::string text;
  const auto c = small_config(d, &text);
  herd::rl::Trainer a(c, text);
  REQUIRE(a.run(nullptr, 2) == herd::rl::RunEnd::kStopped);
  // The checkpoint as the version before the episode count and the extra columns wrote it.
  {
    const herd::io::CheckpointReader r(a.checkpoint_path());
    herd::io::CheckpointWriter w(r.kind(), r.kind_version());
    for (const auto& name : r.names()) {
      if (name == "curve_columns" || name == "episodes_total") continue;
      if (name == "curve") {
        const auto curve = r.get<double>("curve");
        std::vector<double> old;
        for (std::size_t i = 0; i < curve.size(); i += herd::rl::kCurveColumns.size())
          old.insert(old.end(), curve.begin() + static_cast<std::ptrdiff_t>(i),
                     curve.begin() + static_cast<std::ptrdiff_t>(i + 16));
        w.add("curve", old);
      } else {
        w.add_bytes(name, r.bytes(name));
      }
    }
    w.commit(a.checkpoint_path());
  }
  fs::remove(a.progress_path());  // and no progress CSV yet
  herd::rl::Trainer b(c, text);
  b.load_checkpoint(b.checkpoint_path());
  REQUIRE(b.curve().size() == 2u);
  for (std::size_t k = 0; k < herd::rl::kCurveColumns.size(); ++k) {
    INFO(herd::rl::kCurveColumns[k]);
    if (k < 16) CHECK(b.curve()[1][k] == a.curve()[1][k]);
    else CHECK(std::isnan(b.curve()[1][k]));
  }
  REQUIRE(b.run(nullptr) == herd::rl::RunEnd::kDone);
  const auto l = lines(slurp(b.progress_path()));
  REQUIRE(l.size() == 5u);
  CHECK(l[2].rfind("2,256,", 0) == 0);
  CHECK(l[4].rfind("4,512,", 0) == 0);
  std::vector<std::string> f;
  std::stringstream ss(l[4]);
  for (std::string x; std::getline(ss, x, ',');) f.push_back(x);
  REQUIRE(f.size() > 4u);
  CHECK(f[3] == "nan");  // the episode count is unknown after such a resume
  CHECK(f[4] != "nan");  // returns are known
}

TEST_CASE("Trainer: a2c leaves approx_kl and clip_fraction blank; TensorBoard scalars per iteration", "[rl]") {
  const fs::path d = fresh("a2c_tb");
  std::string text;
  const auto c = small_config(d, &text, {"algorithm=a2c", "logging.tensorboard=true"});
  herd::rl::Trainer t(c, text);
  REQUIRE(t.run(nullptr) == herd::rl::RunEnd::kDone);
  const auto l = lines(slurp(t.progress_path()));
  REQUIRE(l.size() == 5u);
  std::vector<std::string> f;
  std::stringstream ss(l[4]);
  for (std::string x; std::getline(ss, x, ',');) f.push_back(x);
  REQUIRE(f.size() >= 17u);
  CHECK(f[13].empty());
  CHECK(f[14].empty());
  CHECK_FALSE(f[12].empty());  // entropy
  const auto scalars = t.tensorboard_scalars(t.curve().back());
  bool kl = false, ret = false;
  for (const auto& s : scalars) {
    kl = kl || s.tag == "train/approx_kl";
    ret = ret || s.tag == "rollout/return_mean";
  }
  CHECK_FALSE(kl);
  CHECK(ret);
  std::size_t files = 0;
  for (const auto& e : fs::directory_iterator(t.tensorboard_dir()))
    files += e.path().filename().string().rfind("events.out.tfevents.", 0) == 0;
  CHECK(files == 1u);
  fs::remove_all(d.parent_path());
}
