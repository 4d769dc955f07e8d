#include "herd/io/toml_reader.hpp"

#include <sstream>

#include <toml++/toml.h>

#include "herd/core/error.hpp"
#include "herd/io/atomic_file.hpp"

namespace herd::io {

namespace {

SourceLocation where_of(const toml::node& n, const std::string& source) {
  return SourceLocation{source, static_cast<int>(n.source().begin.line)};
}

ConfigValue convert(const toml::node& n, const std::string& source, int depth) {
  const SourceLocation where = where_of(n, source);
  if (depth > 64) throw InputError(fmt::format("{}: TOML nesting deeper than 64 levels", where.str()));
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

}  // namespace

Config parse_toml(std::string_view text, const std::string& source) {
  Config config(source);
#if TOML_EXCEPTIONS
  toml::table table;
  try {
    table = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    throw InputError(fmt::format("{}:{}:{}: {}", source, e.source().begin.line, e.source().begin.column,
                                 e.description()));
  }
#else
  toml::parse_result result = toml::parse(text, source);
  if (!result) {
    const auto& e = result.error();
    throw InputError(fmt::format("{}:{}:{}: {}", source, e.source().begin.line, e.source().begin.column,
                                 e.description()));
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
