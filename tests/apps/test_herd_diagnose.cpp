// herd-diagnose end to end: CSV and HDF5 inputs, --json, and the exit-2 error cases.
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <hdf5.h>
#include <nlohmann/json.hpp>

#include "../mcmc/diagnostics_vectors.hpp"
#include "herd/mcmc/diagnostics.hpp"

namespace fs = std::filesystem;

namespace {

const fs::path kWork = HERD_TEST_WORK_DIR;

struct Run {
  int rc;
  std::string out, err;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// The path in double quotes, for the shell.
std::string q(const fs::path& p) {
  std::string s;
  s += '"';
  s += p.string();
  s += '"';
  return s;
}

Run run(const std::string& args) {
  fs::create_directories(kWork);
  const fs::path out = kWork / "stdout.txt", err = kWork / "stderr.txt";
  std::string cmd = q(HERD_DIAGNOSE_EXE);
  cmd += ' ';
  cmd += args;
  cmd += " > ";
  cmd += q(out);
  cmd += " 2> ";
  cmd += q(err);
  const int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
}

/// Writes [M, N] draws as CSV: one column per chain, one row per draw.
fs::path write_csv(const std::string& name, const std::vector<double>& x, std::size_t m,
                   std::size_t n, const std::string& header = "") {
  fs::create_directories(kWork);
  const fs::path p = kWork / name;
  std::FILE* f = std::fopen(p.c_str(), "w");
  if (!header.empty()) std::fprintf(f, "%s\n", header.c_str());
  for (std::size_t t = 0; t < n; ++t)
    for (std::size_t c = 0; c < m; ++c)
      std::fprintf(f, "%.17g%s", x[c * n + t], c + 1 < m ? "," : "\n");
  std::fclose(f);
  return p;
}

void write_dataset(hid_t loc, const char* name, const std::vector<double>& x,
                   std::vector<hsize_t> dims) {
  const hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  const hid_t ds = H5Dcreate2(loc, name, H5T_NATIVE_DOUBLE, space, H5P_DEFAULT, H5P_DEFAULT,
                              H5P_DEFAULT);
  H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, x.data());
  H5Dclose(ds);
  H5Sclose(space);
}

/// A file with theta [4, 1000, 2] (TV1, TV4) at the root and in posterior/, plus mu [4, 999]
/// (TV2) and a rank-1 coordinate in posterior/, and a rank-1 dataset "flat" at the root.
fs::path write_h5(const std::string& name, bool with_inf = false) {
  fs::create_directories(kWork);
  const fs::path p = kWork / name;
  const auto tv1 = herd_test::test_vector(1), tv4 = herd_test::test_vector(4);
  std::vector<double> theta(4 * 1000 * 2);
  for (std::size_t i = 0; i < 4000; ++i) {
    theta[2 * i] = tv1.x[i];
    theta[2 * i + 1] = tv4.x[i];
  }
  if (with_inf) theta[2 * 1234 + 1] = std::numeric_limits<double>::infinity();
  const hid_t f = H5Fcreate(p.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  write_dataset(f, "theta", theta, {4, 1000, 2});
  write_dataset(f, "flat", std::vector<double>(10, 1.0), {10});
  const hid_t g = H5Gcreate2(f, "posterior", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  write_dataset(g, "theta", theta, {4, 1000, 2});
  write_dataset(g, "mu", herd_test::test_vector(2).x, {4, 999});
  write_dataset(g, "chain", {0, 1, 2, 3}, {4});
  H5Gclose(g);
  H5Fclose(f);
  return p;
}

void check_matches(const nlohmann::json& j, const herd_test::TestVector& tv) {
  const auto s = herd::mcmc::summarize(herd::mcmc::DrawsView(tv.x, tv.m, tv.n));
  CHECK(j["mean"].get<double>() == s.mean);
  CHECK(j["sd"].get<double>() == s.sd);
  CHECK(j["q5"].get<double>() == s.q5);
  CHECK(j["q50"].get<double>() == s.q50);
  CHECK(j["q95"].get<double>() == s.q95);
  CHECK(j["mcse_mean"].get<double>() == s.mcse_mean);
  CHECK(j["mcse_sd"].get<double>() == s.mcse_sd);
  CHECK(j["ess_bulk"].get<double>() == s.ess_bulk);
  CHECK(j["ess_tail"].get<double>() == s.ess_tail);
  CHECK(j["rhat"].get<double>() == s.rhat);
}

void check_error(const Run& r, const std::string& needle) {
  INFO("stderr: " << r.err);
  CHECK(r.rc == 2);
  CHECK(r.out.empty());
  CHECK(r.err.find(needle) != std::string::npos);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
}

}  // namespace

TEST_CASE("herd-diagnose: CSV with a header, --json, values of the library", "[mcmc][apps]") {
  const auto tv = herd_test::test_vector(1);
  const auto csv = write_csv("tv1.csv", tv.x, tv.m, tv.n, "chain1,chain2,chain3,chain4");
  const Run r = run(q(csv) + " --json");
  INFO(r.err);
  REQUIRE(r.rc == 0);
  const auto j = nlohmann::json::parse(r.out);
  REQUIRE(j.contains("tv1"));
  check_matches(j["tv1"], tv);
  CHECK_THAT(j["tv1"]["rhat"].get<double>(),
             Catch::Matchers::WithinRel(herd_test::kReference[0].rhat, 1e-9));
  CHECK_THAT(j["tv1"]["ess_bulk"].get<double>(),
             Catch::Matchers::WithinRel(herd_test::kReference[0].ess_bulk, 1e-9));
  // Without a header, and the text table.
  const auto plain = write_csv("tv2.csv", herd_test::test_vector(2).x, 4, 999);
  const Run t = run(q(plain));
  REQUIRE(t.rc == 0);
  CHECK(t.out.find("ess_bulk") != std::string::npos);
  CHECK(t.out.find("tv2") != std::string::npos);
  const Run tj = run(q(plain) + " --json");
  check_matches(nlohmann::json::parse(tj.out)["tv2"], herd_test::test_vector(2));
}

TEST_CASE("herd-diagnose: HDF5 datasets and the posterior group", "[mcmc][apps]") {
  const auto h5 = write_h5("draws.h5");
  const Run r = run(q(h5) + " --dataset theta --json");
  INFO(r.err);
  REQUIRE(r.rc == 0);
  const auto j = nlohmann::json::parse(r.out);
  check_matches(j["theta[0]"], herd_test::test_vector(1));
  check_matches(j["theta[1]"], herd_test::test_vector(4));
  // No --dataset: every dataset of posterior/ (coordinates skipped), in name order.
  const Run g = run(q(h5) + " --json");
  REQUIRE(g.rc == 0);
  const auto jg = nlohmann::ordered_json::parse(g.out);
  REQUIRE(jg.size() == 3);
  CHECK(jg.begin().key() == "mu");
  check_matches(jg["mu"], herd_test::test_vector(2));
  check_matches(jg["theta[1]"], herd_test::test_vector(4));
  const Run text = run(q(h5));
  CHECK(text.rc == 0);
  CHECK(text.out.find("theta[1]") != std::string::npos);
}

TEST_CASE("herd-diagnose: bad input exits 2 with a one-line message", "[mcmc][apps]") {
  const auto tv = herd_test::test_vector(1);
  // NaN and Inf in a CSV.
  {
    const fs::path p = kWork / "nan.csv";
    fs::create_directories(kWork);
    std::ofstream(p) << "1.0,2.0\n0.5,nan\n0.25,0.75\n";
    check_error(run(q(p)), "line 2 column 2 is 'nan', but draws must be finite");
    std::ofstream(p) << "1.0,2.0\n0.5,inf\n0.25,0.75\n";
    check_error(run(q(p)), "must be finite");
  }
  // Ragged CSV and a non-numeric field.
  {
    const fs::path p = kWork / "ragged.csv";
    std::ofstream(p) << "a,b,c\n1,2,3\n4,5\n";
    check_error(run(q(p)), "line 3 has 2 fields, but line 1 has 3");
    std::ofstream(p) << "1,2,3\n4,x,6\n";
    check_error(run(q(p)), "line 2 column 2 is 'x', but must be a number");
    std::ofstream(p) << "a,b,c\n";
    check_error(run(q(p)), "no draws");
  }
  // HDF5: missing dataset, wrong rank, Inf.
  const auto h5 = write_h5("bad.h5");
  check_error(run(q(h5) + " --dataset nope"), "no dataset 'nope'");
  check_error(run(q(h5) + " --dataset flat"), "has rank 1, but must have rank 2");
  const auto inf = write_h5("inf.h5", true);
  check_error(run(q(inf) + " --dataset theta"),
              "has inf at [chain 1, draw 234, param 1], but draws must be finite");
  check_error(run(q(inf)), "must be finite");
  // A missing file and a bad command line.
  check_error(run(q((kWork / "missing.csv"))), "cannot open");
  const Run u = run("--bogus");
  CHECK(u.rc == 2);
  (void)tv;
}
