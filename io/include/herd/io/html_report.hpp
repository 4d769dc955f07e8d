#pragma once
#include "herd/core/cxx20.hpp"  // C++20 or one clear error
/// @file html_report.hpp
/// Self-contained HTML reports (DESIGN.md §7): one file with inlined styles, tables, text
/// and plots, readable offline in any browser. Plots are Vega 5 specifications
/// (https://vega.github.io/vega/) with their data inlined as CSV text; the Vega runtime,
/// from Debian's libjs-vega, is embedded in the library at build time and inlined in every
/// report, so nothing is fetched at view time and an installed herd needs no JavaScript
/// package at run time. Vega draws on a canvas from a declarative JSON specification: the
/// specifications in a report are data a test can inspect (series, points), and the
/// drawing (axes, ticks, scales, legends) is a maintained library's, not ours.
///
/// Thread-safety: an `HtmlReport` is used by one thread at a time; the free functions are
/// reentrant.

#include <cstddef>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace herd::io {

/// One series of a plot: points (x[i], y[i]) drawn as a line, points or steps. Points with
/// a non-finite coordinate (or y <= 0 on a logarithmic y axis) are left out.
struct PlotSeries {
  /// How a series is drawn.
  enum class Mark {
    kLine,   ///< straight segments between consecutive points
    kPoint,  ///< one small filled circle per point (scatter)
    kStep,   ///< a step line (histograms, rank plots): the value holds until the next x
  };
  PlotSeries() = default;
  /// A series named `name` with points (x[i], y[i]) drawn as `mark`.
  PlotSeries(std::string name_, std::vector<double> x_, std::vector<double> y_, Mark mark_ = Mark::kLine)
      : name(std::move(name_)), x(std::move(x_)), y(std::move(y_)), mark(mark_) {}
  std::string name;       ///< legend label (also the `name` of the Vega dataset's series)
  std::vector<double> x;  ///< abscissae
  std::vector<double> y;  ///< ordinates, same size as `x`
  Mark mark = Mark::kLine;
  double opacity = 1.0;  ///< 0..1
  std::string color;     ///< CSS colour; empty: the next of Vega's "category" (Tableau 10) colours
  bool dashed = false;   ///< dashed line (reference curves)
};

/// One panel: axes, labelled, holding series and horizontal reference lines.
struct Plot {
  std::string title;
  std::string x_label, y_label;
  std::vector<PlotSeries> series;
  std::vector<double> y_rules;  ///< dashed horizontal lines at these y (e.g. an R-hat limit)
  bool log_y = false;           ///< logarithmic y axis
  bool legend = false;          ///< show a legend of the series names
  bool empty = false;           ///< a blank cell of a grid (the upper triangle of a corner plot)
  bool zero = false;            ///< include y = 0 in the y domain
  bool axes = true;             ///< draw axes
  /// Fixed axis ranges [min, max] (used when both are finite and min < max; else from the data).
  double x_min = std::numeric_limits<double>::quiet_NaN(), x_max = std::numeric_limits<double>::quiet_NaN();
  double y_min = std::numeric_limits<double>::quiet_NaN(), y_max = std::numeric_limits<double>::quiet_NaN();
  int width = 260;  ///< plotting area, CSS pixels
  int height = 150;
};

/// Builds one self-contained HTML report in memory; `write` stores it atomically.
///
/// The document: a title, then blocks in the order added (headings, paragraphs, notes,
/// preformatted text, tables, figures). Every figure is one Vega specification in a
/// `<script type="application/json" class="herd-vega">` element, rendered by the inlined
/// Vega runtime into the `<div>` before it; if JavaScript is off the tables and text still
/// read and each figure says it needs JavaScript.
class HtmlReport {
 public:
  /// Severity of a note (its colour and label).
  enum class Level { kOk, kInfo, kWarning, kProblem };

  /// A report titled `title` (HTML-escaped), with `subtitle` as a line under it.
  explicit HtmlReport(std::string title, std::string subtitle = {});

  /// A section heading (`<h2>`), with an anchor listed in the table of contents.
  void heading(std::string_view text);
  /// A paragraph of text (escaped).
  void paragraph(std::string_view text);
  /// A highlighted note: verdicts and warnings in words.
  void note(Level level, std::string_view text);
  /// Preformatted text (escaped), e.g. the resolved input file.
  void preformatted(std::string_view text);
  /// A table: `header` names the columns; every row must have header.size() cells
  /// (escaped); a header of empty names is left out (a key-value table). `row_levels`
  /// (empty, or one per row) colours rows that carry a warning.
  /// @throws herd::InputError on a row of the wrong length.
  void table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
             const std::vector<Level>& row_levels = {});
  /// A figure: `plots` laid out in a grid of `columns` panels per row (one Vega spec),
  /// with a caption under it (escaped). `name` (letters, digits, '_' and '-') is the
  /// figure's `data-name` attribute, by which tests and scripts find it.
  /// @throws herd::InputError when a series has x and y of different sizes, columns < 1,
  ///         or `name` has another character.
  void figure(const std::vector<Plot>& plots, int columns, std::string_view caption, std::string_view name);
  /// The same figure from its Vega specification made beforehand (`vega_spec(plots,
  /// columns)`, e.g. on another thread): the same bytes as `figure(plots, columns, ...)`.
  /// @throws herd::InputError when `name` has a character `figure` refuses.
  void figure_spec(const std::string& spec, std::string_view caption, std::string_view name);

  /// Number of figures added so far.
  std::size_t figures() const { return figures_; }
  /// The complete document.
  std::string html() const;
  /// Writes the document to `path` atomically (temporary file, rename).
  /// @throws herd::IoError when it cannot be written (an earlier file is then unchanged).
  void write(const std::string& path) const;

 private:
  std::string title_, subtitle_;
  std::string body_;
  std::vector<std::pair<std::string, std::string>> toc_;  // anchor, text
  std::size_t figures_ = 0;
};

/// The Vega specification (JSON text) of a grid of plots, as `HtmlReport::figure` embeds it:
/// one top-level group per panel, each series a dataset named "p<panel>_s<series>" whose
/// `values` are CSV text "x,y\n..." and whose `herd_series` field holds the series name.
/// Numbers are written with 6 significant digits.
/// @throws herd::InputError as `HtmlReport::figure`.
std::string vega_spec(const std::vector<Plot>& plots, int columns);

/// Appends `v` to `out` as the plots' data write numbers: 6 significant digits, the bytes of
/// `fmt::format("{:.6g}", v)` and of printf's "%.6g" (shortest of fixed and exponent form,
/// trailing zeros dropped, "-0", "inf", "-inf", "nan"; subnormals exact): for |v| in
/// [1e-15, 1e21) from one exact-power-of-ten scaling of v rounded to 6 digits (where that
/// scaling's error cannot change the rounding), otherwise by std::to_chars; about 1.5-2
/// times faster than std::to_chars alone, six than fmt's formatter. Reentrant.
void append_number_6g(std::string& out, double v);

/// `text` with &, <, >, " and ' replaced by character references.
std::string html_escape(std::string_view text);

/// The embedded Vega runtime: the libjs-vega modules and the loader that defines the global
/// `vega` (`vega.View`, `vega.parse`), as the text of one `<script>` element's body.
const std::string& vega_runtime_javascript();

/// Evenly spaced indices for plotting at most `max_points` of `n` points: 0, s, 2s, ...
/// (all when n <= max_points), always including the last index when n > 0.
std::vector<std::size_t> thin_indices(std::size_t n, std::size_t max_points);

}  // namespace herd::io
