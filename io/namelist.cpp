#include "herd/io/namelist.hpp"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <unordered_map>

#include "herd/core/error.hpp"
#include "herd/io/atomic_file.hpp"

namespace herd::io {

namespace {

constexpr std::int64_t kMaxIndex = 1000000;    // largest subscript or repeat count
constexpr std::size_t kMaxElements = 1000000;  // values and array elements in all

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; }
bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }
bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v'; }

bool is_identifier(std::string_view w) {
  if (w.empty() || !is_name_start(w[0])) return false;
  for (char c : w)
    if (!is_name_char(c) && c != '%') return false;
  return true;
}

std::string printable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 40)) out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
  if (s.size() > 40) out += "...";
  return out;
}

struct Dim {
  std::int64_t lo = 1;
  std::int64_t hi = 0;
  bool has_hi = false;
};

class Parser {
 public:
  Parser(std::string_view text, const std::string& source) : t_(text), src_(source), cfg_(source) {
    cfg_.set_case_insensitive(true);
  }

  Config run(std::string_view group) {
    if (!find_group(group)) {
      if (group.empty()) fail(line_, "no namelist group (&name ... /) found");
      // The groups the file does have: a misspelt name (&ParaDRM, &ParaDRAM_) shows there.
      std::string have;
      for (std::size_t i = 0; i < skipped_.size() && i < 3; ++i)
        have += fmt::format("{}&{} (line {})", i > 0 ? ", " : "", skipped_[i].first, skipped_[i].second);
      if (skipped_.size() > 3) have += fmt::format(", ... ({} groups)", skipped_.size());
      if (have.empty()) fail(0, fmt::format("no namelist group &{} found", group));
      fail(0, fmt::format("no namelist group &{} found; the file has {}", group, have));
    }
    parse_body();
    record_other_groups();
    return std::move(cfg_);
  }

 private:
  [[noreturn]] void fail(int line, const std::string& msg) const {
    if (line > 0) throw InputError(fmt::format("{}:{}: {}", src_, line, msg));
    throw InputError(fmt::format("{}: {}", src_, msg));
  }

  /// A problem of a value, prefixed with the variable it is assigned to.
  std::string keyed(const std::string& msg) const {
    return current_.empty() ? msg : fmt::format("key \"{}\": {}", current_, msg);
  }

  bool eof() const { return p_ >= t_.size(); }
  char peek() const { return eof() ? '\0' : t_[p_]; }
  void advance() {
    if (t_[p_] == '\n') ++line_;
    ++p_;
  }
  void skip_comment() {
    while (!eof() && t_[p_] != '\n') ++p_;
  }
  void skip_blanks() {
    while (!eof()) {
      if (is_blank(t_[p_])) advance();
      else if (t_[p_] == '!') skip_comment();
      else break;
    }
  }
  std::string_view read_name() {
    const std::size_t start = p_;
    if (!eof() && is_name_start(t_[p_]))
      while (!eof() && is_name_char(t_[p_])) ++p_;
    return t_.substr(start, p_ - start);
  }

  /// Moves to the next group's name (past its '&' or '$'; text outside groups, "&end" and a
  /// bare '&' are passed over) and returns it as written with the line of its '&', or false
  /// at the end of the text.
  bool next_group(std::string_view& written, int& at) {
    while (true) {
      skip_blanks();
      if (eof()) return false;
      if (peek() != '&' && peek() != '$') {
        skip_comment();  // text outside groups is ignored
        continue;
      }
      at = line_;
      advance();
      written = read_name();
      if (!written.empty() && lower(written) != "end") return true;
    }
  }

  /// Finds group `group` (empty: the first), recording the groups before it as not read.
  bool find_group(std::string_view group) {
    const std::string want = lower(group);
    std::string_view written;
    int at = 0;
    while (next_group(written, at)) {
      if (want.empty() || lower(written) == want) {
        group_ = std::string(written);
        group_line_ = at;
        return true;
      }
      cfg_.add_other_group(std::string(written), at);
      skipped_.emplace_back(std::string(written), at);
      skip_group();
    }
    return false;
  }

  /// The groups after the one read, named in the Config so that a program can say they are
  /// not read.
  void record_other_groups() {
    std::string_view written;
    int at = 0;
    while (next_group(written, at)) {
      cfg_.add_other_group(std::string(written), at);
      skip_group();
    }
  }

  void skip_group() {
    while (!eof()) {
      const char c = peek();
      if (c == '\'' || c == '"') {
        parse_string();
      } else if (c == '!') {
        skip_comment();
      } else if (c == '/') {
        advance();
        return;
      } else if (c == '&' || c == '$') {
        return;
      } else {
        advance();
      }
    }
  }

  void parse_body() {
    while (true) {
      skip_blanks();
      while (peek() == ',') {
        advance();
        skip_blanks();
      }
      if (eof()) fail(group_line_, fmt::format("namelist group &{} is not closed by '/'", group_));
      const char c = peek();
      if (c == '/') {
        advance();
        return;
      }
      if (c == '&' || c == '$') {
        const int at = line_;
        advance();
        const std::string_view name = read_name();
        if (lower(name) == "end") return;
        fail(at,
             fmt::format("namelist group &{} (line {}) is not closed by '/' before &{}", group_, group_line_, name));
      }
      parse_assignment();
    }
  }

  std::int64_t parse_index(int at, std::string_view name) {
    skip_blanks();
    bool neg = false;
    if (peek() == '+' || peek() == '-') {
      neg = peek() == '-';
      advance();
    }
    if (!std::isdigit(static_cast<unsigned char>(peek())))
      fail(at, fmt::format("subscript of \"{}\": expected an integer, found '{}'", name, printable(t_.substr(p_, 1))));
    std::int64_t v = 0;
    while (std::isdigit(static_cast<unsigned char>(peek()))) {
      v = v * 10 + (peek() - '0');
      if (v > kMaxIndex) fail(at, fmt::format("subscript of \"{}\" exceeds the limit {}", name, kMaxIndex));
      advance();
    }
    if (neg) v = -v;
    if (v < 1) fail(at, fmt::format("subscript {} of \"{}\": indices start at 1", v, name));
    return v;
  }

  std::vector<Dim> parse_subscripts(int at, std::string_view name) {
    std::vector<Dim> dims;
    advance();  // '('
    while (true) {
      skip_blanks();
      Dim d;
      if (peek() != ':') d.lo = parse_index(at, name);
      skip_blanks();
      if (peek() == ':') {
        advance();
        skip_blanks();
        if (peek() != ',' && peek() != ')') {
          d.hi = parse_index(at, name);
          d.has_hi = true;
        }
      } else {
        d.hi = d.lo;
        d.has_hi = true;
      }
      if (d.has_hi && d.hi < d.lo) fail(at, fmt::format("empty section {}:{} of \"{}\"", d.lo, d.hi, name));
      dims.push_back(d);
      skip_blanks();
      if (peek() == ',') {
        advance();
        continue;
      }
      if (peek() == ')') {
        advance();
        break;
      }
      fail(at, fmt::format("subscripts of \"{}\": expected ',' or ')', found '{}'", name,
                           eof() ? std::string("end of file") : printable(t_.substr(p_, 1))));
    }
    if (dims.size() > 2) fail(at, fmt::format("\"{}\" has {} subscripts; at most 2 are supported", name, dims.size()));
    return dims;
  }

  void parse_assignment() {
    const int at = line_;
    const std::size_t start = p_;
    if (!is_name_start(peek()))
      fail(at, fmt::format("expected a variable name in &{}, found '{}'", group_, printable(t_.substr(p_, 1))));
    std::string key = lower(read_name());
    int components = 0;
    while (peek() == '%') {
      if (++components > 16) fail(at, "more than 16 nested derived-type components");
      advance();
      const auto part = read_name();
      if (part.empty()) fail(at, "expected a component name after '%'");
      key.push_back('.');
      key += lower(part);
    }
    const std::string written(t_.substr(start, p_ - start));
    skip_blanks();
    std::vector<Dim> subs;
    if (peek() == '(') subs = parse_subscripts(at, written);
    skip_blanks();
    if (peek() != '=')
      fail(at, fmt::format("expected '=' after \"{}\", found {}", written,
                           eof() ? std::string("end of file") : fmt::format("'{}'", printable(t_.substr(p_, 1)))));
    advance();
    current_ = written;
    std::vector<ConfigValue> values = parse_values();
    current_.clear();
    assign(key, written, subs, std::move(values), at);
  }

  std::string parse_string() {
    const char q = peek();
    const int at = line_;
    advance();
    std::string s;
    while (true) {
      if (eof()) fail(at, "string is not closed");
      const char c = peek();
      advance();
      if (c == q) {
        if (peek() == q) {  // doubled quote: one quote character
          s += q;
          advance();
          continue;
        }
        return s;
      }
      s += c;
    }
  }

  void count(std::size_t n, int at) {
    elements_ += n;
    if (elements_ > kMaxElements) fail(at, fmt::format("more than {} values and array elements in all", kMaxElements));
  }

  ConfigValue scalar(std::string_view w, int at) const {
    const SourceLocation where{src_, at};
    const std::string l = lower(w);
    if (l == ".true." || l == ".t." || l == "t" || l == "true" || l == ".true" || l == ".t")
      return ConfigValue::boolean(true, where);
    if (l == ".false." || l == ".f." || l == "f" || l == "false" || l == ".false" || l == ".f")
      return ConfigValue::boolean(false, where);
    // Integer?
    std::size_t i = (l[0] == '+' || l[0] == '-') ? 1 : 0;
    bool digits = i < l.size();
    for (std::size_t k = i; k < l.size(); ++k) digits = digits && std::isdigit(static_cast<unsigned char>(l[k]));
    if (digits) {
      errno = 0;
      char* end = nullptr;
      const long long v = std::strtoll(l.c_str(), &end, 10);
      if (errno == ERANGE)
        fail(at, keyed(fmt::format("integer {} is out of range (64-bit integers: -9223372036854775808 to "
                                   "9223372036854775807)",
                                   printable(w))));
      return ConfigValue::integer(v, where);
    }
    // Real: Fortran d/q exponents become e. Only decimal notation is accepted.
    std::string r = l;
    bool ok = !r.empty();
    for (auto& c : r) {
      if (c == 'd' || c == 'q') c = 'e';
      if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == '+' || c == '-')) ok = false;
    }
    if (l == "inf" || l == "+inf" || l == "-inf" || l == "infinity" || l == "+infinity" || l == "-infinity" ||
        l == "nan")
      ok = true, r = l;
    if (ok) {
      char* end = nullptr;
      const double v = std::strtod(r.c_str(), &end);
      if (end == r.c_str() + r.size() && !r.empty()) return ConfigValue::real(v, where);
    }
    fail(at,
         keyed(fmt::format("\"{}\" is not a value: expected a number, a logical (.true./.false.) or a quoted string",
                           printable(w))));
  }

  std::vector<ConfigValue> parse_values() {
    std::vector<ConfigValue> out;
    bool expect = true;
    while (true) {
      skip_blanks();
      if (eof()) break;
      const char c = peek();
      const int at = line_;
      if (c == ',') {
        advance();
        if (expect) {
          count(1, at);
          out.push_back(ConfigValue::null({src_, at}));
        }
        expect = true;
        continue;
      }
      if (c == '/' || c == '&' || c == '$') break;
      if (c == '\'' || c == '"') {
        count(1, at);
        out.push_back(ConfigValue::string(parse_string(), {src_, at}));
        expect = false;
        continue;
      }
      if (c == '(') fail(at, keyed("complex values like (1.0, 2.0) are not supported"));
      if (c == '=' || c == ')') fail(at, fmt::format("unexpected '{}'", c));
      const std::size_t start = p_;
      while (!eof()) {
        const char d = peek();
        if (is_blank(d) || d == ',' || d == '/' || d == '!' || d == '=' || d == '(' || d == ')' || d == '\'' ||
            d == '"' || d == '&' || d == '$')
          break;
        ++p_;
      }
      const std::string_view word = t_.substr(start, p_ - start);
      if (is_identifier(word)) {
        // The next variable's name, when followed by '=' or '('.
        const std::size_t save_p = p_;
        const int save_line = line_;
        skip_blanks();
        const bool designator = peek() == '=' || peek() == '(';
        p_ = save_p;
        line_ = save_line;
        if (designator) {
          p_ = start;
          line_ = at;
          break;
        }
      }
      const auto star = word.find('*');
      if (star != std::string_view::npos) {
        const std::string_view rs = word.substr(0, star);
        std::int64_t r = 0;
        bool ok = !rs.empty() && rs.size() <= 7;
        for (char d : rs) {
          ok = ok && std::isdigit(static_cast<unsigned char>(d));
          if (ok) r = r * 10 + (d - '0');
        }
        if (!ok || r < 1 || r > kMaxIndex)
          fail(at, keyed(fmt::format("bad repeat count in \"{}\": expected r*value with 1 <= r <= {}", printable(word),
                                     kMaxIndex)));
        const std::string_view rest = word.substr(star + 1);
        ConfigValue v;
        if (!rest.empty()) v = scalar(rest, at);
        else if (peek() == '\'' || peek() == '"') v = ConfigValue::string(parse_string(), {src_, at});
        else v = ConfigValue::null({src_, at});
        count(static_cast<std::size_t>(r), at);
        out.insert(out.end(), static_cast<std::size_t>(r), v);
      } else {
        count(1, at);
        out.push_back(scalar(word, at));
      }
      expect = false;
    }
    return out;
  }

  /// Writes `v` into `slot` unless `v` is null (a null leaves the element as it was).
  static void put(ConfigValue& slot, ConfigValue&& v) {
    if (!v.is_null()) slot = std::move(v);
  }

  void grow(ConfigValue::Array& a, std::size_t n, int at) {
    if (n > a.size()) {
      count(n - a.size(), at);
      a.resize(n, ConfigValue::null({src_, at}));
    }
  }

  void assign(const std::string& key, const std::string& written, const std::vector<Dim>& subs,
              std::vector<ConfigValue> values, int at) {
    const SourceLocation where{src_, at};
    // Work in place: copying a large array for every element assignment would be quadratic.
    // Top-level names (all but derived-type components) are found through an index, as a
    // linear search per assignment would be quadratic in the number of names.
    ConfigValue* slot = nullptr;
    auto& root = cfg_.root();
    if (key.find('.') == std::string::npos) {
      auto it = top_index_.find(key);
      if (it != top_index_.end()) {
        slot = &root.as_table()[it->second].second;
      } else {
        slot = &root.append(key, ConfigValue::null(where));
        top_index_.emplace(key, root.as_table().size() - 1);
      }
    } else {
      slot = cfg_.find(key);
      if (slot == nullptr) {
        try {
          slot = &cfg_.set(key, ConfigValue::null(where));
        } catch (const InputError&) {
          fail(at, fmt::format("\"{}\": a component of a variable that is not a derived type", written));
        }
        // Index the top-level table that set() may have created.
        const std::string head = key.substr(0, key.find('.'));
        if (top_index_.find(head) == top_index_.end()) {
          const auto& t = root.as_table();
          for (std::size_t i = 0; i < t.size(); ++i)
            if (t[i].first == head) top_index_.emplace(head, i);
        }
      }
    }
    ConfigValue& cur = *slot;
    if (cur.is_table()) cur = ConfigValue::null(where);

    if (subs.empty()) {
      if (!cur.is_array() && values.size() == 1) {
        if (!values[0].is_null() || cur.is_null()) cur = std::move(values[0]);
      } else if (!values.empty()) {
        if (!cur.is_array()) {
          ConfigValue::Array a;
          if (!cur.is_null()) a.push_back(cur);
          cur = ConfigValue::array(std::move(a), where);
        }
        auto& a = cur.as_array();
        if (!a.empty() && a[0].is_array())
          fail(at,
               fmt::format("\"{}\" was assigned with 2 subscripts; assign its elements as {}(i,j)", written, written));
        grow(a, values.size(), at);
        for (std::size_t i = 0; i < values.size(); ++i) put(a[i], std::move(values[i]));
      } else if (cur.is_null()) {
        cur = ConfigValue::null(where);
      }
    } else if (subs.size() == 1) {
      const Dim d = subs[0];
      const auto lo = static_cast<std::size_t>(d.lo);
      if (d.has_hi && values.size() > static_cast<std::size_t>(d.hi - d.lo + 1))
        fail(at, fmt::format("{} values for {}({}:{}), which has {} elements", values.size(), written, d.lo, d.hi,
                             d.hi - d.lo + 1));
      if (lo - 1 + values.size() > static_cast<std::size_t>(kMaxIndex))
        fail(at, fmt::format("\"{}\" would exceed {} elements", written, kMaxIndex));
      if (!cur.is_array()) {
        ConfigValue::Array a;
        if (!cur.is_null()) a.push_back(cur);
        cur = ConfigValue::array(std::move(a), where);
      }
      auto& a = cur.as_array();
      if (!a.empty() && a[0].is_array())
        fail(at, fmt::format("\"{}\" was assigned with 2 subscripts, now with 1", written));
      grow(a, lo - 1 + values.size(), at);
      if (a.size() < lo) grow(a, lo, at);
      for (std::size_t i = 0; i < values.size(); ++i) put(a[lo - 1 + i], std::move(values[i]));
    } else {
      Dim r = subs[0], c = subs[1];
      if (!r.has_hi) fail(at, fmt::format("{}: the first subscript of a 2-D section needs both bounds", written));
      const auto rows = static_cast<std::size_t>(r.hi - r.lo + 1);
      if (!c.has_hi)
        c.hi = c.lo + static_cast<std::int64_t>((std::max<std::size_t>(values.size(), 1) + rows - 1) / rows) - 1;
      const auto cols = static_cast<std::size_t>(c.hi - c.lo + 1);
      if (values.size() > rows * cols)
        fail(at, fmt::format("{} values for a {}x{} section of {}", values.size(), rows, cols, written));
      if (static_cast<std::size_t>(r.hi) * static_cast<std::size_t>(c.hi) > kMaxElements)
        fail(at, fmt::format("\"{}\" would exceed {} elements", written, kMaxElements));
      if (cur.is_null()) cur = ConfigValue::array({}, where);
      if (!cur.is_array() || (!cur.as_array().empty() && !cur.as_array()[0].is_array()))
        fail(at, fmt::format("\"{}\" was assigned as a 1-D value, now with 2 subscripts", written));
      auto& m = cur.as_array();
      if (m.size() < static_cast<std::size_t>(r.hi)) {
        count(static_cast<std::size_t>(r.hi) - m.size(), at);
        m.resize(static_cast<std::size_t>(r.hi), ConfigValue::array({}, where));
      }
      std::size_t k = 0;
      for (auto j = static_cast<std::size_t>(c.lo); j <= static_cast<std::size_t>(c.hi); ++j)
        for (auto i = static_cast<std::size_t>(r.lo); i <= static_cast<std::size_t>(r.hi) && k < values.size(); ++i) {
          auto& row = m[i - 1].as_array();
          grow(row, j, at);
          put(row[j - 1], std::move(values[k++]));
        }
    }
    cur.written_name = written;
    if (cur.where.line == 0) cur.where = where;
  }

  std::string_view t_;
  std::size_t p_ = 0;
  int line_ = 1;
  const std::string& src_;
  Config cfg_;
  std::string group_;
  int group_line_ = 0;
  std::string current_;  // the variable whose values are being read, as written
  std::size_t elements_ = 0;
  std::unordered_map<std::string, std::size_t> top_index_;  // top-level name -> root table index
  std::vector<std::pair<std::string, int>> skipped_;        // groups before the one sought: name, line
};

}  // namespace

Config parse_namelist(std::string_view text, const std::string& source, std::string_view group) {
  Parser p(text, source);
  return p.run(group);
}

Config read_namelist(const std::string& path, std::string_view group) {
  const auto bytes = read_file_bytes(path);
  return parse_namelist(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), path, group);
}

}  // namespace herd::io
