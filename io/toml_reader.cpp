#include "herd/io/toml_reader.hpp"

#include <algorithm>
#include <cctype>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>

#include <toml++/toml.h>

#include "herd/core/error.hpp"
#include "herd/io/atomic_file.hpp"

namespace herd::io {

namespace {

/// Deepest nesting accepted (tables, arrays, inline tables and dotted-key levels alike).
constexpr int kMaxDepth = 64;

/// The deepest nesting a TOML text can produce, found by a scan of its characters before
/// toml++ parses it (toml++ 3.3 recurses once per level of a dotted key, table header,
/// array or inline table, and a text of a few hundred kilobytes can exhaust the stack).
/// Counts, outside strings and comments, the open arrays and inline tables plus the dots
/// of the key (or value) being read; returns that maximum and the line where it occurs.
/// A value's dots count too (a float or time has at most one), so the figure is an upper
/// bound of the real depth, never an underestimate.
std::pair<int, int> max_nesting(std::string_view t) {
  int best = 0, best_line = 1, line = 1, brackets = 0, dots = 0;
  std::size_t i = 0;
  const std::size_t n = t.size();
  auto note = [&] {
    const int depth = brackets + dots + 1;
    if (depth > best) {
      best = depth;
      best_line = line;
    }
  };
  auto starts = [&](std::string_view s) { return t.substr(i, s.size()) == s; };
  while (i < n) {
    const char c = t[i];
    if (c == '\n') {
      ++line;
      dots = 0;
      ++i;
    } else if (c == '#') {
      while (i < n && t[i] != '\n') ++i;
    } else if (starts("\"\"\"") || starts("'''")) {
      const std::string_view close = t.substr(i, 3);
      const bool basic = c == '"';
      i += 3;
      while (i < n && !starts(close)) {
        if (t[i] == '\n') ++line;
        if (basic && t[i] == '\\' && i + 1 < n) {
          if (t[i + 1] == '\n') ++line;
          ++i;
        }
        ++i;
      }
      i += 3;
      // Up to two more quotes may belong to the string ("""a"""" is a" + quote).
      while (i < n && t[i] == c) ++i;
    } else if (c == '"' || c == '\'') {
      ++i;
      while (i < n && t[i] != c && t[i] != '\n') {
        if (c == '"' && t[i] == '\\' && i + 1 < n && t[i + 1] != '\n') ++i;
        ++i;
      }
      if (i < n && t[i] == c) ++i;
    } else {
      if (c == '[' || c == '{') {
        ++brackets;
        dots = 0;
      } else if (c == ']' || c == '}') {
        brackets = std::max(0, brackets - 1);
        dots = 0;
      } else if (c == '=' || c == ',') {
        dots = 0;
      } else if (c == '.') {
        ++dots;
      }
      note();
      ++i;
    }
  }
  return {best, best_line};
}

SourceLocation where_of(const toml::node& n, const std::string& source) {
  return SourceLocation{source, static_cast<int>(n.source().begin.line)};
}

ConfigValue convert(const toml::node& n, const std::string& source, int depth) {
  const SourceLocation where = where_of(n, source);
  if (depth > kMaxDepth)
    throw InputError(
        fmt::format("{}: TOML nesting deeper than {} levels (tables, arrays, inline tables and dotted keys "
                    "together)",
                    where.str(), kMaxDepth));
  if (const auto* t = n.as_table()) {
    ConfigValue out = ConfigValue::table(where);
    for (const auto& [k, v] : *t) {
      // toml++ has already rejected duplicate keys.
      ConfigValue& child = out.append(std::string(k.str()), convert(v, source, depth + 1));
      child.written_name = std::string(k.str());
    }
    return out;
  }
  if (const auto* a = n.as_array()) {
    ConfigValue::Array items;
    items.reserve(a->size());
    for (const auto& v : *a) items.push_back(convert(v, source, depth + 1));
    return ConfigValue::array(std::move(items), where);
  }
  if (const auto* v = n.as_integer()) return ConfigValue::integer(v->get(), where);
  if (const auto* v = n.as_floating_point()) return ConfigValue::real(v->get(), where);
  if (const auto* v = n.as_boolean()) return ConfigValue::boolean(v->get(), where);
  if (const auto* v = n.as_string()) return ConfigValue::string(v->get(), where);
  // Dates and times: keep their TOML text.
  std::ostringstream os;
  if (const auto* v = n.as_date()) os << *v;
  else if (const auto* v = n.as_time()) os << *v;
  else if (const auto* v = n.as_date_time()) os << *v;
  return ConfigValue::string(os.str(), where);
}

/// toml++'s message at `line`:`column` (1-based) of `text`, with the usual cause spelt out
/// where it is plain: a bare word where a value belongs is a string without its quotes.
std::string parse_message(std::string_view text, const std::string& source, std::size_t line, std::size_t column,
                          std::string_view description) {
  std::string msg = fmt::format("{}:{}:{}: {}", source, line, column, description);
  if (description.find("could not determine value type") == std::string_view::npos || line == 0 || column == 0)
    return msg;
  std::size_t at = 0;  // the start of line `line`
  for (std::size_t l = 1; l < line && at != std::string_view::npos; ++l) {
    at = text.find('\n', at);
    if (at != std::string_view::npos) ++at;
  }
  if (at == std::string_view::npos || at + column - 1 >= text.size()) return msg;
  std::string_view word = text.substr(at + column - 1);
  word = word.substr(0, std::min<std::size_t>(word.find_first_of(" \t\r\n,]}#"), 64));
  const bool bare = !word.empty() && std::isalpha(static_cast<unsigned char>(word.front())) &&
                    std::all_of(word.begin(), word.end(), [](char ch) {
                      return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-' || ch == '.';
                    });
  if (bare) msg += fmt::format(" (a string value must be quoted: \"{}\")", word);
  return msg;
}

}  // namespace

Config parse_toml(std::string_view text, const std::string& source) {
  Config config(source);
  // Refused before toml++ sees it: its parser recurses once per level, so a deep enough
  // text would overflow the stack. A value's one dot (a float) may add one to the bound.
  if (const auto [depth, line] = max_nesting(text); depth > kMaxDepth + 1)
    throw InputError(
        fmt::format("{}:{}: TOML nesting of {} levels, but at most {} are accepted (tables, arrays, inline "
                    "tables and dotted-key parts together)",
                    source, line, depth, kMaxDepth));
#if TOML_EXCEPTIONS
  toml::table table;
  try {
    table = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    throw InputError(parse_message(text, source, e.source().begin.line, e.source().begin.column, e.description()));
  }
#else
  toml::parse_result result = toml::parse(text, source);
  if (!result) {
    const auto& e = result.error();
    throw InputError(parse_message(text, source, e.source().begin.line, e.source().begin.column, e.description()));
  }
  toml::table table = std::move(result).table();
#endif
  ConfigValue root = convert(table, source, 0);
  root.where = SourceLocation{source, 0};
  config.root() = std::move(root);
  return config;
}

Config read_toml(const std::string& path) {
  const auto bytes = read_file_bytes(path);
  return parse_toml(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), path);
}

}  // namespace herd::io
