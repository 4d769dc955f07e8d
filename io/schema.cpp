#include "herd/io/schema.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>

#include "herd/core/error.hpp"
#include "herd/core/memory.hpp"
#include "herd/io/toml_reader.hpp"

namespace herd::io {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

bool is_list(ValueType t) {
  return t == ValueType::kBoolList || t == ValueType::kIntList || t == ValueType::kFloatList ||
         t == ValueType::kStringList;
}

ValueType element_type(ValueType t) {
  switch (t) {
    case ValueType::kBoolList:
      return ValueType::kBool;
    case ValueType::kIntList:
      return ValueType::kInt;
    case ValueType::kFloatList:
      return ValueType::kFloat;
    case ValueType::kStringList:
      return ValueType::kString;
    case ValueType::kFloatMatrix:
      return ValueType::kFloat;
    default:
      return t;
  }
}

std::string num(double x) { return fmt::format("{}", x); }

std::string quoted_list(const std::vector<std::string>& v) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", \"" : "\"") + v[i] + "\"";
  return out;
}

/// The nearest of `names` to `s` by edit distance (ties: the first declared).
std::string nearest(std::string_view s, const std::vector<std::string>& names, bool fold, std::size_t* dist = nullptr) {
  std::string best;
  std::size_t best_d = std::numeric_limits<std::size_t>::max();
  const std::string a = fold ? lower(s) : std::string(s);
  for (const auto& n : names) {
    const std::size_t d = edit_distance(a, fold ? lower(n) : n);
    if (d < best_d) best_d = d, best = n;
  }
  if (dist != nullptr) *dist = best_d;
  return best;
}

}  // namespace

// --- SchemaKey --------------------------------------------------------------------------

SchemaKey& SchemaKey::range(double lo, double hi) {
  lo_ = lo;
  hi_ = hi;
  lo_open_ = hi_open_ = false;
  return *this;
}
SchemaKey& SchemaKey::min(double lo, bool exclusive) {
  lo_ = lo;
  lo_open_ = exclusive;
  return *this;
}
SchemaKey& SchemaKey::max(double hi, bool exclusive) {
  hi_ = hi;
  hi_open_ = exclusive;
  return *this;
}
SchemaKey& SchemaKey::finite() {
  finite_ = true;
  return *this;
}
SchemaKey& SchemaKey::choices(std::vector<std::string> allowed) {
  choices_ = std::move(allowed);
  return *this;
}
SchemaKey& SchemaKey::alias(std::string name) {
  aliases_.push_back(std::move(name));
  return *this;
}
SchemaKey& SchemaKey::required() {
  required_ = true;
  return *this;
}
SchemaKey& SchemaKey::number_as_text() {
  number_as_text_ = true;
  return *this;
}
SchemaKey& SchemaKey::unset_elements() {
  unset_elements_ = true;
  return *this;
}
SchemaKey& SchemaKey::length(std::size_t min_len, std::size_t max_len) {
  min_len_ = min_len;
  max_len_ = max_len;
  return *this;
}

std::string SchemaKey::expected() const {
  const ValueType et = element_type(type_);
  std::string base;
  const bool list = is_list(type_);
  switch (et) {
    case ValueType::kBool:
      base = list ? "logicals" : "a logical (true or false)";
      break;
    case ValueType::kInt:
      base = list ? "integers" : "an integer";
      break;
    case ValueType::kFloat:
      base = list ? (finite_           ? "finite floats"
                     : unset_elements_ ? "floats (not NaN)"
                                       : "floats")
                  : (finite_ ? "a finite float" : "a float");
      break;
    default:
      base = list ? (unset_elements_ ? "strings (not empty)" : "strings") : "a string";
      break;
  }
  if (!choices_.empty()) base = list ? "strings from " + quoted_list(choices_) : "one of " + quoted_list(choices_);
  if (lo_ && hi_)
    base += fmt::format(" in {}{}, {}{}", lo_open_ ? "(" : "[", num(*lo_), num(*hi_), hi_open_ ? ")" : "]");
  else if (lo_) base += fmt::format(" {} {}", lo_open_ ? ">" : ">=", num(*lo_));
  else if (hi_) base += fmt::format(" {} {}", hi_open_ ? "<" : "<=", num(*hi_));
  const std::size_t kMax = std::numeric_limits<std::size_t>::max();
  if (type_ == ValueType::kFloatMatrix) {
    base = std::string(finite_ ? "a matrix (a list of rows) of finite floats" : "a matrix (a list of rows) of floats") +
           base.substr(std::string(finite_ ? "a finite float" : "a float").size());
    if (min_len_ == max_len_) return fmt::format("{} with {} rows", base, min_len_);
    if (max_len_ != kMax) return fmt::format("{} with {} to {} rows", base, min_len_, max_len_);
    if (min_len_ > 0) return fmt::format("{} with at least {} rows", base, min_len_);
    return base;
  }
  if (!list) return base;
  if (min_len_ == max_len_) return fmt::format("a list of {} {}", min_len_, base);
  if (max_len_ != kMax && min_len_ > 0) return fmt::format("a list of {} to {} {}", min_len_, max_len_, base);
  if (max_len_ != kMax) return fmt::format("a list of at most {} {}", max_len_, base);
  if (min_len_ > 0) return fmt::format("a list of at least {} {}", min_len_, base);
  return "a list of " + base;
}

// --- Settings ---------------------------------------------------------------------------

const Settings::Entry& Settings::entry(std::string_view key) const {
  for (const auto& e : entries_)
    if (e.name == key) return e;
  throw InputError(fmt::format("settings: no key \"{}\" in the schema", key));
}

bool Settings::has(std::string_view key) const { return !entry(key).value.is_null(); }
bool Settings::is_default(std::string_view key) const { return entry(key).is_default; }
bool Settings::partial(std::string_view key) const { return entry(key).partial; }
std::size_t Settings::matrix_columns(std::string_view key) const { return entry(key).columns; }
const ConfigValue& Settings::value(std::string_view key) const { return entry(key).value; }
std::string Settings::origin(std::string_view key) const { return entry(key).value.where.str(); }

const std::string& Settings::written(std::string_view key) const { return entry(key).written; }

std::uint64_t Settings::get_memory_size(std::string_view key) const {
  const std::string& text = get_string(key);
  try {
    return parse_memory_size(text);
  } catch (const InputError& e) {
    // parse_memory_size says "\"<text>\" is not a memory size: must be ...": its expectation
    // goes into the one-line form of every refused key.
    std::string why = e.what();
    if (const auto k = why.find(": must be "); k != std::string::npos) why = why.substr(k + 2);
    throw InputError(fmt::format("{}: key \"{}\" is \"{}\", but {}", origin(key), written(key), text, why));
  }
}

void Settings::refuse_unread(const std::vector<std::string>& keys, std::string_view reason) const {
  if (keys.empty()) return;
  std::string others;
  for (std::size_t i = 1; i < keys.size(); ++i)
    others += fmt::format("{}\"{}\" ({})", i > 1 ? ", " : "", written(keys[i]), origin(keys[i]));
  throw InputError(fmt::format("{}: key \"{}\" is set, but {}{}", origin(keys[0]), written(keys[0]), reason,
                               others.empty() ? "" : "; nor does it read " + others + ", also set"));
}

std::string Settings::get_path(std::string_view key) const {
  namespace fs = std::filesystem;
  const std::string& p = get_string(key);
  const std::string& from = entry(key).value.where.file;
  // An input file's own location: not "--set k=v", "(input text)", "<defaults>" or "default".
  const bool in_file =
      !from.empty() && from.rfind("--set", 0) != 0 && from.front() != '(' && from.front() != '<' && from != "default";
  if (p.empty())
    throw InputError(fmt::format("{}: key \"{}\" is empty, but must name a file", origin(key), written(key)));
  if (fs::path(p).is_absolute() || !in_file) return p;
  return (fs::path(from).parent_path() / p).lexically_normal().string();
}

namespace {
const ConfigValue& set_value(const ConfigValue& v, std::string_view key) {
  if (v.is_null()) throw InputError(fmt::format("settings: key \"{}\" is not set", key));
  return v;
}
}  // namespace

bool Settings::get_bool(std::string_view key) const { return set_value(value(key), key).as_bool(); }
std::int64_t Settings::get_int(std::string_view key) const { return set_value(value(key), key).as_int(); }
double Settings::get_float(std::string_view key) const { return set_value(value(key), key).as_float(); }
const std::string& Settings::get_string(std::string_view key) const { return set_value(value(key), key).as_string(); }
std::vector<bool> Settings::get_bool_list(std::string_view key) const {
  std::vector<bool> out;
  for (const auto& v : set_value(value(key), key).as_array()) out.push_back(v.as_bool());
  return out;
}
std::vector<std::int64_t> Settings::get_int_list(std::string_view key) const {
  std::vector<std::int64_t> out;
  for (const auto& v : set_value(value(key), key).as_array()) out.push_back(v.as_int());
  return out;
}
std::vector<double> Settings::get_float_list(std::string_view key) const {
  std::vector<double> out;
  for (const auto& v : set_value(value(key), key).as_array()) out.push_back(v.as_float());
  return out;
}
std::vector<std::string> Settings::get_string_list(std::string_view key) const {
  std::vector<std::string> out;
  for (const auto& v : set_value(value(key), key).as_array()) out.push_back(v.as_string());
  return out;
}

std::vector<std::vector<double>> Settings::get_float_matrix(std::string_view key) const {
  std::vector<std::vector<double>> out;
  for (const auto& row : set_value(value(key), key).as_array()) {
    out.emplace_back();
    for (const auto& v : row.as_array()) out.back().push_back(v.as_float());
  }
  return out;
}

std::string Settings::describe(
    const std::function<std::string(const std::string& key)>& note,
    const std::function<const std::vector<double>*(const std::string& key)>& laid_out) const {
  std::string out;
  for (const auto& e : entries_) {
    const std::string n = note ? note(e.name) : std::string();
    const std::string doc = n.empty() ? e.doc : n + "; " + e.doc;
    ConfigValue shown_list;
    const std::vector<double>* layout = e.partial && laid_out ? laid_out(e.name) : nullptr;
    if (layout != nullptr) {
      ConfigValue::Array a;
      for (const double x : *layout) a.push_back(ConfigValue::real(x));
      shown_list = ConfigValue::array(std::move(a));
    }
    const ConfigValue& shown = layout != nullptr ? shown_list : e.value;
    // An unset element: NaN in a float list, "" in a string list.
    const bool holes =
        e.partial && shown.is_array() &&
        std::any_of(shown.as_array().begin(), shown.as_array().end(), [](const ConfigValue& x) {
          return x.kind() == ConfigValue::Kind::kString ? x.as_string().empty() : std::isnan(x.as_float());
        });
    if (e.value.is_null()) out += fmt::format("# {} = (unset)  # {}\n", e.name, doc);
    else if (holes)
      // NaN (a float's) or "" (a string's) marks the elements a namelist left unset, which no
      // TOML list can leave unset: the line is shown commented out.
      out += fmt::format("# {} = {}  # {}; {}: elements the namelist leaves unset, which take their defaults; {}\n",
                         e.name, shown.to_string(), e.value.where.str(),
                         shown.as_array().front().kind() == ConfigValue::Kind::kString ? "\"\"" : "nan", doc);
    else
      out += fmt::format("{}{} = {}  # {}; {}\n", n.empty() ? "" : "# ", e.name, e.value.to_string(),
                         e.value.where.str(), doc);
  }
  return out;
}

// --- Schema -----------------------------------------------------------------------------

Schema::Schema(std::string name) : name_(std::move(name)) {}

SchemaKey& Schema::add(std::string name, ValueType type, ConfigValue def, std::string doc) {
  HERD_REQUIRE(!name.empty(), "{}: schema key with an empty name", name_);
  for (const auto& k : keys_) {
    HERD_REQUIRE(lower(k.name_) != lower(name), "{}: schema key \"{}\" declared twice", name_, name);
    for (const auto& a : k.aliases_)
      HERD_REQUIRE(lower(a) != lower(name), "{}: schema key \"{}\" is an alias of \"{}\"", name_, name, k.name_);
  }
  SchemaKey k;
  k.name_ = std::move(name);
  k.type_ = type;
  k.doc_ = std::move(doc);
  k.default_ = std::move(def);
  k.default_.where = SourceLocation{"default", 0};
  keys_.push_back(std::move(k));
  return keys_.back();
}

SchemaKey& Schema::add_bool(std::string name, std::optional<bool> def, std::string doc) {
  return add(std::move(name), ValueType::kBool, def ? ConfigValue::boolean(*def) : ConfigValue(), std::move(doc));
}
SchemaKey& Schema::add_int(std::string name, std::optional<std::int64_t> def, std::string doc) {
  return add(std::move(name), ValueType::kInt, def ? ConfigValue::integer(*def) : ConfigValue(), std::move(doc));
}
SchemaKey& Schema::add_float(std::string name, std::optional<double> def, std::string doc) {
  return add(std::move(name), ValueType::kFloat, def ? ConfigValue::real(*def) : ConfigValue(), std::move(doc));
}
SchemaKey& Schema::add_string(std::string name, std::optional<std::string> def, std::string doc) {
  return add(std::move(name), ValueType::kString, def ? ConfigValue::string(*def) : ConfigValue(), std::move(doc));
}

namespace {
/// The default list `def` as an array value (empty when there is none); its elements are
/// moved into the values.
template <class T, class Make>
ConfigValue list_of(std::optional<std::vector<T>>&& def, Make make) {
  if (!def) return ConfigValue();
  ConfigValue::Array a;
  for (auto&& x : *def) a.push_back(make(std::move(x)));
  return ConfigValue::array(std::move(a));
}
}  // namespace

SchemaKey& Schema::add_bool_list(std::string name, std::optional<std::vector<bool>> def, std::string doc) {
  return add(std::move(name), ValueType::kBoolList,
             list_of(std::move(def), [](bool b) { return ConfigValue::boolean(b); }), std::move(doc));
}
SchemaKey& Schema::add_int_list(std::string name, std::optional<std::vector<std::int64_t>> def, std::string doc) {
  return add(std::move(name), ValueType::kIntList,
             list_of(std::move(def), [](std::int64_t i) { return ConfigValue::integer(i); }), std::move(doc));
}
SchemaKey& Schema::add_float_list(std::string name, std::optional<std::vector<double>> def, std::string doc) {
  return add(std::move(name), ValueType::kFloatList,
             list_of(std::move(def), [](double d) { return ConfigValue::real(d); }), std::move(doc));
}
SchemaKey& Schema::add_string_list(std::string name, std::optional<std::vector<std::string>> def, std::string doc) {
  return add(std::move(name), ValueType::kStringList,
             list_of(std::move(def), [](std::string s) { return ConfigValue::string(std::move(s)); }), std::move(doc));
}

SchemaKey& Schema::add_float_matrix(std::string name, std::optional<std::vector<std::vector<double>>> def,
                                    std::string doc) {
  ConfigValue d;
  if (def) {
    ConfigValue::Array rows;
    for (auto& row : *def)
      rows.push_back(
          list_of(std::optional<std::vector<double>>(std::move(row)), [](double x) { return ConfigValue::real(x); }));
    d = ConfigValue::array(std::move(rows));
  }
  return add(std::move(name), ValueType::kFloatMatrix, std::move(d), std::move(doc));
}

namespace {

/// Parses override text as one element of type `t`; nullopt when it does not parse.
std::optional<ConfigValue> parse_text(const std::string& text, ValueType t, const SourceLocation& where) {
  const std::string s = trim(text);
  switch (t) {
    case ValueType::kBool: {
      const std::string l = lower(s);
      if (l == "true" || l == "yes" || l == "on" || l == "1" || l == ".true." || l == "t" || l == ".t.")
        return ConfigValue::boolean(true, where);
      if (l == "false" || l == "no" || l == "off" || l == "0" || l == ".false." || l == "f" || l == ".f.")
        return ConfigValue::boolean(false, where);
      return std::nullopt;
    }
    case ValueType::kInt:
    case ValueType::kFloat: {
      if (s.empty()) return std::nullopt;
      std::string r = s;
      for (auto& c : r)
        if (c == 'd' || c == 'D') c = 'e';
      errno = 0;
      char* end = nullptr;
      const long long i = std::strtoll(r.c_str(), &end, 10);
      if (end == r.c_str() + r.size() && errno == 0) return ConfigValue::integer(i, where);
      const double d = std::strtod(r.c_str(), &end);
      if (end == r.c_str() + r.size()) return ConfigValue::real(d, where);
      return std::nullopt;
    }
    default: {
      std::string v = s;
      if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front())
        v = v.substr(1, v.size() - 2);
      return ConfigValue::string(v, where);
    }
  }
}

/// Pieces of `text` between commas that are not inside '...' or "..." quotes, each trimmed.
std::vector<std::string> split_outside_quotes(std::string_view text) {
  std::vector<std::string> out;
  std::string cur;
  char quote = 0;
  for (const char c : text) {
    if (quote != 0) {
      if (c == quote) quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == ',') {
      out.push_back(trim(cur));
      cur.clear();
      continue;
    }
    cur += c;
  }
  out.push_back(trim(cur));
  return out;
}

/// `v` for messages: override text that parses as a number shows as that number ("40 (an
/// integer)", not "\"40\" (text)"); anything else as `describe` gives it.
std::string shown_value(const ConfigValue& v, ValueType t) {
  if (v.is_raw_text() && (t == ValueType::kInt || t == ValueType::kFloat))
    if (auto p = parse_text(v.as_string(), t, v.where)) return p->describe();
  return v.describe();
}

/// Converts `v` to an element of type `t`; nullopt when the kind does not fit.
std::optional<ConfigValue> convert_scalar(const ConfigValue& v, ValueType t) {
  if (v.is_raw_text()) {
    auto p = parse_text(v.as_string(), t, v.where);
    if (!p || t != ValueType::kInt || p->kind() != ConfigValue::Kind::kFloat) return p;
    return convert_scalar(*p, t);  // "1e3" is 1000; "1e20" and "2.5" are no integers
  }
  switch (t) {
    case ValueType::kBool:
      if (v.kind() == ConfigValue::Kind::kBool) return v;
      return std::nullopt;
    case ValueType::kInt:
      if (v.kind() == ConfigValue::Kind::kInt) return v;
      if (v.kind() == ConfigValue::Kind::kFloat) {
        const double d = v.as_float();
        if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.2e18)
          return ConfigValue::integer(static_cast<std::int64_t>(d), v.where);
      }
      return std::nullopt;
    case ValueType::kFloat:
      if (v.kind() == ConfigValue::Kind::kFloat) return v;
      if (v.kind() == ConfigValue::Kind::kInt) return ConfigValue::real(v.as_float(), v.where);
      return std::nullopt;
    default:
      if (v.kind() == ConfigValue::Kind::kString) return v;
      return std::nullopt;
  }
}

struct Problem {
  long order;
  std::string message;
};

class Resolver {
 public:
  Resolver(const std::vector<SchemaKey>& keys, const Config& config) : keys_(keys), fold_(config.case_insensitive()) {
    for (const auto& k : keys_) {
      names_.push_back(k.name());
      for (const auto& a : k.aliases()) names_.push_back(a);
    }
    // Table names are candidates for "did you mean" too.
    candidates_ = names_;
    for (const auto& n : names_)
      for (std::size_t dot = n.find('.'); dot != std::string::npos; dot = n.find('.', dot + 1))
        if (std::find(candidates_.begin(), candidates_.end(), n.substr(0, dot)) == candidates_.end())
          candidates_.push_back(n.substr(0, dot));
  }

  /// What an unknown key `written` may have meant, quoted: the keys whose last part is its
  /// last part (a key put in the wrong table or outside its table, e.g. "init" for
  /// "network.init"; up to 3, joined by "or"), else those whose last part starts with its
  /// last part, of 4 characters or more (a name cut short, e.g. "output" for
  /// "output_prefix"; up to 3), else the nearest name by edit distance; when even that one
  /// differs in more than half of the written characters, the keys whose last part holds
  /// its last part's letters in order, from the same first letter (an abbreviation, e.g.
  /// "totl" for "total_steps", where "eval" is nearer; up to 3), if any, else, when the
  /// nearest name differs in more than half of the written characters plus one, nothing
  /// (empty: "mpiname" is like no key, and "thin" would mislead).
  std::string suggest(const std::string& written) const {
    const auto leaf = [&](const std::string& n) {
      const std::size_t dot = n.rfind('.');
      const std::string l = dot == std::string::npos ? n : n.substr(dot + 1);
      return fold_ ? lower(l) : l;
    };
    const std::string want = leaf(written);
    // Up to 3 names whose last part `matches`, quoted and joined by "or" (empty: none).
    const auto those = [&](const std::vector<std::string>& names, auto&& matches) {
      std::string out;
      int found = 0;
      for (const auto& n : names)
        if (found < 3 && matches(leaf(n))) out += (found++ ? " or \"" : "\"") + n + "\"";
      return out;
    };
    // The keys' own names, not their aliases too; in a namelist, a key's first alias
    // (ParaDRAM's name, `variableNameList`), which is how such an input spells it.
    std::vector<std::string> own;
    for (const auto& k : keys_) own.push_back(fold_ && !k.aliases().empty() ? k.aliases().front() : k.name());
    if (std::string s = those(names_, [&](const std::string& l) { return l == want; }); !s.empty()) return s;
    if (want.size() >= 4)
      if (std::string s = those(own, [&](const std::string& l) { return l.rfind(want, 0) == 0; }); !s.empty()) return s;
    std::size_t dist = 0;
    const std::string near = nearest(written, candidates_, fold_, &dist);
    if (2 * dist > want.size() && !want.empty()) {
      const auto abbreviates = [&](const std::string& l) {
        if (l.empty() || l[0] != want[0]) return false;
        std::size_t at = 0;
        for (const char ch : l)
          if (at < want.size() && ch == want[at]) ++at;
        return at == want.size();
      };
      // In a table of the schema, its own keys first: an abbreviation of one of them, else
      // those with the same first letter ("target.mu": "target.mean", not a top-level key).
      const std::size_t dot = written.rfind('.');
      if (dot != std::string::npos && is_prefix(written.substr(0, dot))) {
        const std::string table = (fold_ ? lower(written.substr(0, dot)) : written.substr(0, dot)) + ".";
        std::vector<std::string> mine;
        for (const auto& n : own)
          if ((fold_ ? lower(n) : n).rfind(table, 0) == 0) mine.push_back(n);
        if (std::string s = those(mine, abbreviates); !s.empty()) return s;
        if (std::string s = those(mine, [&](const std::string& l) { return !l.empty() && l[0] == want[0]; });
            !s.empty())
          return s;
      }
      if (std::string s = those(own, abbreviates); !s.empty()) return s;
      // Nothing alike: no name at all is better than a misleading one ("mpiname": "thin").
      if (2 * dist > want.size() + 2) return {};
    }
    // A namelist is told a key's namelist name (`variableNameList`, not `variable_names`).
    if (fold_)
      for (const auto& k : keys_)
        if (k.name() == near && !k.aliases().empty()) return "\"" + k.aliases().front() + "\"";
    return "\"" + near + "\"";
  }

  /// Keys directly or indirectly under table `path`, relative to it, for messages.
  std::string members_of(const std::string& path) const {
    const std::string p = (fold_ ? lower(path) : path) + ".";
    std::vector<std::string> out;
    for (const auto& k : keys_)
      if ((fold_ ? lower(k.name()) : k.name()).rfind(p, 0) == 0) out.push_back(k.name().substr(p.size()));
    return quoted_list(out);
  }

  void problem(const SourceLocation& where, std::string msg) {
    long order = 2000000000L + static_cast<long>(problems.size());
    if (where.line > 0) order = where.line;
    else if (where.file.rfind("--set", 0) == 0) order = 1000000000L + static_cast<long>(problems.size());
    const std::string prefix = where.str();
    problems.push_back({order, prefix.empty() ? std::move(msg) : prefix + ": " + msg});
  }

  /// The index of the key that `path` names, or -1.
  int match(const std::string& path) const {
    const std::string p = fold_ ? lower(path) : path;
    for (std::size_t i = 0; i < keys_.size(); ++i) {
      if ((fold_ ? lower(keys_[i].name()) : keys_[i].name()) == p) return static_cast<int>(i);
      for (const auto& a : keys_[i].aliases())
        if ((fold_ ? lower(a) : a) == p) return static_cast<int>(i);
    }
    return -1;
  }

  bool is_prefix(const std::string& path) const {
    const std::string p = (fold_ ? lower(path) : path) + ".";
    for (const auto& n : names_)
      if ((fold_ ? lower(n) : n).rfind(p, 0) == 0) return true;
    return false;
  }

  void walk(const ConfigValue& table, const std::string& prefix, const std::string& written_prefix) {
    for (const auto& [k, v] : table.as_table()) {
      const std::string path = prefix.empty() ? k : fmt::format("{}.{}", prefix, k);
      const std::string shown_leaf = (fold_ && !v.written_name.empty()) ? v.written_name : k;
      // A namelist component (target%ndim) keeps its whole written name, as does --set text.
      const bool whole = fold_ && v.written_name.find('%') != std::string::npos;
      const std::string written =
          (v.is_raw_text() && !v.written_name.empty()) || whole
              ? v.written_name
              : (written_prefix.empty() ? shown_leaf : fmt::format("{}.{}", written_prefix, shown_leaf));
      const int idx = match(path);
      if (idx >= 0) {
        auto& slot = assigned[static_cast<std::size_t>(idx)];
        if (slot.value != nullptr && !v.is_raw_text() && !slot.value->is_raw_text()) {
          problem(v.where, fmt::format("key \"{}\" is also given as \"{}\" (line {})", written, slot.written,
                                       slot.value->where.line));
        } else if (slot.value == nullptr || v.is_raw_text()) {
          slot.value = &v;
          slot.written = written;
        }
      } else if (v.is_table() && is_prefix(path)) {
        walk(v, path, written);
      } else if (is_prefix(path)) {
        problem(v.where, fmt::format("key \"{}\" is {}, but must be a table with keys {}", written, v.describe(),
                                     members_of(path)));
      } else {
        // Suggestions cost an edit distance per candidate; a file of thousands of unknown
        // keys (not a typo) gets them for the first 100 only.
        if (problems.size() < 100) {
          std::string dotted = written;  // a namelist's target%mu as the table key target.mu
          std::replace(dotted.begin(), dotted.end(), '%', '.');
          std::string near = suggest(dotted);
          if (dotted != written) std::replace(near.begin(), near.end(), '.', '%');  // as a namelist writes them
          problem(v.where, near.empty() ? fmt::format("unknown key \"{}\" (no key is spelled like it; --help-keys "
                                                      "lists them)",
                                                      written)
                                        : fmt::format("unknown key \"{}\"; did you mean {}?", written, near));
        } else {
          problem(v.where, fmt::format("unknown key \"{}\"", written));
        }
      }
    }
  }

  /// Whether names (and choice values) match in any case: a Fortran namelist.
  bool folds() const noexcept { return fold_; }

  struct Slot {
    const ConfigValue* value = nullptr;
    std::string written;
  };
  std::vector<Slot> assigned;
  std::vector<Problem> problems;

 private:
  const std::vector<SchemaKey>& keys_;
  bool fold_;
  std::vector<std::string> names_, candidates_;
};

}  // namespace

Settings Schema::resolve(const Config& config_in, const std::vector<std::string>& overrides,
                         std::vector<std::string>& errors) const {
  Resolver r(keys_, config_in);
  // Overrides go into a copy; without them, no copy of a possibly large tree.
  Config with_overrides;
  if (!overrides.empty()) {
    with_overrides = config_in;
    for (const auto& o : overrides) {
      try {
        with_overrides.set_override(o);
      } catch (const InputError& e) {
        r.problem({}, e.what());
      }
    }
  }
  const Config& config = overrides.empty() ? config_in : with_overrides;
  r.assigned.resize(keys_.size());
  r.walk(config.root(), "", "");

  Settings out;
  out.namelist_ = config.case_insensitive();
  for (std::size_t i = 0; i < keys_.size(); ++i) {
    const SchemaKey& key = keys_[i];
    const ConfigValue* given = r.assigned[i].value;
    const std::string shown = given != nullptr ? r.assigned[i].written : key.name();
    Settings::Entry e{key.name(), key.doc(), {}, false, shown};
    if (given == nullptr || given->is_null()) {
      if (!key.default_value().is_null()) {
        e.value = key.default_value();
        e.is_default = true;
      } else if (key.required_) {
        r.problem({config.source(), 0},
                  fmt::format("missing required key \"{}\" ({}; {})", key.name(), key.expected(), key.doc()));
      } else {
        e.value = ConfigValue::null({"unset", 0});
      }
      out.entries_.push_back(std::move(e));
      continue;
    }
    const ValueType et = element_type(key.type());
    auto bad = [&](const ConfigValue& v, const std::string& what) {
      r.problem(v.where,
                fmt::format("key \"{}\"{} is {}, but must be {}", shown, what, shown_value(v, et), key.expected()));
    };
    // Range and choice checks of one converted element.
    auto in_bounds = [&](const ConfigValue& v) {
      if (v.kind() == ConfigValue::Kind::kInt || v.kind() == ConfigValue::Kind::kFloat) {
        const double x = v.as_float();
        if (key.lo_ && !(key.lo_open_ ? x > *key.lo_ : x >= *key.lo_)) return false;
        if (key.hi_ && !(key.hi_open_ ? x < *key.hi_ : x <= *key.hi_)) return false;
        if (std::isnan(x) && (key.lo_ || key.hi_)) return false;
        if (key.finite_ && !std::isfinite(x)) return false;
        if (key.unset_elements_ && std::isnan(x)) return false;  // NaN marks an unset element
      }
      // "" marks an unset element of a string list.
      if (v.kind() == ConfigValue::Kind::kString && key.unset_elements_ && v.as_string().empty()) return false;
      if (v.kind() == ConfigValue::Kind::kString && !key.choices_.empty())
        return std::find(key.choices_.begin(), key.choices_.end(), v.as_string()) != key.choices_.end();
      return true;
    };
    // A namelist's choice values are read as Fortran programs read them (ParaMonte among
    // them): in any case, blanks, '_' and '-' ignored ("Verbose", "single chain").
    auto fold_choice = [&](ConfigValue& v) {
      if (v.kind() != ConfigValue::Kind::kString || key.choices_.empty()) return;
      auto norm = [](std::string_view x) {
        std::string out;
        for (char c : x)
          if (c != ' ' && c != '_' && c != '-' && c != '\t')
            out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
        return out;
      };
      const std::string n = norm(v.as_string());
      for (const auto& c : key.choices_)
        if (norm(c) == n) {
          ConfigValue folded = ConfigValue::string(c, v.where);
          v = std::move(folded);
          return;
        }
    };
    auto choice_hint = [&](const ConfigValue& v) -> std::string {
      if (v.kind() != ConfigValue::Kind::kString || key.choices_.empty()) return "";
      std::size_t d = 0;
      const std::string n = nearest(v.as_string(), key.choices_, false, &d);
      return d <= std::max<std::size_t>(2, v.as_string().size() / 3) ? fmt::format("; did you mean \"{}\"?", n) : "";
    };
    if (key.type() == ValueType::kFloatMatrix) {
      ConfigValue parsed;
      const ConfigValue* m = given;
      if (given->is_raw_text()) {
        try {
          parsed = *parse_toml("v = " + given->as_string(), "--set").find("v");
          parsed.where = given->where;
          m = &parsed;
        } catch (const InputError&) {
          bad(*given, "");
          out.entries_.push_back(std::move(e));
          continue;
        }
      }
      bool ok = m->is_array();
      std::size_t cols = 0;
      if (ok)
        for (const auto& row : m->as_array()) {
          if (!row.is_array()) {
            ok = false;
            break;
          }
          cols = std::max(cols, row.as_array().size());
        }
      if (!ok) {
        bad(*m, "");
        out.entries_.push_back(std::move(e));
        continue;
      }
      const auto& def = key.default_value();
      ConfigValue::Array rows;
      for (std::size_t i = 0; i < m->as_array().size() && ok; ++i) {
        const auto& row = m->as_array()[i].as_array();
        ConfigValue::Array typed_row;
        for (std::size_t j = 0; j < cols && ok; ++j) {
          const std::string what = fmt::format(" element ({},{})", i + 1, j + 1);
          const ConfigValue* item = j < row.size() && !row[j].is_null() ? &row[j] : nullptr;
          if (item == nullptr) {
            if (def.is_array() && i < def.as_array().size() && j < def.as_array()[i].as_array().size()) {
              typed_row.push_back(def.as_array()[i].as_array()[j]);
              continue;
            }
            r.problem(m->where, fmt::format("key \"{}\"{} is not set and has no default", shown, what));
            ok = false;
            break;
          }
          auto v = item->is_array() || item->is_table() ? std::nullopt : convert_scalar(*item, et);
          const ConfigValue& at = item->where.line > 0 ? *item : *m;
          if (!v) {
            r.problem(at.where,
                      fmt::format("key \"{}\"{} is {}, but must be {}", shown, what, item->describe(), key.expected()));
            ok = false;
          } else if (!in_bounds(*v)) {
            r.problem(at.where, fmt::format("key \"{}\"{} is {}, but must be {}", shown, what,
                                            item->is_raw_text() ? v->describe() : item->describe(), key.expected()));
            ok = false;
          } else {
            typed_row.push_back(std::move(*v));
          }
        }
        rows.push_back(ConfigValue::array(std::move(typed_row), m->where));
      }
      if (ok && (rows.size() < key.min_len_ || rows.size() > key.max_len_)) {
        r.problem(m->where, fmt::format("key \"{}\" has {} rows, but must be {}", shown, rows.size(), key.expected()));
        ok = false;
      }
      if (ok) e.value = ConfigValue::array(std::move(rows), m->where);
      out.entries_.push_back(std::move(e));
      continue;
    }
    if (!is_list(key.type())) {
      if (given->is_array() || given->is_table()) {
        bad(*given, "");
        out.entries_.push_back(std::move(e));
        continue;
      }
      auto v = convert_scalar(*given, et);
      if (!v && key.number_as_text_ &&
          (given->kind() == ConfigValue::Kind::kFloat || given->kind() == ConfigValue::Kind::kInt))
        v = ConfigValue::string(given->to_string(), given->where);
      if (v && r.folds()) fold_choice(*v);
      if (!v) {
        bad(*given, "");
      } else if (!in_bounds(*v)) {
        r.problem(given->where, fmt::format("key \"{}\" is {}, but must be {}{}", shown,
                                            given->is_raw_text() ? v->describe() : given->describe(), key.expected(),
                                            choice_hint(*v)));
      } else {
        e.value = std::move(*v);
        e.value.where = given->where;
      }
      out.entries_.push_back(std::move(e));
      continue;
    }
    // Lists.
    ConfigValue::Array items;
    bool well_formed = true;
    // A single value given for a list key is taken as a one-element list; its problems name
    // the key alone, since "element 1" would suggest the user wrote a list.
    bool written_as_list = true;
    if (given->is_raw_text()) {
      // Command-line text: TOML array syntax first ("[1, 2]", "[\"a,b\", \"c\"]", rows
      // "[[1, 2], [3, 4]]"), else bare items split at commas outside quotes ("1, 2", "a, b").
      std::string text = trim(given->as_string());
      bool toml_array = false;
      if (text.size() >= 2 && text.front() == '[') {
        try {
          const ConfigValue v = *parse_toml("v = " + text, "--set").find("v");
          if (v.is_array()) {
            items = v.as_array();
            for (auto& x : items) {
              x.where = given->where;
              if (x.is_array())
                for (auto& y : x.as_array()) y.where = given->where;
            }
            toml_array = true;
          }
        } catch (const InputError&) {
        }
      }
      if (!toml_array) {
        const bool bracketed = text.size() >= 2 && text.front() == '[' && text.back() == ']';
        if (bracketed) text = text.substr(1, text.size() - 2);
        // Brackets left over are nesting TOML could not read: refused, never flattened.
        well_formed = text.find_first_of("[]") == std::string::npos;
        if (well_formed && !trim(text).empty())
          for (auto& piece : split_outside_quotes(text)) items.push_back(ConfigValue::raw_text(piece, given->where));
        written_as_list = bracketed || items.size() != 1;
      }
    } else if (given->is_array()) {
      items = given->as_array();
    } else if (given->is_table()) {
      well_formed = false;
    } else {
      items.push_back(*given);
      written_as_list = false;
    }
    // A namelist file's list of an unset_elements key: Fortran's partial arrays.
    const bool partial = key.unset_elements_ && r.folds() && !given->is_raw_text();
    // A matrix given as rows (TOML [[a, b], [c, d]], a namelist m(1:2,1:2) = ...): a list key
    // takes its elements in row-major order. Rows must have one length: ragged rows are refused.
    const bool rows = !items.empty() && std::all_of(items.begin(), items.end(), [](const ConfigValue& v) {
      return v.is_array() && std::none_of(v.as_array().begin(), v.as_array().end(),
                                          [](const ConfigValue& x) { return x.is_array() || x.is_table(); });
    });
    // A namelist file's matrix elements of an unset_elements key (`m(1,2) = 0.5` alone: row 1
    // is [unset, 0.5]): the rows are padded with unset elements to the longest one.
    const bool matrix_elements = rows && partial;
    if (rows) {
      ConfigValue::Array flat;
      std::string lengths;
      bool ragged = false;
      std::size_t cols = 0;
      for (const auto& row : items) cols = std::max(cols, row.as_array().size());
      for (const auto& row : items) {
        ragged = ragged || row.as_array().size() != items.front().as_array().size();
        if (&row - items.data() < 8) lengths += fmt::format("{}{}", lengths.empty() ? "" : ", ", row.as_array().size());
        for (const auto& x : row.as_array()) flat.push_back(x);
        if (matrix_elements)
          for (std::size_t j = row.as_array().size(); j < cols; ++j) flat.push_back(ConfigValue::null(row.where));
      }
      if (items.size() > 8) lengths += fmt::format(", ... ({} rows)", items.size());
      if (matrix_elements) e.columns = cols;
      if (ragged && well_formed && !matrix_elements) {
        // E.g. a namelist's m(3,3) = 1 alone: rows 1 and 2 are empty.
        r.problem(given->where, fmt::format("key \"{}\" is a matrix whose rows have {} elements, but must be {} (rows "
                                            "of one length, taken in row-major order)",
                                            shown, lengths, key.expected()));
        out.entries_.push_back(std::move(e));
        continue;
      }
      items = std::move(flat);
    }
    if (!well_formed) {
      bad(*given, "");
      out.entries_.push_back(std::move(e));
      continue;
    }
    bool ok = true;
    ConfigValue::Array typed;
    const auto& def = key.default_value();
    for (std::size_t i = 0; i < items.size() && ok; ++i) {
      const ConfigValue& item = items[i];
      const std::string what = written_as_list ? fmt::format(" element {}", i + 1) : std::string();
      if (item.is_null()) {
        if (def.is_array() && i < def.as_array().size()) {
          typed.push_back(def.as_array()[i]);
          continue;
        }
        if (partial) {
          typed.push_back(et == ValueType::kString
                              ? ConfigValue::string("", given->where)
                              : ConfigValue::real(std::numeric_limits<double>::quiet_NaN(), given->where));
          continue;
        }
        // Which elements the input does set (a namelist's x(5) = 1 leaves 1 to 4 unset).
        std::vector<std::size_t> set_at;
        for (std::size_t j = 0; j < items.size(); ++j)
          if (!items[j].is_null()) set_at.push_back(j + 1);
        std::string sets = set_at.empty() ? "" : fmt::format("{}", set_at.front());
        for (std::size_t j = 1; j < set_at.size() && j < 4; ++j) sets += fmt::format(", {}", set_at[j]);
        if (set_at.size() > 4) sets += fmt::format(", ... ({} in all)", set_at.size());
        r.problem(item.where.line > 0 ? item.where : given->where,
                  fmt::format("key \"{}\" element {} is not set and has no default ({} of {})", shown, i + 1,
                              set_at.empty()       ? std::string("the input sets none")
                              : set_at.size() == 1 ? "the input sets element " + sets
                                                   : "the input sets elements " + sets,
                              items.size()));
        ok = false;
        break;
      }
      auto v = item.is_array() || item.is_table() ? std::nullopt : convert_scalar(item, et);
      if (!v) {
        // An element of --set text in TOML array syntax ("[1, \"x\"]") is named by its own
        // value, as a file's is, not by the whole text.
        bad(item.where.line > 0 || item.is_raw_text() || given->is_raw_text() ? item : *given, what);
        ok = false;
      } else if (!in_bounds(*v)) {
        r.problem(item.where.line > 0 ? item.where : given->where,
                  fmt::format("key \"{}\"{} is {}, but must be {}{}", shown, what,
                              item.is_raw_text() ? v->describe() : item.describe(), key.expected(), choice_hint(*v)));
        ok = false;
      } else {
        typed.push_back(std::move(*v));
      }
    }
    if (ok && (typed.size() < key.min_len_ || typed.size() > key.max_len_)) {
      r.problem(given->where,
                fmt::format("key \"{}\" has {} elements, but must be {}", shown, typed.size(), key.expected()));
      ok = false;
    }
    if (ok) e.value = ConfigValue::array(std::move(typed), given->where);
    e.partial = ok && partial;
    if (!e.partial) e.columns = 0;
    out.entries_.push_back(std::move(e));
  }

  std::stable_sort(r.problems.begin(), r.problems.end(),
                   [](const Problem& a, const Problem& b) { return a.order < b.order; });
  for (auto& p : r.problems) errors.push_back(std::move(p.message));
  return out;
}

std::vector<std::string> Schema::check(const Config& config, const std::vector<std::string>& overrides) const {
  std::vector<std::string> errors;
  resolve(config, overrides, errors);
  return errors;
}

Settings Schema::apply(const Config& config, const std::vector<std::string>& overrides) const {
  std::vector<std::string> errors;
  Settings s = resolve(config, overrides, errors);
  if (!errors.empty()) {
    if (errors.size() == 1) throw InputError(errors[0]);
    // Every problem at once, one per line (a user fixes them all in one edit).
    std::string all;
    for (const auto& e : errors) all += (all.empty() ? "" : "\n") + e;
    throw InputError(all);
  }
  return s;
}

std::string Schema::help() const {
  std::string out;
  for (const auto& k : keys_) {
    out += fmt::format("{} : {}", k.name(), k.expected());
    if (!k.default_value().is_null()) out += fmt::format(" (default {})", k.default_value().to_string());
    if (k.required_) out += " (required)";
    if (!k.aliases().empty()) out += " (also " + quoted_list(k.aliases()) + ")";
    out += "\n    " + k.doc() + "\n";
  }
  return out;
}

}  // namespace herd::io
