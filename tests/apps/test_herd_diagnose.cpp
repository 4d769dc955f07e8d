// herd-diagnose end to end: CSV and HDF5 inputs, --json, and the exit-2 error cases.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <hdf5.h>
#include <hdf5_hl.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <fmt/format.h>
#include "../mcmc/diagnostics_vectors.hpp"
#include "herd/core/config.hpp"
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
fs::path write_csv(const std::string& name, const std::vector<double>& x, std::size_t m, std::size_t n,
                   const std::string& header = "") {
  fs::create_directories(kWork);
  fs::path p = kWork / name;
  std::FILE* f = std::fopen(p.c_str(), "w");
  if (!header.empty()) std::fprintf(f, "%s\n", header.c_str());
  for (std::size_t t = 0; t < n; ++t)
    for (std::size_t c = 0; c < m; ++c) std::fprintf(f, "%.17g%s", x[c * n + t], c + 1 < m ? "," : "\n");
  std::fclose(f);
  return p;
}

void write_dataset(hid_t loc, const char* name, const std::vector<double>& x, std::vector<hsize_t> dims) {
  const hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  const hid_t ds = H5Dcreate2(loc, name, H5T_NATIVE_DOUBLE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, x.data());
  H5Dclose(ds);
  H5Sclose(space);
}

/// A scalar attribute `name` of HDF5 object `obj`: a fixed-length string (`text` and its
/// terminating NUL) or a 64-bit integer.
void write_attribute(hid_t obj, const char* name, const std::string& text) {
  const hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, text.size() + 1);
  const hid_t space = H5Screate(H5S_SCALAR);
  const hid_t a = H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(a, type, text.c_str());
  H5Aclose(a);
  H5Sclose(space);
  H5Tclose(type);
}
void write_attribute(hid_t obj, const char* name, std::int64_t value) {
  const hid_t space = H5Screate(H5S_SCALAR);
  const hid_t a = H5Acreate2(obj, name, H5T_NATIVE_INT64, space, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(a, H5T_NATIVE_INT64, &value);
  H5Aclose(a);
  H5Sclose(space);
}

/// A file with theta [4, 1000, 2] (TV1, TV4) at the root and in posterior/, plus mu [4, 999]
/// (TV2) and a rank-1 coordinate in posterior/, and a rank-1 dataset "flat" at the root.
fs::path write_h5(const std::string& name, bool with_inf = false) {
  fs::create_directories(kWork);
  fs::path p = kWork / name;
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

/// A 1-D dataset of variable-length strings, as herd's io layer writes name lists (`utf8`:
/// in UTF-8, as herd-sample's `diagnostics/variable`, else ASCII).
void write_strings(hid_t loc, const char* name, const std::vector<std::string>& v, bool utf8 = false) {
  const hsize_t n = v.size();
  const hid_t space = H5Screate_simple(1, &n, nullptr);
  const hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, H5T_VARIABLE);
  if (utf8) H5Tset_cset(type, H5T_CSET_UTF8);
  const hid_t ds = H5Dcreate2(loc, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  std::vector<const char*> ptrs;
  ptrs.reserve(v.size());
  for (const auto& x : v) ptrs.push_back(x.c_str());
  H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data());
  H5Dclose(ds);
  H5Tclose(type);
  H5Sclose(space);
}

/// How `write_named_h5` lays its file out.
struct NamedLayout {
  bool herd = true;                        ///< the root attribute herd_version (a file herd wrote)
  const char* list_group = "diagnostics";  ///< where the `variable` name list is (null: none)
  bool creation_order = false;             ///< the posterior group tracks its links' creation order
};

/// posterior/ with, created in this order, x10 (TV1), beta [4, 1000, 2] (TV1, TV4), x2 (TV4)
/// and the coordinates chain and beta_dim_0; the name list (as herd-sample writes it)
/// `beta[1], beta[2], x2, x10`. Name order is beta, x10, x2; creation order x10, beta, x2.
fs::path write_named_h5(const std::string& name, const NamedLayout& layout) {
  fs::create_directories(kWork);
  fs::path p = kWork / name;
  const auto tv1 = herd_test::test_vector(1), tv4 = herd_test::test_vector(4);
  std::vector<double> beta(4 * 1000 * 2);
  for (std::size_t i = 0; i < 4000; ++i) {
    beta[2 * i] = tv1.x[i];
    beta[2 * i + 1] = tv4.x[i];
  }
  const hid_t f = H5Fcreate(p.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (layout.herd) write_attribute(f, "herd_version", std::string("0.0.0"));
  const hid_t gcpl = H5Pcreate(H5P_GROUP_CREATE);
  if (layout.creation_order) H5Pset_link_creation_order(gcpl, H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED);
  const hid_t g = H5Gcreate2(f, "posterior", H5P_DEFAULT, gcpl, H5P_DEFAULT);
  H5Pclose(gcpl);
  write_dataset(g, "x10", tv1.x, {4, 1000});
  write_dataset(g, "beta", beta, {4, 1000, 2});
  write_dataset(g, "x2", tv4.x, {4, 1000});
  write_dataset(g, "chain", {0, 1, 2, 3}, {4});
  write_dataset(g, "beta_dim_0", {0, 1}, {2});
  H5Gclose(g);
  if (layout.list_group != nullptr) {
    const hid_t d = H5Gcreate2(f, layout.list_group, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    write_strings(d, "variable", {"beta[1]", "beta[2]", "x2", "x10"});
    H5Gclose(d);
  }
  H5Fclose(f);
  return p;
}

/// The keys of a JSON object, in its order.
std::vector<std::string> keys(const nlohmann::ordered_json& j) {
  std::vector<std::string> k;
  for (auto it = j.begin(); it != j.end(); ++it) k.push_back(it.key());
  return k;
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
  CHECK_THAT(j["tv1"]["rhat"].get<double>(), Catch::Matchers::WithinRel(herd_test::kReference[0].rhat, 1e-9));
  CHECK_THAT(j["tv1"]["ess_bulk"].get<double>(), Catch::Matchers::WithinRel(herd_test::kReference[0].ess_bulk, 1e-9));
  // Without a header, and the text table.
  const auto plain = write_csv("tv2.csv", herd_test::test_vector(2).x, 4, 999);
  const Run t = run(q(plain));
  REQUIRE(t.rc == 0);
  CHECK(t.out.find("ess_bulk") != std::string::npos);
  CHECK(t.out.find("tv2") != std::string::npos);
  // On stderr, what was read and herd-sample's convergence warnings (tv1: R-hat 1.03, ESS
  // under 400), the advice naming no herd-sample setting; stdout holds the table alone.
  CHECK_THAT(t.err, Catch::Contains("herd-diagnose: tv2: 4 chains x 999 draws"));
  const Run w = run(q(csv));
  CHECK_THAT(w.err, Catch::Contains("herd-diagnose: tv1: 4 chains x 1000 draws\nWARNING: R-hat is above 1.01 for tv1"));
  CHECK_THAT(w.err, Catch::Contains("WARNING: Bulk- or tail-ESS is below 400") &&
                        Catch::Contains("tune the sampler (its proposal or step size)") &&
                        !Catch::Contains("proposal_std"));
  CHECK(w.out.find("WARNING") == std::string::npos);
  const Run tj = run(q(plain) + " --json");
  check_matches(nlohmann::json::parse(tj.out)["tv2"], herd_test::test_vector(2));
  // One chain with its header ("chain1": no delimiter in it) reads as the same chain without.
  const std::vector<double> first(tv.x.begin(), tv.x.begin() + static_cast<std::ptrdiff_t>(tv.n));
  const Run h1 = run(q(write_csv("one_h.csv", first, 1, tv.n, "chain1")) + " --json");
  const Run p1 = run(q(write_csv("one_p.csv", first, 1, tv.n)) + " --json");
  INFO(h1.err);
  REQUIRE(h1.rc == 0);
  REQUIRE(p1.rc == 0);
  CHECK(nlohmann::json::parse(h1.out)["one_h"] == nlohmann::json::parse(p1.out)["one_p"]);
}

TEST_CASE("herd-diagnose: a matrix parameter [chain, draw, 2, 3] is six parameters, ArviZ's labels", "[mcmc][apps]") {
  // The same values as a [4, 250, 6] dataset M and a [4, 250, 2, 3] dataset L: L[i, j] is
  // M[3 i + j] (row-major), so every statistic must be the same number. (Such a file was
  // refused: rank 4.)
  fs::create_directories(kWork);
  const fs::path p = kWork / "matrix.h5";
  std::vector<double> v(4 * 250 * 6);
  std::uint64_t z = 12345;
  for (std::size_t i = 0; i < v.size(); ++i) {
    z = z * 6364136223846793005ULL + 1442695040888963407ULL;
    v[i] = static_cast<double>(z >> 11) * 0x1p-53 + static_cast<double>(i % 6);  // parameter k around k + 0.5
  }
  const hid_t f = H5Fcreate(p.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  const hid_t g = H5Gcreate2(f, "posterior", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  write_dataset(g, "L", v, {4, 250, 2, 3});
  write_dataset(g, "M", v, {4, 250, 6});
  H5Gclose(g);
  H5Fclose(f);
  const Run r = run(q(p) + " --json");
  INFO(r.err);
  REQUIRE(r.rc == 0);
  const auto j = nlohmann::json::parse(r.out);
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t k = 0; k < 3; ++k) {
      const std::string l = "L[" + std::to_string(i) + ", " + std::to_string(k) + "]";
      const std::string m = "M[" + std::to_string(3 * i + k) + "]";
      INFO(l << " vs " << m);
      REQUIRE(j.contains(l));
      CHECK(j[l] == j[m]);
      CHECK_THAT(j[l]["mean"].get<double>(), Catch::Matchers::WithinAbs(static_cast<double>(3 * i + k) + 0.5, 0.05));
    }
  CHECK(j.size() == 12);
}

// An ArviZ file's array elements were labelled by their 0-based index (theta[0]) where
// az.summary labels them by their coordinate's values (theta[Choate] for coords={"school":
// [...]}, a[1] for integer coordinates from 1): the rows of the two tables did not match.
TEST_CASE("herd-diagnose: array elements are labelled by their coordinates, as az.summary labels them",
          "[mcmc][apps]") {
  fs::create_directories(kWork);
  const fs::path p = kWork / "coords.h5";
  const auto tv = herd_test::test_vector(1);  // [4, 1000]
  std::vector<double> theta(4 * 250 * 3), m(4 * 250 * 2 * 2), e(4 * 250 * 2);
  for (std::size_t i = 0; i < theta.size(); ++i) theta[i] = tv.x[i % tv.x.size()];
  for (std::size_t i = 0; i < m.size(); ++i) m[i] = tv.x[(3 * i) % tv.x.size()];
  for (std::size_t i = 0; i < e.size(); ++i) e[i] = tv.x[(7 * i) % tv.x.size()];
  const hid_t f = H5Fcreate(p.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  const hid_t g = H5Gcreate2(f, "posterior", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  write_dataset(g, "theta", theta, {4, 250, 3});
  write_dataset(g, "M", m, {4, 250, 2, 2});
  write_dataset(g, "e", e, {4, 250, 2});
  write_dataset(g, "u", e, {4, 250, 2});
  // Coordinates as netCDF-4 writes them: dimension scales, strings in UTF-8, integers.
  write_strings(g, "school", {"Choate", "Deerfield", "Phillips"}, true);
  write_strings(g, "row", {"r1", "r2"}, true);
  write_strings(g, "twin", {"a", "a"}, true);  // repeated values: rows would be named alike
  const hsize_t two = 2;
  const hid_t space = H5Screate_simple(1, &two, nullptr);
  const hid_t col = H5Dcreate2(g, "col", H5T_NATIVE_INT64, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  const std::int64_t cols[2] = {1, 2};
  H5Dwrite(col, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, cols);
  // A dimension without a coordinate, as netCDF-4 marks it: labelled by the index.
  const hid_t bare = H5Dcreate2(g, "e_dim_0", H5T_NATIVE_FLOAT, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Sclose(space);
  const hid_t school = H5Dopen2(g, "school", H5P_DEFAULT), row = H5Dopen2(g, "row", H5P_DEFAULT),
              twin = H5Dopen2(g, "twin", H5P_DEFAULT), uu = H5Dopen2(g, "u", H5P_DEFAULT);
  const hid_t th = H5Dopen2(g, "theta", H5P_DEFAULT), mm = H5Dopen2(g, "M", H5P_DEFAULT),
              ee = H5Dopen2(g, "e", H5P_DEFAULT);
  H5DSset_scale(school, "school");
  H5DSset_scale(row, "row");
  H5DSset_scale(col, "col");
  H5DSset_scale(twin, "twin");
  H5DSset_scale(bare, "This is a netCDF dimension but not a netCDF variable.         2");
  H5DSattach_scale(th, school, 2);
  H5DSattach_scale(mm, row, 2);
  H5DSattach_scale(mm, col, 3);
  H5DSattach_scale(ee, bare, 2);
  H5DSattach_scale(uu, twin, 2);
  for (const hid_t d : {school, row, col, bare, twin, th, mm, ee, uu}) H5Dclose(d);
  H5Gclose(g);
  H5Fclose(f);
  const Run r = run(q(p) + " --json");
  INFO(r.err);
  REQUIRE(r.rc == 0);
  using V = std::vector<std::string>;
  CHECK(keys(nlohmann::ordered_json::parse(r.out)) == V{"M[r1, 1]", "M[r1, 2]", "M[r2, 1]", "M[r2, 2]", "e[0]", "e[1]",
                                                        "theta[Choate]", "theta[Deerfield]", "theta[Phillips]", "u[0]",
                                                        "u[1]"});
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
  // Parameters spread over threads: the same rows, in the same order, to the last digit.
  for (const char* t : {"1", "2", "3"}) {
    const Run m = run(q(h5) + " --json --threads " + t);
    REQUIRE(m.rc == 0);
    CHECK(m.out == g.out);
  }
}

TEST_CASE("herd-diagnose: a herd file's quantities in herd-sample's order and names; others in ArviZ's",
          "[mcmc][apps]") {
  using V = std::vector<std::string>;
  // herd's file: the order and the names of its `variable` list (diagnostics/, else
  // chain_compact/), not HDF5's name order (beta, x10, x2) and 0-based beta[0], beta[1].
  for (const char* group : {"diagnostics", "chain_compact"}) {
    INFO(group);
    const auto h5 = write_named_h5(std::string("herd_") + group + ".h5", {.herd = true, .list_group = group});
    const Run r = run(q(h5) + " --json");
    INFO(r.err);
    REQUIRE(r.rc == 0);
    const auto j = nlohmann::ordered_json::parse(r.out);
    CHECK(keys(j) == V{"beta[1]", "beta[2]", "x2", "x10"});
    check_matches(j["beta[1]"], herd_test::test_vector(1));
    check_matches(j["beta[2]"], herd_test::test_vector(4));
    check_matches(j["x10"], herd_test::test_vector(1));
    // The table and --dataset name them so too.
    const Run t = run(q(h5));
    CHECK(t.out.find("beta[2]") < t.out.find("x2"));
    CHECK(t.out.find("x2") < t.out.find("x10"));
    CHECK(t.out.find("beta[0]") == std::string::npos);
    const Run d = run(q(h5) + " --dataset posterior/beta --json");
    CHECK(keys(nlohmann::ordered_json::parse(d.out)) == V{"beta[1]", "beta[2]"});
  }
  // A file herd did not write: ArviZ's 0-based element names (also with a `variable` list),
  // in the group's creation order when it tracks it, else in name order.
  const auto foreign = write_named_h5("foreign.h5", {.herd = false});
  const Run f = run(q(foreign) + " --json");
  REQUIRE(f.rc == 0);
  CHECK(keys(nlohmann::ordered_json::parse(f.out)) == V{"beta[0]", "beta[1]", "x10", "x2"});
  const auto ordered = write_named_h5("foreign_ordered.h5", {.herd = false, .creation_order = true});
  const Run o = run(q(ordered) + " --json");
  REQUIRE(o.rc == 0);
  CHECK(keys(nlohmann::ordered_json::parse(o.out)) == V{"x10", "beta[0]", "beta[1]", "x2"});
  // A herd file without a name list: its creation order, ArviZ's names.
  const auto bare = write_named_h5("herd_bare.h5", {.herd = true, .list_group = nullptr, .creation_order = true});
  const Run b = run(q(bare) + " --json");
  REQUIRE(b.rc == 0);
  CHECK(keys(nlohmann::ordered_json::parse(b.out)) == V{"x10", "beta[0]", "beta[1]", "x2"});
  // The HTML report's summary table follows the same order.
  const auto html = kWork / "named.html";
  const auto h5 = write_named_h5("herd_html.h5", {});
  REQUIRE(run(q(h5) + " --html " + q(html)).rc == 0);
  const std::string page = slurp(html);
  const auto b2 = page.find("<td>beta[2]</td>"), x2 = page.find("<td>x2</td>"), x10 = page.find("<td>x10</td>");
  REQUIRE(x10 != std::string::npos);
  CHECK(b2 < x2);
  CHECK(x2 < x10);
  CHECK(page.find("beta[0]") == std::string::npos);
}

TEST_CASE("herd-diagnose: bad input exits 2 with a one-line message", "[mcmc][apps]") {
  const auto tv = herd_test::test_vector(1);
  // Two columns of one name: the table had two rows "mu" and --json one key (one lost).
  {
    const fs::path p = kWork / "twin_columns.csv";
    std::ofstream(p) << "# model = m\nlp__,accept_stat__,mu,mu\n-1,0.9,1,5\n-2,0.9,2,6\n-1,0.8,3,7\n";
    check_error(run(q(p) + " --json"),
                "twin_columns.csv: line 2 column 4 is named \"mu\", as column 3 is, but each "
                "column of draws must have its own name");
  }
  // A missing file: and why it cannot be opened (it said "cannot open the file" alone).
  check_error(run(q(kWork / "no_such_chain.csv")),
              "no_such_chain.csv: cannot open the file (No such file or directory)");
  // Ragged CSV and a non-numeric field.
  {
    const fs::path p = kWork / "ragged.csv";
    std::ofstream(p) << "chain1,chain2,chain3\n1,2,3\n4,5\n";
    check_error(run(q(p)), "line 3 has 2 fields, but line 1 has 3");
    std::ofstream(p) << "1,2,3\n4,x,6\n";
    check_error(run(q(p)), "line 2 column 2 is 'x', but must be a number");
    std::ofstream(p) << "chain_1,chain_2\n";
    check_error(run(q(p)), "no draws");
  }
  // HDF5: missing dataset, wrong rank.
  const auto h5 = write_h5("bad.h5");
  check_error(run(q(h5) + " --dataset nope"), "no dataset 'nope'");
  check_error(run(q(h5) + " --dataset flat"), "has rank 1, but must have rank 2");
  // A missing file and a bad command line.
  check_error(run(q((kWork / "missing.csv"))), "cannot open");
  const Run u = run("--bogus");
  CHECK(u.rc == 2);
  (void)tv;
}

namespace {

/// An AR(1) series of length n (fixed seed), shifted by `shift`.
std::vector<double> ar1(std::size_t n, unsigned seed, double shift) {
  std::vector<double> x(n);
  std::uint64_t st = seed * 6364136223846793005ULL + 1442695040888963407ULL;
  auto unif = [&] {
    st = st * 6364136223846793005ULL + 1442695040888963407ULL;
    return (static_cast<double>(st >> 11) + 0.5) / 9007199254740992.0;
  };
  double v = 0;
  for (std::size_t i = 0; i < n; ++i) {
    v = 0.6 * v + (unif() - 0.5) * 2.0;
    x[i] = v + shift;
  }
  return x;
}

/// Every statistic of `j` (one parameter of --json) is null: NA, as for NaN or infinite draws.
void check_na(const nlohmann::json& j) {
  REQUIRE(j.is_object());
  CHECK(j.size() == 10);
  for (const auto& item : j.items()) {
    INFO(item.key());
    CHECK(item.value().is_null());
  }
}

void check_summary(const nlohmann::json& j, const std::vector<double>& draws, std::size_t m, std::size_t n) {
  const auto s = herd::mcmc::summarize(herd::mcmc::DrawsView(draws, m, n));
  CHECK(j["mean"].get<double>() == s.mean);
  CHECK(j["sd"].get<double>() == s.sd);
  CHECK(j["q50"].get<double>() == s.q50);
  CHECK(j["ess_bulk"].get<double>() == s.ess_bulk);
  CHECK(j["ess_tail"].get<double>() == s.ess_tail);
  CHECK(j["rhat"].get<double>() == s.rhat);
}

// A Stan generated quantity can be NaN: such a quantity's statistics are NA (null in --json),
// as ArviZ's are for a NaN draw, with a note naming its first NaN or infinite draw; the
// other quantities are diagnosed as before, and the HTML report leaves the quantity out with a
// note. (The whole file was refused.)
TEST_CASE("herd-diagnose: NaN or infinite draws give NA statistics and a note", "[mcmc][apps]") {
  fs::create_directories(kWork);
  {
    const fs::path p = kWork / "nan.csv";  // one column per chain; the quantity is "nan"
    std::ofstream(p) << "1.0,2.0\n0.5,nan\n0.25,0.75\n";
    const Run r = run(q(p) + " --json");
    INFO(r.err);
    REQUIRE(r.rc == 0);
    check_na(nlohmann::json::parse(r.out)["nan"]);
    CHECK_THAT(r.err, Catch::Contains("herd-diagnose: note: nan: 1 draw is NaN or infinite (the first: nan at chain "
                                      "1, draw 1, counted from 0), so its statistics are NA"));
    // The first in chain-major order, whatever the rows' order; a count of all of them.
    std::ofstream(p) << "1.0,2.0\n0.5,inf\n-inf,0.75\n";
    const Run i = run(q(p));
    REQUIRE(i.rc == 0);
    CHECK_THAT(i.err, Catch::Contains("nan: 2 draws are NaN or infinite (the first: -inf at chain 0, draw 2,"));
  }
  const auto tv1 = herd_test::test_vector(1);
  const auto inf = write_h5("inf.h5", true);
  const fs::path html = kWork / "inf.html";
  const Run r = run(q(inf) + " --dataset theta --json --html " + q(html));
  INFO(r.err);
  REQUIRE(r.rc == 0);
  const auto j = nlohmann::json::parse(r.out);
  check_summary(j["theta[0]"], tv1.x, 4, 1000);
  check_na(j["theta[1]"]);
  CHECK_THAT(r.err, Catch::Contains("note: theta[1]: 1 draw is NaN or infinite (the first: inf at chain 1, draw 234, "
                                    "counted from 0)"));
  const std::string page = slurp(html);
  CHECK_THAT(page, Catch::Contains("Left out of this report (NaN or infinite draws, so every statistic is NA): "
                                   "theta[1]"));
  // Past ten such quantities the rest are counted in one line.
  {
    const fs::path p = kWork / "many_nan.csv";
    std::ofstream f(p);
    f << "lp__,accept_stat__";
    for (int q = 1; q <= 12; ++q) f << ",y." << q;
    f << ",mu\n";
    for (int t = 0; t < 4; ++t) {
      f << "-1,0.9";
      for (int q = 1; q <= 12; ++q) f << (t == 2 ? ",nan" : ",0.5");
      f << "," << t << "\n";
    }
    f.close();
    const Run m = run(q(p));
    INFO(m.err);
    REQUIRE(m.rc == 0);
    CHECK_THAT(m.err, Catch::Contains("note: y[10]: 1 draw is NaN"));
    CHECK_THAT(m.err, !Catch::Contains("note: y[11]: "));
    CHECK_THAT(m.err, Catch::Contains("herd-diagnose: note: 2 more quantities have NaN or infinite draws"));
  }
}

/// A ParaDRAM compact chain file of rows (weight, logfunc, x, y) in ParaMonte's own style:
/// leading-dot reals, E exponents, padded columns when `padded`.
struct Compact {
  std::vector<int> weight;
  std::vector<double> lp, x, y;
  /// The Markov chain (weights expanded) of column `c` (0 lp, 1 x, 2 y).
  std::vector<double> expanded(int c) const {
    std::vector<double> out;
    for (std::size_t i = 0; i < weight.size(); ++i)
      for (int k = 0; k < weight[i]; ++k) out.push_back(c == 0 ? lp[i] : c == 1 ? x[i] : y[i]);
    return out;
  }
};

Compact make_compact(std::size_t rows, unsigned seed) {
  Compact c;
  const auto x = ar1(rows, seed, 0.0), y = ar1(rows, seed + 100, 1.0);
  for (std::size_t i = 0; i < rows; ++i) {
    c.weight.push_back(1 + static_cast<int>(i * 7 % 4));
    c.x.push_back(x[i]);
    c.y.push_back(y[i]);
    c.lp.push_back(-0.5 * (x[i] * x[i] + (y[i] - 1) * (y[i] - 1)));
  }
  return c;
}

/// A ParaMonte-like real: ".12345678E-01" style (no leading zero), 17 digits.
std::string pm_real(double v) {
  std::string s = fmt::format("{:.16E}", v);
  if (s.rfind("0.", 0) == 0) s.erase(0, 1);
  else if (s.rfind("-0.", 0) == 0) s.erase(1, 1);
  return s;
}

fs::path write_paradram_chain(const std::string& name, const Compact& c, const std::string& delim, bool padded) {
  fs::create_directories(kWork);
  fs::path p = kWork / name;
  std::ofstream o(p);
  auto col = [&](const std::string& v) { return padded ? fmt::format("{:>26}", v) : v; };
  const char* h[] = {"ProcessID",         "DelayedRejectionStage", "MeanAcceptanceRate",
                     "AdaptationMeasure", "BurninLocation",        "SampleWeight",
                     "SampleLogFunc",     "SampleVariable1",       "SampleVariable2"};
  for (int k = 0; k < 9; ++k) o << (k ? delim : "") << col(h[k]);
  o << "\n";
  for (std::size_t i = 0; i < c.weight.size(); ++i) {
    o << col("1") << delim << col(std::to_string(i % 3)) << delim << col(pm_real(0.25)) << delim << col(pm_real(0.0))
      << delim << col("1") << delim << col(std::to_string(c.weight[i])) << delim << col(pm_real(c.lp[i])) << delim
      << col(pm_real(c.x[i])) << delim << col(pm_real(c.y[i])) << "\n";
  }
  return p;
}

}  // namespace

TEST_CASE("herd-diagnose: ParaDRAM chain files: weights expand the compact chain, metadata excluded", "[mcmc][apps]") {
  const Compact a = make_compact(400, 1), b = make_compact(380, 2);
  // One ParaMonte-style file (comma, no padding): one chain.
  const auto fa = write_paradram_chain("run_process_1_chain.txt", a, ",", false);
  const Run r = run(q(fa) + " --json");
  INFO(r.err);
  REQUIRE(r.rc == 0);
  const auto j = nlohmann::ordered_json::parse(r.out);
  REQUIRE(j.size() == 3);  // SampleLogFunc and the two variables; no ProcessID, SampleWeight, ...
  CHECK(j.begin().key() == "SampleLogFunc");
  const auto xa = a.expanded(1);
  check_summary(j["SampleVariable1"], xa, 1, xa.size());
  check_summary(j["SampleVariable2"], a.expanded(2), 1, xa.size());
  check_summary(j["SampleLogFunc"], a.expanded(0), 1, xa.size());
  // Two files (multi-chain), blank-delimited and padded as outputColumnWidth writes them:
  // two chains cut to the shorter Markov chain, with a note.
  const auto fb = write_paradram_chain("run_process_2_chain.txt", b, " ", true);
  const auto fa2 = write_paradram_chain("run_process_1p_chain.txt", a, " ", true);
  const Run r2 = run(q(fa2) + " " + q(fb) + " --json");
  INFO(r2.err);
  REQUIRE(r2.rc == 0);
  const auto xb = b.expanded(1);
  const std::size_t n = std::min(xa.size(), xb.size());
  std::vector<double> both(xa.begin(), xa.begin() + static_cast<std::ptrdiff_t>(n));
  both.insert(both.end(), xb.begin(), xb.begin() + static_cast<std::ptrdiff_t>(n));
  check_summary(nlohmann::json::parse(r2.out)["SampleVariable1"], both, 2, n);
  CHECK(r2.err.find("cut to the first " + std::to_string(n)) != std::string::npos);
  // A weight that is not a positive integer is refused.
  {
    const fs::path p = kWork / "badweight_chain.txt";
    std::ofstream(p) << "ProcessID,DelayedRejectionStage,MeanAcceptanceRate,AdaptationMeasure,BurninLocation,"
                        "SampleWeight,SampleLogFunc,x\n1,0,1,0,1,2,-1,0.5\n1,0,1,0,1,0,-1,0.5\n";
    check_error(run(q(p)), "line 3 column 6 (SampleWeight) is '0', but must be a positive integer");
  }
  // The burn-in the last row's BurninLocation marks is diagnosed too, and a note says so
  // (herd-sample's table leaves it out); BurninLocation 1 (no burn-in) gets no note.
  CHECK(r.err.find("BurninLocation") == std::string::npos);
  {
    const fs::path p = kWork / "burnin_chain.txt";
    std::ofstream o(p);
    o << "ProcessID,DelayedRejectionStage,MeanAcceptanceRate,AdaptationMeasure,BurninLocation,SampleWeight,"
         "SampleLogFunc,x\n";
    for (int i = 0; i < 40; ++i)
      o << "1,1,0.5,0," << (i < 2 ? i + 1 : 3) << "," << 1 + i % 3 << "," << -0.5 * (i % 7) << "," << 0.1 * (i % 7)
        << "\n";
    o.close();
    const Run rb = run(q(p));
    INFO(rb.err);
    REQUIRE(rb.rc == 0);
    CHECK(rb.err.find("burnin_chain.txt: its last row's BurninLocation (3) marks the first 2 compact state(s) as "
                      "burn-in; they are diagnosed with the rest") != std::string::npos);
  }
}

TEST_CASE("herd-diagnose: ParaDRAM sample files, one per chain", "[mcmc][apps]") {
  const auto x1 = ar1(500, 3, 0.0), x2 = ar1(500, 4, 0.1), l1 = ar1(500, 5, -2.0), l2 = ar1(500, 6, -2.0);
  auto write = [&](const std::string& name, const std::vector<double>& lp, const std::vector<double>& x) {
    fs::path p = kWork / name;
    std::ofstream o(p);
    o << "SampleLogFunc,mu\n";
    for (std::size_t i = 0; i < x.size(); ++i) o << fmt::format("{:.17g},{:.17g}\n", lp[i], x[i]);
    return p;
  };
  fs::create_directories(kWork);
  const auto p1 = write("s_process_1_sample.txt", l1, x1), p2 = write("s_process_2_sample.txt", l2, x2);
  const Run r = run(q(p1) + " " + q(p2) + " --json");
  INFO(r.err);
  REQUIRE(r.rc == 0);
  std::vector<double> mu = x1;
  mu.insert(mu.end(), x2.begin(), x2.end());
  std::vector<double> lp = l1;
  lp.insert(lp.end(), l2.begin(), l2.end());
  const auto j = nlohmann::json::parse(r.out);
  check_summary(j["mu"], mu, 2, 500);
  check_summary(j["SampleLogFunc"], lp, 2, 500);
  CHECK(r.err.find("note:") == std::string::npos);  // equal lengths: nothing cut
  CHECK_THAT(r.err, Catch::Contains("herd-diagnose: SampleLogFunc ... mu (2 parameters): 2 chains x 500 draws"));
}

TEST_CASE("herd-diagnose: CmdStan CSV files with comment lines, one per chain", "[mcmc][apps]") {
  const std::size_t n = 300;
  std::vector<double> theta, lp;
  std::vector<fs::path> paths;
  fs::create_directories(kWork);
  for (int c = 0; c < 3; ++c) {
    const auto t = ar1(n, 10 + static_cast<unsigned>(c), 0.2 * c), l = ar1(n, 20 + static_cast<unsigned>(c), -7.0);
    theta.insert(theta.end(), t.begin(), t.end());
    lp.insert(lp.end(), l.begin(), l.end());
    const fs::path p = kWork / fmt::format("model_{}.csv", c + 1);
    std::ofstream o(p);
    o << "# model = bernoulli_model\n# method = sample (Default)\n#   num_samples = 300\n";
    o << "lp__,accept_stat__,stepsize__,treedepth__,n_leapfrog__,divergent__,energy__,theta\n";
    o << "# Adaptation terminated\n# Step size = 0.93\n# Diagonal elements of inverse mass matrix:\n# 0.51\n";
    for (std::size_t i = 0; i < n; ++i) o << fmt::format("{:.17g},0.9,0.93,1,3,0,{:.17g},{:.17g}\n", l[i], -l[i], t[i]);
    o << "\n#  Elapsed Time: 0.005 seconds (Warm-up)\n#                0.01 seconds (Total)\n";
    paths.push_back(p);
  }
  const Run r = run(q(paths[0]) + " " + q(paths[1]) + " " + q(paths[2]) + " --json");
  INFO(r.err);
  REQUIRE(r.rc == 0);
  const auto j = nlohmann::ordered_json::parse(r.out);
  REQUIRE(j.size() == 2);  // lp__ and theta; the other name__ columns are sampler diagnostics
  CHECK(j.begin().key() == "lp__");
  check_summary(j["theta"], theta, 3, n);
  check_summary(j["lp__"], lp, 3, n);
  CHECK(r.err.find("note:") == std::string::npos);  // no warm-up rows: nothing left out
  // One file alone is one chain.
  const Run one = run(q(paths[0]) + " --json");
  REQUIRE(one.rc == 0);
  check_summary(nlohmann::json::parse(one.out)["theta"], std::vector<double>(theta.begin(), theta.begin() + n), 1, n);
}

// Divergent transitions and saturated trees were read as sampler columns and dropped without
// a word; CmdStan's diagnose, cmdstanr and CmdStanPy warn of them.
TEST_CASE("herd-diagnose: CmdStan's divergences and maximum tree depth of the post-warm-up transitions are warned of",
          "[mcmc][apps]") {
  fs::create_directories(kWork);
  const auto theta = ar1(400, 41, 0.0);
  const auto write = [&](const fs::path& p, int chain, bool max_depth_given) {
    std::ofstream o(p);
    o << "# model = funnel_model\n# method = sample (Default)\n#   sample\n#     num_samples = 300\n"
         "#     num_warmup = 100\n#     save_warmup = 1\n#   algorithm = hmc (Default)\n#     hmc\n"
         "#       engine = nuts (Default)\n#         nuts\n";
    if (max_depth_given) o << "#           max_depth = 6\n";
    o << "lp__,accept_stat__,stepsize__,treedepth__,n_leapfrog__,divergent__,energy__,theta\n";
    for (std::size_t i = 0; i < 400; ++i) {
      if (i == 100) o << "# Adaptation terminated\n# Step size = 0.5\n";
      // Warm-up rows (i < 100) diverge and saturate too: not counted. After it, chain 0 has
      // divergences at every 50th row (6 of 300) and trees of depth 6 at every 100th (3).
      const int div = (i < 100 && i % 7 == 0) || (i >= 100 && chain == 0 && i % 50 == 0) ? 1 : 0;
      const int depth = i < 100 || (chain == 0 && i % 100 == 0) ? 6 : 3;
      o << fmt::format("{:.17g},0.9,0.5,{},7,{},1.0,{:.17g}\n", -theta[i] * theta[i], depth, div,
                       theta[i] + 0.01 * chain);
    }
  };
  const fs::path a = kWork / "div_1.csv", b = kWork / "div_2.csv";
  write(a, 0, true);
  write(b, 1, true);
  const Run r = run(q(a) + " " + q(b) + " --html " + q(kWork / "div.html"));
  INFO(r.err);
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.err, Catch::Contains("\nWARNING: 6 of 600 post-warm-up transitions (1.00%) ended with a divergence "
                                    "(divergent__): the sampler could not follow the posterior's curvature there"));
  CHECK_THAT(r.err, Catch::Contains("\nWARNING: 3 of 600 post-warm-up transitions (0.50%) hit the maximum tree depth "
                                    "(treedepth__ = max_depth = 6): an efficiency problem, not a bias"));
  const std::string page = slurp(kWork / "div.html");
  CHECK(page.find("6 of 600 post-warm-up transitions (1.00%) ended with a divergence") != std::string::npos);
  // Without max_depth in the configuration the depth is not judged; without divergences,
  // nothing is said.
  write(a, 1, false);
  write(b, 1, false);
  const Run quiet = run(q(a) + " " + q(b));
  REQUIRE(quiet.rc == 0);
  CHECK(quiet.err.find("divergen") == std::string::npos);
  CHECK(quiet.err.find("tree depth") == std::string::npos);
  CHECK(quiet.err.find("treedepth__") == std::string::npos);  // no tree of depth 10
  // Trees of CmdStan's default max_depth, 10, in a file that does not give it: a note.
  {
    std::ofstream o(a);
    o << "lp__,accept_stat__,treedepth__,divergent__,theta\n";
    for (std::size_t i = 0; i < 200; ++i)
      o << fmt::format("{:.17g},0.9,{},0,{:.17g}\n", -theta[i] * theta[i], i % 40 == 0 ? 10 : 4, theta[i]);
  }
  const Run unjudged = run(q(a));
  REQUIRE(unjudged.rc == 0);
  CHECK_THAT(unjudged.err, Catch::Contains("herd-diagnose: note: 5 post-warm-up transitions reach treedepth__ 10 "
                                           "(CmdStan's default max_depth), but the file gives no max_depth"));
  // A divergent__ other than 0 or 1 (a NaN counted as a divergence before) or a treedepth__
  // that is not a count: a damaged file, refused naming line and column.
  for (const auto& [row, what] : {std::pair{"-1.5,0.9,4,nan,0.25",
                                            "line 3 column 4 (divergent__) is 'nan', but must "
                                            "be 0 or 1"},
                                  std::pair{"-1.5,0.9,4.5,0,0.25",
                                            "line 3 column 3 (treedepth__) is '4.5', but must "
                                            "be a count"}}) {
    std::ofstream(a) << "lp__,accept_stat__,treedepth__,divergent__,theta\n-1,0.9,4,0,0.5\n" << row << "\n";
    const Run bad = run(q(a));
    CHECK(bad.rc == 2);
    CHECK_THAT(bad.err, Catch::Contains(what));
  }
}

// CmdStan's other methods: variational's first row is the approximation's mean, which was read
// as a draw; its rows, laplace's and pathfinder's are independent draws of an approximation
// (a note says so); optimize and log_prob hold no draws and are refused.
TEST_CASE("herd-diagnose: CmdStan methods other than sample", "[mcmc][apps]") {
  fs::create_directories(kWork);
  const std::string config = "# stan_version_major = 2\n# model = bernoulli_model\n# method = ";
  const fs::path vi = kWork / "variational.csv";
  std::ofstream(vi)
      << config
      << "variational\n#   variational\n#     algorithm = meanfield (Default)\nlp__,log_p__,log_g__,theta\n"
         "# Stepsize adaptation complete.\n# eta = 1\n0,0,0,0.9\n0,-6.8,-0.5,0.25\n0,-7.1,-0.6,0.5\n"
         "0,-6.9,-0.4,0.125\n0,-7.3,-0.9,0.375\n0,-6.7,-0.3,0.25\n0,-7.0,-0.5,0.5\n";
  const fs::path vi_html = kWork / "variational.html";
  Run r = run(q(vi) + " --json --html " + q(vi_html));
  INFO(r.err);
  REQUIRE(r.rc == 0);
  // The HTML report says so too, beside its verdicts (it showed a plain "OK").
  CHECK_THAT(slurp(vi_html), Catch::Contains("rows are independent draws of an approximation of the posterior"));
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["theta"]["mean"].get<double>() == 2.0 / 6.0);  // the six draws, not the mean row's 0.9
  CHECK_THAT(r.err, Catch::Contains("theta (2 parameters): 1 chain x 6 draws"));
  CHECK_THAT(r.err,
             Catch::Contains("note: " + vi.string() +
                             ": CmdStan's method is variational: its first row, the approximation's mean, is "
                             "left out as CmdStanPy leaves it out (and its lp__ is 0 by construction); its 6 rows are "
                             "independent draws of an "
                             "approximation of the posterior, so ESS and R-hat judge nothing"));
  const fs::path laplace = kWork / "laplace.csv";
  std::ofstream(laplace) << config << "laplace\nlog_p__,log_g__,theta\n-6.8,-0.5,0.25\n-7.1,-0.6,0.5\n";
  r = run(q(laplace) + " --json");
  REQUIRE(r.rc == 0);
  j = nlohmann::json::parse(r.out);
  CHECK(j["theta"]["mean"].get<double>() == 0.375);
  CHECK_THAT(r.err, Catch::Contains("CmdStan's method is laplace: its 2 rows are independent draws"));
  const fs::path opt = kWork / "optimize.csv";
  std::ofstream(opt) << config << "optimize\n#   optimize\nlp__,theta\n-5,0.2\n";
  check_error(run(q(opt)),
              "optimize.csv: line 3: CmdStan's method is optimize, so the file holds a point estimate "
              "(the mode), not draws: there is nothing to diagnose");
  std::ofstream(opt) << config << "log_prob\nlp__,g_1\n-5,0.2\n";
  check_error(run(q(opt)), "line 3: CmdStan's method is log_prob, so the file holds log densities and gradients");
  // A variational file with only the mean row.
  std::ofstream(vi) << config << "variational\nlp__,log_p__,log_g__,theta\n0,0,0,0.9\n";
  check_error(run(q(vi)),
              "variational.csv: line 3: CmdStan's method is variational, whose first row is the "
              "approximation's mean, and the file has no draw after it");
}

// An ArviZ file's sampler diagnostics (PyMC's, NumPyro's sample_stats) are warned of as
// CmdStan's divergent__ and treedepth__ are (they were not read): booleans as netCDF stores
// them (int8, what xarray writes with either engine) and as h5py does (an enum).
TEST_CASE("herd-diagnose: divergences and saturated trees in an ArviZ file's sample_stats", "[mcmc][apps]") {
  fs::create_directories(kWork);
  const fs::path p = kWork / "pymc_trace.nc";
  const auto tv1 = herd_test::test_vector(1);
  const auto make = [&](bool string_flags) {
    const hid_t f = H5Fcreate(p.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hid_t post = H5Gcreate2(f, "posterior", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    write_dataset(post, "mu", tv1.x, {4, 1000});
    H5Gclose(post);
    const hid_t st = H5Gcreate2(f, "sample_stats", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    const hsize_t dims[2] = {4, 1000};
    const hid_t space = H5Screate_simple(2, dims, nullptr);
    std::vector<std::int8_t> div(4000, 0), depth(4000, 0);
    div[1234] = div[3999] = div[5] = 1;
    depth[17] = 1;
    // diverging as int8 (netCDF's bool); reached_max_treedepth as h5py's bool enum.
    const hid_t ds = H5Dcreate2(st, "diverging", string_flags ? H5T_C_S1 : H5T_NATIVE_INT8, space, H5P_DEFAULT,
                                H5P_DEFAULT, H5P_DEFAULT);
    if (!string_flags) H5Dwrite(ds, H5T_NATIVE_INT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, div.data());
    H5Dclose(ds);
    const hid_t en = H5Tenum_create(H5T_NATIVE_INT8);
    std::int8_t v = 0;
    H5Tenum_insert(en, "FALSE", &v);
    v = 1;
    H5Tenum_insert(en, "TRUE", &v);
    const hid_t dd = H5Dcreate2(st, "reached_max_treedepth", en, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(dd, en, H5S_ALL, H5S_ALL, H5P_DEFAULT, depth.data());
    H5Dclose(dd);
    H5Tclose(en);
    H5Sclose(space);
    H5Gclose(st);
    H5Fclose(f);
  };
  make(false);
  const fs::path html = kWork / "pymc_trace.html";
  const Run r = run(q(p) + " --html " + q(html));
  INFO(r.err);
  REQUIRE(r.rc == 0);
  const std::string div =
      "3 of 4000 post-warm-up transitions (0.07%) ended with a divergence (sample_stats/diverging): the sampler could "
      "not follow the posterior's curvature there, so the draws may be biased";
  const std::string depth =
      "1 of 4000 post-warm-up transitions (0.03%) hit the maximum tree depth (sample_stats/reached_max_treedepth): "
      "an efficiency problem, not a bias";
  CHECK_THAT(r.err, Catch::Contains("WARNING: " + div) && Catch::Contains("WARNING: " + depth));
  const std::string page = slurp(html);
  CHECK_THAT(page, Catch::Contains("3 of 4000 post-warm-up transitions (0.07%) ended with a divergence "
                                   "(sample_stats/diverging)") &&
                       Catch::Contains(depth));
  // A file without sample_stats warns of nothing.
  const Run clean = run(q(write_h5("no_stats.h5")));
  REQUIRE(clean.rc == 0);
  CHECK_THAT(clean.err, !Catch::Contains("post-warm-up transitions"));
  // Flags of another shape than the posterior's are not counted (a note says why), and an
  // E-BFMI that cannot be computed is named as not judged.
  {
    const fs::path m = kWork / "mismatch.nc";
    const hid_t f = H5Fcreate(m.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hid_t post = H5Gcreate2(f, "posterior", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    write_dataset(post, "mu", tv1.x, {4, 1000});
    H5Gclose(post);
    const hid_t st = H5Gcreate2(f, "sample_stats", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    write_dataset(st, "diverging", std::vector<double>(5 * 1000, 1.0), {5, 1000});
    std::vector<double> energy(4000);
    for (std::size_t i = 0; i < energy.size(); ++i) energy[i] = static_cast<double>(i % 2);
    energy[1000 + 7] = std::numeric_limits<double>::quiet_NaN();    // chain 1
    for (std::size_t t = 0; t < 1000; ++t) energy[3000 + t] = 2.0;  // chain 3: constant
    write_dataset(st, "energy", energy, {4, 1000});
    H5Gclose(st);
    H5Fclose(f);
    const Run mm = run(q(m));
    INFO(mm.err);
    REQUIRE(mm.rc == 0);
    CHECK_THAT(mm.err, Catch::Contains("note: " + m.string() +
                                       ": 'sample_stats/diverging' has the shape [5, 1000], but the posterior's "
                                       "draws are [4, 1000] (chain, draw): not judged"));
    CHECK_THAT(mm.err, !Catch::Contains("ended with a divergence"));
    CHECK_THAT(mm.err, Catch::Contains("note: E-BFMI is not computed for chain 1, chain 3 (sample_stats/energy: a "
                                       "non-finite or constant energy, or fewer than 2 draws), so it is not judged "
                                       "(chains counted from 0)"));
    CHECK_THAT(mm.err, !Catch::Contains("E-BFMI is below"));
  }
  // Flags of another type are refused naming the dataset.
  make(true);
  check_error(run(q(p)), "pymc_trace.nc: dataset 'sample_stats/diverging' must hold one flag per transition");
}

// E-BFMI (Betancourt 2016) below 0.3 is warned of, as CmdStan's diagnose does, from CmdStan's
// energy__ and an ArviZ file's sample_stats/energy; known answers: the sum of squared
// differences over the sum of squared deviations (CmdStan's and ArviZ 1.3's formula).
TEST_CASE("herd-diagnose: low E-BFMI is warned of", "[mcmc][apps]") {
  fs::create_directories(kWork);
  const std::size_t n = 128;
  // Per chain: a linear ramp (E-BFMI 12 / (n (n + 1)) = 0.000727); 0 and 1 in runs of 8 (15
  // changes of 1 over squared deviations of 128 x 0.25 = 32: 0.46875); runs of 16 (7 / 32 =
  // 0.21875); alternating (4 (n - 1) / n = 3.97).
  const auto energy = [n](int kind) {
    std::vector<double> e(n);
    for (std::size_t t = 0; t < n; ++t)
      e[t] = kind == 0   ? static_cast<double>(t)
             : kind == 1 ? static_cast<double>(t / 8 % 2)
             : kind == 2 ? static_cast<double>(t / 16 % 2)
                         : static_cast<double>(t % 2);
    return e;
  };
  const auto tv1 = herd_test::test_vector(1);
  // CmdStan: one file per chain, energy__ beside the draws.
  std::vector<fs::path> files;
  for (int kind : {0, 3}) {
    files.push_back(kWork / fmt::format("energy_{}.csv", kind));
    std::ofstream f(files.back());
    f << "# method = sample (Default)\nlp__,accept_stat__,energy__,theta\n";
    const auto e = energy(kind);
    for (std::size_t t = 0; t < n; ++t) f << "-1,0.9," << e[t] << "," << tv1.x[t + kind * n] << "\n";
  }
  const Run c = run(q(files[0]) + " " + q(files[1]));
  INFO(c.err);
  REQUIRE(c.rc == 0);
  CHECK_THAT(c.err, Catch::Contains("WARNING: E-BFMI is below 0.3 for " + files[0].string() +
                                    " (0.001): the momentum resampling explores the energy distribution poorly"));
  CHECK_THAT(c.err, !Catch::Contains("energy_3.csv ("));
  // A constant energy__ (E-BFMI 0 / 0) is named as not judged.
  {
    std::ofstream f(files[1]);
    f << "# method = sample (Default)\nlp__,accept_stat__,energy__,theta\n";
    for (std::size_t t = 0; t < n; ++t) f << "-1,0.9,3.5," << tv1.x[t] << "\n";
  }
  const Run k = run(q(files[1]));
  REQUIRE(k.rc == 0);
  CHECK_THAT(k.err, Catch::Contains("note: E-BFMI is not computed for " + files[1].string() +
                                    " (energy__: a non-finite or constant energy, or fewer than 2 draws), so it is "
                                    "not judged\n"));
  // ArviZ: sample_stats/energy [chain, draw].
  const fs::path p = kWork / "energy.nc";
  {
    const hid_t f = H5Fcreate(p.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hid_t post = H5Gcreate2(f, "posterior", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    write_dataset(post, "mu", std::vector<double>(tv1.x.begin(), tv1.x.begin() + 4 * n), {4, n});
    H5Gclose(post);
    const hid_t st = H5Gcreate2(f, "sample_stats", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    std::vector<double> all;
    for (int kind : {0, 1, 2, 3}) {
      const auto e = energy(kind);
      all.insert(all.end(), e.begin(), e.end());
    }
    write_dataset(st, "energy", all, {4, n});
    H5Gclose(st);
    H5Fclose(f);
  }
  const Run a = run(q(p));
  INFO(a.err);
  REQUIRE(a.rc == 0);
  CHECK_THAT(a.err, Catch::Contains("WARNING: E-BFMI is below 0.3 for chain 0 (0.001), chain 2 (0.219): the momentum "
                                    "resampling") &&
                        Catch::Contains("(chains counted from 0)"));
}

namespace {

/// A CmdStan CSV file of `rows` post-warm-up NUTS transitions (max_depth 8, or none given when
/// `max_depth_given` is false): theta of ar1(rows, seed), divergent__ set at the rows
/// `divergent`, treedepth__ `depth` at the rows `deep` (else 3), and energy__ `energy`
/// (alternating 0 and 1 when empty).
void write_nuts_csv(const fs::path& p, std::size_t rows, unsigned seed, const std::vector<std::size_t>& divergent,
                    const std::vector<std::size_t>& deep, std::vector<double> energy = {}, int depth = 8,
                    bool max_depth_given = true) {
  const auto theta = ar1(rows, seed, 0.0);
  if (energy.empty())
    for (std::size_t i = 0; i < rows; ++i) energy.push_back(static_cast<double>(i % 2));
  std::ofstream o(p);
  o << "# model = m_model\n# method = sample (Default)\n#   sample\n#     num_samples = " << rows
    << "\n#     num_warmup = 0\n#   algorithm = hmc (Default)\n#     hmc\n#       engine = nuts (Default)\n"
       "#         nuts\n"
    << (max_depth_given ? "#           max_depth = 8\n" : "")
    << "lp__,accept_stat__,stepsize__,treedepth__,n_leapfrog__,divergent__,energy__,theta\n";
  for (std::size_t i = 0; i < rows; ++i) {
    const bool div = std::find(divergent.begin(), divergent.end(), i) != divergent.end();
    const bool max = std::find(deep.begin(), deep.end(), i) != deep.end();
    o << fmt::format("{:.17g},0.9,0.5,{},7,{},{:.17g},{:.17g}\n", -theta[i] * theta[i], max ? depth : 3, div ? 1 : 0,
                     energy[i], theta[i]);
  }
}

/// The lines of `err` that start with `prefix`, without it.
std::vector<std::string> lines_after(const std::string& err, const std::string& prefix) {
  std::vector<std::string> out;
  std::istringstream in(err);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(prefix, 0) == 0) out.push_back(line.substr(prefix.size()));
  return out;
}

}  // namespace

// --json printed the quantities' statistics alone: a script had to parse stderr for the
// divergences, saturated trees, E-BFMI and the notes of reading the input. --json-diagnostics
// gives them as numbers beside --json's object, which stays as it was.
TEST_CASE("herd-diagnose --json-diagnostics: the sampler's diagnostics, warnings and notes as JSON", "[mcmc][apps]") {
  fs::create_directories(kWork);
  const std::size_t n = 200;
  // Chain 0: 3 divergences, 2 trees at max_depth 8, an energy ramp (E-BFMI 12 / (n (n + 1)));
  // chain 1: 1 divergence, alternating energies (E-BFMI 4 (n - 1) / n).
  std::vector<double> ramp(n);
  for (std::size_t i = 0; i < n; ++i) ramp[i] = static_cast<double>(i);
  const fs::path a = kWork / "dj_1.csv", b = kWork / "dj_2.csv";
  write_nuts_csv(a, n, 51, {3, 70, 199}, {10, 20}, ramp);
  write_nuts_csv(b, n, 52, {5}, {});
  const Run r = run(q(a) + " " + q(b) + " --json-diagnostics");
  INFO(r.err);
  REQUIRE(r.rc == 0);
  const auto j = nlohmann::json::parse(r.out);
  using V = std::vector<std::string>;
  CHECK(keys(nlohmann::ordered_json::parse(r.out)) ==
        V{"quantities", "chains", "draws_per_chain", "sampler", "input", "non_finite", "warnings", "notes"});
  CHECK(j["input"] == nlohmann::json::parse(R"({"format": "cmdstan", "method": "sample", "approximation": false,
      "warmup_left_out": [0, 0], "draws_read": [200, 200], "cut_to": null})"));
  CHECK(j["non_finite"] == nlohmann::json::array());
  // "quantities" is --json's object, which is unchanged: one key per quantity.
  const Run plain = run(q(a) + " " + q(b) + " --json");
  REQUIRE(plain.rc == 0);
  CHECK(j["quantities"] == nlohmann::json::parse(plain.out));
  CHECK(keys(nlohmann::ordered_json::parse(plain.out)) == V{"lp__", "theta"});
  CHECK(j["chains"] == nlohmann::json(V{a.string(), b.string()}));
  CHECK(j["draws_per_chain"] == n);
  const auto& d = j["sampler"]["divergent"];
  CHECK(d["source"] == "divergent__");
  CHECK(d["count"] == 4);
  CHECK(d["transitions"] == 2 * n);
  CHECK(d["percent"].get<double>() == 100.0 * 4 / 400);
  CHECK(d["per_chain"] == nlohmann::json({3, 1}));
  CHECK(d["cut_off"] == 0);
  const std::string div_message =
      "4 of 400 post-warm-up transitions (1.00%) ended with a divergence (divergent__): the sampler could not follow "
      "the posterior's curvature there, so the draws may be biased; raise adapt delta (e.g. 0.95 or 0.99) or "
      "reparameterize the model (e.g. non-centred)";
  CHECK(d["message"] == div_message);
  const auto& t = j["sampler"]["max_treedepth"];
  CHECK(t["source"] == "treedepth__");
  CHECK(t["count"] == 2);
  CHECK(t["transitions"] == 2 * n);
  CHECK(t["per_chain"] == nlohmann::json({2, 0}));
  CHECK(t["max_depth"] == nlohmann::json({8, 8}));
  const auto& e = j["sampler"]["ebfmi"];
  CHECK(e["source"] == "energy__");
  CHECK(e["threshold"] == 0.3);
  CHECK_THAT(e["per_chain"][0].get<double>(), Catch::WithinRel(12.0 / (n * (n + 1.0)), 1e-12));
  CHECK_THAT(e["per_chain"][1].get<double>(), Catch::WithinRel(4.0 * (n - 1.0) / n, 1e-12));
  CHECK(e["low_chains"] == nlohmann::json(V{a.string()}));
  CHECK_THAT(e["message"].get<std::string>(), Catch::StartsWith("E-BFMI is below 0.3 for " + a.string() + " (0.000)"));
  // The warnings and notes are stderr's lines, in its order, without their prefixes.
  CHECK(j["warnings"] == nlohmann::json(lines_after(r.err, "WARNING: ")));
  CHECK(j["warnings"][0] == div_message);
  CHECK(j["notes"] == nlohmann::json(lines_after(r.err, "herd-diagnose: note: ")));
  // The terminal's lines are those of --json: the same stderr.
  CHECK(r.err == plain.err);
  // An input without the sampler's columns: null diagnostics; a draws CSV's chains by index.
  const auto tv = herd_test::test_vector(1);
  const Run csv = run(q(write_csv("dj_draws.csv", tv.x, tv.m, tv.n)) + " --json-diagnostics");
  REQUIRE(csv.rc == 0);
  const auto jc = nlohmann::json::parse(csv.out);
  CHECK(jc["chains"] == nlohmann::json(V{"0", "1", "2", "3"}));
  CHECK(jc["sampler"]["divergent"].is_null());
  CHECK(jc["sampler"]["max_treedepth"].is_null());
  CHECK(jc["sampler"]["ebfmi"].is_null());
  CHECK(jc["warnings"].is_array());
  CHECK(jc["input"]["format"] == "draws_csv");
  CHECK(jc["input"]["draws_read"].is_null());
  check_matches(jc["quantities"]["dj_draws"], tv);
  // A quantity with a NaN draw: its note is in "notes", its statistics null.
  auto x = tv.x;
  x[5] = std::nan("");
  const Run nan = run(q(write_csv("dj_nan.csv", x, tv.m, tv.n)) + " --json-diagnostics");
  REQUIRE(nan.rc == 0);
  const auto jn = nlohmann::json::parse(nan.out);
  CHECK(jn["quantities"]["dj_nan"]["mean"].is_null());
  CHECK(jn["non_finite"] == nlohmann::json::parse(R"([{"quantity": "dj_nan", "count": 1, "first_chain": 0,
      "first_draw": 5, "first_value": "nan"}])"));
  CHECK(jn["notes"][0] ==
        "dj_nan: 1 draw is NaN or infinite (the first: nan at chain 0, draw 5, counted from 0), so its statistics are "
        "NA");
}

// With chains of different lengths the draws are cut to the shortest, but the divergences and
// saturated trees were counted over every post-warm-up row of each file: a count and a per
// cent of other transitions than the draws diagnosed. They are counted in the draws kept (as
// ArviZ's sample_stats would hold them beside the cut posterior), and those in the rows cut
// off are told apart.
TEST_CASE("herd-diagnose: uneven CmdStan chains: the sampler diagnostics of the draws kept", "[mcmc][apps]") {
  fs::create_directories(kWork);
  const fs::path a = kWork / "uneven_1.csv", b = kWork / "uneven_2.csv";
  // Chain 0: 200 rows, divergences at 10 and 199; chain 1: 300 rows, divergences at 20 (kept),
  // 250 and 260 (cut off), a tree at max_depth at 280 (cut off). Energies of chain 1: a ramp
  // over its first 200 rows, then alternating (E-BFMI of the kept part: 12 / (200 * 201)).
  std::vector<double> energy(300);
  for (std::size_t i = 0; i < 300; ++i) energy[i] = i < 200 ? static_cast<double>(i) : static_cast<double>(i % 2);
  write_nuts_csv(a, 200, 61, {10, 199}, {});
  write_nuts_csv(b, 300, 62, {20, 250, 260}, {280}, energy);
  const Run r = run(q(a) + " " + q(b) + " --json-diagnostics");
  INFO(r.err);
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.err, Catch::Contains("each is cut to the first 200"));
  CHECK_THAT(r.err, Catch::Contains("\nWARNING: 3 of 400 post-warm-up transitions (0.75%) ended with a divergence "
                                    "(divergent__, in the draws diagnosed: the first 200 of each chain; 2 more in the "
                                    "rows cut off): the sampler could not follow"));
  CHECK_THAT(r.err, !Catch::Contains("WARNING: 1 of 400"));
  CHECK_THAT(r.err, Catch::Contains("herd-diagnose: note: 1 post-warm-up transition hit the maximum tree depth "
                                    "(treedepth__) in the rows cut off, after the first 200 of each chain that are "
                                    "diagnosed; none did among those"));
  CHECK_THAT(r.err, Catch::Contains("E-BFMI is below 0.3 for " + b.string() + " (0.000)") &&
                        Catch::Contains("(of the first 200 draws of each chain, those diagnosed)"));
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["input"]["draws_read"] == nlohmann::json({200, 300}));
  CHECK(j["input"]["cut_to"] == 200);
  CHECK(j["draws_per_chain"] == 200);
  const auto& d = j["sampler"]["divergent"];
  CHECK(d["count"] == 3);
  CHECK(d["transitions"] == 400);
  CHECK(d["per_chain"] == nlohmann::json({2, 1}));
  CHECK(d["cut_off"] == 2);
  const auto& t = j["sampler"]["max_treedepth"];
  CHECK(t["count"] == 0);
  CHECK(t["cut_off"] == 1);
  CHECK(t["message"].is_null());
  CHECK_THAT(j["sampler"]["ebfmi"]["per_chain"][1].get<double>(), Catch::WithinRel(12.0 / (200.0 * 201.0), 1e-12));
  // Without max_depth: the trees at CmdStan's default, 10, are counted in the draws kept too.
  write_nuts_csv(a, 200, 61, {}, {5}, {}, 10, false);
  write_nuts_csv(b, 300, 62, {}, {10, 250}, {}, 10, false);
  const Run u = run(q(a) + " " + q(b));
  INFO(u.err);
  REQUIRE(u.rc == 0);
  CHECK_THAT(u.err, Catch::Contains("herd-diagnose: note: 2 post-warm-up transitions reach treedepth__ 10 (CmdStan's "
                                    "default max_depth), but the files that hold them give no max_depth in their "
                                    "configuration block (CmdStan writes it under nuts), so whether they hit the limit "
                                    "is not judged (counted in the draws diagnosed: the first 200 of each chain)\n"));
}

// An ArviZ file's E-BFMI warning counted its chains from 0 where the file labels them (PyMC
// and ArviZ's from_dict with coords={"chain": [1, 2, 3, 4]}): chain 2 of the warning was the
// file's chain 3. The labels of its chain coordinate name them, on the terminal, in the HTML
// report and in --json-diagnostics.
TEST_CASE("herd-diagnose: an ArviZ file's chains are named by its chain coordinate", "[mcmc][apps]") {
  fs::create_directories(kWork);
  const std::size_t n = 128;
  const auto tv1 = herd_test::test_vector(1);
  const auto write = [&](const fs::path& p, const std::vector<std::int64_t>& labels) {
    const hid_t f = H5Fcreate(p.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hid_t post = H5Gcreate2(f, "posterior", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    write_dataset(post, "mu", std::vector<double>(tv1.x.begin(), tv1.x.begin() + 4 * n), {4, n});
    H5Gclose(post);
    const hid_t st = H5Gcreate2(f, "sample_stats", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    std::vector<double> energy(4 * n), div(4 * n, 0.0);
    for (std::size_t c = 0; c < 4; ++c)  // chain position 2: a ramp (E-BFMI 0.000727), else alternating
      for (std::size_t t = 0; t < n; ++t) energy[c * n + t] = c == 2 ? static_cast<double>(t) : 1.0 * (t % 2);
    div[3 * n + 7] = 1;
    write_dataset(st, "energy", energy, {4, n});
    write_dataset(st, "diverging", div, {4, n});
    const hsize_t four = 4;
    const hid_t space = H5Screate_simple(1, &four, nullptr);
    const hid_t chain = H5Dcreate2(st, "chain", H5T_NATIVE_INT64, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(chain, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, labels.data());
    H5Sclose(space);
    H5DSset_scale(chain, "chain");
    for (const char* name : {"energy", "diverging"}) {
      const hid_t ds = H5Dopen2(st, name, H5P_DEFAULT);
      H5DSattach_scale(ds, chain, 0);
      H5Dclose(ds);
    }
    H5Dclose(chain);
    H5Gclose(st);
    H5Fclose(f);
  };
  const fs::path p = kWork / "chain_labels.nc", html = kWork / "chain_labels.html";
  write(p, {1, 2, 3, 4});
  const Run r = run(q(p) + " --json-diagnostics --html " + q(html));
  INFO(r.err);
  REQUIRE(r.rc == 0);
  const std::string low = "E-BFMI is below 0.3 for chain 3 (0.001): the momentum resampling";
  CHECK_THAT(r.err,
             Catch::Contains("WARNING: " + low) && Catch::Contains("(chains named by the file's chain coordinate)\n"));
  CHECK_THAT(slurp(html), Catch::Contains(low));
  const auto j = nlohmann::json::parse(r.out);
  using V = std::vector<std::string>;
  CHECK(j["chains"] == nlohmann::json(V{"1", "2", "3", "4"}));
  CHECK(j["input"]["format"] == "hdf5");
  CHECK(j["sampler"]["ebfmi"]["low_chains"] == nlohmann::json(V{"3"}));
  CHECK(j["sampler"]["divergent"]["per_chain"] == nlohmann::json({0, 0, 0, 1}));
  CHECK(j["sampler"]["max_treedepth"].is_null());
  // ArviZ's default coordinate, 0 to 3, is the position: named as before.
  write(p, {0, 1, 2, 3});
  const Run d = run(q(p) + " --json-diagnostics");
  REQUIRE(d.rc == 0);
  CHECK_THAT(d.err, Catch::Contains("E-BFMI is below 0.3 for chain 2 (0.001)") &&
                        Catch::Contains("(chains counted from 0)\n"));
  CHECK(nlohmann::json::parse(d.out)["chains"] == nlohmann::json(V{"0", "1", "2", "3"}));
}

TEST_CASE("herd-diagnose: CmdStan array elements are labelled as stansummary labels them", "[mcmc][apps]") {
  const std::size_t n = 200;
  const auto a = ar1(n, 31, 0.3), b = ar1(n, 32, 0.1), c = ar1(n, 33, -0.2);
  fs::create_directories(kWork);
  const fs::path p = kWork / "labels.csv";
  std::ofstream o(p);
  o << "lp__,accept_stat__,theta.1,theta.10,Sigma.2.1,pair:1,odd.,x.y\n";
  for (std::size_t i = 0; i < n; ++i)
    o << fmt::format("{:.17g},0.9,{:.17g},{:.17g},{:.17g},{:.17g},{:.17g},{:.17g}\n", a[i], b[i], c[i], a[i], b[i],
                     c[i], a[i]);
  o.close();
  const Run r = run(q(p) + " --json");
  INFO(r.err);
  REQUIRE(r.rc == 0);
  const auto j = nlohmann::ordered_json::parse(r.out);
  // Indices after dots become 1-based brackets; a tuple's "pair:1" and names that are not
  // indices ("odd.", "x.y") stay as written.
  CHECK(keys(j) == std::vector<std::string>{"lp__", "theta[1]", "theta[10]", "Sigma[2,1]", "pair:1", "odd.", "x.y"});
  check_summary(j["Sigma[2,1]"], a, 1, n);
  check_summary(j["theta[10]"], c, 1, n);
  // A generated quantity of a Stan model can be NaN: that quantity's statistics are NA
  // (null), named as the table names it, and the others are diagnosed (the file was refused).
  const fs::path bad = kWork / "labels_nan.csv";
  std::ofstream(bad) << "# a comment\nlp__,accept_stat__,theta.1,Sigma.2.1\n-1.5,0.9,0.25,0.5\n-1.25,0.8,0.5,nan\n";
  const Run rn = run(q(bad) + " --json");
  INFO(rn.err);
  REQUIRE(rn.rc == 0);
  const auto jn = nlohmann::json::parse(rn.out);
  CHECK(jn["theta[1]"]["mean"].get<double>() == 0.375);
  check_na(jn["Sigma[2,1]"]);
  CHECK_THAT(rn.err, Catch::Contains("herd-diagnose: note: Sigma[2,1]: 1 draw is NaN or infinite (the first: nan at "
                                     "chain 0, draw 1, counted from 0), so its statistics are NA"));
  CHECK_THAT(rn.err, !Catch::Contains("theta[1]: 1 draw"));
  // Several files are the chains: the note names the file of the first such draw.
  const fs::path good = kWork / "labels_ok.csv";
  std::ofstream(good) << "# a comment\nlp__,accept_stat__,theta.1,Sigma.2.1\n-1.5,0.9,0.25,0.5\n-1.25,0.8,0.5,0.75\n";
  const Run two = run(q(good) + " " + q(bad));
  REQUIRE(two.rc == 0);
  CHECK_THAT(two.err, Catch::Contains("note: Sigma[2,1]: 1 draw is NaN or infinite (the first: nan at chain 1 (" +
                                      bad.string() + "), draw 1, counted from 0)"));
  // Chains of different CmdStan methods are refused naming both.
  const fs::path vb = kWork / "labels_vi.csv";
  std::ofstream(vb) << "# method = variational\nlp__,log_p__,log_g__,theta.1,Sigma.2.1\n0,0,0,0.3,0.4\n"
                       "0,-1,-1,0.25,0.5\n0,-1,-1,0.5,0.75\n";
  check_error(run(q(good) + " " + q(vb)), "labels_vi.csv: is the output of CmdStan's method variational, but " +
                                              good.string() + " is of method sample");
}

// `herd-diagnose out-1.csv ./out-1.csv` (or a link to a file already named) read one chain
// twice: two identical chains, whose agreement made R-hat look converged.
TEST_CASE("herd-diagnose: a file named twice is refused", "[mcmc][apps]") {
  // Two CmdStan CSV files, one chain each.
  const auto tv = herd_test::test_vector(1);
  const auto cmdstan = [&](const std::string& name, std::size_t chain) {
    std::vector<double> x(2 * 1000);
    for (std::size_t t = 0; t < 1000; ++t) {
      x[t] = -0.5 * tv.x[chain * 1000 + t] * tv.x[chain * 1000 + t];
      x[1000 + t] = tv.x[chain * 1000 + t];
    }
    return write_csv(name, x, 2, 1000, "lp__,mu");
  };
  const auto a = cmdstan("twice_a.csv", 0), b = cmdstan("twice_b.csv", 1);
  check_error(run(q(a) + " " + q(b) + " " + q(a.parent_path() / "." / a.filename())),
              "/./twice_a.csv: is the same file as " + a.string() + ", given twice, but each file is one chain");
  const fs::path link = kWork / "twice_link.csv";
  fs::remove(link);
  fs::create_symlink(b, link);
  check_error(run(q(a) + " " + q(b) + " " + q(link)), "twice_link.csv: is the same file as " + b.string());
  const Run ok = run(q(a) + " " + q(b));
  CHECK(ok.rc == 0);
}

// The report of several files named in folders was titled after the last one alone
// ("herd-diagnose report: c.csv"): the title was the file name of the joined list.
TEST_CASE("herd-diagnose --html of several files is titled after them all", "[mcmc][apps]") {
  const auto tv = herd_test::test_vector(1);
  std::vector<std::string> paths;
  for (std::size_t chain = 0; chain < 3; ++chain) {
    std::vector<double> x(2 * 1000);
    for (std::size_t t = 0; t < 1000; ++t) {
      x[t] = -0.5 * tv.x[chain * 1000 + t] * tv.x[chain * 1000 + t];
      x[1000 + t] = tv.x[chain * 1000 + t];
    }
    paths.push_back(write_csv(fmt::format("title_{}.csv", chain + 1), x, 2, 1000, "lp__,mu").string());
  }
  const fs::path html = kWork / "title.html";
  REQUIRE(run(q(paths[0]) + " " + q(paths[1]) + " " + q(paths[2]) + " --html " + q(html)).rc == 0);
  const std::string page = slurp(html);
  CHECK(page.find("<title>herd-diagnose report: title_1.csv ... title_3.csv (3 files)</title>") != std::string::npos);
  REQUIRE(run(q(paths[0]) + " " + q(paths[1]) + " --html " + q(html)).rc == 0);
  CHECK(slurp(html).find("<title>herd-diagnose report: title_1.csv, title_2.csv</title>") != std::string::npos);
}

// A CSV saved with a UTF-8 byte order mark (a spreadsheet's "CSV UTF-8", pandas'
// encoding="utf-8-sig") was refused: its first line "\xEF\xBB\xBFchain1,chain2" is no known
// header, and the message showed the header without the invisible mark.
TEST_CASE("herd-diagnose: a UTF-8 byte order mark before the header is skipped", "[mcmc][apps]") {
  const auto tv = herd_test::test_vector(1);
  const auto plain = write_csv("bom_plain.csv", tv.x, 4, 1000, "chain1,chain2,chain3,chain4");
  const fs::path bom = kWork / "bom.csv";
  std::ofstream(bom, std::ios::binary) << "\xEF\xBB\xBF" << slurp(plain);
  const Run a = run(q(plain) + " --json"), b = run(q(bom) + " --json");
  INFO(b.err);
  REQUIRE(b.rc == 0);
  CHECK(nlohmann::json::parse(b.out)["bom"] == nlohmann::json::parse(a.out)["bom_plain"]);  // named after the file
  // A CmdStan CSV, whose first line is a comment.
  const fs::path stan = kWork / "bom_stan.csv", stan_bom = kWork / "bom_stan_bom.csv";
  std::ofstream(stan) << "# model = m\nlp__,accept_stat__,mu\n-1,0.9,0.5\n-2,0.8,0.25\n-1.5,0.7,0.75\n";
  std::ofstream(stan_bom, std::ios::binary) << "\xEF\xBB\xBF" << slurp(stan);
  const Run c = run(q(stan) + " --json"), d = run(q(stan_bom) + " --json");
  INFO(d.err);
  REQUIRE(d.rc == 0);
  CHECK(d.out == c.out);
}

TEST_CASE("herd-diagnose: a file of no known format is refused, never guessed", "[mcmc][apps]") {
  fs::create_directories(kWork);
  const fs::path p = kWork / "params.csv";
  std::ofstream(p) << "alpha,beta\n0.1,0.2\n0.3,0.4\n";
  check_error(run(q(p)), "is not a header herd-diagnose knows");
  const fs::path c = kWork / "commented.csv";
  std::ofstream(c) << "# a comment\nalpha,beta\n0.1,0.2\n";
  check_error(run(q(c)), "is not a header herd-diagnose knows");
  // Formats mixed, and several draws CSVs.
  const fs::path s = kWork / "mix_sample.txt";
  std::ofstream(s) << "SampleLogFunc,alpha\n-1,0.5\n-2,0.25\n";
  const fs::path st = kWork / "mix.csv";
  std::ofstream(st) << "lp__,alpha\n-1,0.5\n-2,0.25\n";
  check_error(run(q(s) + " " + q(st)), "the chains of one run must have one format");
  const fs::path s2 = kWork / "mix2_sample.txt";
  std::ofstream(s2) << "SampleLogFunc,gamma\n-1,0.5\n-2,0.25\n";
  check_error(run(q(s) + " " + q(s2)), "its columns differ");
  const fs::path d = kWork / "d.csv", d2 = kWork / "d2.csv";
  std::ofstream(d) << "1,2\n3,4\n";
  std::ofstream(d2) << "1,2\n3,4\n";
  check_error(run(q(d) + " " + q(d2)), "holds all chains itself");
  // Binary data.
  const fs::path b = kWork / "bin_chain.txt";
  std::ofstream(b, std::ios::binary) << std::string("\x01\x00\x02\x03", 4);
  check_error(run(q(b)), "binary");
  // netCDF-3, as xarray writes it with only scipy installed: said as such (it was "binary
  // data, but herd-diagnose reads text files (a ParaDRAM binary chain ...)").
  const fs::path nc3 = kWork / "classic.nc";
  std::ofstream(nc3, std::ios::binary) << std::string("CDF\x02\x00\x00\x00\x00\x00\x00\x00\x0a", 12);
  check_error(run(q(nc3)), "classic.nc: is a netCDF-3 (classic) file, but herd-diagnose reads netCDF-4 (HDF5) files");
  // An HDF5 file cut short (an unfinished copy): why it cannot be opened.
  const std::string whole = slurp(write_h5("whole.h5"));
  const fs::path cut = kWork / "cut.h5";
  std::ofstream(cut, std::ios::binary) << whole.substr(0, whole.size() / 3);
  check_error(run(q(cut)), "cut.h5: cannot open the HDF5 file: it has an HDF5 signature but cannot be read (cut short");
}

namespace {

/// How `write_layout_h5` stores its dataset.
struct Layout {
  std::vector<hsize_t> chunk;  ///< chunk shape (empty: contiguous)
  bool deflate = false;        ///< gzip-compressed chunks
  hid_t type = H5T_NATIVE_DOUBLE;
};

/// posterior/theta of shape `dims` ([chains, draws] or [chains, draws, params]) holding `x`
/// (row-major), stored as `layout` says.
fs::path write_layout_h5(const std::string& name, const std::vector<double>& x, const std::vector<hsize_t>& dims,
                         const Layout& layout) {
  fs::create_directories(kWork);
  fs::path p = kWork / name;
  const hid_t f = H5Fcreate(p.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  const hid_t g = H5Gcreate2(f, "posterior", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  const hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  if (!layout.chunk.empty()) H5Pset_chunk(dcpl, static_cast<int>(layout.chunk.size()), layout.chunk.data());
  if (layout.deflate) H5Pset_deflate(dcpl, 1);
  const hid_t ds = H5Dcreate2(g, "theta", layout.type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, x.data());
  H5Dclose(ds);
  H5Pclose(dcpl);
  H5Sclose(space);
  H5Gclose(g);
  H5Fclose(f);
  return p;
}

}  // namespace

TEST_CASE("herd-diagnose: HDF5 datasets read in blocks, in any storage layout, on any number of threads",
          "[mcmc][apps]") {
  // [5, 30011, 3]: a chain's rows are 720 kB, so blocks of about 512 kB end inside chains
  // and chunks of [2, 7000, 2] end inside the dataset on every axis.
  const std::size_t m = 5, n = 30011, k = 3;
  std::vector<double> x(m * n * k);
  std::vector<std::vector<double>> param(k);  // [chains, draws] of each parameter
  for (std::size_t p = 0; p < k; ++p) {
    for (std::size_t c = 0; c < m; ++c) {
      const auto s = ar1(n, static_cast<unsigned>(100 + 10 * p + c), 0.01 * static_cast<double>(c));
      for (std::size_t t = 0; t < n; ++t) {
        // Integers in the second parameter, so that an integer dataset holds the same values.
        const double v = p == 1 ? std::round(1000.0 * s[t]) : s[t];
        x[(c * n + t) * k + p] = v;
        param[p].push_back(v);
      }
    }
  }
  const std::vector<hsize_t> dims{m, n, k};
  struct Case {
    const char* name;
    Layout layout;
  };
  std::vector<Case> cases{{"contiguous.h5", {}}, {"chunked.h5", {{2, 7000, 2}, false}}};
  if (H5Zfilter_avail(H5Z_FILTER_DEFLATE) > 0) cases.push_back({"deflate.h5", {{2, 7000, 2}, true}});
  std::string first;
  for (const auto& cs : cases) {
    INFO(cs.name);
    const auto h5 = write_layout_h5(cs.name, x, dims, cs.layout);
    for (const char* t : {"1", "2", "3"}) {
      const Run r = run(q(h5) + " --json --threads " + t);
      INFO(r.err);
      REQUIRE(r.rc == 0);
      if (first.empty()) {
        first = r.out;
        const auto j = nlohmann::json::parse(r.out);
        for (std::size_t p = 0; p < k; ++p) check_summary(j[fmt::format("theta[{}]", p)], param[p], m, n);
      }
      CHECK(r.out == first);  // every layout and thread count: the same numbers
    }
  }
  // An integer dataset is converted; a [chains, draws] dataset (one parameter) is read straight
  // into its buffer, contiguous or chunked.
  {
    std::vector<double> ints(m * n);
    for (std::size_t i = 0; i < m * n; ++i) ints[i] = param[1][i];
    const auto h5 = write_layout_h5("int.h5", ints, {m, n}, {{3, 4000}, false, H5T_NATIVE_INT32});
    const auto flat = write_layout_h5("flat2d.h5", ints, {m, n}, {});
    for (const auto& f : {h5, flat}) {
      const Run r = run(q(f) + " --json --threads 2");
      INFO(r.err);
      REQUIRE(r.rc == 0);
      check_summary(nlohmann::json::parse(r.out)["theta"], param[1], m, n);
    }
  }
  // Many short chains: blocks of several whole chains (of whole rows of chunks), the last
  // one shorter.
  {
    const std::size_t mm = 3000, nn = 20;
    std::vector<double> y(mm * nn * 2);
    std::vector<std::vector<double>> yp(2);
    for (std::size_t p = 0; p < 2; ++p) {
      const auto s = ar1(mm * nn, static_cast<unsigned>(7 + p), 0.5 * static_cast<double>(p));
      for (std::size_t i = 0; i < mm * nn; ++i) y[i * 2 + p] = s[i];
      yp[p] = s;
    }
    for (const Layout& l : {Layout{}, Layout{{7, 20, 1}, false}}) {
      const auto h5 = write_layout_h5("short.h5", y, {mm, nn, 2}, l);
      const Run r1 = run(q(h5) + " --json --threads 1"), r3 = run(q(h5) + " --json --threads 3");
      INFO(r1.err);
      REQUIRE(r1.rc == 0);
      CHECK(r3.out == r1.out);
      const auto j = nlohmann::json::parse(r1.out);
      for (std::size_t p = 0; p < 2; ++p) check_summary(j[fmt::format("theta[{}]", p)], yp[p], mm, nn);
    }
  }
  // Non-finite draws in different blocks: each parameter's note names its own first one (in
  // chain-major order), whichever thread reads it; the statistics are NA.
  {
    std::vector<double> bad = x;
    bad[(4 * n + 10) * k + 0] = std::numeric_limits<double>::quiet_NaN();
    bad[(2 * n + 29000) * k + 2] = -std::numeric_limits<double>::infinity();
    bad[(3 * n + 5) * k + 1] = std::numeric_limits<double>::infinity();
    bad[(3 * n + 7) * k + 1] = std::numeric_limits<double>::quiet_NaN();
    for (const auto& cs : cases) {
      INFO(cs.name);
      const auto h5 = write_layout_h5(std::string("bad_") + cs.name, bad, dims, cs.layout);
      const Run r1 = run(q(h5) + " --json --threads 1"), r3 = run(q(h5) + " --json --threads 3");
      INFO(r1.err);
      REQUIRE(r1.rc == 0);
      CHECK(r3.out == r1.out);
      CHECK(r3.err == r1.err);
      const auto j = nlohmann::json::parse(r1.out);
      for (std::size_t p = 0; p < k; ++p) check_na(j[fmt::format("theta[{}]", p)]);
      for (const char* note :
           {"theta[0]: 1 draw is NaN or infinite (the first: nan at chain 4, draw 10, counted from 0)",
            "theta[1]: 2 draws are NaN or infinite (the first: inf at chain 3, draw 5, counted from 0)",
            "theta[2]: 1 draw is NaN or infinite (the first: -inf at chain 2, draw 29000, counted from 0)"})
        CHECK_THAT(r1.err, Catch::Contains(note));
    }
  }
}

TEST_CASE("herd-diagnose: the errors of several datasets come in the group's order", "[mcmc][apps]") {
  // posterior/ in name order: a (fine), b (a NaN late in its data), c (a NaN early in its
  // data), and e (strings [2, 2]: refused by its type, before any draw is read).
  fs::create_directories(kWork);
  const auto tv1 = herd_test::test_vector(1);
  auto make = [&](const std::string& name, bool with_e) {
    const fs::path p = kWork / name;
    const hid_t f = H5Fcreate(p.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hid_t g = H5Gcreate2(f, "posterior", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    write_dataset(g, "a", tv1.x, {4, 1000});
    auto b = tv1.x, c = tv1.x;
    b[3990] = std::numeric_limits<double>::quiet_NaN();
    c[1] = std::numeric_limits<double>::quiet_NaN();
    write_dataset(g, "b", b, {4, 1000});
    write_dataset(g, "c", c, {4, 1000});
    if (with_e) {
      const hsize_t dims[2] = {2, 2};
      const hid_t space = H5Screate_simple(2, dims, nullptr);
      const hid_t type = H5Tcopy(H5T_C_S1);
      H5Tset_size(type, 2);
      const hid_t ds = H5Dcreate2(g, "e", type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
      H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, "a\0b\0c\0d\0");
      H5Dclose(ds);
      H5Tclose(type);
      H5Sclose(space);
    }
    H5Gclose(g);
    H5Fclose(f);
    return p;
  };
  std::string first;
  for (const char* t : {"1", "2", "3"}) {
    const Run r = run(q(make("order.h5", false)) + " --threads " + t);
    INFO(r.err);
    REQUIRE(r.rc == 0);
    // The notes in the group's order, whichever thread finished first.
    const auto b = r.err.find("note: b: 1 draw is NaN or infinite (the first: nan at chain 3, draw 990");
    const auto c = r.err.find("note: c: 1 draw is NaN or infinite (the first: nan at chain 0, draw 1,");
    CHECK(b != std::string::npos);
    CHECK(c != std::string::npos);
    CHECK(b < c);
    if (first.empty()) first = r.out + r.err;
    CHECK(r.out + r.err == first);
  }
  // A dataset refused by its type is refused before any diagnostics, NaN or not.
  const auto with_e = make("order_e.h5", true);
  check_error(run(q(with_e)), "posterior/e");
}

TEST_CASE("herd-diagnose --version prints the project version", "[mcmc][apps]") {
  const Run r = run("--version");
  CHECK(r.rc == 0);
  CHECK(r.out == std::string("herd-diagnose (herd) ") + HERD_VERSION_STRING + "\n");
}

TEST_CASE("herd-diagnose: --html naming an input file is refused before any work, the input untouched",
          "[mcmc][apps]") {
  // `herd-diagnose victim.h5 --html victim.h5` replaced the draws with the report (exit 0).
  const auto h5 = write_h5("victim.h5");
  const std::string before = slurp(h5);
  for (const std::string& html : {h5.string(), (h5.parent_path() / "." / h5.filename()).string()}) {
    const Run r = run(q(h5) + " --html " + q(html));
    check_error(r, "is the input file " + h5.string() + ", which the report would replace");
    CHECK(r.err.find("--html " + html + ":") != std::string::npos);
  }
  CHECK(slurp(h5) == before);
  // A report beside it is written as before.
  const Run ok = run(q(h5) + " --html " + q(kWork / "victim_report.html"));
  CHECK(ok.rc == 0);
  CHECK(slurp(h5) == before);
}

TEST_CASE("herd-diagnose: an --html path that cannot be written is refused before any work", "[mcmc][apps]") {
  // These failed only the final rename, after all the diagnostics ran (exit 1, the table
  // printed): now one line, exit 2, nothing on stdout.
  const auto csv = write_csv("html_path.csv", herd_test::test_vector(1).x, 4, 1000);
  fs::create_directories(kWork / "a_folder");
  check_error(run(q(csv) + " --html " + q(kWork / "a_folder")), "is a folder");
  check_error(run(q(csv) + " --html " + q(kWork / "no_such_folder" / "r.html")), "does not exist");
  if (::geteuid() != 0) {  // root writes into a read-only folder
    const fs::path ro = kWork / "read_only";
    fs::create_directories(ro);
    fs::permissions(ro, fs::perms::owner_read | fs::perms::owner_exec);
    const Run r = run(q(csv) + " --html " + q(ro / "r.html"));
    fs::permissions(ro, fs::perms::owner_all);
    check_error(r, "is not writable");
  }
}

/// `m` chains x `n` iid standard normal draws ([chain, draw]), the first half of the chains
/// shifted by +0.2 and the rest by -0.2: R-hat about 1.02.
std::vector<double> split_chains(std::size_t m, std::size_t n, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  std::vector<double> x(m * n);
  for (std::size_t c = 0; c < m; ++c)
    for (std::size_t t = 0; t < n; ++t) x[c * n + t] = normal(rng) + (c < m / 2 ? 0.2 : -0.2);
  return x;
}

// The HTML report of herd-diagnose gave other verdicts than its terminal: its advice named
// herd-sample's chain_size ("Run longer (raise chain_size)") for draws of any sampler, and on
// an .h5 with herd-sample's stored nested R-hat (many short chains in superchains) it judged
// classic R-hat alone, a "Problem" where the terminal and herd-sample's report found none.
TEST_CASE("herd-diagnose --html gives the terminal's verdicts: its advice and nested R-hat", "[mcmc][apps]") {
  // 8 chains x 1000 iid normal draws, chains 0-3 shifted by +0.2 and 4-7 by -0.2: R-hat
  // 1.022.
  constexpr std::size_t m = 8, n = 1000;
  const std::vector<double> x = split_chains(m, n, 7);
  // Draws of another sampler: the report's advice names no herd-sample setting.
  const auto csv = write_csv("verdicts.csv", x, m, n);
  const Run c = run(q(csv) + " --html " + q(kWork / "verdicts_csv.html"));
  INFO(c.err);
  REQUIRE(c.rc == 0);
  CHECK(c.err.find("WARNING: R-hat is above 1.01") != std::string::npos);
  CHECK(c.err.find("Run longer (more draws per chain)") != std::string::npos);
  const std::string csv_page = slurp(kWork / "verdicts_csv.html");
  CHECK(csv_page.find("Run longer (more draws per chain)") != std::string::npos);
  CHECK(csv_page.find("chain_size") == std::string::npos);
  // herd-sample's .h5 of 2 superchains of 4 chains whose nested R-hat passes (as stored).
  const fs::path h5 = kWork / "verdicts.h5";
  const hid_t f = H5Fcreate(h5.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  const hid_t g = H5Gcreate2(f, "posterior", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  write_dataset(g, "x", x, {m, n});
  H5Gclose(g);
  const hid_t d = H5Gcreate2(f, "diagnostics", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  write_strings(d, "variable", {"x"}, true);
  write_dataset(d, "nested_rhat", {1.001}, {1});
  const hid_t ds = H5Dopen2(d, "nested_rhat", H5P_DEFAULT);
  write_attribute(ds, "superchains", std::int64_t{2});
  H5Dclose(ds);
  H5Gclose(d);
  H5Fclose(f);
  const Run r = run(q(h5) + " --html " + q(kWork / "verdicts_h5.html"));
  INFO(r.err);
  REQUIRE(r.rc == 0);
  CHECK(r.err.find("WARNING: R-hat is above") == std::string::npos);
  CHECK(r.err.find("note: R-hat is above 1.01 for x (1.02") != std::string::npos);
  const std::string page = slurp(kWork / "verdicts_h5.html");
  CHECK(page.find("R-hat is above 1.01 for x (1.02") != std::string::npos);  // a note ...
  CHECK(page.find("but nested R-hat over 2 superchains is not") != std::string::npos);
  CHECK(page.find("Problem:") == std::string::npos);  // ... not a problem
  // No input stored: nothing said of the starts. The resolved input of herd-sample's .h5
  // says random_start_point = false: every chain from one point, which the page notes.
  CHECK(page.find("Every chain started from the same point") == std::string::npos);
  {
    const hid_t fw = H5Fopen(h5.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    const hid_t in = H5Gcreate2(fw, "input", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    write_attribute(in, "random_start_point", std::string("false"));
    H5Gclose(in);
    H5Fclose(fw);
  }
  const Run shared = run(q(h5) + " --html " + q(kWork / "verdicts_h5_shared.html"));
  INFO(shared.err);
  REQUIRE(shared.rc == 0);
  CHECK(slurp(kWork / "verdicts_h5_shared.html")
            .find("Every chain started from the same point, so the 2 superchains were not started from dispersed") !=
        std::string::npos);
}

// The warnings came once per dataset: an ArviZ file of many scalars repeated the same
// paragraph for each; herd-sample's report and the HTML report give it once, naming them all.
TEST_CASE("herd-diagnose: one verdict for all the datasets of a file", "[mcmc][apps]") {
  constexpr std::size_t m = 8, n = 1000;
  const std::vector<double> x = split_chains(m, n, 11);
  const fs::path h5 = kWork / "one_verdict.h5";
  fs::create_directories(kWork);
  const hid_t f = H5Fcreate(h5.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  const hid_t g = H5Gcreate2(f, "posterior", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  write_dataset(g, "a", x, {m, n});
  write_dataset(g, "b", x, {m, n});
  write_dataset(g, "c", x, {m, n});
  H5Gclose(g);
  H5Fclose(f);
  const Run r = run(q(h5));
  INFO(r.err);
  REQUIRE(r.rc == 0);
  const auto count = [&](const std::string& s) {
    std::size_t k = 0;
    for (auto i = r.err.find(s); i != std::string::npos; i = r.err.find(s, i + 1)) ++k;
    return k;
  };
  CHECK(count("WARNING: R-hat is above 1.01") == 1);
  CHECK(r.err.find("WARNING: R-hat is above 1.01 for a (1.0") != std::string::npos);
  CHECK(r.err.find("), b (1.0") != std::string::npos);
  CHECK(r.err.find("), c (1.0") != std::string::npos);
  CHECK(count("herd-diagnose: ") == 3);  // what was read: one line per dataset, as before
}

// Chains too short for ESS (or constant draws) printed NA in the table and nothing on the
// terminal to say why; only the --html report had the note. A quantity with NA beside judged
// ones gets a note; when no quantity can be judged, a warning says so.
TEST_CASE("herd-diagnose: undefined (NA) diagnostics are explained on stderr, as in the HTML report", "[mcmc][apps]") {
  const auto short_csv = write_csv("too_short.csv", {0.1, -0.4, 0.7, 1.2, 0.3, -0.8}, 2, 3);
  const Run r = run(q(short_csv));
  INFO(r.err);
  REQUIRE(r.rc == 0);
  CHECK(r.out.find(" nan ") != std::string::npos);
  CHECK(r.err.find("WARNING: R-hat and ESS are undefined (NA) for every quantity (too_short): too few draws (ESS "
                   "needs at least 6 per chain)") != std::string::npos);
  // A constant quantity beside a judged one: a note names it.
  const std::vector<double> good = herd_test::test_vector(1).x;
  const fs::path h5 = kWork / "constant_beside.h5";
  fs::create_directories(kWork);
  const hid_t f = H5Fcreate(h5.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  const hid_t g = H5Gcreate2(f, "posterior", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  write_dataset(g, "constant", std::vector<double>(4000, 2.5), {4, 1000});
  write_dataset(g, "moving", good, {4, 1000});
  H5Gclose(g);
  H5Fclose(f);
  const Run c = run(q(h5) + " --json");
  INFO(c.err);
  REQUIRE(c.rc == 0);
  CHECK(nlohmann::json::parse(c.out)["constant"]["rhat"].is_null());
  CHECK(c.err.find("herd-diagnose: note: R-hat or ESS is undefined (NA) for constant: constant draws, a "
                   "non-finite draw, too few draws (ESS needs at least 6 per chain), or for the tail ESS a 5% or 95% "
                   "quantile at the smallest or largest draw (discrete draws).\n") != std::string::npos);
  CHECK(c.err.find("for every quantity") == std::string::npos);
  // Defined diagnostics: no note.
  const Run ok = run(q(write_csv("defined.csv", good, 4, 1000)));
  REQUIRE(ok.rc == 0);
  CHECK(ok.err.find("undefined") == std::string::npos);
}

TEST_CASE("herd-diagnose: a last row without a newline (cut off) is left out with a note, in every text format",
          "[mcmc][apps]") {
  // A file still being written, or left by a killed run, ends inside a row: the cut number
  // (-8.5405652228767404e-01 cut to -8.5405652228767404) still parses and was read as a draw.
  // Each file here is a whole file plus such a row: the numbers must be the whole file's.
  const Compact c = make_compact(200, 7);
  const auto whole = write_paradram_chain("whole_chain.txt", c, ",", false);
  const std::string text = slurp(whole);
  struct Case {
    std::string name, whole, cut_row;
  };
  std::string sample = "SampleLogFunc,mu\n",
              cmdstan =
                  "# model = m\n#   num_samples = 100\n"
                  "lp__,accept_stat__,theta\n# Adaptation terminated\n",
              draws = "chain1,chain2\n";
  const auto x = ar1(100, 3, 0.0), y = ar1(100, 4, 0.5);
  for (std::size_t i = 0; i < x.size(); ++i) {
    sample += fmt::format("{:.17g},{:.17g}\n", y[i], x[i]);
    cmdstan += fmt::format("{:.17g},0.9,{:.17g}\n", y[i], x[i]);
    draws += fmt::format("{:.17g},{:.17g}\n", x[i], y[i]);
  }
  const std::vector<Case> cases{
      {"cut_chain.txt", text, "1,2,.25E+00,.0E+00,1,300,-.12E+01,.5E+00,-8.5405652228767404"},
      {"cut_sample.txt", sample, "-1.5,-8.5405652228767404"},
      {"cut_cmdstan.csv", cmdstan, "-1.5,0.9,-8.5405652228767404"},
      {"cut_draws.csv", draws, "0.25,-8.5405652228767404"},
  };
  for (const auto& cs : cases) {
    INFO(cs.name);
    const fs::path full = kWork / ("full_" + cs.name), cut = kWork / cs.name;
    std::ofstream(full, std::ios::binary) << cs.whole;
    std::ofstream(cut, std::ios::binary) << cs.whole << cs.cut_row;
    const Run a = run(q(full) + " --json"), b = run(q(cut) + " --json");
    INFO(b.err);
    REQUIRE(a.rc == 0);
    REQUIRE(b.rc == 0);
    const std::size_t last = static_cast<std::size_t>(std::count(cs.whole.begin(), cs.whole.end(), '\n')) + 1;
    CHECK_THAT(b.err, Catch::Contains("herd-diagnose: note: " + cut.string() + ": line " + std::to_string(last) +
                                      " has no newline at its end, so it looks cut off"));
    CHECK(a.err.find("note:") == std::string::npos);
    if (cs.name == "cut_draws.csv") {
      // The draws CSV's quantity is named after the file.
      CHECK(nlohmann::json::parse(b.out)["cut_draws"] == nlohmann::json::parse(a.out)["full_cut_draws"]);
    } else {
      CHECK(b.out == a.out);
    }
  }
  // Comment lines and blank lines without a newline are not rows: nothing to leave out.
  const fs::path footer = kWork / "footer.csv";
  std::ofstream(footer, std::ios::binary) << cmdstan << "#  Elapsed Time: 0.01 seconds (Total)";
  const Run f = run(q(footer) + " --json");
  CHECK(f.rc == 0);
  CHECK(f.err.find("note:") == std::string::npos);
  // A file whose only row is cut off has no draws.
  const fs::path only = kWork / "only_chain.txt";
  std::ofstream(only, std::ios::binary) << "SampleLogFunc,x\n-1.5,-8.5405652228767404";
  check_error(run(q(only)), "only_chain.txt: no draws: its only data row, line 2, has no newline at its end");
}

TEST_CASE("herd-diagnose: CmdStan CSV with save_warmup: the warm-up draws are left out, with a note", "[mcmc][apps]") {
  // save_warmup = 1 writes the warm-up draws first, then "# Adaptation terminated": they were
  // read as posterior draws (R-hat 1.22 for 1.01). Here the warm-up drifts from 20 down to the
  // posterior's level, so that reading it changes every number.
  const std::size_t n = 300, warmup = 50;
  fs::create_directories(kWork);
  std::vector<double> theta, lp;
  auto write = [&](const std::string& name, int c, const std::string& save, bool adapted) {
    const auto t = ar1(n, 40 + static_cast<unsigned>(c), 0.1 * c), l = ar1(n, 50 + static_cast<unsigned>(c), -7.0);
    theta.insert(theta.end(), t.begin(), t.end());
    lp.insert(lp.end(), l.begin(), l.end());
    const fs::path p = kWork / name;
    std::ofstream o(p);
    o << "# model = bernoulli_model\n# method = sample (Default)\n#   sample\n#     num_samples = 300\n"
      << "#     num_warmup = " << (adapted ? "50" : "99") << "\n#     save_warmup = " << save << "\n"
      << "#     thin = " << (adapted ? "1 (Default)" : "2") << "\n#     adapt\n#       engaged = " << (adapted ? 1 : 0)
      << "\n"
      << "lp__,accept_stat__,stepsize__,treedepth__,n_leapfrog__,divergent__,energy__,theta\n";
    for (std::size_t i = 0; i < warmup; ++i)
      o << fmt::format("{:.17g},0.5,0.1,3,7,0,7,{:.17g}\n", -50.0 + static_cast<double>(i),
                       20.0 - 0.4 * static_cast<double>(i));
    if (adapted)
      o << "# Adaptation terminated\n# Step size = 0.93\n# Diagonal elements of inverse mass matrix:\n# 0.5\n";
    for (std::size_t i = 0; i < n; ++i) o << fmt::format("{:.17g},0.9,0.93,1,3,0,{:.17g},{:.17g}\n", l[i], -l[i], t[i]);
    o << "\n#  Elapsed Time: 0.005 seconds (Warm-up)\n#                0.01 seconds (Total)\n";
    return p;
  };
  const auto p1 = write("warm_1.csv", 0, "1", true), p2 = write("warm_2.csv", 1, "1", true);
  const Run r = run(q(p1) + " " + q(p2) + " --json");
  INFO(r.err);
  REQUIRE(r.rc == 0);
  auto j = nlohmann::json::parse(r.out);
  check_summary(j["theta"], theta, 2, n);
  check_summary(j["lp__"], lp, 2, n);
  CHECK_THAT(r.err,
             Catch::Contains("herd-diagnose: note: left out the warm-up draws of the CmdStan CSV files (the rows "
                             "before \"# Adaptation terminated\"), as stansummary and ArviZ do: 50 draws per "
                             "chain\nherd-diagnose: lp__ ... theta (2 parameters): 2 chains x 300 draws"));
  // CmdStan 2.33 writes `save_warmup = true`; an unadapted run (adapt engaged = 0) has no
  // "# Adaptation terminated" line: its first ceil(num_warmup / thin) = ceil(99 / 2) = 50 rows
  // are the warm-up.
  theta.clear();
  lp.clear();
  const auto u = write("warm_unadapted.csv", 2, "true", false);
  const Run ru = run(q(u) + " --json");
  INFO(ru.err);
  REQUIRE(ru.rc == 0);
  check_summary(nlohmann::json::parse(ru.out)["theta"], theta, 1, n);
  CHECK_THAT(ru.err, Catch::Contains("ceil(99 / 2) rows), as stansummary and ArviZ do: 50 draws"));
  // save_warmup on, but neither the line nor num_warmup: refused, not guessed.
  const fs::path bare = kWork / "warm_bare.csv";
  std::ofstream(bare) << "# save_warmup = 1\nlp__,theta\n-1,0.5\n-2,0.25\n";
  check_error(run(q(bare)),
              "warm_bare.csv: line 1: save_warmup is 1, but the file has neither a \"# Adaptation "
              "terminated\" line nor num_warmup");
  const fs::path all = kWork / "warm_all.csv";
  std::ofstream(all) << "# num_warmup = 10\n# save_warmup = 1\nlp__,theta\n-1,0.5\n-2,0.25\n";
  check_error(run(q(all)), "warm_all.csv: all its 2 draws are warm-up");
  const fs::path odd = kWork / "warm_odd.csv";
  std::ofstream(odd) << "# save_warmup = yes\nlp__,theta\n-1,0.5\n-2,0.25\n";
  check_error(run(q(odd)), "warm_odd.csv: line 1: CmdStan's save_warmup is 'yes', but must be 0 or 1 (false or true)");
}

TEST_CASE("herd-diagnose: a weighted chain file within --max-memory reads as before", "[mcmc][apps]") {
  // The rows are repeated SampleWeight times only once their memory is known to fit: a small
  // chain under a small --max-memory gives the same numbers as without it.
  const Compact c = make_compact(400, 1);
  const auto f = write_paradram_chain("small_weighted_chain.txt", c, ",", false);
  const Run a = run(q(f) + " --json"), b = run(q(f) + " --json --max-memory 1MiB");
  INFO(b.err);
  REQUIRE(b.rc == 0);
  CHECK(nlohmann::json::parse(b.out)["bom"] == nlohmann::json::parse(a.out)["bom_plain"]);  // named after the file
  check_summary(nlohmann::json::parse(b.out)["SampleVariable1"], c.expanded(1), 1, c.expanded(1).size());
}

TEST_CASE("herd-diagnose --html of a weighted compact chain: its expansion is estimated before the diagnostics",
          "[mcmc][apps]") {
  // herd-sample's compact-only .h5 (chain_compact: state [rows, variable], weight [rows]) is
  // diagnosed weighted, but the report expands it: 10 rows of weight 200,000 are 2e6 draws
  // of 2 variables, 30.5 MiB, whatever --max-memory said.
  fs::create_directories(kWork);
  const fs::path p = kWork / "compact_only.h5";
  const hid_t f = H5Fcreate(p.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  const hid_t g = H5Gcreate2(f, "chain_compact", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  std::vector<double> state(20);
  for (std::size_t i = 0; i < state.size(); ++i) state[i] = 0.1 * static_cast<double>(i % 7);
  write_dataset(g, "state", state, {10, 2});
  write_dataset(g, "weight", std::vector<double>(10, 200000.0), {10});
  write_strings(g, "variable", {"a", "b"});
  write_attribute(g, "burnin", std::int64_t{0});
  H5Gclose(g);
  H5Fclose(f);
  const Run plain = run(q(p) + " --json --max-memory 16MiB");
  INFO(plain.err);
  REQUIRE(plain.rc == 0);  // the diagnostics never expand it
  // What was read: the verbose draws per chain (it said "10 draws (weighted: verbose draws
  // per chain)", the compact rows).
  CHECK_THAT(plain.err,
             Catch::Contains("herd-diagnose: a: 1 chain x 2000000 draws (from up to 10 weighted compact rows "
                             "per chain)\n"));
  const Run js = run(q(p) + " --json-diagnostics --max-memory 16MiB");
  REQUIRE(js.rc == 0);
  CHECK(nlohmann::json::parse(js.out)["draws_per_chain"] == 2000000);
  const fs::path html = kWork / "compact_only.html";
  fs::remove(html);
  check_error(run(q(p) + " --max-memory 16MiB --html " + q(html)),
              "compact_only.h5: the --html report of its weighted draws, expanded (1 chain x 2000000 draws x 2 "
              "quantities) needs about 30.5 MiB of memory, but --max-memory is 16 MiB");
  CHECK_FALSE(fs::exists(html));
  CHECK(run(q(p) + " --max-memory 64MiB --html " + q(html)).rc == 0);
}

namespace {

/// A dimension of a netCDF-4 file, as netCDF and h5netcdf write it: a 1-D dataset named after
/// it, made a dimension scale.
hid_t make_dimension(hid_t loc, const char* name, std::size_t size) {
  // int64 coordinates 0..size-1, as ArviZ writes chain, draw and theta_dim_0 (float ones
  // would label theta's elements theta[0.0], ..., as az.summary does).
  std::vector<std::int64_t> v(size);
  for (std::size_t i = 0; i < size; ++i) v[i] = static_cast<std::int64_t>(i);
  const hsize_t n = size;
  const hid_t space = H5Screate_simple(1, &n, nullptr);
  const hid_t d = H5Dcreate2(loc, name, H5T_NATIVE_INT64, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Sclose(space);
  H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
  H5DSset_scale(d, name);
  return d;
}

/// Dataset `name` of `loc` with shape `dims`, values `x`, and the dimension scales `scales`
/// attached in order.
void write_named(hid_t loc, const char* name, const std::vector<double>& x, const std::vector<hsize_t>& dims,
                 const std::vector<hid_t>& scales, const std::vector<hsize_t>& chunk = {}) {
  const hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  if (!chunk.empty()) H5Pset_chunk(dcpl, static_cast<int>(chunk.size()), chunk.data());
  const hid_t ds = H5Dcreate2(loc, name, H5T_NATIVE_DOUBLE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, x.data());
  for (std::size_t k = 0; k < scales.size(); ++k) H5DSattach_scale(ds, scales[k], static_cast<unsigned>(k));
  H5Dclose(ds);
  H5Pclose(dcpl);
  H5Sclose(space);
}

}  // namespace

TEST_CASE("herd-diagnose: an .h5 dataset's dimension names say which axis holds the chains", "[mcmc][apps]") {
  // xarray writes a variable's dimensions in its own order, naming them by dimension scales:
  // mu(draw, chain) was read as 20000 chains of 4 draws. The same draws as (chain, draw),
  // (draw, chain) and (draw, chain, theta_dim_0), contiguous and chunked, must give the same
  // numbers on any number of threads.
  const std::size_t m = 4, n = 20000, k = 3;
  std::vector<std::vector<double>> param(k);  // [chains, draws] of each parameter
  for (std::size_t p = 0; p < k; ++p)
    for (std::size_t c = 0; c < m; ++c) {
      const auto s = ar1(n, static_cast<unsigned>(300 + 10 * p + c), 0.05 * static_cast<double>(c));
      param[p].insert(param[p].end(), s.begin(), s.end());
    }
  std::vector<double> by_chain = param[0], by_draw(m * n), theta(n * m * k);
  for (std::size_t t = 0; t < n; ++t)
    for (std::size_t c = 0; c < m; ++c) {
      by_draw[t * m + c] = param[0][c * n + t];
      for (std::size_t p = 0; p < k; ++p) theta[(t * m + c) * k + p] = param[p][c * n + t];
    }
  auto make = [&](const std::string& name, const std::vector<double>& th, const std::vector<hsize_t>& chunk) {
    const fs::path p = kWork / name;
    const hid_t f = H5Fcreate(p.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hid_t gcpl = H5Pcreate(H5P_GROUP_CREATE);
    H5Pset_link_creation_order(gcpl, H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED);
    const hid_t g = H5Gcreate2(f, "posterior", H5P_DEFAULT, gcpl, H5P_DEFAULT);
    H5Pclose(gcpl);
    const hid_t chain = make_dimension(g, "chain", m), draw = make_dimension(g, "draw", n),
                dim0 = make_dimension(g, "theta_dim_0", k);
    write_named(g, "nu", by_chain, {m, n}, {chain, draw});
    write_named(g, "mu", by_draw, {n, m}, {draw, chain}, chunk.empty() ? chunk : std::vector<hsize_t>{chunk[0], 3});
    write_named(g, "theta", th, {n, m, k}, {draw, chain, dim0}, chunk);
    for (hid_t d : {chain, draw, dim0}) H5Dclose(d);
    H5Gclose(g);
    H5Fclose(f);
    return p;
  };
  fs::create_directories(kWork);
  std::string first;
  for (const auto& chunk : {std::vector<hsize_t>{}, std::vector<hsize_t>{3000, 3, 2}}) {
    const auto h5 = make(chunk.empty() ? "named_dims.h5" : "named_dims_chunked.h5", theta, chunk);
    for (const char* t : {"1", "2", "3"}) {
      const Run r = run(q(h5) + " --json --threads " + t);
      INFO(r.err);
      REQUIRE(r.rc == 0);
      if (first.empty()) {
        first = r.out;
        const auto j = nlohmann::ordered_json::parse(r.out);
        CHECK(keys(j) == std::vector<std::string>{"nu", "mu", "theta[0]", "theta[1]", "theta[2]"});
        check_summary(j["nu"], param[0], m, n);
        CHECK(j["mu"] == j["nu"]);
        for (std::size_t p = 0; p < k; ++p) check_summary(j[fmt::format("theta[{}]", p)], param[p], m, n);
        CHECK_THAT(r.err, Catch::Contains("herd-diagnose: mu: 4 chains x 20000 draws"));
      }
      CHECK(r.out == first);
    }
  }
  // A non-finite draw of a transposed dataset is named by its chain and draw.
  {
    std::vector<double> bad = theta;
    bad[(15000 * m + 2) * k + 1] = std::numeric_limits<double>::quiet_NaN();
    bad[(17000 * m + 0) * k + 0] = std::numeric_limits<double>::infinity();
    const auto h5 = make("named_dims_nan.h5", bad, {3000, 3, 2});
    for (const char* t : {"1", "3"}) {
      const Run r = run(q(h5) + " --json --threads " + t);
      INFO(r.err);
      REQUIRE(r.rc == 0);
      const auto j = nlohmann::json::parse(r.out);
      check_na(j["theta[0]"]);
      check_na(j["theta[1]"]);
      check_summary(j["theta[2]"], param[2], m, n);
      CHECK_THAT(r.err, Catch::Contains("theta[1]: 1 draw is NaN or infinite (the first: nan at chain 2, draw 15000,"));
      CHECK_THAT(r.err, Catch::Contains("theta[0]: 1 draw is NaN or infinite (the first: inf at chain 0, draw 17000,"));
    }
  }
  // Dimensions named otherwise are refused, naming them: (compact_draw, variable) was read as
  // compact_draw chains of 5 draws.
  {
    const fs::path p = kWork / "other_dims.h5";
    const hid_t f = H5Fcreate(p.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hid_t rows = make_dimension(f, "compact_draw", 100), var = make_dimension(f, "variable", 5);
    write_named(f, "state", std::vector<double>(500, 0.5), {100, 5}, {rows, var});
    const hid_t chain = make_dimension(f, "chain", 4), draw = make_dimension(f, "draw", 25);
    write_named(f, "late", std::vector<double>(500, 0.5), {5, 4, 25}, {var, chain, draw});
    for (hid_t d : {rows, var, chain, draw}) H5Dclose(d);
    H5Fclose(f);
    check_error(run(q(p) + " --dataset state"),
                "dataset 'state' has the dimensions (compact_draw, variable), but herd-diagnose reads draws with the "
                "dimensions (chain, draw, ...) or (draw, chain, ...)");
    check_error(run(q(p) + " --dataset late"), "dataset 'late' has the dimensions (variable, chain, draw)");
  }
}

// An ArviZ file's sample_stats written (draw, chain), as xarray writes a transposed variable,
// were "not judged" (their shape is not the posterior's [chain, draw]), and a square one would
// have been read with chains and draws swapped; their dimension names say which axis holds the
// chains, as the posterior's do.
TEST_CASE("herd-diagnose: sample_stats of dimensions (draw, chain) are read by their names", "[mcmc][apps]") {
  fs::create_directories(kWork);
  const std::size_t n = 128;
  const auto tv1 = herd_test::test_vector(1);
  const fs::path p = kWork / "stats_draw_chain.nc";
  const hid_t f = H5Fcreate(p.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  const hid_t post = H5Gcreate2(f, "posterior", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  const hid_t pc = make_dimension(post, "chain", 4), pd = make_dimension(post, "draw", n);
  write_named(post, "mu", std::vector<double>(tv1.x.begin(), tv1.x.begin() + 4 * n), {4, n}, {pc, pd});
  H5Dclose(pc);
  H5Dclose(pd);
  H5Gclose(post);
  const hid_t st = H5Gcreate2(f, "sample_stats", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  const hid_t sc = make_dimension(st, "chain", 4), sd = make_dimension(st, "draw", n);
  std::vector<double> energy(n * 4), div(n * 4, 0.0);  // [draw, chain]
  for (std::size_t t = 0; t < n; ++t)
    for (std::size_t c = 0; c < 4; ++c)  // chain 2: a ramp (E-BFMI 0.000727), else alternating
      energy[t * 4 + c] = c == 2 ? static_cast<double>(t) : 1.0 * (t % 2);
  div[7 * 4 + 3] = div[9 * 4 + 3] = 1;  // chain 3
  write_named(st, "energy", energy, {n, 4}, {sd, sc});
  write_named(st, "diverging", div, {n, 4}, {sd, sc});
  H5Dclose(sc);
  H5Dclose(sd);
  H5Gclose(st);
  H5Fclose(f);
  const Run r = run(q(p) + " --json-diagnostics");
  INFO(r.err);
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.err, !Catch::Contains("not judged"));
  CHECK_THAT(r.err, Catch::Contains("WARNING: 2 of 512 post-warm-up transitions (0.39%) ended with a divergence"));
  CHECK_THAT(r.err, Catch::Contains("WARNING: E-BFMI is below 0.3 for chain 2 (0.001): the momentum resampling") &&
                        Catch::Contains("(chains counted from 0)\n"));
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["sampler"]["divergent"]["per_chain"] == nlohmann::json({0, 0, 0, 2}));
  CHECK(j["sampler"]["ebfmi"]["low_chains"] == nlohmann::json(std::vector<std::string>{"2"}));
  CHECK_THAT(j["sampler"]["ebfmi"]["per_chain"][1].get<double>(), Catch::WithinRel(4.0 * (n - 1.0) / n, 1e-12));
}

// A table or JSON that could not be written to stdout (a full disk) was lost with exit status
// 0: a CI step's JSON file was left empty as if all went well.
TEST_CASE("herd-diagnose: a failed write of stdout exits 1 with a line", "[mcmc][apps]") {
  if (!fs::exists("/dev/full")) return;  // Linux's always-full device
  const auto tv = herd_test::test_vector(1);
  const fs::path csv = write_csv("full.csv", tv.x, tv.m, tv.n), err = kWork / "full_stderr.txt";
  for (const char* flag : {"", " --json", " --json-diagnostics"}) {
    const std::string cmd = q(HERD_DIAGNOSE_EXE) + " " + q(csv) + flag + " > /dev/full 2> " + q(err);
    const int status = std::system(cmd.c_str());
    INFO(flag);
    CHECK((WIFEXITED(status) ? WEXITSTATUS(status) : -1) == 1);
    CHECK_THAT(slurp(err), Catch::EndsWith(std::string("herd-diagnose: error: cannot write ") +
                                           (*flag != 0 ? "the JSON" : "the table") +
                                           " to standard output (No space left on device)\n"));
  }
}
