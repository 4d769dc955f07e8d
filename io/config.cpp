#include "herd/io/config.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

#include "herd/core/error.hpp"
#include "herd/io/atomic_file.hpp"
#include "herd/io/namelist.hpp"
#include "herd/io/toml_reader.hpp"

namespace herd::io {

std::string SourceLocation::str() const {
  if (line > 0) return fmt::format("{}:{}", file, line);
  return file;
}

// --- ConfigValue ------------------------------------------------------------------------

ConfigValue ConfigValue::null(SourceLocation where) {
  ConfigValue v;
  v.where = std::move(where);
  return v;
}
ConfigValue ConfigValue::boolean(bool b, SourceLocation where) {
  ConfigValue v;
  v.kind_ = Kind::kBool;
  v.b_ = b;
  v.where = std::move(where);
  return v;
}
ConfigValue ConfigValue::integer(std::int64_t i, SourceLocation where) {
  ConfigValue v;
  v.kind_ = Kind::kInt;
  v.i_ = i;
  v.where = std::move(where);
  return v;
}
ConfigValue ConfigValue::real(double d, SourceLocation where) {
  ConfigValue v;
  v.kind_ = Kind::kFloat;
  v.d_ = d;
  v.where = std::move(where);
  return v;
}
ConfigValue ConfigValue::string(std::string s, SourceLocation where) {
  ConfigValue v;
  v.kind_ = Kind::kString;
  v.s_ = std::move(s);
  v.where = std::move(where);
  return v;
}
ConfigValue ConfigValue::array(Array a, SourceLocation where) {
  ConfigValue v;
  v.kind_ = Kind::kArray;
  v.a_ = std::move(a);
  v.where = std::move(where);
  return v;
}
ConfigValue ConfigValue::table(SourceLocation where) {
  ConfigValue v;
  v.kind_ = Kind::kTable;
  v.where = std::move(where);
  return v;
}
ConfigValue ConfigValue::raw_text(std::string s, SourceLocation where) {
  ConfigValue v = string(std::move(s), std::move(where));
  v.raw_ = true;
  return v;
}

const char* ConfigValue::kind_name(Kind k) {
  switch (k) {
    case Kind::kNull:
      return "nothing";
    case Kind::kBool:
      return "a logical";
    case Kind::kInt:
      return "an integer";
    case Kind::kFloat:
      return "a float";
    case Kind::kString:
      return "a string";
    case Kind::kArray:
      return "a list";
    case Kind::kTable:
      return "a table";
  }
  return "?";
}

namespace {
[[noreturn]] void wrong_kind(const ConfigValue& v, const char* wanted) {
  throw InputError(fmt::format("{}: value {}, but {} was expected", v.where.str(), v.describe(), wanted));
}
}  // namespace

bool ConfigValue::as_bool() const {
  if (kind_ != Kind::kBool) wrong_kind(*this, "a logical");
  return b_;
}
std::int64_t ConfigValue::as_int() const {
  if (kind_ != Kind::kInt) wrong_kind(*this, "an integer");
  return i_;
}
double ConfigValue::as_float() const {
  if (kind_ == Kind::kInt) return static_cast<double>(i_);
  if (kind_ != Kind::kFloat) wrong_kind(*this, "a float");
  return d_;
}
const std::string& ConfigValue::as_string() const {
  if (kind_ != Kind::kString) wrong_kind(*this, "a string");
  return s_;
}
const ConfigValue::Array& ConfigValue::as_array() const {
  if (kind_ != Kind::kArray) wrong_kind(*this, "a list");
  return a_;
}
ConfigValue::Array& ConfigValue::as_array() {
  if (kind_ != Kind::kArray) wrong_kind(*this, "a list");
  return a_;
}
const ConfigValue::Table& ConfigValue::as_table() const {
  if (kind_ != Kind::kTable) wrong_kind(*this, "a table");
  return t_;
}
ConfigValue::Table& ConfigValue::as_table() {
  if (kind_ != Kind::kTable) wrong_kind(*this, "a table");
  return t_;
}

const ConfigValue* ConfigValue::find(std::string_view key) const {
  if (kind_ != Kind::kTable) return nullptr;
  for (const auto& [k, v] : t_)
    if (k == key) return &v;
  return nullptr;
}
ConfigValue* ConfigValue::find(std::string_view key) {
  if (kind_ != Kind::kTable) return nullptr;
  for (auto& [k, v] : t_)
    if (k == key) return &v;
  return nullptr;
}

ConfigValue& ConfigValue::set(std::string key, ConfigValue value) {
  if (kind_ != Kind::kTable) wrong_kind(*this, "a table");
  if (ConfigValue* old = find(key)) {
    *old = std::move(value);
    return *old;
  }
  t_.emplace_back(std::move(key), std::move(value));
  return t_.back().second;
}

ConfigValue& ConfigValue::append(std::string key, ConfigValue value) {
  if (kind_ != Kind::kTable) wrong_kind(*this, "a table");
  t_.emplace_back(std::move(key), std::move(value));
  return t_.back().second;
}

namespace {
std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) out += fmt::format("\\u{:04x}", static_cast<int>(c));
        else out += c;
    }
  }
  return out + "\"";
}
std::string format_double(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  std::string s = fmt::format("{}", d);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}
}  // namespace

namespace {
/// Appends the TOML rendering of `v` to `out`, stopping once `out` exceeds `limit`.
void render(const ConfigValue& v, std::string& out, std::size_t limit) {
  if (out.size() > limit) return;
  switch (v.kind()) {
    case ConfigValue::Kind::kNull:
      out += "(unset)";
      return;
    case ConfigValue::Kind::kBool:
      out += v.as_bool() ? "true" : "false";
      return;
    case ConfigValue::Kind::kInt:
      out += fmt::format("{}", v.as_int());
      return;
    case ConfigValue::Kind::kFloat:
      out += format_double(v.as_float());
      return;
    case ConfigValue::Kind::kString:
      out += quote(v.as_string());
      return;
    case ConfigValue::Kind::kArray: {
      out += '[';
      const auto& a = v.as_array();
      for (std::size_t i = 0; i < a.size() && out.size() <= limit; ++i) {
        if (i) out += ", ";
        render(a[i], out, limit);
      }
      out += ']';
      return;
    }
    case ConfigValue::Kind::kTable: {
      out += '{';
      const auto& t = v.as_table();
      for (std::size_t i = 0; i < t.size() && out.size() <= limit; ++i) {
        out += i ? ", " : " ";
        out += t[i].first;
        out += " = ";
        render(t[i].second, out, limit);
      }
      out += " }";
      return;
    }
  }
}
}  // namespace

std::string ConfigValue::to_string() const {
  std::string out;
  render(*this, out, std::numeric_limits<std::size_t>::max());
  return out;
}

std::string ConfigValue::describe() const {
  std::string text;
  render(*this, text, 60);
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return fmt::format("{} ({})", text, raw_ ? "text" : kind_name(kind_));
}

// --- Config -----------------------------------------------------------------------------

Config::Config() : Config("<config>") {}

Config::Config(std::string source) : source_(std::move(source)), root_(ConfigValue::table({source_, 0})) {}

namespace {
std::vector<std::string_view> split_dots(std::string_view s) {
  std::vector<std::string_view> parts;
  std::size_t i = 0;
  while (true) {
    const std::size_t j = s.find('.', i);
    parts.push_back(s.substr(i, j == std::string_view::npos ? std::string_view::npos : j - i));
    if (j == std::string_view::npos) break;
    i = j + 1;
  }
  return parts;
}
}  // namespace

const ConfigValue* Config::find(std::string_view dotted) const {
  const ConfigValue* cur = &root_;
  for (auto part : split_dots(dotted)) {
    cur = cur->find(part);
    if (cur == nullptr) return nullptr;
  }
  return cur;
}

ConfigValue* Config::find(std::string_view dotted) {
  return const_cast<ConfigValue*>(static_cast<const Config*>(this)->find(dotted));
}

ConfigValue& Config::set(std::string_view dotted, ConfigValue value) {
  ConfigValue* cur = &root_;
  const auto parts = split_dots(dotted);
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    ConfigValue* next = cur->find(parts[i]);
    if (next == nullptr) {
      next = &cur->set(std::string(parts[i]), ConfigValue::table(value.where));
    } else if (!next->is_table()) {
      throw InputError(
          fmt::format("{}: \"{}\" is {}, so \"{}\" cannot be set", value.where.str(),
                      std::string(dotted.substr(0, static_cast<std::size_t>(parts[i].end() - dotted.begin()))),
                      ConfigValue::kind_name(next->kind()), dotted));
    }
    cur = next;
  }
  return cur->set(std::string(parts.back()), std::move(value));
}

void Config::set_override(std::string_view assignment) {
  const auto eq = assignment.find('=');
  auto trim = [](std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
  };
  const SourceLocation where{fmt::format("--set {}", assignment), 0};
  if (eq == std::string_view::npos || trim(assignment.substr(0, eq)).empty()) {
    const std::string_view named = trim(assignment.substr(0, eq));  // the whole text without '='
    throw InputError(fmt::format("--set \"{}\": expected key=value, e.g. --set {}=<value>", assignment,
                                 named.empty() ? std::string_view("key") : named));
  }
  std::string key(trim(assignment.substr(0, eq)));
  const auto parts = split_dots(key);
  // As deep as a TOML file may nest (toml_reader's limit): each level would be a table that
  // carries this assignment as its location, so a key of thousands of parts would cost
  // memory quadratic in its length.
  constexpr std::size_t kMaxKeyParts = 64;
  if (parts.size() > kMaxKeyParts)
    throw InputError(fmt::format("--set \"{:.80}...\": the key has {} dot-separated parts, but at most {} are allowed",
                                 assignment, parts.size(), kMaxKeyParts));
  for (const auto& part : parts)
    if (part.empty()) throw InputError(fmt::format("--set \"{}\": key \"{}\" has an empty part", assignment, key));
  if (case_insensitive_)
    std::transform(key.begin(), key.end(), key.begin(), [](unsigned char c) { return std::tolower(c); });
  ConfigValue v = ConfigValue::raw_text(std::string(trim(assignment.substr(eq + 1))), where);
  v.written_name = std::string(trim(assignment.substr(0, eq)));
  set(key, std::move(v));
}

namespace {
void collect_leaves(const ConfigValue& t, const std::string& prefix,
                    std::vector<std::pair<std::string, const ConfigValue*>>& out) {
  for (const auto& [k, v] : t.as_table()) {
    const std::string full = prefix.empty() ? k : fmt::format("{}.{}", prefix, k);
    if (v.is_table()) collect_leaves(v, full, out);
    else out.emplace_back(full, &v);
  }
}
}  // namespace

std::vector<std::pair<std::string, const ConfigValue*>> Config::leaves() const {
  std::vector<std::pair<std::string, const ConfigValue*>> out;
  collect_leaves(root_, "", out);
  return out;
}

// --- Files ------------------------------------------------------------------------------

Config read_config(const std::string& path, std::string_view namelist_group) {
  const auto bytes = read_file_bytes(path);
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  return parse_config(text, path, namelist_group);
}

Config parse_config(std::string_view text, const std::string& source, std::string_view namelist_group) {
  // Namelist when the first meaningful character is '&' or '$'.
  bool namelist = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') continue;
    if (c == '!' || c == '#') {
      while (i < text.size() && text[i] != '\n') ++i;
      continue;
    }
    namelist = (c == '&' || c == '$');
    break;
  }
  if (namelist) return parse_namelist(text, source, namelist_group);
  try {
    return parse_toml(text, source);
  } catch (const InputError&) {
    // Not TOML, and a line opens a namelist group ("&ParaDRAM"): a namelist with free text
    // before its first group, which Fortran's namelist read skips.
    for (std::size_t at = 0; at < text.size();) {
      std::size_t i = at;
      while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
      if (i + 1 < text.size() && (text[i] == '&' || text[i] == '$') &&
          std::isalpha(static_cast<unsigned char>(text[i + 1])))
        return parse_namelist(text, source, namelist_group);
      at = text.find('\n', at);
      if (at == std::string_view::npos) break;
      ++at;
    }
    throw;
  }
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  // Optimal string alignment: rows i - 2, i - 1 and i of the dynamic programme.
  std::vector<std::size_t> prev2(b.size() + 1), prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) cur[j] = std::min(cur[j], prev2[j - 2] + 1);
    }
    std::swap(prev2, prev);
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace herd::io
