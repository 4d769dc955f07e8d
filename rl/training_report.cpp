// The HTML report of a herd-rl training run (see training_report.hpp).
#include "herd/rl/training_report.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "herd/core/error.hpp"
#include "herd/io/hdf5.hpp"
#include "herd/io/html_report.hpp"
#include "herd/io/output_files.hpp"

namespace herd::rl {

namespace {

using io::HtmlReport;
using io::Plot;
using io::PlotSeries;
using Level = HtmlReport::Level;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr std::size_t kMaxPoints = 2000;  // points per series (evenly thinned beyond)

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.pop_back();
  std::size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  return s.substr(i);
}

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t c = line.find(',', start);
    out.push_back(trim(line.substr(start, c == std::string::npos ? std::string::npos : c - start)));
    if (c == std::string::npos) return out;
    start = c + 1;
  }
}

bool parse_number(const std::string& f, double& v) {
  if (f.empty()) {
    v = kNaN;
    return true;
  }
  std::string lower = f;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower == "nan" || lower == "-nan" || lower == "+nan") {
    v = kNaN;
    return true;
  }
  if (lower == "inf" || lower == "+inf" || lower == "infinity") {
    v = INFINITY;
    return true;
  }
  if (lower == "-inf" || lower == "-infinity") {
    v = -INFINITY;
    return true;
  }
  const char* b = f.data() + (f.front() == '+' ? 1 : 0);
  const auto [p, ec] = std::from_chars(b, f.data() + f.size(), v);
  return ec == std::errc() && p == f.data() + f.size();
}

bool any_finite(const std::vector<double>* v) {
  return v != nullptr && std::any_of(v->begin(), v->end(), [](double x) { return std::isfinite(x); });
}

/// The series (x = env steps or iteration, y = column) thinned to kMaxPoints.
PlotSeries series(const TrainingCurve& c, const std::vector<double>& x, const std::string& col, std::string label) {
  PlotSeries s(std::move(label), {}, {});
  const std::vector<double>* y = c.column(col);
  if (y == nullptr) return s;
  for (std::size_t i : io::thin_indices(x.size(), kMaxPoints)) {
    s.x.push_back(x[i]);
    s.y.push_back((*y)[i]);
  }
  return s;
}

/// As `series` for a column with values in some rows only (the evaluation columns, NaN
/// between evaluations): its finite points, thinned to kMaxPoints, so that the line joins
/// the evaluations instead of breaking at every row between them.
PlotSeries sparse_series(const TrainingCurve& c, const std::vector<double>& x, const std::string& col,
                         std::string label) {
  PlotSeries s(std::move(label), {}, {});
  const std::vector<double>* y = c.column(col);
  if (y == nullptr) return s;
  std::vector<std::size_t> rows;
  for (std::size_t i = 0; i < y->size() && i < x.size(); ++i)
    if (std::isfinite((*y)[i])) rows.push_back(i);
  for (std::size_t k : io::thin_indices(rows.size(), kMaxPoints)) {
    s.x.push_back(x[rows[k]]);
    s.y.push_back((*y)[rows[k]]);
  }
  return s;
}

std::string last_finite(const std::vector<double>* v, const char* format = "{:.4g}") {
  if (v == nullptr) return "NA";
  for (auto it = v->rbegin(); it != v->rend(); ++it)
    if (std::isfinite(*it)) return fmt::format(fmt::runtime(format), *it);
  return "NA";
}

/// A panel of the report's figures: title, axis labels and the size every panel here shares.
Plot panel(std::string title, const std::string& x_label, std::string y_label, int height = 240) {
  Plot p;
  p.title = std::move(title);
  p.x_label = x_label;
  p.y_label = std::move(y_label);
  p.width = 480;
  p.height = height;
  return p;
}

}  // namespace

const std::vector<double>* TrainingCurve::column(const std::string& name) const {
  const auto it = columns.find(name);
  return it == columns.end() ? nullptr : &it->second;
}

TrainingCurve read_progress_csv(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(fmt::format("{}: cannot open the progress file", path));
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  TrainingCurve c;
  c.source = path;
  std::size_t pos = 0, line_no = 0;
  bool header = true;
  while (pos < text.size()) {
    const std::size_t nl = text.find('\n', pos);
    const bool complete = nl != std::string::npos;
    const std::string line = text.substr(pos, complete ? nl - pos : std::string::npos);
    pos = complete ? nl + 1 : text.size();
    ++line_no;
    if (trim(line).empty()) continue;
    const auto fields = split(line);
    if (header) {
      for (const auto& f : fields) {
        HERD_REQUIRE(!f.empty(), "{}:1: an empty column name in the header", path);
        HERD_REQUIRE(c.columns.count(f) == 0, "{}:1: column \"{}\" appears twice", path, f);
        c.names.push_back(f);
        c.columns[f];
      }
      header = false;
      continue;
    }
    if (fields.size() != c.names.size()) {
      if (!complete && fields.size() < c.names.size()) break;  // a last row cut off by a kill
      throw InputError(
          fmt::format("{}:{}: {} fields, but the header has {} columns", path, line_no, fields.size(), c.names.size()));
    }
    for (std::size_t k = 0; k < fields.size(); ++k) {
      double v = 0;
      if (!parse_number(fields[k], v)) {
        if (!complete) break;
        throw InputError(fmt::format("{}:{}: column \"{}\" is \"{}\", but must be a number (or empty, or nan)", path,
                                     line_no, c.names[k], fields[k]));
      }
      c.columns[c.names[k]].push_back(v);
    }
    // A cut-off last row that parsed partially leaves ragged columns: drop it.
    if (!complete && c.columns[c.names.back()].size() != c.columns[c.names.front()].size()) {
      const std::size_t n = c.columns[c.names.back()].size();
      for (auto& [k, v] : c.columns) v.resize(n);
    }
  }
  HERD_REQUIRE(!header, "{}: the progress file is empty (no header)", path);
  return c;
}

TrainingCurve read_curve_h5(const std::string& path) {
  const io::H5File f = io::H5File::open(path);
  const io::H5Group g = f.open_group("curve");
  TrainingCurve c;
  c.source = path;
  for (const std::string& name : g.members()) {
    if (!g.is_dataset(name)) continue;
    const std::string key = name == "wall_seconds" ? "wall_time_s" : name == "episode_length" ? "length_mean" : name;
    c.names.push_back(key);
    c.columns[key] = g.read<double>(name);
  }
  for (const auto& [k, v] : c.columns)
    HERD_REQUIRE(v.size() == c.rows(), "{}:/curve/{} has {} rows, but other columns have {}", path, k, v.size(),
                 c.rows());
  return c;
}

std::string write_training_report(const std::string& prefix, const std::string& out) {
  namespace fs = std::filesystem;
  const std::string csv_path = prefix + "_progress.csv", h5_path = prefix + ".h5";
  std::string path = out.empty() ? prefix + "_report.html" : out;
  const bool have_csv = fs::exists(csv_path), have_h5 = fs::exists(h5_path);
  HERD_REQUIRE(have_csv || have_h5, "herd-rl report: neither {} nor {} exists: is \"{}\" the output_prefix of a run?",
               csv_path, h5_path, prefix);
  // The report's folder must take it: checked before the run's files are read, and said as a
  // mistake of the command line (not as a failed write of a temporary file).
  {
    const fs::path dir = fs::path(path).parent_path();
    std::error_code ec;
    HERD_REQUIRE(dir.empty() || fs::is_directory(dir, ec), "herd-rl report: cannot write {}: {}{}", path,
                 fs::exists(dir, ec) ? "\"" + dir.string() + "\" is not a folder"
                                     : "the folder \"" + dir.string() + "\" does not exist",
                 out.empty() ? "" : " (--output writes into an existing folder)");
    try {
      io::check_folder_writable(dir.string(), "herd-rl report: cannot write " + path);
    } catch (const InputError& e) {
      throw InputError(std::string(e.what()) +
                       (out.empty() ? "; write it elsewhere with --output OUT.html" : std::string()));
    }
  }
  TrainingCurve c;
  std::string config, env, algorithm;
  if (have_h5) {
    const io::H5File f = io::H5File::open(h5_path);
    const io::H5Group root = f.root();
    if (root.has_attribute("config")) config = root.attribute_string("config");
    if (root.has_attribute("env")) env = root.attribute_string("env");
    if (root.has_attribute("algorithm")) algorithm = root.attribute_string("algorithm");
  }
  if (have_csv) c = read_progress_csv(csv_path);
  if (c.rows() == 0 && have_h5) c = read_curve_h5(h5_path);
  HERD_REQUIRE(c.rows() > 0, "herd-rl report: {} has no iterations yet", c.source);

  // The x axis: env steps when recorded, else iterations.
  std::vector<double> x;
  std::string x_label = "env steps";
  if (const auto* s = c.column("env_steps"); any_finite(s)) {
    x = *s;
  } else if (const auto* it = c.column("iteration"); it != nullptr) {
    x = *it;
    x_label = "iteration";
  } else {
    for (std::size_t i = 0; i < c.rows(); ++i) x.push_back(static_cast<double>(i + 1));
    x_label = "row";
  }

  const std::string title = "herd-rl report" + (prefix.empty() ? std::string() : ": " + prefix);
  std::string subtitle = algorithm.empty() && env.empty()
                             ? std::string()
                             : fmt::format("{} on {}; ", algorithm.empty() ? "?" : algorithm, env.empty() ? "?" : env);
  subtitle += "from " + c.source + (have_csv && have_h5 ? " and " + h5_path : std::string());
  HtmlReport r(title, subtitle);
  r.heading("Run");
  {
    std::vector<std::vector<std::string>> rows;
    if (!algorithm.empty()) rows.push_back({"algorithm", algorithm});
    if (!env.empty()) rows.push_back({"environment", env});
    rows.push_back({"iterations recorded", std::to_string(c.rows())});
    rows.push_back({"env steps", last_finite(c.column("env_steps"), "{:.0f}")});
    rows.push_back({"wall time (s)", last_finite(c.column("wall_time_s"), "{:.1f}")});
    if (c.column("episodes")) rows.push_back({"episodes", last_finite(c.column("episodes"), "{:.0f}")});
    rows.push_back({"last mean return (last 100 episodes)", last_finite(c.column("return_mean"))});
    if (const auto* rm = c.column("return_mean"); any_finite(rm)) {
      double best = -INFINITY;
      for (double v : *rm)
        if (std::isfinite(v)) best = std::max(best, v);
      rows.push_back({"best mean return", fmt::format("{:.4g}", best)});
    }
    // Evaluation during training: the last evaluation and the best (the first of equal
    // means, as <prefix>_best.ckpt holds it), with the env steps they were played at.
    if (const auto* em = c.column("eval_return_mean"); any_finite(em)) {
      const std::vector<double>* steps = c.column("env_steps");
      const auto at = [&](std::size_t i) {
        return steps && i < steps->size() && std::isfinite((*steps)[i])
                   ? fmt::format(" at {:.0f} env steps", (*steps)[i])
                   : std::string();
      };
      std::size_t best = em->size(), last = em->size();
      for (std::size_t i = 0; i < em->size(); ++i) {
        if (!std::isfinite((*em)[i])) continue;
        if (best == em->size() || (*em)[i] > (*em)[best]) best = i;
        last = i;
      }
      rows.push_back({"last evaluation mean return", fmt::format("{:.4g}{}", (*em)[last], at(last))});
      rows.push_back({"best evaluation mean return", fmt::format("{:.4g}{}", (*em)[best], at(best))});
    }
    rows.push_back({"source", c.source});
    r.table({"", ""}, rows);
  }
  if (!have_h5)
    r.note(Level::kInfo, fmt::format("{} does not exist yet: the run is still going, was interrupted, or stopped "
                                     "before its end (resume it with herd-rl train --resume). This report is read from "
                                     "the progress file.",
                                     h5_path));
  if (!any_finite(c.column("return_mean")))
    r.note(Level::kWarning,
           "No training episode has finished yet, so there is no return to show. Train longer, or "
           "check the environment's time limit.");

  r.heading("Learning curves");
  {
    Plot ret = panel("episode return (last 100 episodes)", x_label, "return");
    ret.legend = true;
    PlotSeries lo = series(c, x, "return_min", "min"), hi = series(c, x, "return_max", "max");
    lo.color = hi.color = "#9ecae9";
    lo.dashed = hi.dashed = true;
    ret.series.push_back(series(c, x, "return_mean", "mean"));
    if (!lo.x.empty()) ret.series.push_back(std::move(lo));
    if (!hi.x.empty()) ret.series.push_back(std::move(hi));
    Plot len = panel("episode length (last 100 episodes)", x_label, "steps");
    len.series.push_back(series(c, x, "length_mean", "mean"));
    for (const char* k : {"length_min", "length_max"})
      if (c.column(k)) {
        PlotSeries s = series(c, x, k, std::string(k).substr(7));
        s.color = "#9ecae9";
        s.dashed = true;
        len.series.push_back(std::move(s));
      }
    std::vector<Plot> plots{ret};
    if (any_finite(c.column("length_mean"))) plots.push_back(len);
    r.figure(plots, 2,
             "Training episodes: mean (solid), min and max (dashed) return and length over the last 100 finished "
             "episodes, by " +
                 x_label + ".",
             "return");
  }
  // Evaluation returns: columns eval_return_mean (and _min/_max) when the run records them.
  if (any_finite(c.column("eval_return_mean"))) {
    Plot ev = panel("evaluation return", x_label, "return");
    ev.series.push_back(sparse_series(c, x, "eval_return_mean", "mean"));
    for (const char* k : {"eval_return_min", "eval_return_max"})
      if (c.column(k)) ev.series.push_back(sparse_series(c, x, k, std::string(k).substr(12)));
    r.figure({ev}, 1,
             "Returns of the evaluation episodes played during training (eval.every_steps, on an env of their own; "
             "the mode action or greedy unless eval.stochastic): mean, minimum and maximum of each evaluation.",
             "evaluation");
  } else {
    r.note(Level::kInfo,
           "No evaluation returns were recorded during training: the curves above are training "
           "episodes (stochastic policy). Evaluate a checkpoint with herd-rl eval PREFIX.ckpt, or during "
           "training with eval.every_steps.");
  }

  r.heading("Losses and diagnostics");
  {
    std::vector<Plot> plots;
    const std::pair<const char*, const char*> kPanels[] = {
        {"policy_loss", "policy loss"},
        {"value_loss", "value loss"},
        {"entropy", "entropy"},
        {"approx_kl", "approximate KL"},
        {"clip_fraction", "clip fraction"},
        {"explained_variance", "explained variance"},
        {"learning_rate", "learning rate"},
        {"clip_range", "clip range"},
        // DQN: TD loss, mean Q(s, a) of the sampled batches, exploration rate.
        {"loss", "TD loss (Huber)"},
        {"q_mean", "mean Q(s, a)"},
        {"epsilon", "exploration epsilon"}};
    std::vector<std::string> absent;
    for (const auto& [col, label] : kPanels) {
      if (!any_finite(c.column(col))) {
        if (c.column(col) != nullptr) absent.push_back(col);  // a column of the file without a value
        continue;
      }
      Plot p;
      p.title = label;
      p.x_label = x_label;
      p.series.push_back(series(c, x, col, label));
      if (std::string(col) == "explained_variance") p.y_rules = {0.0, 1.0};
      plots.push_back(std::move(p));
    }
    if (!plots.empty())
      r.figure(
          plots, 3,
          "Per iteration, means over its minibatches. Approximate KL and clip fraction (PPO) show how far each "
          "update moved the policy; explained variance near 1 means the value function predicts the returns "
          "well, below 0 worse than a constant." +
              (absent.empty()
                   ? std::string()
                   : " Empty (not computed by this algorithm): " + fmt::format("{}", fmt::join(absent, ", ")) + "."),
          "losses");
    else r.note(Level::kInfo, "No losses were recorded.");
  }

  r.heading("Throughput");
  {
    Plot sps = panel("steps per second", x_label, "env steps / s", 220);
    sps.legend = true;
    sps.zero = true;
    for (const auto& [col, label] : {std::pair<const char*, const char*>{"sample_steps_per_s", "sampling"},
                                     {"train_steps_per_s", "training"},
                                     {"steps_per_second", "overall"}})
      if (any_finite(c.column(col))) sps.series.push_back(series(c, x, col, label));
    Plot wall = panel("wall time", x_label, "seconds", 220);
    wall.zero = true;
    if (any_finite(c.column("wall_time_s"))) wall.series.push_back(series(c, x, "wall_time_s", "wall time"));
    std::vector<Plot> plots;
    if (!sps.series.empty()) plots.push_back(sps);
    if (!wall.series.empty()) plots.push_back(wall);
    if (!plots.empty())
      r.figure(plots, 2,
               "Env steps per second of sampling (collecting rollouts), of training (the updates) and overall, and "
               "the wall time since the start.",
               "throughput");
  }
  if (!config.empty()) {
    r.heading("Configuration");
    r.preformatted(config);
  }
  r.write(path);
  return path;
}

}  // namespace herd::rl
