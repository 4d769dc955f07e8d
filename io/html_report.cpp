// Self-contained HTML reports with Vega plots (see html_report.hpp).
#include "herd/io/html_report.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <iterator>
#include <span>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "herd/core/error.hpp"
#include "herd/io/atomic_file.hpp"

namespace herd::io {

namespace detail {
/// One Vega module: its CommonJS name and its minified source (generated: vega_js.cpp).
struct VegaModule {
  const char* name;
  const char* text;
};
extern const VegaModule kVegaModules[];
extern const std::size_t kVegaModuleCount;
}  // namespace detail

namespace {

using Json = nlohmann::ordered_json;

// Tableau 10, Vega's "category" scheme: fixed here so a series keeps its colour across panels.
constexpr const char* kPalette[] = {"#4c78a8", "#f58518", "#e45756", "#72b7b2", "#54a24b",
                                    "#eeca3b", "#b279a2", "#ff9da6", "#9d755d", "#bab0ac"};

std::string number(double v) {
  std::string s;
  append_number_6g(s, v);
  return s;
}

void check_plots(const std::vector<Plot>& plots, int columns) {
  HERD_REQUIRE(columns >= 1, "html report: a figure has {} columns, but needs at least 1", columns);
  for (const Plot& p : plots)
    for (const PlotSeries& s : p.series)
      HERD_REQUIRE(s.x.size() == s.y.size(), "html report: series \"{}\" of plot \"{}\" has {} x and {} y values",
                   s.name, p.title, s.x.size(), s.y.size());
}

// The CSS of every report: readable tables, notes coloured by level, figures that wrap.
constexpr const char* kStyle = R"css(
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:1.5em auto;max-width:1200px;padding:0 1em;color:#222;line-height:1.4}
h1{font-size:1.5em;margin-bottom:.1em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ddd;padding-bottom:.2em}
.sub{color:#555;margin-top:0}
nav{font-size:.9em;margin:.8em 0}nav a{margin-right:1em;color:#36c;text-decoration:none}
table{border-collapse:collapse;font-size:.85em;margin:.5em 0}th,td{border:1px solid #ddd;padding:2px 8px;text-align:right}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}
tr.warning td{background:#fff4d6}tr.problem td{background:#fde2e1}
.note{padding:.4em .8em;margin:.4em 0;border-left:4px solid #999;background:#f7f7f7}
.note.ok{border-color:#54a24b;background:#eef7ec}.note.warning{border-color:#e6a700;background:#fff7e0}
.note.problem{border-color:#d62728;background:#fdecea}.note.info{border-color:#4c78a8;background:#eef3f9}
.note b{margin-right:.4em}
pre{background:#f7f7f7;padding:.6em;overflow-x:auto;font-size:.8em;max-height:30em}
figure{margin:1em 0}figcaption{font-size:.85em;color:#555;max-width:60em}
.herd-plot{overflow-x:auto}.herd-error{color:#d62728}
)css";

// Renders every figure once the page is parsed; a failure is written into its figure.
constexpr const char* kRenderScript = R"js(
(function(){
  function failed(e, err){ e.setAttribute('data-error', String(err)); e.className += ' herd-error'; e.textContent = 'plot failed: ' + String(err); }
  var specs = document.querySelectorAll('script.herd-vega');
  for (var i = 0; i < specs.length; ++i) {
    var el = specs[i].previousElementSibling;
    try {
      if (typeof vega === 'undefined') throw new Error('the Vega runtime did not load');
      var view = new vega.View(vega.parse(JSON.parse(specs[i].textContent)), {renderer: 'canvas', container: el, hover: false});
      (function(e, v){ v.runAsync().then(function(){ e.setAttribute('data-rendered', '1'); })
        .catch(function(err){ failed(e, err); }); })(el, view);
    } catch (err) {
      failed(el, err);
    }
  }
})();
)js";

std::string build_runtime() {
  std::string js =
      "/* Vega 5 (https://vega.github.io/vega/, BSD-3-Clause; Debian's libjs-vega), loaded through a small "
      "CommonJS shim: each module's exports are kept by name and merged into the global `vega`, as the vega "
      "package's index does. */\n(function(){\nvar mods={},alias={'vega-selections':'vega-selection'};\n"
      "function req(n){n=alias[n]||n;if(!(n in mods))throw new Error('Vega module '+n+' is not embedded');"
      "return mods[n];}\nfunction def(n,f){var module={exports:{}};f(module,module.exports,req);"
      "mods[n]=module.exports;}\n";
  std::vector<std::string> names;
  std::size_t total = js.size() + 4096;
  for (std::size_t i = 0; i < detail::kVegaModuleCount; ++i) total += std::strlen(detail::kVegaModules[i].text) + 128;
  js.reserve(total);  // one allocation: each module is appended in place (about 450 KB in all)
  for (std::size_t i = 0; i < detail::kVegaModuleCount; ++i) {
    const detail::VegaModule& m = detail::kVegaModules[i];
    js += "def('";
    js += m.name;
    js += "',function(module,exports,require){\n";
    // The module's text with "</script" written "<\/script" (it cannot close the element).
    const std::string_view text = m.text;
    for (std::size_t from = 0;;) {
      const std::size_t p = text.find("</script", from);
      js.append(text.substr(from, p == std::string_view::npos ? std::string_view::npos : p - from));
      if (p == std::string_view::npos) break;
      js += "<\\/script";
      from = p + 8;
    }
    js += "\n});\n";
    names.emplace_back(m.name);
  }
  js += "var vega={};\n";
  for (const auto& n : names) js += fmt::format("Object.assign(vega,mods['{}']);\n", n);
  // The transforms a specification names are looked up in vega-dataflow's registry.
  js += "var tx=mods['vega-dataflow'].transforms;\n";
  for (const char* n : {"vega-transforms", "vega-view-transforms", "vega-encode"})
    if (std::find(names.begin(), names.end(), n) != names.end())
      js += fmt::format("Object.assign(tx,mods['{}']);\n", n);
  js += "window.vega=vega;\n})();\n";
  return js;
}

// Appends one dataset (a JSON object's text) to `data`, the comma-separated body of the
// spec's "data" array.
void add_dataset(std::string& data, const std::string& item) {
  if (!data.empty()) data += ',';
  data += item;
}

Json panel(const Plot& p, std::size_t index, std::string& data) {
  Json g;
  g["type"] = "group";
  g["name"] = fmt::format("panel{}", index);
  // A nested group sees the top level's width/height signals unless it defines its own:
  // its scales' "width"/"height" ranges use these.
  g["signals"] = Json::array({{{"name", "width"}, {"value", p.width}}, {{"name", "height"}, {"value", p.height}}});
  g["encode"]["update"] = {{"width", {{"value", p.width}}}, {"height", {{"value", p.height}}}};
  if (p.empty) return g;
  // Titles no longer than the panel (and its axis), cut with an ellipsis: in a grid every
  // column is as wide as its widest cell, so one long variable name widened the whole corner
  // plot past the page.
  if (!p.title.empty())
    g["title"] = {{"text", p.title}, {"fontSize", 11}, {"fontWeight", "normal"}, {"limit", p.width + 30}};
  // Marks are clipped to the plotting area when an axis range is fixed.
  const bool fixed_range = (std::isfinite(p.x_min) && std::isfinite(p.x_max) && p.x_min < p.x_max) ||
                           (std::isfinite(p.y_min) && std::isfinite(p.y_max) && p.y_min < p.y_max);
  Json xfields = Json::array(), yfields = Json::array();
  double y_lo = INFINITY, y_hi = -INFINITY;  // of the series' points
  Json marks = Json::array();
  std::vector<std::string> names, colors;
  for (std::size_t s = 0; s < p.series.size(); ++s) {
    const PlotSeries& ser = p.series[s];
    const std::string color = ser.color.empty() ? kPalette[s % std::size(kPalette)] : ser.color;
    names.push_back(ser.name);
    colors.push_back(color);
    // The dataset's JSON text written directly, as nlohmann's dump of {"name", "herd_series",
    // "herd_points", "values", "format"} would: the CSV's only character to escape is the
    // newline (finite numbers are digits, '-', '.', 'e' and '+').
    const std::string dname = fmt::format("p{}_s{}", index, s);
    std::string item =
        "{\"name\":" + Json(dname).dump() + ",\"herd_series\":" + Json(ser.name).dump() + ",\"herd_points\":";
    const std::size_t count_at = item.size();
    item += ",\"values\":\"x,y\\n";
    item.reserve(item.size() + 24 * ser.x.size() + 80);
    std::size_t kept = 0;
    for (std::size_t i = 0; i < ser.x.size(); ++i) {
      const double x = ser.x[i], y = ser.y[i];
      if (!std::isfinite(x) || !std::isfinite(y) || (p.log_y && y <= 0)) continue;
      append_number_6g(item, x);
      item += ',';
      append_number_6g(item, y);
      item += "\\n";
      ++kept;
      y_lo = std::min(y_lo, y);
      y_hi = std::max(y_hi, y);
    }
    item.insert(count_at, fmt::format("{}", kept));
    item += R"(","format":{"type":"csv","parse":{"x":"number","y":"number"}}})";
    add_dataset(data, item);
    if (kept == 0) continue;  // an empty dataset would give the scales no domain
    xfields.push_back({{"data", dname}, {"field", "x"}});
    yfields.push_back({{"data", dname}, {"field", "y"}});
    Json enc = {{"x", {{"scale", "x"}, {"field", "x"}}}, {"y", {{"scale", "y"}, {"field", "y"}}}};
    Json m;
    if (ser.mark == PlotSeries::Mark::kPoint) {
      m["type"] = "symbol";
      enc["fill"] = {{"value", color}};
      enc["size"] = {{"value", 6}};
      enc["fillOpacity"] = {{"value", ser.opacity}};
    } else {
      m["type"] = "line";
      enc["stroke"] = {{"value", color}};
      enc["strokeWidth"] = {{"value", 1.2}};
      enc["strokeOpacity"] = {{"value", ser.opacity}};
      if (ser.mark == PlotSeries::Mark::kStep) enc["interpolate"] = {{"value", "step-after"}};
      if (ser.dashed) enc["strokeDash"] = {{"value", Json::array({4, 3})}};
    }
    m["from"] = {{"data", dname}};
    m["encode"]["enter"] = enc;
    if (fixed_range) m["clip"] = true;
    marks.push_back(m);
  }
  if (!p.y_rules.empty()) {
    const std::string dname = fmt::format("p{}_rules", index);
    std::string csv = "y\n";
    for (double y : p.y_rules)
      if (std::isfinite(y) && (!p.log_y || y > 0)) csv += number(y) + "\n";
    add_dataset(
        data,
        Json({{"name", dname}, {"values", csv}, {"format", {{"type", "csv"}, {"parse", {{"y", "number"}}}}}}).dump());
    yfields.push_back({{"data", dname}, {"field", "y"}});
    marks.push_back({{"type", "rule"},
                     {"from", {{"data", dname}}},
                     {"encode",
                      {{"enter",
                        {{"x", {{"value", 0}}},
                         {"x2", {{"signal", "width"}}},
                         {"y", {{"scale", "y"}, {"field", "y"}}},
                         {"stroke", {{"value", "#d62728"}}},
                         {"strokeDash", {{"value", Json::array({5, 4})}}},
                         {"strokeWidth", {{"value", 1}}}}}}}});
  }
  if (xfields.empty()) {
    g["marks"] = Json::array({{{"type", "text"},
                               {"encode",
                                {{"enter",
                                  {{"x", {{"value", 10}}},
                                   {"y", {{"value", 20}}},
                                   {"text", {{"value", "no finite values to plot"}}},
                                   {"fill", {{"value", "#888"}}}}}}}}});
    return g;
  }
  Json xs = {{"name", "x"},   {"type", "linear"}, {"range", "width"},
             {"zero", false}, {"nice", true},     {"domain", {{"fields", xfields}}}};
  Json ys = {{"name", "y"},
             {"type", p.log_y ? "log" : "linear"},
             {"range", "height"},
             {"nice", true},
             {"domain", {{"fields", yfields}}}};
  if (!p.log_y) ys["zero"] = p.zero;
  // Constant data (and no rule elsewhere) would give the y scale an empty domain: widen it.
  if (y_lo == y_hi && p.y_rules.empty() && !p.log_y) {
    const double half = y_lo == 0.0 ? 1.0 : 0.5 * std::abs(y_lo);
    ys["domain"] = Json::array({p.zero ? std::min(0.0, y_lo - half) : y_lo - half, y_lo + half});
  }
  if (std::isfinite(p.x_min) && std::isfinite(p.x_max) && p.x_min < p.x_max) {
    xs["domain"] = Json::array({p.x_min, p.x_max});
    xs["nice"] = false;
  }
  if (std::isfinite(p.y_min) && std::isfinite(p.y_max) && p.y_min < p.y_max) {
    ys["domain"] = Json::array({p.y_min, p.y_max});
    ys["nice"] = false;
    ys["zero"] = false;
  }
  Json scales = Json::array({xs, ys});
  if (p.legend) scales.push_back({{"name", "color"}, {"type", "ordinal"}, {"domain", names}, {"range", colors}});
  g["scales"] = scales;
  if (p.axes) {
    g["axes"] = Json::array({{{"orient", "bottom"},
                              {"scale", "x"},
                              {"title", p.x_label},
                              {"titleLimit", p.width},
                              {"tickCount", 5},
                              {"labelFontSize", 9},
                              {"titleFontSize", 10},
                              {"labelOverlap", true}},
                             {{"orient", "left"},
                              {"scale", "y"},
                              {"title", p.y_label},
                              {"titleLimit", p.height},
                              {"tickCount", 5},
                              {"labelFontSize", 9},
                              {"titleFontSize", 10},
                              {"labelOverlap", true}}});
  } else {
    g["encode"]["update"]["stroke"] = {{"value", "#ddd"}};
  }
  if (p.legend)
    g["legends"] = Json::array({{{"stroke", "color"},
                                 {"fill", "color"},
                                 {"orient", "right"},
                                 {"labelFontSize", 9},
                                 {"symbolType", "stroke"},
                                 {"labelLimit", 120}}});
  g["marks"] = marks;
  return g;
}

// Appends `json` to `out` with "</" written "<\/" (a JSON escape: the text cannot close its
// <script> element), without a copy of the whole text.
void append_json_for_script(std::string& out, std::string_view json) {
  for (std::size_t from = 0;;) {
    const std::size_t p = json.find("</", from);
    if (p == std::string_view::npos) {
      out.append(json.substr(from));
      return;
    }
    out.append(json.substr(from, p - from));
    out += "<\\/";
    from = p + 2;
  }
}

}  // namespace

std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

const std::string& vega_runtime_javascript() {
  static const std::string js = build_runtime();
  return js;
}

namespace {

/// 10^0 .. 10^22: the powers of ten that are exact doubles.
constexpr double kPow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                             1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/// "%.6g" of `v` into `buf` (32 bytes) from one correctly rounded scaling of |v| by an exact
/// power of ten into p in [1e5, 1e6) (error below 1.2e-10, so p's rounding to an integer is
/// the exact value's wherever p's fraction is not within 1e-6 of one half and p not within
/// 1e-6 of 1e5 or 1e6); nullptr for those few values and outside [1e-15, 1e21) (zero,
/// subnormals, infinities, NaN), which std::to_chars then writes.
char* format_6g_scaled(char* buf, double v) {
  const double a = std::fabs(v);
  if (!(a >= 1e-15 && a < 1e21)) return nullptr;
  std::uint64_t bits = 0;
  std::memcpy(&bits, &a, sizeof bits);
  const int binary_exponent = static_cast<int>(bits >> 52) - 1023;  // a in [2^b, 2^(b + 1))
  int e = (binary_exponent * 78913) >> 18;  // floor(b log10(2)): the decimal exponent or one less
  double p = 0;
  for (int tries = 0;; ++tries) {
    if (tries == 3 || e < -15 || e > 20) return nullptr;
    p = e <= 5 ? a * kPow10[5 - e] : a / kPow10[e - 5];
    if (p < 1e5) {
      --e;
    } else if (p >= 1e6) {
      ++e;
    } else {
      break;
    }
  }
  if (p - 1e5 < 1e-6 || 1e6 - p < 1e-6) return nullptr;
  auto digits = static_cast<std::uint32_t>(p);  // floor (p > 0)
  const double frac = p - static_cast<double>(digits);
  if (std::fabs(frac - 0.5) < 1e-6) return nullptr;
  if (frac > 0.5) ++digits;
  if (digits == 1000000) {
    digits = 100000;
    ++e;
  }
  std::array<char, 6> d{};
  for (int i = 5; i >= 0; --i) {
    d[static_cast<std::size_t>(i)] = static_cast<char>('0' + digits % 10);
    digits /= 10;
  }
  int nd = 6;  // the significant digits kept (trailing zeros dropped)
  while (nd > 1 && d[static_cast<std::size_t>(nd - 1)] == '0') --nd;
  const auto digit = [&](int i) { return d[static_cast<std::size_t>(i)]; };
  char* o = buf;
  if (v < 0) *o++ = '-';
  if (e >= -4 && e < 6) {  // fixed notation
    if (e >= 0) {
      for (int i = 0; i <= e; ++i) *o++ = digit(i);
      if (nd > e + 1) {
        *o++ = '.';
        for (int i = e + 1; i < nd; ++i) *o++ = digit(i);
      }
    } else {
      *o++ = '0';
      *o++ = '.';
      for (int i = -1; i > e; --i) *o++ = '0';
      for (int i = 0; i < nd; ++i) *o++ = digit(i);
    }
  } else {  // d.ddddde+XX
    *o++ = digit(0);
    if (nd > 1) {
      *o++ = '.';
      for (int i = 1; i < nd; ++i) *o++ = digit(i);
    }
    *o++ = 'e';
    *o++ = e < 0 ? '-' : '+';
    const int x = e < 0 ? -e : e;  // at most 20
    *o++ = static_cast<char>('0' + x / 10);
    *o++ = static_cast<char>('0' + x % 10);
  }
  return o;
}

}  // namespace

void append_number_6g(std::string& out, double v) {
  char buf[32];  // the longest: "-2.22507e-308"
  char* end = format_6g_scaled(buf, v);
  if (end == nullptr) end = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general, 6).ptr;
  out.append(buf, end);
}

std::vector<std::size_t> thin_indices(std::size_t n, std::size_t max_points) {
  std::vector<std::size_t> out;
  if (n == 0) return out;
  if (max_points < 2 || n <= max_points) {
    if (max_points < 2 && n > 1) return {0, n - 1};
    out.resize(n);
    for (std::size_t i = 0; i < n; ++i) out[i] = i;
    return out;
  }
  const std::size_t stride = (n + max_points - 2) / (max_points - 1);
  for (std::size_t i = 0; i < n; i += stride) out.push_back(i);
  if (out.back() != n - 1) out.push_back(n - 1);
  return out;
}

namespace {

/// Refuses a figure name with a character other than letters, digits, '_' and '-'.
void check_figure_name(std::string_view name) {
  for (char ch : name)
    HERD_REQUIRE(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-',
                 "html report: figure name \"{}\" may hold only letters, digits, '_' and '-'", name);
}

}  // namespace

std::string vega_spec(const std::vector<Plot>& plots, int columns) {
  check_plots(plots, columns);
  Json spec;
  spec["$schema"] = "https://vega.github.io/schema/vega/v5.json";  // an identifier, never fetched
  spec["padding"] = 8;
  spec["autosize"] = "pad";
  spec["background"] = "white";
  spec["layout"] = {{"columns", std::min<int>(columns, std::max<int>(1, static_cast<int>(plots.size())))},
                    {"padding", {{"row", 22}, {"column", 24}}},
                    {"bounds", "full"},
                    {"align", "all"}};
  std::string data;  // the datasets' JSON texts, comma-separated
  Json marks = Json::array();
  for (std::size_t i = 0; i < plots.size(); ++i) marks.push_back(panel(plots[i], i, data));
  // spec.dump() with "data" and "marks" last: the same bytes as adding them to the tree.
  std::string text = spec.dump();
  text.pop_back();  // the closing '}'
  text.reserve(text.size() + data.size() + 64);
  text += ",\"data\":[";
  text += data;
  text += "],\"marks\":";
  text += marks.dump();
  text += '}';
  return text;
}

HtmlReport::HtmlReport(std::string title, std::string subtitle)
    : title_(std::move(title)), subtitle_(std::move(subtitle)) {}

void HtmlReport::heading(std::string_view text) {
  const std::string anchor = fmt::format("s{}", toc_.size() + 1);
  toc_.emplace_back(anchor, std::string(text));
  body_ += fmt::format("<h2 id=\"{}\">{}</h2>\n", anchor, html_escape(text));
}

void HtmlReport::paragraph(std::string_view text) { body_ += "<p>" + html_escape(text) + "</p>\n"; }

void HtmlReport::note(Level level, std::string_view text) {
  static constexpr const char* kClass[] = {"ok", "info", "warning", "problem"};
  static constexpr const char* kLabel[] = {"OK", "Note", "Warning", "Problem"};
  const auto l = static_cast<std::size_t>(level);
  body_ += fmt::format("<div class=\"note {}\"><b>{}:</b>{}</div>\n", kClass[l], kLabel[l], html_escape(text));
}

void HtmlReport::preformatted(std::string_view text) { body_ += "<pre>" + html_escape(text) + "</pre>\n"; }

void HtmlReport::table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
                       const std::vector<Level>& row_levels) {
  HERD_REQUIRE(row_levels.empty() || row_levels.size() == rows.size(),
               "html report: a table has {} rows but {} row levels", rows.size(), row_levels.size());
  std::string t = "<table>\n";
  if (std::any_of(header.begin(), header.end(), [](const std::string& h) { return !h.empty(); })) {
    t += "<thead><tr>";
    for (const auto& h : header) t += "<th>" + html_escape(h) + "</th>";
    t += "</tr></thead>\n";
  }
  t += "<tbody>\n";
  for (std::size_t r = 0; r < rows.size(); ++r) {
    HERD_REQUIRE(rows[r].size() == header.size(), "html report: table row {} has {} cells, but the header has {}",
                 r + 1, rows[r].size(), header.size());
    const Level l = row_levels.empty() ? Level::kInfo : row_levels[r];
    t += l == Level::kWarning ? "<tr class=\"warning\">" : l == Level::kProblem ? "<tr class=\"problem\">" : "<tr>";
    for (const auto& c : rows[r]) t += "<td>" + html_escape(c) + "</td>";
    t += "</tr>\n";
  }
  body_ += t + "</tbody></table>\n";
}

void HtmlReport::figure(const std::vector<Plot>& plots, int columns, std::string_view caption, std::string_view name) {
  check_figure_name(name);
  figure_spec(vega_spec(plots, columns), caption, name);
}

void HtmlReport::figure_spec(const std::string& spec, std::string_view caption, std::string_view name) {
  check_figure_name(name);
  ++figures_;
  // Appended in place (the spec is most of the document: no copies of it).
  body_.reserve(body_.size() + spec.size() + caption.size() + 300);
  fmt::format_to(std::back_inserter(body_),
                 "<figure id=\"fig{0}\" data-name=\"{1}\"><div class=\"herd-plot\"><noscript>This plot needs "
                 "JavaScript.</noscript></div>"
                 "<script type=\"application/json\" class=\"herd-vega\" data-figure=\"{0}\">",
                 figures_, name);
  append_json_for_script(body_, spec);
  fmt::format_to(std::back_inserter(body_), "</script><figcaption>Figure {}. {}</figcaption></figure>\n", figures_,
                 html_escape(caption));
}

std::string HtmlReport::html() const {
  std::string h;
  h.reserve(vega_runtime_javascript().size() + body_.size() + 8192);  // one allocation, no regrowth copies
  h += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  h += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  h += "<meta name=\"generator\" content=\"herd\">\n";
  h += "<title>" + html_escape(title_) + "</title>\n<style>" + std::string(kStyle) + "</style>\n";
  h += "<script>\n";
  h += vega_runtime_javascript();
  h += "</script>\n</head>\n<body>\n";
  h += "<h1>" + html_escape(title_) + "</h1>\n";
  if (!subtitle_.empty()) h += "<p class=\"sub\">" + html_escape(subtitle_) + "</p>\n";
  if (!toc_.empty()) {
    h += "<nav>";
    for (const auto& [anchor, text] : toc_) h += "<a href=\"#" + anchor + "\">" + html_escape(text) + "</a>";
    h += "</nav>\n";
  }
  h += body_;
  h += "<script>";
  h += kRenderScript;
  h += "</script>\n</body>\n</html>\n";
  return h;
}

void HtmlReport::write(const std::string& path) const {
  const std::string h = html();
  write_file_atomic(path, std::as_bytes(std::span<const char>(h.data(), h.size())));
}

}  // namespace herd::io
