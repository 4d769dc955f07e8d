// HTML report builder (io/include/herd/io/html_report.hpp).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>

#include <fmt/format.h>

#include "herd/core/error.hpp"
#include "herd/io/html_report.hpp"
#include "temp_dir.hpp"

using herd::io::HtmlReport;
using herd::io::Plot;
using herd::io::PlotSeries;

TEST_CASE("html_escape replaces the five markup characters", "[io]") {
  CHECK(herd::io::html_escape("a<b>&\"c'") == "a&lt;b&gt;&amp;&quot;c&#39;");
  CHECK(herd::io::html_escape("plain") == "plain");
}

TEST_CASE("thin_indices keeps at most max_points evenly spaced indices and the last one", "[io]") {
  CHECK(herd::io::thin_indices(0, 10).empty());
  CHECK(herd::io::thin_indices(5, 10) == std::vector<std::size_t>{0, 1, 2, 3, 4});
  const auto t = herd::io::thin_indices(1000000, 1000);
  CHECK(t.size() <= 1001);
  CHECK(t.size() >= 900);
  CHECK(t.front() == 0);
  CHECK(t.back() == 999999);
  for (std::size_t i = 1; i + 1 < t.size(); ++i) CHECK(t[i] - t[i - 1] == t[1] - t[0]);
}

TEST_CASE("vega_spec writes one group per panel and one CSV dataset per series", "[io]") {
  Plot a;
  a.series.push_back({"s0", {0, 1, 2}, {1, 2, 3}});
  a.series.push_back({"s1", {0, 1, NAN}, {1, 2, 3}});  // the NaN point is left out
  a.y_rules = {2.5};
  Plot b;
  b.log_y = true;
  b.series.push_back({"pos", {0, 1, 2}, {0.0, 1e-3, 10}, PlotSeries::Mark::kPoint});  // y = 0 left out on log y
  Plot e;
  e.empty = true;
  const auto spec = nlohmann::json::parse(herd::io::vega_spec({a, b, e}, 2));
  REQUIRE(spec["marks"].size() == 3);
  CHECK(spec["layout"]["columns"] == 2);
  std::vector<std::pair<std::string, int>> got;
  for (const auto& d : spec["data"])
    if (d.contains("herd_series")) got.emplace_back(d["herd_series"], d["herd_points"]);
  CHECK(got == std::vector<std::pair<std::string, int>>{{"s0", 3}, {"s1", 2}, {"pos", 2}});
  CHECK(spec["data"][0]["values"] == "x,y\n0,1\n1,2\n2,3\n");
  CHECK(spec["marks"][1]["scales"][1]["type"] == "log");
  CHECK(spec["marks"][1]["marks"][0]["type"] == "symbol");
  CHECK_FALSE(spec["marks"][2].contains("marks"));  // the empty cell draws nothing
  // The rule's dataset takes part in the y domain.
  CHECK(spec["marks"][0]["scales"][1]["domain"]["fields"].size() == 3);
}

TEST_CASE("append_number_6g writes fmt's {:.6g} byte for byte", "[io]") {
  const auto same = [](double v) {
    std::string s = "<";  // appends, keeping what is there
    herd::io::append_number_6g(s, v);
    return s.front() == '<' && s.substr(1) == fmt::format("{:.6g}", v);
  };
  constexpr double kInf = std::numeric_limits<double>::infinity();
  for (double v : {0.0,
                   -0.0,
                   1.0,
                   -1.0,
                   0.1,
                   123456.0,
                   1234565.0,
                   999999.5,
                   9999995.0,
                   1e-5,
                   0.0001,
                   0.000099999995,
                   1e100,
                   -1e-300,
                   5e-324,
                   -5e-324,
                   2.2250738585072009e-308,
                   2.2250738585072014e-308,
                   std::numeric_limits<double>::max(),
                   -std::numeric_limits<double>::max(),
                   kInf,
                   -kInf,
                   std::numeric_limits<double>::quiet_NaN(),
                   -std::numeric_limits<double>::quiet_NaN()})
    CHECK(same(v));
  std::mt19937_64 g(7);
  std::normal_distribution<double> normal;
  std::uniform_int_distribution<int> exponent(-330, 308);
  long differ = 0;
  for (int i = 0; i < 300000; ++i) {
    double v = 0;
    if (i % 3 == 0) {
      v = normal(g);
    } else if (i % 3 == 1) {  // any bit pattern: subnormals, NaN payloads, infinities
      const std::uint64_t bits = g();
      std::memcpy(&v, &bits, sizeof v);
    } else {
      v = normal(g) * std::pow(10.0, exponent(g));
    }
    if (!same(v)) ++differ;
  }
  CHECK(differ == 0);
  // Ties and 6-digit values at every decimal exponent the scaled path takes, with their
  // neighbours, and decimal grids (where the scaled value lands on or next to a half).
  for (int k = -16; k <= 21; ++k)
    for (long m = 100000; m < 1000000; m += 997) {
      const double scale = std::pow(10.0, k - 5);
      for (double base : {(static_cast<double>(m) + 0.5) * scale, static_cast<double>(m) * scale})
        for (double v : {base, std::nextafter(base, 0.0), std::nextafter(base, INFINITY)})
          if (!same(v) || !same(-v)) ++differ;
    }
  for (long i = -200000; i <= 200000; ++i)
    for (double v : {i * 0.001, i * 1e-7, i * 0.5e-6, i * 1e-5 + 0.5e-5, i * 12345.0})
      if (!same(v)) ++differ;
  CHECK(differ == 0);
}

// A grid's column is as wide as its widest cell: one long variable name in a corner plot's
// axis titles widened every column, and the last columns were scrolled out of the page.
TEST_CASE("vega_spec cuts titles longer than their panel with an ellipsis", "[io]") {
  Plot a;
  a.title = "log_of_the_effective_temperature_kelvin";
  a.x_label = a.title;
  a.y_label = a.title;
  a.width = 90;
  a.height = 70;
  a.series.push_back({"s", {0, 1}, {1, 2}});
  const auto spec = nlohmann::json::parse(herd::io::vega_spec({a}, 1));
  const auto& g = spec["marks"][0];
  CHECK(g["title"]["text"] == a.title);  // the whole name, drawn at most this wide
  CHECK(g["title"]["limit"] == 90 + 30);
  CHECK(g["axes"][0]["orient"] == "bottom");
  CHECK(g["axes"][0]["titleLimit"] == 90);
  CHECK(g["axes"][1]["orient"] == "left");
  CHECK(g["axes"][1]["titleLimit"] == 70);
}

TEST_CASE("vega_spec's text is nlohmann's dump of its own tree, with fmt's CSV numbers", "[io]") {
  // The datasets are written directly (not through a JSON tree): parsing and dumping again
  // gives the same bytes, and the CSV holds every finite point as "{:.6g},{:.6g}".
  Plot a;
  a.title = "a \"quoted\" title </script>";
  PlotSeries s1("s\u00e9ries \"1\"\n", {0.1, -0.0, 1e-310, 3.0, NAN}, {1e300, 2.5, -7e-8, INFINITY, 1.0});
  PlotSeries s2("points", {1, 2}, {3, 4}, PlotSeries::Mark::kPoint);
  a.series = {s1, s2};
  a.y_rules = {1.01, NAN};
  Plot b;
  b.empty = true;
  Plot c;  // no finite point
  c.series.emplace_back("none", std::vector<double>{NAN}, std::vector<double>{1.0});
  const std::string spec = herd::io::vega_spec({a, b, c}, 2);
  const auto j = nlohmann::ordered_json::parse(spec);
  CHECK(j.dump() == spec);
  REQUIRE(j["data"].size() == 4);
  CHECK(j["data"][0]["herd_series"] == s1.name);
  CHECK(j["data"][0]["herd_points"] == 3);
  CHECK(j["data"][0]["values"] ==
        fmt::format("x,y\n{:.6g},{:.6g}\n{:.6g},{:.6g}\n{:.6g},{:.6g}\n", 0.1, 1e300, -0.0, 2.5, 1e-310, -7e-8));
  CHECK(j["data"][1]["values"] == "x,y\n1,3\n2,4\n");
  CHECK(j["data"][2]["values"] == "y\n1.01\n");
  CHECK(j["data"][3]["herd_points"] == 0);
  CHECK(herd::io::vega_spec({}, 1) == nlohmann::ordered_json::parse(herd::io::vega_spec({}, 1)).dump());
}

TEST_CASE("HtmlReport rejects malformed tables, series and figure names", "[io]") {
  HtmlReport r("t");
  CHECK_THROWS_AS(r.table({"a", "b"}, {{"1"}}), herd::InputError);
  Plot p;
  p.series.push_back({"bad", {0, 1}, {1}});
  CHECK_THROWS_AS(r.figure({p}, 1, "c", "f"), herd::InputError);
  CHECK_THROWS_AS(r.figure({}, 0, "c", "f"), herd::InputError);
  CHECK_THROWS_AS(r.figure({}, 1, "c", "a b"), herd::InputError);
  CHECK_THROWS_AS(r.figure_spec("{}", "c", "a b"), herd::InputError);
  CHECK(r.figures() == 0);
}

TEST_CASE("HtmlReport::figure_spec of vega_spec is figure's document byte for byte", "[io]") {
  Plot a, b;
  a.title = "a <b>";
  a.series.push_back({"s", {0, 1, 2}, {0.5, -1e-7, 3e12}});
  b.series.push_back({"t", {1, 2}, {2, 1}, herd::io::PlotSeries::Mark::kPoint});
  HtmlReport by_plots("t"), by_spec("t");
  by_plots.figure({a}, 1, "first & one", "one");
  by_plots.figure({a, b}, 2, "second", "two");
  by_spec.figure_spec(herd::io::vega_spec({a}, 1), "first & one", "one");
  by_spec.figure_spec(herd::io::vega_spec({a, b}, 2), "second", "two");
  CHECK(by_spec.figures() == 2);
  CHECK(by_spec.html() == by_plots.html());
  CHECK(by_plots.html().find("Figure 2. second") != std::string::npos);
}

TEST_CASE("HtmlReport writes one self-contained document with escaped text and the Vega runtime", "[io]") {
  herd::test::TempDir dir;
  HtmlReport r("title <x>", "sub");
  r.heading("Section & more");
  r.note(HtmlReport::Level::kWarning, "R-hat > 1.01");
  Plot p;
  p.series.push_back({"s", {0, 1}, {0, 1}});
  r.figure({p}, 1, "cap", "one");
  const std::string path = dir.file("r.html");
  r.write(path);
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string h = ss.str();
  CHECK(h.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(h.find("<title>title &lt;x&gt;</title>") != std::string::npos);
  CHECK(h.find("Section &amp; more") != std::string::npos);
  CHECK(h.find("R-hat &gt; 1.01") != std::string::npos);
  CHECK(h.find("data-name=\"one\"") != std::string::npos);
  CHECK(h.find("window.vega=vega") != std::string::npos);
  CHECK(h.find("def('vega-view'") != std::string::npos);
  CHECK(h.find("<script src") == std::string::npos);  // nothing loaded from elsewhere
  CHECK(h.find("<link") == std::string::npos);
  CHECK(herd::io::vega_runtime_javascript().size() > 300000);
}

TEST_CASE("vega_spec widens the y range of constant data and fixes given axis ranges", "[io]") {
  Plot c;
  c.series.push_back({"flat", {0, 1, 2}, {0.1, 0.1, 0.1}});
  Plot f;
  f.series.push_back({"s", {0, 1}, {0, 1}});
  f.x_min = -2;
  f.x_max = 2;
  const auto spec = nlohmann::json::parse(herd::io::vega_spec({c, f}, 2));
  const auto& dom = spec["marks"][0]["scales"][1]["domain"];
  REQUIRE(dom.is_array());
  CHECK(dom[0].get<double>() == Approx(0.05));
  CHECK(dom[1].get<double>() == Approx(0.15));
  CHECK(spec["marks"][1]["scales"][0]["domain"] == nlohmann::json::array({-2, 2}));
  CHECK(spec["marks"][1]["marks"][0]["clip"] == true);
}
