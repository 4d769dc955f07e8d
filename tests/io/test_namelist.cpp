// The ParaMonte namelist parser: every construct of namelist.hpp, and clear errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <ctime>
#include <fstream>

#include "herd/core/error.hpp"
#include "herd/io/namelist.hpp"
#include "herd/io/schema.hpp"
#include "herd/io/toml_reader.hpp"
#include "temp_dir.hpp"

using namespace herd::io;
using Kind = ConfigValue::Kind;

namespace {

Config nml(std::string_view text, std::string_view group = "ParaDRAM") { return parse_namelist(text, "in.nml", group); }

const ConfigValue& at(const Config& c, std::string_view key) {
  const ConfigValue* v = c.find(key);
  INFO("key " << key);
  REQUIRE(v != nullptr);
  return *v;
}

std::vector<double> floats(const ConfigValue& v) {
  std::vector<double> out;
  for (const auto& e : v.as_array()) out.push_back(e.is_null() ? -999.0 : e.as_float());
  return out;
}

std::string error_of(std::string_view text, std::string_view group = "ParaDRAM") {
  try {
    nml(text, group);
  } catch (const herd::InputError& e) {
    return e.what();
  }
  return "(no error)";
}

// A ParaMonte-style input file with every construct.
constexpr const char* kParaDram = R"NML(
! ParaMonte ParaDRAM input file: text before the group is ignored.
This line is outside any group & has an ampersand.
&ParaDRAM
    ! comments everywhere
    ChainSize                       = 30000   ! trailing comment
    outputFileName                  = "./out/run_""quoted""" , description = 'it''s a test / with slash'
    randomSeed = 2136275,
    targetAcceptanceRate = 0.23d0
    domainLowerLimitVec = 4*-1.e300
    domainUpperLimitVec = 4 1.e300     ! blanks separate values
    startPointVec(3:4) = 1.5, -2
    startPointVec(1) = .5D1
    proposalStartStdVec = 3*, 0.5
    scaleFactor = "gelman"
    adaptiveUpdateCount = 1.5e+3
    greedyAdaptationCount = -7
    burninAdaptationMeasure = 1.e-3
    overwriteRequested = .true.
    mpiFinalizeRequested = F
    silentModeRequested = .f.
    restartFileFormat = T
    parallelizationModel = 'singleChain'
    proposalStartCovMat(1,1) = 1.0
    proposalStartCovMat(2,2) = 2.0
    proposalStartCovMat(1:2, 3) = 0.1, 0.2
    spec%maxNumDomainCheckToWarn = 100
    blanks = 1 2
      3
    nulls = 1,,3
/
&other
    ignored = 1
/
)NML";

}  // namespace

TEST_CASE("namelist: every ParaMonte construct", "[io]") {
  const Config c = nml(kParaDram);
  CHECK(c.case_insensitive());
  CHECK(at(c, "chainsize").as_int() == 30000);
  CHECK(at(c, "chainsize").written_name == "ChainSize");
  CHECK(at(c, "chainsize").where.str() == "in.nml:6");
  CHECK(at(c, "outputfilename").as_string() == "./out/run_\"quoted\"");
  CHECK(at(c, "description").as_string() == "it's a test / with slash");
  CHECK(at(c, "randomseed").as_int() == 2136275);
  CHECK(at(c, "targetacceptancerate").as_float() == 0.23);
  CHECK(floats(at(c, "domainlowerlimitvec")) == std::vector<double>(4, -1e300));
  CHECK(floats(at(c, "domainupperlimitvec")) == std::vector<double>{4.0, 1e300});
  CHECK(floats(at(c, "startpointvec")) == std::vector<double>{5.0, -999.0, 1.5, -2.0});
  const auto& std_vec = at(c, "proposalstartstdvec").as_array();
  REQUIRE(std_vec.size() == 4);
  CHECK(std_vec[0].is_null());
  CHECK(std_vec[2].is_null());
  CHECK(std_vec[3].as_float() == 0.5);
  CHECK(at(c, "scalefactor").as_string() == "gelman");
  CHECK(at(c, "adaptiveupdatecount").kind() == Kind::kFloat);
  CHECK(at(c, "adaptiveupdatecount").as_float() == 1500.0);
  CHECK(at(c, "greedyadaptationcount").as_int() == -7);
  CHECK(at(c, "burninadaptationmeasure").as_float() == 1e-3);
  CHECK(at(c, "overwriterequested").as_bool());
  CHECK_FALSE(at(c, "mpifinalizerequested").as_bool());
  CHECK_FALSE(at(c, "silentmoderequested").as_bool());
  CHECK(at(c, "restartfileformat").as_bool());
  CHECK(at(c, "parallelizationmodel").as_string() == "singleChain");
  const auto& m = at(c, "proposalstartcovmat").as_array();
  REQUIRE(m.size() == 2);
  CHECK(m[0].as_array()[0].as_float() == 1.0);
  CHECK(m[1].as_array()[1].as_float() == 2.0);
  CHECK(m[0].as_array()[2].as_float() == 0.1);
  CHECK(m[1].as_array()[2].as_float() == 0.2);
  CHECK(m[0].as_array()[1].is_null());
  CHECK(at(c, "spec.maxnumdomainchecktowarn").as_int() == 100);
  CHECK(floats(at(c, "blanks")) == std::vector<double>{1, 2, 3});
  CHECK(floats(at(c, "nulls")) == std::vector<double>{1, -999.0, 3});
  CHECK(c.find("ignored") == nullptr);
}

TEST_CASE("namelist: groups, case and terminators", "[io]") {
  CHECK(nml("&paradram x = 1 /", "PARADRAM").find("x")->as_int() == 1);
  CHECK(nml("$ParaDRAM x = 2 $end").find("x")->as_int() == 2);
  CHECK(nml("&ParaDRAM x = 3 &end").find("x")->as_int() == 3);
  CHECK(nml("&first a=1 /\n&ParaDRAM b='/' /").find("b")->as_string() == "/");
  CHECK(nml("&first a=1 /", "").find("a")->as_int() == 1);  // first group
  CHECK(nml("&ParaDRAM /").root().as_table().empty());
  // The groups not read, before and after the one read, with their lines (a program names them).
  const Config g = nml("&first a=1 /\n! &comment /\n&ParaDRAM b=2 /\n\n$Target x='&y' $end\n&ParaDISE /\n");
  REQUIRE(g.other_groups().size() == 3);
  CHECK(g.other_groups()[0].name == "first");
  CHECK(g.other_groups()[0].line == 1);
  CHECK(g.other_groups()[1].name == "Target");
  CHECK(g.other_groups()[1].line == 5);
  CHECK(g.other_groups()[2].name == "ParaDISE");
  CHECK(g.other_groups()[2].line == 6);
  CHECK(nml("&ParaDRAM b=2 /\ntext after the group\n").other_groups().empty());
  // Free text after a group closed by $end is passed over, quotes and all; a second group of
  // the name read is recorded too.
  const Config e = nml("&ParaDRAM b=2 /\n$ParaDISE x=1 $end\nNotes: don't edit\n&ParaDRAM b=3 /\n");
  REQUIRE(e.other_groups().size() == 2);
  CHECK(e.other_groups()[0].name == "ParaDISE");
  CHECK(e.other_groups()[1].name == "ParaDRAM");
  CHECK(e.other_groups()[1].line == 4);
  CHECK(e.find("b")->as_int() == 2);
  // Later assignments win, element-wise for arrays.
  const Config c = nml("&ParaDRAM x = 1, 2, 3\n x(2) = 20\n y = 1\n y = 2 /");
  CHECK(floats(*c.find("x")) == std::vector<double>{1, 20, 3});
  CHECK(c.find("y")->as_int() == 2);
  // Repeat counts of strings and logicals; scalars with repeat counts.
  const Config r = nml("&ParaDRAM s = 2*'ab' , b = 3*.true. , n = 2*-0.5d+1 /");
  CHECK(r.find("s")->as_array().size() == 2);
  CHECK(r.find("s")->as_array()[1].as_string() == "ab");
  CHECK(r.find("b")->as_array()[2].as_bool());
  CHECK(floats(*r.find("n")) == std::vector<double>{-5.0, -5.0});
  // Derived-type components and plain names side by side.
  const Config d = nml("&ParaDRAM spec%a = 1, x = 5, spec%b = 2, spec%a = 3, y(2) = 4 /");
  CHECK(d.find("spec.a")->as_int() == 3);
  CHECK(d.find("spec.b")->as_int() == 2);
  CHECK(d.find("x")->as_int() == 5);
  CHECK(d.root().as_table().size() == 3);  // spec, x, y
  CHECK(error_of("&ParaDRAM x = 1, x%a = 2 /") ==
        "in.nml:1: \"x%a\": a component of a variable that is not a derived type");
  std::string deep = "&ParaDRAM a";
  for (int i = 0; i < 17; ++i) deep += "%a";
  CHECK(error_of(deep + " = 1 /") == "in.nml:1: more than 16 nested derived-type components");
  // inf and nan, as Fortran reads them.
  const Config f = nml("&ParaDRAM a = -Inf, b = NaN /");
  CHECK(std::isinf(f.find("a")->as_float()));
  CHECK(std::isnan(f.find("b")->as_float()));
}

TEST_CASE("namelist: element assignments to a large array stay linear", "[io]") {
  // 3000 element assignments to a 200000-element array: quadratic copying would take
  // seconds; in place it takes milliseconds.
  std::string text = "&ParaDRAM\n x(200000) = 1\n";
  for (int i = 1; i <= 3000; ++i) text += " x(" + std::to_string(i) + ") = " + std::to_string(i) + "\n";
  text += "/\n";
  // CPU time, not wall time: a loaded machine stretches the wall time, not the work.
  const std::clock_t t0 = std::clock();
  const Config c = nml(text);
  const double seconds = static_cast<double>(std::clock() - t0) / CLOCKS_PER_SEC;
  const auto& x = c.find("x")->as_array();
  REQUIRE(x.size() == 200000);
  CHECK(x[2999].as_int() == 3000);
  CHECK(x[199999].as_int() == 1);
  CHECK(x[5000].is_null());
  CHECK(seconds < 1.0);
}

TEST_CASE("namelist: errors name the file, the line and the problem", "[io]") {
  CHECK(error_of("&ParaDRAM x = 1\n") == "in.nml:1: namelist group &ParaDRAM is not closed by '/'");
  // The groups the file has are named (a misspelt group name was reported as no group at all).
  CHECK(error_of("&Other x = 1 /") == "in.nml: no namelist group &ParaDRAM found; the file has &Other (line 1)");
  CHECK(error_of("! input\n&ParaDRM x = 1 /\n&b /\n&c /\n&d /") ==
        "in.nml: no namelist group &ParaDRAM found; the file has &ParaDRM (line 2), &b (line 3), &c (line 4), ... "
        "(4 groups)");
  CHECK(error_of("x = 1\n") == "in.nml: no namelist group &ParaDRAM found");
  CHECK(error_of("&ParaDRAM\n x = abc /") ==
        "in.nml:2: key \"x\": \"abc\" is not a value: expected a number, a logical (.true./.false.) or a quoted "
        "string");
  CHECK(error_of("&ParaDRAM\n\n x 1 /") == "in.nml:3: expected '=' after \"x\", found '1'");
  CHECK(error_of("&ParaDRAM\n x = 'open /") == "in.nml:2: string is not closed");
  CHECK(error_of("&ParaDRAM x(0) = 1 /") == "in.nml:1: subscript 0 of \"x\": indices start at 1");
  CHECK(error_of("&ParaDRAM x(3:2) = 1 /") == "in.nml:1: empty section 3:2 of \"x\"");
  CHECK(error_of("&ParaDRAM x(1:2) = 1, 2, 3 /") == "in.nml:1: 3 values for x(1:2), which has 2 elements");
  CHECK(error_of("&ParaDRAM x(1,2,3) = 1 /") == "in.nml:1: \"x\" has 3 subscripts; at most 2 are supported");
  CHECK(error_of("&ParaDRAM x = 0*1 /") ==
        "in.nml:1: key \"x\": bad repeat count in \"0*1\": expected r*value with 1 <= r <= 1000000");
  CHECK(error_of("&ParaDRAM x = 4 * 1 /") ==
        "in.nml:1: key \"x\": bad repeat count in \"*\": expected r*value with 1 <= r <= 1000000");
  CHECK(error_of("&ParaDRAM x = 99999999999999999999999*1 /").find("bad repeat count") != std::string::npos);
  CHECK(error_of("&ParaDRAM x = 99999999*1 /").find("bad repeat count") != std::string::npos);
  CHECK(error_of("&ParaDRAM x = (1.0, 2.0) /") ==
        "in.nml:1: key \"x\": complex values like (1.0, 2.0) are not supported");
  CHECK(error_of("&ParaDRAM randomSeed = 99999999999999999999 /") ==
        "in.nml:1: key \"randomSeed\": integer 99999999999999999999 is out of range (64-bit integers: "
        "-9223372036854775808 to 9223372036854775807)");
  CHECK(error_of("&ParaDRAM 1x = 2 /") == "in.nml:1: expected a variable name in &ParaDRAM, found '1'");
  CHECK(error_of("&ParaDRAM x = 1 &other y = 2 /") ==
        "in.nml:1: namelist group &ParaDRAM (line 1) is not closed by '/' before &other");
  CHECK(error_of("&ParaDRAM x(1000001) = 1 /").find("exceeds the limit 1000000") != std::string::npos);
  CHECK(error_of("&ParaDRAM m(1,1) = 1\n m(2) = 3 /") == "in.nml:2: \"m\" was assigned with 2 subscripts, now with 1");
}

TEST_CASE("namelist: a ParaMonte file through a schema with aliases", "[io]") {
  Schema s("ParaDRAM");
  s.add_int("chain_size", 100000, "accepted states to collect").min(1).alias("chainSize");
  s.add_float("target_acceptance_rate", std::nullopt, "target acceptance").range(0, 1).alias("targetAcceptanceRate");
  s.add_float_list("domain_lower_limit", std::vector<double>{-1, -1, -1, -1}, "lower limits")
      .alias("domainLowerLimitVec");
  s.add_float_list("start_point", std::vector<double>{0, 0, 0, 0}, "start point").alias("startPointVec");
  s.add_bool("overwrite", false, "overwrite outputs").alias("overwriteRequested");
  s.add_string("scale_factor", "gelman", "proposal scale").alias("scaleFactor");
  s.add_float_matrix("cov", std::vector<std::vector<double>>{{1, 0}, {0, 1}}, "start covariance")
      .alias("proposalStartCovMat");

  const Config c = nml(R"(&ParaDRAM
    chainSize = 500
    targetAcceptanceRate = 0.3
    domainLowerLimitVec = 4*-1.e300
    startPointVec(3:4) = 1, 2
    OVERWRITEREQUESTED = .true.
    proposalStartCovMat(1,2) = 0.5
    proposalStartCovMat(2,1) = 0.5
/)");
  const Settings r = s.apply(c);
  CHECK(r.get_int("chain_size") == 500);
  CHECK(r.get_float("target_acceptance_rate") == 0.3);
  CHECK(r.get_float_list("domain_lower_limit") == std::vector<double>(4, -1e300));
  // Holes take the default's elements.
  CHECK(r.get_float_list("start_point") == std::vector<double>{0, 0, 1, 2});
  CHECK(r.get_bool("overwrite"));
  CHECK(r.is_default("scale_factor"));
  CHECK(r.origin("chain_size") == "in.nml:2");
  CHECK(r.get_float_matrix("cov") == std::vector<std::vector<double>>{{1, 0.5}, {0.5, 1}});
  // An element past the default's length (startPointVec(6) with 4 defaults): the message says
  // which elements the input sets.
  CHECK_THROWS_WITH(s.apply(nml("&ParaDRAM\n startPointVec(6) = 2 /")),
                    "in.nml:2: key \"startPointVec\" element 5 is not set and has no default (the input sets "
                    "element 6 of 6)");
  CHECK_THROWS_WITH(s.apply(nml("&ParaDRAM\n startPointVec(2) = 2\n startPointVec(6) = 3 /")),
                    "in.nml:3: key \"startPointVec\" element 5 is not set and has no default (the input sets "
                    "elements 2, 6 of 6)");
  CHECK_THROWS_WITH(s.apply(nml("&ParaDRAM\n proposalStartCovMat(3,3) = 2 /")),
                    "in.nml:2: key \"proposalStartCovMat\" element (1,3) is not set and has no default");
  CHECK_THROWS_WITH(s.apply(nml("&ParaDRAM\n proposalStartCovMat = 1, 0, 0, 1 /")),
                    "in.nml:2: key \"proposalStartCovMat\" is [1, 0, 0, 1] (a list), but must be a matrix (a list "
                    "of rows) of floats");

  try {
    s.apply(nml("&ParaDRAM\n chainSise = 5 /"));
    FAIL("no error");
  } catch (const herd::InputError& e) {
    CHECK(std::string(e.what()) == "in.nml:2: unknown key \"chainSise\"; did you mean \"chainSize\"?");
  }
  // A namelist is pointed at the namelist name: before, "chain_sise" got "chain_size" and
  // "overwrites" "overwrite", herd's TOML names, nearer by edit distance than the aliases.
  CHECK_THROWS_WITH(s.apply(nml("&ParaDRAM\n chain_sise = 5 /")),
                    "in.nml:2: unknown key \"chain_sise\"; did you mean \"chainSize\"?");
  CHECK_THROWS_WITH(s.apply(nml("&ParaDRAM\n overwrites = t /")),
                    "in.nml:2: unknown key \"overwrites\"; did you mean \"overwriteRequested\"?");
  // TOML keeps the TOML names.
  CHECK_THROWS_WITH(s.apply(herd::io::parse_toml("overwrites = true\n", "in.toml")),
                    "in.toml:1: unknown key \"overwrites\"; did you mean \"overwrite\"?");
  try {
    s.apply(nml("&ParaDRAM\n targetAcceptanceRate = 1.5 /"));
    FAIL("no error");
  } catch (const herd::InputError& e) {
    CHECK(std::string(e.what()) ==
          "in.nml:2: key \"targetAcceptanceRate\" is 1.5 (a float), but must be a float in [0, 1]");
  }
}

TEST_CASE("namelist: files are read and auto-detected", "[io]") {
  herd::test::TempDir tmp;
  { std::ofstream(tmp.file("in.nml")) << "! a ParaMonte input\n\n&ParaDRAM chainSize = 7 /\n"; }
  const Config c = read_config(tmp.file("in.nml"), "ParaDRAM");
  CHECK(c.case_insensitive());
  CHECK(c.find("chainsize")->as_int() == 7);
  CHECK(read_namelist(tmp.file("in.nml")).find("chainsize")->where.str() == tmp.file("in.nml") + ":3");
  CHECK_THROWS_AS(read_namelist(tmp.file("missing.nml")), herd::IoError);
  // Free text before the first group, which Fortran's read skips (it was read as TOML).
  { std::ofstream(tmp.file("notes.nml")) << "Header text, don't edit\n! a comment\n  &ParaDRAM chainSize = 8 /\n"; }
  CHECK(read_config(tmp.file("notes.nml"), "ParaDRAM").find("chainsize")->as_int() == 8);
  // TOML stays TOML, and a broken TOML file without a group keeps TOML's error.
  { std::ofstream(tmp.file("run.toml")) << "chain_size = 9\n"; }
  CHECK_FALSE(read_config(tmp.file("run.toml"), "ParaDRAM").case_insensitive());
  { std::ofstream(tmp.file("bad.toml")) << "chain_size = \n"; }
  CHECK_THROWS_WITH(read_config(tmp.file("bad.toml"), "ParaDRAM"), Catch::Contains("bad.toml:1"));
}

TEST_CASE("namelist and TOML: a matrix given as rows fills a list key in row-major order", "[io]") {
  Schema s("ParaDRAM");
  s.add_float_list("proposal_cov", std::nullopt, "covariance [d, d] row-major").alias("proposalStartCovMat");
  // Fortran order: m(1,1), m(2,1), m(1,2), m(2,2).
  const Settings a = s.apply(nml("&ParaDRAM\n proposalStartCovMat(1:2,1:2) = 1.0, 0.5, 0.3, 2.0 /"));
  CHECK(a.get_float_list("proposal_cov") == std::vector<double>{1.0, 0.3, 0.5, 2.0});
  const Settings b = s.apply(herd::io::parse_toml("proposal_cov = [[1.0, 0.3], [0.5, 2.0]]", "in.toml"));
  CHECK(b.get_float_list("proposal_cov") == std::vector<double>{1.0, 0.3, 0.5, 2.0});
  const Settings c = s.apply(herd::io::parse_toml("", "in.toml"), {"proposal_cov=[[1.0,0.3],[0.5,2.0]]"});
  CHECK(c.get_float_list("proposal_cov") == std::vector<double>{1.0, 0.3, 0.5, 2.0});
  // A flat list still works; a list mixing rows and numbers is still an error.
  CHECK(s.apply(herd::io::parse_toml("proposal_cov = [1.0, 2.0]", "in.toml")).get_float_list("proposal_cov") ==
        std::vector<double>{1.0, 2.0});
  CHECK_THROWS_AS(s.apply(herd::io::parse_toml("proposal_cov = [[1.0], 2.0]", "in.toml")), herd::InputError);
}
