// Writes a small HTML report with known figures (tests/io/CMakeLists.txt checks it with
// tests/support/check_html_report.py and renders it with headless Chromium).
// Usage: io_html_report_writer OUT.html
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>

#include "herd/io/html_report.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: io_html_report_writer OUT.html\n");
    return 2;
  }
  try {
    using herd::io::Plot;
    using herd::io::PlotSeries;
    herd::io::HtmlReport r("io report test <&>", "three figures with known series");
    r.heading("Tables");
    r.note(herd::io::HtmlReport::Level::kOk, "an ok note");
    r.note(herd::io::HtmlReport::Level::kWarning, "a warning note");
    r.table({"name", "value"}, {{"a", "1"}, {"b<", "2"}},
            {herd::io::HtmlReport::Level::kInfo, herd::io::HtmlReport::Level::kWarning});
    r.heading("Plots");
    // Figure "lines": 2 panels; panel 0 has 2 line series of 100 points, panel 1 one step series of 10.
    Plot a;
    a.title = "sine and cosine";
    a.x_label = "t";
    a.y_label = "value";
    a.legend = true;
    PlotSeries s{"sin", {}, {}}, c{"cos", {}, {}};
    for (int i = 0; i < 100; ++i) {
      s.x.push_back(i * 0.1);
      s.y.push_back(std::sin(i * 0.1));
      c.x.push_back(i * 0.1);
      c.y.push_back(std::cos(i * 0.1));
    }
    a.series = {s, c};
    a.y_rules = {0.5};
    Plot b;
    b.title = "steps";
    b.x_label = "bin";
    PlotSeries st{"counts", {}, {}, PlotSeries::Mark::kStep};
    for (int i = 0; i < 10; ++i) {
      st.x.push_back(i);
      st.y.push_back(1 + i % 3);
    }
    b.series = {st};
    b.zero = true;
    r.figure({a, b}, 2, "two panels", "lines");
    // Figure "scatter": one panel, 500 points, plus a NaN that is left out, on a log axis.
    Plot p;
    p.title = "scatter";
    p.log_y = true;
    PlotSeries pts{"points", {}, {}, PlotSeries::Mark::kPoint};
    for (int i = 0; i < 500; ++i) {
      pts.x.push_back(std::cos(i * 0.7) * i);
      pts.y.push_back(1.0 + i);
    }
    pts.x.push_back(NAN);
    pts.y.push_back(1.0);
    p.series = {pts};
    r.figure({p}, 1, "500 points", "scatter");
    const std::filesystem::path out(argv[1]);
    if (out.has_parent_path()) std::filesystem::create_directories(out.parent_path());
    r.write(argv[1]);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "io_html_report_writer: %s\n", e.what());
    return 1;
  }
}
