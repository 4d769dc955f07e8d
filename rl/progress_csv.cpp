#include "herd/rl/progress_csv.hpp"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>
#include <sstream>

#include <fmt/format.h>

#include "herd/core/error.hpp"
#include "herd/io/atomic_file.hpp"

namespace herd::rl {

namespace {

std::string format_value(double v, bool integer) {
  if (std::isnan(v)) return "nan";
  if (integer && std::isfinite(v) && std::abs(v) < 9.0e15) return fmt::format("{}", static_cast<long long>(v));
  return fmt::format("{}", v);  // shortest representation that reads back to v
}

}  // namespace

std::string progress_csv_header() {
  std::string h;
  for (std::size_t c = 0; c < kProgressColumns.size(); ++c) {
    if (c) h += ',';
    h += kProgressColumns[c];
  }
  h += '\n';
  return h;
}

ProgressCsv::ProgressCsv(std::string path, const std::vector<std::string>& blank)
    : ProgressCsv(std::move(path), std::vector<std::string>(kProgressColumns.begin(), kProgressColumns.end()),
                  {"iteration", "env_steps", "episodes"}, blank) {}

ProgressCsv::ProgressCsv(std::string path, std::vector<std::string> columns,
                         const std::vector<std::string>& integer_columns, const std::vector<std::string>& blank)
    : path_(std::move(path)), columns_(std::move(columns)) {
  if (columns_.empty()) throw InputError("rl::ProgressCsv: no columns");
  blank_.assign(columns_.size(), false);
  integer_.assign(columns_.size(), false);
  const auto index = [this](const std::string& name) {
    std::size_t c = 0;
    while (c < columns_.size() && name != columns_[c]) ++c;
    if (c == columns_.size()) throw InputError("rl::ProgressCsv: \"" + name + "\" is not a column of the CSV");
    return c;
  };
  for (const auto& name : integer_columns) integer_[index(name)] = true;
  for (const auto& name : blank) blank_[index(name)] = true;
  for (std::size_t c = 0; c < columns_.size(); ++c) header_ += (c ? "," : "") + columns_[c];
  header_ += '\n';
}

std::string ProgressCsv::format(const ProgressRow& row) const { return format_values(row); }

std::string ProgressCsv::format_values(std::span<const double> row) const {
  if (row.size() != columns_.size())
    throw InputError("rl::ProgressCsv: a row of " + std::to_string(row.size()) + " values, but the CSV has " +
                     std::to_string(columns_.size()) + " columns");
  std::string line;
  for (std::size_t c = 0; c < row.size(); ++c) {
    if (c) line += ',';
    if (!blank_[c]) line += format_value(row[c], integer_[c]);
  }
  return line + "\n";
}

void ProgressCsv::start() { start_with({}); }

void ProgressCsv::start_with(const std::vector<std::vector<double>>& rows) {
  // The header (and rows) replace the file atomically: a kill at any moment leaves the
  // old file or the new one, never a file without its header.
  std::string text = header_;
  for (const auto& r : rows) text += format_values(r);
  io::write_file_atomic(path_, std::as_bytes(std::span<const char>(text.data(), text.size())));
  file_ = io::LogFile(path_, io::LogOpen::kAppend);
}

void ProgressCsv::resume(const std::vector<ProgressRow>& rows) {
  std::vector<std::vector<double>> v;
  v.reserve(rows.size());
  for (const auto& r : rows) v.emplace_back(r.begin(), r.end());
  resume_values(v);
}

void ProgressCsv::resume_values(const std::vector<std::vector<double>>& rows) {
  namespace fs = std::filesystem;
  const std::string& header = header_;
  std::string text;
  if (fs::exists(path_)) {
    std::ifstream in(path_, std::ios::binary);
    if (!in) throw IoError(path_ + ": cannot be read: " + std::strerror(errno));
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  if (text.compare(0, header.size(), header) != 0) {
    // No file, or not one of these columns: written anew from the checkpoint's curve.
    start_with(rows);
    return;
  }
  // The leading whole rows of iterations 1, 2, ..., rows.size().
  std::size_t keep = header.size();
  std::int64_t kept = 0;
  while (kept < static_cast<std::int64_t>(rows.size())) {
    const std::size_t eol = text.find('\n', keep);
    if (eol == std::string::npos) break;  // a partial last line
    std::int64_t it = 0;
    const char* b = text.data() + keep;
    const auto [p, ec] = std::from_chars(b, text.data() + eol, it);
    if (ec != std::errc() || *p != ',' || it != kept + 1) break;
    keep = eol + 1;
    ++kept;
  }
  file_ = io::LogFile(path_, io::LogOpen::kAppend);
  if (keep < text.size()) file_.truncate(keep);
  for (std::size_t i = static_cast<std::size_t>(kept); i < rows.size(); ++i) append_values(rows[i]);
}

void ProgressCsv::append(const ProgressRow& row) { file_.write(format(row)); }

void ProgressCsv::append_values(std::span<const double> row) { file_.write(format_values(row)); }

}  // namespace herd::rl
