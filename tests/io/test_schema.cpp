// TOML input through a schema: typed keys, defaults, ranges, choices, overrides, reports,
// and the one-line message of each kind of mistake.
#include <algorithm>
#include <cmath>
#include <limits>

#include <catch2/catch.hpp>

#include <fstream>

#include "herd/core/error.hpp"
#include "herd/io/namelist.hpp"
#include "herd/io/schema.hpp"
#include "herd/io/toml_reader.hpp"
#include "temp_dir.hpp"

using namespace herd::io;

namespace {

Schema sampler_schema() {
  Schema s("sampler");
  s.add_int("chain_size", 1000, "accepted states to collect").min(1);
  s.add_float("target_acceptance", 0.234, "target acceptance rate").range(0, 1);
  s.add_string("method", "dram", "sampling method").choices({"dram", "am", "dr", "mh"});
  s.add_bool("overwrite", false, "overwrite existing outputs");
  s.add_string("model", std::nullopt, "model name").required();
  s.add_float_list("start", std::vector<double>{0.0, 0.0}, "start point").length(1, 8);
  s.add_int_list("seeds", std::nullopt, "optional per-chain seeds");
  s.add_string_list("outputs", std::vector<std::string>{"chain"}, "outputs to write")
      .choices({"chain", "sample", "report"});
  s.add_float("proposal.scale", 2.38, "proposal scale factor").min(0, true);
  s.add_int("proposal.delayed_rejection_stages", 1, "DR stages").range(0, 10);
  s.add_float_matrix("proposal.cov", std::nullopt, "start covariance").length(1, 4).min(-10);
  return s;
}

Config toml(std::string_view text) { return parse_toml(text, "run.toml"); }

std::string error_of(std::string_view text, const std::vector<std::string>& overrides = {}) {
  try {
    sampler_schema().apply(toml(text), overrides);
  } catch (const herd::InputError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("schema: TOML values resolve with defaults and origins", "[io]") {
  const Config c = toml(R"(model = "gauss"
chain_size = 5000
start = [1, 2.5, -3]

[proposal]
scale = 1.5
)");
  const Settings r = sampler_schema().apply(c);
  CHECK(r.get_int("chain_size") == 5000);
  CHECK(r.origin("chain_size") == "run.toml:2");
  CHECK(r.get_float("target_acceptance") == 0.234);
  CHECK(r.is_default("target_acceptance"));
  CHECK(r.origin("target_acceptance") == "default");
  CHECK(r.get_string("method") == "dram");
  CHECK(r.get_float_list("start") == std::vector<double>{1.0, 2.5, -3.0});
  CHECK(r.get_float("proposal.scale") == 1.5);
  CHECK(r.origin("proposal.scale") == "run.toml:6");
  CHECK(r.get_int("proposal.delayed_rejection_stages") == 1);
  CHECK_FALSE(r.has("seeds"));
  CHECK_THROWS_AS(r.get_int_list("seeds"), herd::InputError);
  CHECK(r.get_string_list("outputs") == std::vector<std::string>{"chain"});
  const std::string report = r.describe();
  CHECK(report.find("chain_size = 5000  # run.toml:2; accepted states to collect\n") != std::string::npos);
  CHECK(report.find("target_acceptance = 0.234  # default; target acceptance rate\n") != std::string::npos);
  CHECK(report.find("# seeds = (unset)  # optional per-chain seeds\n") != std::string::npos);
  CHECK(report.find("start = [1.0, 2.5, -3.0]  # run.toml:3") != std::string::npos);
  const std::string help = sampler_schema().help();
  CHECK(help.find("chain_size : an integer >= 1 (default 1000)") != std::string::npos);
  CHECK(help.find("model : a string (required)") != std::string::npos);
}

TEST_CASE("schema: --set overrides are typed by the schema", "[io]") {
  const Config c = toml("model = \"gauss\"\nchain_size = 10\n");
  const Settings r = sampler_schema().apply(c, {"chain_size=20", "proposal.scale = 0.5", "start=[1, 2, 3]",
                                                "overwrite=yes", "method=am", "outputs=chain,report", "seeds=1,2"});
  CHECK(r.get_int("chain_size") == 20);
  CHECK(r.origin("chain_size") == "--set chain_size=20");
  CHECK(r.get_float("proposal.scale") == 0.5);
  CHECK(r.get_float_list("start") == std::vector<double>{1, 2, 3});
  CHECK(r.get_bool("overwrite"));
  CHECK(r.get_string("method") == "am");
  CHECK(r.get_string_list("outputs") == std::vector<std::string>{"chain", "report"});
  CHECK(r.get_int_list("seeds") == std::vector<std::int64_t>{1, 2});
  // Integral floats are accepted as integers, integers as floats.
  const Settings r2 = sampler_schema().apply(toml("model = 'm'\nchain_size = 1e4\ntarget_acceptance = 0"));
  CHECK(r2.get_int("chain_size") == 10000);
  CHECK(r2.get_float("target_acceptance") == 0.0);
}

TEST_CASE("schema: --set lists: commas inside quotes do not split, nesting is never flattened silently", "[io]") {
  Schema s("lists");
  s.add_string_list("names", std::vector<std::string>{"a"}, "names");
  s.add_int_list("hidden", std::vector<std::int64_t>{64}, "widths");
  const Config c = parse_toml("", "run.toml");
  CHECK(s.apply(c, {"names=[\"x,y\", \"z\"]"}).get_string_list("names") == std::vector<std::string>{"x,y", "z"});
  CHECK(s.apply(c, {"names=\"x,y\", 'z'"}).get_string_list("names") == std::vector<std::string>{"x,y", "z"});
  CHECK(s.apply(c, {"names=[p, q]"}).get_string_list("names") == std::vector<std::string>{"p", "q"});
  CHECK(s.apply(c, {"hidden=[[1, 2], [3, 4]]"}).get_int_list("hidden") == std::vector<std::int64_t>{1, 2, 3, 4});
  const auto error = [&](const std::string& set) {
    try {
      s.apply(c, {set});
    } catch (const herd::InputError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  // Ragged rows (TOML or not) and stray brackets are refused with the key and the text.
  CHECK(error("hidden=[[64], [64, 32]]").find("key \"hidden\"") != std::string::npos);
  CHECK(error("hidden=[64, [32]]").find("key \"hidden\"") != std::string::npos);
  CHECK(error("names=[a, [b]]").find("key \"names\"") != std::string::npos);
  CHECK(error("hidden=64]").find("key \"hidden\"") != std::string::npos);
  // A key of more parts than a TOML file may nest is refused before any table is made.
  std::string deep = "a";
  for (int i = 0; i < 5000; ++i) deep += ".a";
  CHECK(error(deep + "=1").find("at most 64 are allowed") != std::string::npos);
  // The same refusal for ragged rows written in a TOML file.
  CHECK_THROWS_AS(s.apply(parse_toml("hidden = [[64], [64, 32]]\n", "run.toml")), herd::InputError);
  // The message gives the rows' lengths (it printed the value with its holes).
  CHECK(error("hidden=[[64], [64, 32]]").find("is a matrix whose rows have 1, 2 elements, but must be") !=
        std::string::npos);
}

TEST_CASE("schema: each kind of mistake has a one-line message", "[io]") {
  // Unknown key, with the nearest valid name.
  CHECK(error_of("model = 'm'\n\n\n\n\n\nchain_sise = 3\n") ==
        "run.toml:7: unknown key \"chain_sise\"; did you mean \"chain_size\"?");
  CHECK(error_of("model = 'm'\n[proposal]\nscal = 3\n") ==
        "run.toml:3: unknown key \"proposal.scal\"; did you mean \"proposal.scale\"?");
  // A name like no key gets no suggestion rather than a misleading one.
  CHECK(error_of("model = 'm'\nmpiname = 3\n") ==
        "run.toml:2: unknown key \"mpiname\" (no key is spelled like it; --help-keys lists them)");
  CHECK(error_of("model = 'm'\n[proposa]\nscale = 3\n") ==
        "run.toml:2: unknown key \"proposa\"; did you mean \"proposal\"?");
  // A key outside its table, or in another table, is pointed to the key of that name.
  CHECK(error_of("model = 'm'\nscale = 3\n") == "run.toml:2: unknown key \"scale\"; did you mean \"proposal.scale\"?");
  CHECK(error_of("model = 'm'\n[proposal]\nchain_size = 2\n") ==
        "run.toml:3: unknown key \"proposal.chain_size\"; did you mean \"chain_size\"?");
  // A name cut short is pointed to the keys it begins (4 characters or more), not to the
  // nearest name by edit distance ("target" is nearer "start" than "target_acceptance").
  CHECK(error_of("model = 'm'\ntarget = 0.3\n") ==
        "run.toml:2: unknown key \"target\"; did you mean \"target_acceptance\"?");
  CHECK(error_of("model = 'm'\n[proposal]\ndelayed = 2\n") ==
        "run.toml:3: unknown key \"proposal.delayed\"; did you mean \"proposal.delayed_rejection_stages\"?");
  // An abbreviation, far from every name by edit distance, is pointed to the keys whose name
  // holds its letters in order ("tgt_acc" is 5 edits from "start", 10 from
  // "target_acceptance"; "dr_stg" is nearest "proposal.cov").
  CHECK(error_of("model = 'm'\ntgt_acc = 0.3\n") ==
        "run.toml:2: unknown key \"tgt_acc\"; did you mean \"target_acceptance\"?");
  CHECK(error_of("model = 'm'\n[proposal]\ndr_stg = 2\n") ==
        "run.toml:3: unknown key \"proposal.dr_stg\"; did you mean \"proposal.delayed_rejection_stages\"?");
  // In a table, its own keys come first: "proposal.sd" abbreviates none of them, so those
  // with its first letter ("proposal.scale"), not the top-level "start" or "seeds".
  CHECK(error_of("model = 'm'\n[proposal]\nsd = 2\n") ==
        "run.toml:3: unknown key \"proposal.sd\"; did you mean \"proposal.scale\"?");
  // A bare word where a value belongs: toml++'s message, and the string it would be quoted;
  // other syntax errors keep toml++'s message alone.
  const auto parse_error = [](std::string_view text) {
    try {
      parse_toml(text, "run.toml");
    } catch (const herd::InputError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  CHECK_THAT(parse_error("model = 'm'\nmethod = dram # DRAM\n"),
             Catch::StartsWith("run.toml:2:10: ") && Catch::EndsWith(" (a string value must be quoted: \"dram\")"));
  CHECK_THAT(parse_error("model = 'm'\nstart = [1, x2]\n"),
             Catch::StartsWith("run.toml:2:13: ") && Catch::EndsWith(" (a string value must be quoted: \"x2\")"));
  CHECK_THAT(parse_error("model = 'm'\nchain_size = @3\n"),
             Catch::StartsWith("run.toml:2:") && !Catch::Contains("must be quoted"));
  // Wrong type.
  CHECK(error_of("model = 'm'\nchain_size = \"abc\"\n") ==
        "run.toml:2: key \"chain_size\" is \"abc\" (a string), but must be an integer >= 1");
  CHECK(error_of("model = 'm'\nchain_size = 2.5\n") ==
        "run.toml:2: key \"chain_size\" is 2.5 (a float), but must be an integer >= 1");
  CHECK(error_of("model = 'm'\noverwrite = 1\n") ==
        "run.toml:2: key \"overwrite\" is 1 (an integer), but must be a logical (true or false)");
  CHECK(error_of("model = 'm'\nstart = [1, \"x\"]\n") ==
        "run.toml:2: key \"start\" element 2 is \"x\" (a string), but must be a list of 1 to 8 floats");
  // A single value for a list key is a one-element list: its problem names the key, not "element 1".
  CHECK(error_of("model = 'm'\nstart = \"1.0\"\n") ==
        "run.toml:2: key \"start\" is \"1.0\" (a string), but must be a list of 1 to 8 floats");
  CHECK(error_of("model = 'm'\nstart = [\"1.0\"]\n") ==
        "run.toml:2: key \"start\" element 1 is \"1.0\" (a string), but must be a list of 1 to 8 floats");
  CHECK(error_of("model = 'm'\n", {"start=x"}) ==
        "--set start=x: key \"start\" is \"x\" (text), but must be a list of 1 to 8 floats");
  CHECK(error_of("model = 'm'\n", {"start=[x]"}) ==
        "--set start=[x]: key \"start\" element 1 is \"x\" (text), but must be a list of 1 to 8 floats");
  // An element of a --set list in TOML syntax is named by its value, not by the whole text.
  CHECK(error_of("model = 'm'\n", {"start=[1, \"x\"]"}) ==
        "--set start=[1, \"x\"]: key \"start\" element 2 is \"x\" (a string), but must be a list of 1 to 8 floats");
  CHECK(error_of("model = 'm'\nchain_size = [1, 2]\n") ==
        "run.toml:2: key \"chain_size\" is [1, 2] (a list), but must be an integer >= 1");
  CHECK(error_of("model = 'm'\nproposal = 3\n") ==
        "run.toml:2: key \"proposal\" is 3 (an integer), but must be a table with keys \"scale\", "
        "\"delayed_rejection_stages\", \"cov\"");
  // Range.
  CHECK(error_of("model = 'm'\nchain_size = 0\n") ==
        "run.toml:2: key \"chain_size\" is 0 (an integer), but must be an integer >= 1");
  CHECK(error_of("model = 'm'\ntarget_acceptance = 1.5\n") ==
        "run.toml:2: key \"target_acceptance\" is 1.5 (a float), but must be a float in [0, 1]");
  CHECK(error_of("model = 'm'\ntarget_acceptance = nan\n") ==
        "run.toml:2: key \"target_acceptance\" is nan (a float), but must be a float in [0, 1]");
  CHECK(error_of("model = 'm'\n[proposal]\nscale = 0.0\n") ==
        "run.toml:3: key \"proposal.scale\" is 0.0 (a float), but must be a float > 0");
  // Choices, with a suggestion.
  CHECK(error_of("model = 'm'\nmethod = \"drma\"\n") ==
        "run.toml:2: key \"method\" is \"drma\" (a string), but must be one of \"dram\", \"am\", \"dr\", \"mh\"; "
        "did you mean \"dram\"?");
  CHECK(error_of("model = 'm'\noutputs = ['chain', 'samples']\n") ==
        "run.toml:2: key \"outputs\" element 2 is \"samples\" (a string), but must be a list of strings from "
        "\"chain\", \"sample\", \"report\"; did you mean \"sample\"?");
  // List length.
  CHECK(error_of("model = 'm'\nstart = []\n") ==
        "run.toml:2: key \"start\" has 0 elements, but must be a list of 1 to 8 floats");
  // Missing required key.
  CHECK(error_of("chain_size = 3\n") == "run.toml: missing required key \"model\" (a string; model name)");
  // Overrides.
  CHECK(error_of("model = 'm'\n", {"chain_size=abc"}) ==
        "--set chain_size=abc: key \"chain_size\" is \"abc\" (text), but must be an integer >= 1");
  CHECK(error_of("model = 'm'\n", {"chain_sise=3"}) ==
        "--set chain_sise=3: unknown key \"chain_sise\"; did you mean \"chain_size\"?");
  CHECK(error_of("model = 'm'\n", {"chain_size"}) ==
        "--set \"chain_size\": expected key=value, e.g. --set chain_size=<value>");
  CHECK(error_of("model = 'm'\n", {"=3"}) == "--set \"=3\": expected key=value, e.g. --set key=<value>");
  // Several problems: all of them, one per line, in file order.
  {
    const std::string e = error_of("chain_size = 0\nmethod = 'x'\n");
    CHECK(e.rfind("run.toml:1: key \"chain_size\" is 0 (an integer), but must be an integer >= 1\n", 0) == 0);
    CHECK(std::count(e.begin(), e.end(), '\n') == 2);
    CHECK(e.find("\nrun.toml:2: ") != std::string::npos);
  }
  CHECK(sampler_schema().check(toml("chain_size = 0\nmethod = 'x'\n")).size() == 3);
  // TOML syntax errors carry file, line and column.
  CHECK_THROWS_WITH(toml("a = 1\nb = = 2\n"), Catch::StartsWith("run.toml:2:"));
  CHECK_THROWS_AS(toml("a = [1, 2\n"), herd::InputError);
}

TEST_CASE("schema: matrices are lists of rows", "[io]") {
  const Settings r = sampler_schema().apply(toml("model = 'm'\n[proposal]\ncov = [[1, 0.5], [0.5, 2]]\n"));
  CHECK(r.get_float_matrix("proposal.cov") == std::vector<std::vector<double>>{{1, 0.5}, {0.5, 2}});
  const Settings o = sampler_schema().apply(toml("model = 'm'\n"), {"proposal.cov=[[4]]"});
  CHECK(o.get_float_matrix("proposal.cov") == std::vector<std::vector<double>>{{4}});
  CHECK(error_of("model = 'm'\n[proposal]\ncov = [[1, 0.5], [0.5]]\n") ==
        "run.toml:3: key \"proposal.cov\" element (2,2) is not set and has no default");
  CHECK(error_of("model = 'm'\n[proposal]\ncov = [[1, -11]]\n") ==
        "run.toml:3: key \"proposal.cov\" element (1,2) is -11 (an integer), but must be a matrix (a list of rows) "
        "of floats >= -10 with 1 to 4 rows");
  CHECK(error_of("model = 'm'\n", {"proposal.cov=[[1,"}) ==
        "--set proposal.cov=[[1,: key \"proposal.cov\" is \"[[1,\" (text), but must be a matrix (a list of rows) of "
        "floats >= -10 with 1 to 4 rows");
  CHECK(error_of("model = 'm'\n[proposal]\ncov = []\n") ==
        "run.toml:3: key \"proposal.cov\" has 0 rows, but must be a matrix (a list of rows) of floats >= -10 with 1 "
        "to 4 rows");
}

TEST_CASE("schema: declaration mistakes are caught", "[io]") {
  Schema s;
  s.add_int("a", 1, "doc").alias("b");
  CHECK_THROWS_AS(s.add_int("a", 1, "again"), herd::InputError);
  CHECK_THROWS_AS(s.add_float("B", 1.0, "alias clash"), herd::InputError);
}

TEST_CASE("schema: TOML files are read with locations", "[io]") {
  herd::test::TempDir tmp;
  { std::ofstream(tmp.file("run.toml")) << "# comment\nmodel = \"gauss\"\n[proposal]\nscale = 2\n"; }
  const Config c = read_config(tmp.file("run.toml"));
  CHECK_FALSE(c.case_insensitive());
  CHECK(c.find("proposal.scale")->where.str() == tmp.file("run.toml") + ":4");
  const Settings r = sampler_schema().apply(c);
  CHECK(r.get_float("proposal.scale") == 2.0);
  CHECK_THROWS_AS(read_toml(tmp.file("nope.toml")), herd::IoError);
}

TEST_CASE("schema: --set values in messages are the numbers given, and every message names the key", "[io]") {
  // Before: "--set ...: key \"x\" is \"40\" (text), ..." and, for an integer too large for
  // 64 bits, "value 1e+20 (a float), but an integer was expected" without the key.
  CHECK(error_of("model = 'm'\n", {"proposal.delayed_rejection_stages=40"}) ==
        "--set proposal.delayed_rejection_stages=40: key \"proposal.delayed_rejection_stages\" is 40 (an integer), but "
        "must be an integer in [0, 10]");
  CHECK(error_of("model = 'm'\n", {"chain_size=99999999999999999999"}) ==
        "--set chain_size=99999999999999999999: key \"chain_size\" is 1e+20 (a float), but must be an integer >= 1");
  CHECK(error_of("model = 'm'\n", {"chain_size=2.5"}) ==
        "--set chain_size=2.5: key \"chain_size\" is 2.5 (a float), but must be an integer >= 1");
  CHECK(error_of("model = 'm'\n", {"start=[1, 2, x]"}) ==
        "--set start=[1, 2, x]: key \"start\" element 3 is \"x\" (text), but must be a list of 1 to 8 floats");
  CHECK(error_of("model = 'm'\n", {"target_acceptance=1.5"}) ==
        "--set target_acceptance=1.5: key \"target_acceptance\" is 1.5 (a float), but must be a float in [0, 1]");
  // An integral float is an integer.
  const Settings s = sampler_schema().apply(toml("model = 'm'\n"), {"chain_size=1e3"});
  CHECK(s.get_int("chain_size") == 1000);
}

TEST_CASE("schema: written() gives the key as the input spelled it", "[io]") {
  Schema s("t");
  s.add_float_list("proposal_cov", std::nullopt, "start covariance").alias("proposalStartCovMat");
  s.add_int("chain_size", 10, "size").alias("chainSize");
  Config nml = parse_toml("proposalStartCovMat = [1.0]\n", "run.toml");
  const Settings st = s.apply(nml);
  CHECK(st.written("proposal_cov") == "proposalStartCovMat");
  CHECK(st.written("chain_size") == "chain_size");  // default
}

TEST_CASE("schema: finite() refuses NaN and infinities, naming the key", "[io]") {
  herd::io::Schema s("t");
  s.add_float("b", 0.03, "curvature").finite();
  s.add_float_list("mean", std::nullopt, "mean").finite();
  s.add_float_matrix("cov", std::nullopt, "covariance").finite();
  auto err = [&](std::string_view text, const std::vector<std::string>& sets = {}) -> std::string {
    try {
      s.apply(toml(text), sets);
    } catch (const herd::InputError& e) {
      return e.what();
    }
    return "(no error)";
  };
  CHECK(err("b = nan\n") == "run.toml:1: key \"b\" is nan (a float), but must be a finite float");
  CHECK(err("mean = [0.0, inf]\n") ==
        "run.toml:1: key \"mean\" element 2 is inf (a float), but must be a list of finite floats");
  CHECK(err("cov = [[1.0, 0.0], [0.0, -inf]]\n").find("key \"cov\"") != std::string::npos);
  CHECK(err("", {"b=nan"}) == "--set b=nan: key \"b\" is nan (a float), but must be a finite float");
  CHECK(err("b = 1e300\nmean = [1.0, -2.0]\ncov = [[1.0]]\n") == "(no error)");
}

namespace {

std::string toml_error(const std::string& text) {
  try {
    parse_toml(text, "deep.toml");
  } catch (const herd::InputError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

// toml++ 3.3 recurses once per level: 40,000 dotted-key levels overflowed the stack.
TEST_CASE("TOML: nesting deeper than 64 levels is refused before parsing, in every form", "[io]") {
  auto dotted = [](int n) {
    std::string t = "a";
    for (int i = 1; i < n; ++i) t += ".a";
    return t + " = 1\n";
  };
  auto arrays = [](int n) {
    return "x = " + std::string(static_cast<std::size_t>(n), '[') + "1" +
           std::string(static_cast<std::size_t>(n), ']') + "\n";
  };
  auto inline_tables = [](int n) {
    std::string t = "x = ";
    for (int i = 0; i < n; ++i) t += "{a = ";
    t += "1";
    for (int i = 0; i < n; ++i) t += "}";
    return t + "\n";
  };
  auto header = [](int n) {
    std::string t = "[a";
    for (int i = 1; i < n; ++i) t += ".a";
    return t + "]\nb = 1\n";
  };
  for (const int n : {40000, 1000, 66}) {
    INFO("levels: " << n);
    CHECK_THAT(toml_error("ok = 1\n" + dotted(n)), Catch::Matchers::StartsWith("deep.toml:2: TOML nesting of") &&
                                                       Catch::Matchers::Contains("but at most 64 are accepted"));
    CHECK_THAT(toml_error(arrays(n)), Catch::Matchers::Contains("at most 64"));
    CHECK_THAT(toml_error(inline_tables(n)), Catch::Matchers::Contains("at most 64"));
    CHECK_THAT(toml_error(header(n)), Catch::Matchers::Contains("at most 64"));
  }
  // Up to the limit is fine; dots, brackets and braces in strings and comments do not count.
  CHECK(toml_error(dotted(60)) == "(no error)");
  CHECK(toml_error(arrays(60)) == "(no error)");
  CHECK(toml_error(inline_tables(60)) == "(no error)");
  CHECK(toml_error("x = [[1.5, 2.5], [3.5]]\ns = \"" + std::string(500, '[') + std::string(500, '.') + "\"\n# " +
                   std::string(500, '{') + "\nt = '''" + std::string(500, '.') + "'''\nu = \"\"\"\n" +
                   std::string(300, '[') + "\"\"\"\n") == "(no error)");
}

TEST_CASE("schema: number_as_text() takes a number given for a string key as its text", "[io]") {
  Schema s("sampler");
  s.add_string("scale", "gelman", "a number or a word").number_as_text();
  s.add_string("name", "x", "a word only");
  const Settings r = s.apply(parse_toml("scale = 2.0\n", "run.toml"));
  CHECK(r.get_string("scale") == "2.0");
  CHECK(r.origin("scale") == "run.toml:1");
  CHECK(s.apply(parse_toml("scale = 3\n", "run.toml")).get_string("scale") == "3");
  CHECK(s.apply(parse_toml("scale = \"0.5*gelman\"\n", "run.toml")).get_string("scale") == "0.5*gelman");
  // Other kinds are still refused, and so is a number for a key without it.
  CHECK_THROWS_WITH(s.apply(parse_toml("scale = true\n", "run.toml")), Catch::Contains("must be a string"));
  CHECK_THROWS_WITH(s.apply(parse_toml("name = 2.0\n", "run.toml")), Catch::Contains("must be a string"));
}

TEST_CASE("schema: unset_elements() reads a namelist's partial arrays as Fortran does", "[io]") {
  Schema s("t");
  s.add_float_list("start", std::nullopt, "start point").alias("startPointVec").finite().unset_elements();
  s.add_float_list("lower", std::nullopt, "lower bounds").unset_elements();
  s.add_float_list("mean", std::nullopt, "mean");  // no unset elements: holes refused as before
  const auto nml = [](std::string_view body) {
    return parse_namelist("&ParaDRAM\n" + std::string(body) + "/\n", "r.nml");
  };
  const auto is_nan = [](double x) { return std::isnan(x); };
  // Holes read as NaN, the list as long as its last element given; partial() says so.
  Settings st = s.apply(nml("startPointVec(2:3) = 1.5, 2.5\nlower = 3*-1.0\n"));
  const std::vector<double> start = st.get_float_list("start");
  REQUIRE(start.size() == 3);
  CHECK(is_nan(start[0]));
  CHECK(start[1] == 1.5);
  CHECK(start[2] == 2.5);
  CHECK(st.partial("start"));
  CHECK(st.get_float_list("lower") == std::vector<double>{-1.0, -1.0, -1.0});
  CHECK(st.partial("lower"));
  // A blank between commas is a hole too.
  st = s.apply(nml("lower = 1.0, , 3.0\n"));
  CHECK(is_nan(st.get_float_list("lower")[1]));
  // The resolved input shows the line commented out, NaN marking the unset elements.
  CHECK(st.describe().find("# lower = [1.0, nan, 3.0]  # r.nml:2; nan: elements the namelist leaves unset") !=
        std::string::npos);
  // A NaN written in the input is refused, never read as unset.
  const auto err = [&](const Config& c, const std::vector<std::string>& sets = {}) -> std::string {
    try {
      s.apply(c, sets);
    } catch (const herd::InputError& e) {
      return e.what();
    }
    return "(no error)";
  };
  CHECK(err(nml("lower(2) = NaN\n")).find("key \"lower\" element 2 is nan") != std::string::npos);
  CHECK(err(nml("lower(2) = NaN\n")).find("must be a list of floats (not NaN)") != std::string::npos);
  // Keys without unset_elements() refuse holes as before.
  CHECK(err(nml("mean(2) = 1.0\n")).find("element 1 is not set and has no default") != std::string::npos);
  // TOML and --set give whole lists: not partial.
  st = s.apply(toml("start = [1.0, 2.0]\n"), {"lower=[1,2]"});
  CHECK_FALSE(st.partial("start"));
  CHECK_FALSE(st.partial("lower"));
  st = s.apply(nml("lower(1) = 0.5\n"), {"start=1,2"});
  CHECK_FALSE(st.partial("start"));  // --set over a namelist
  CHECK(st.partial("lower"));
  // A string list's holes read as empty strings; an empty string written is refused.
  {
    Schema names("t");
    names.add_string_list("names", std::nullopt, "names").alias("variableNameList").unset_elements();
    const Settings ns = names.apply(nml("variableNameList(2) = 'b'\n"));
    CHECK(ns.get_string_list("names") == std::vector<std::string>{"", "b"});
    CHECK(ns.partial("names"));
    CHECK(ns.describe().find("# names = [\"\", \"b\"]  # r.nml:2; \"\": elements the namelist leaves unset") !=
          std::string::npos);
    try {
      names.apply(nml("variableNameList = 'a', ''\n"));
      FAIL("no error");
    } catch (const herd::InputError& e) {
      CHECK_THAT(e.what(), Catch::Contains("element 2 is \"\" (a string), but must be a list of strings (not empty)"));
    }
  }
  // Matrix elements (m(1,2) = 0.5 alone, ragged rows): the rows padded with unset elements to
  // the longest and flattened, with their column count. Before, ragged rows were refused.
  st = s.apply(nml("lower(1,2) = 0.5\nlower(3,1) = 0.25\n"));
  CHECK(st.partial("lower"));
  CHECK(st.matrix_columns("lower") == 2);
  const std::vector<double> m = st.get_float_list("lower");
  REQUIRE(m.size() == 6);
  CHECK(is_nan(m[0]));
  CHECK(m[1] == 0.5);
  CHECK(is_nan(m[2]));
  CHECK(is_nan(m[3]));
  CHECK(m[4] == 0.25);
  CHECK(is_nan(m[5]));
  CHECK(s.apply(nml("lower = 1, 2\n")).matrix_columns("lower") == 0);
  // Keys without unset_elements() still refuse ragged rows.
  CHECK(err(nml("mean(1,2) = 0.5\nmean(2,1) = 0.5\n")).find("is a matrix whose rows have 2, 1 elements") !=
        std::string::npos);
  // describe() shows the program's layout of a partial key where it gives one (a list shorter
  // than its full length, padded with NaN: commented out), else the list as given.
  st = s.apply(nml("lower = 2*1.0\nstartPointVec = 1.0, 2.0\n"));
  const std::vector<double> padded{1.0, 1.0, std::numeric_limits<double>::quiet_NaN()};
  const std::string shown = st.describe(
      {}, [&](const std::string& key) -> const std::vector<double>* { return key == "lower" ? &padded : nullptr; });
  CHECK(shown.find("# lower = [1.0, 1.0, nan]  # r.nml:2; nan: elements the namelist leaves unset") !=
        std::string::npos);
  CHECK(shown.rfind("start = [1.0, 2.0]  # r.nml:3;", 0) == 0);
}
