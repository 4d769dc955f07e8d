// HTML report builder (io/include/herd/io/html_report.hpp).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <sstream>

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
