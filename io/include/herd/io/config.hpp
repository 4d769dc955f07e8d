#pragma once
#include "herd/core/cxx20.hpp"  // C++20 or one clear error
/// @file config.hpp
/// `herd::io::Config`: the key/value tree that every input reader produces (TOML through
/// toml++, ParaMonte `&ParaDRAM` namelists), with the source file and line of every value,
/// so that `herd::io::Schema` can validate it and report mistakes as
/// `run.toml:7: unknown key "chain_sise"; did you mean "chain_size"?`.
///
/// Keys are addressed by dotted paths ("proposal.scale"). Thread-safety: a `Config` is a
/// plain value; concurrent reads are safe, writes need external locking.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace herd::io {

/// Where a value came from: a file and a 1-based line (0: unknown), or a command-line
/// override ("--set key=value"), or a schema default ("default").
struct SourceLocation {
  std::string file;  ///< file name, "--set key=value", or "default"
  int line = 0;      ///< 1-based line; 0 when unknown or not from a file
  /// "run.toml:7", "run.toml" (line unknown), or the file text alone for overrides.
  std::string str() const;
};

/// One node of the tree: null, bool, integer, float, string, array, or table.
/// Arrays may hold nulls: the holes a namelist leaves with `3*` or `x(5) = 1`.
class ConfigValue {
 public:
  /// The kinds of node.
  enum class Kind { kNull, kBool, kInt, kFloat, kString, kArray, kTable };
  /// Array elements, in order.
  using Array = std::vector<ConfigValue>;
  /// Table entries in insertion order (tables are small; lookups are linear).
  using Table = std::vector<std::pair<std::string, ConfigValue>>;

  /// A null value.
  ConfigValue() = default;
  /// Factories, one per kind; `where` records the origin.
  static ConfigValue null(SourceLocation where = {});
  static ConfigValue boolean(bool v, SourceLocation where = {});
  static ConfigValue integer(std::int64_t v, SourceLocation where = {});
  static ConfigValue real(double v, SourceLocation where = {});
  static ConfigValue string(std::string v, SourceLocation where = {});
  static ConfigValue array(Array v = {}, SourceLocation where = {});
  static ConfigValue table(SourceLocation where = {});
  /// A string from a command-line override, not yet typed: the schema parses it as the
  /// type its key expects.
  static ConfigValue raw_text(std::string v, SourceLocation where);

  Kind kind() const noexcept { return kind_; }
  bool is_null() const noexcept { return kind_ == Kind::kNull; }
  bool is_table() const noexcept { return kind_ == Kind::kTable; }
  bool is_array() const noexcept { return kind_ == Kind::kArray; }
  /// True for an override string that the schema still has to parse.
  bool is_raw_text() const noexcept { return raw_; }

  /// Typed access (mutable overloads for arrays and tables).
  /// @throws InputError naming the location when the kind differs (as_float accepts integers).
  bool as_bool() const;
  std::int64_t as_int() const;
  double as_float() const;
  const std::string& as_string() const;
  const Array& as_array() const;
  Array& as_array();
  const Table& as_table() const;
  Table& as_table();

  /// Direct child of a table by exact name; nullptr when absent or not a table.
  /// Pointers stay valid until the table is modified.
  const ConfigValue* find(std::string_view key) const;
  ConfigValue* find(std::string_view key);
  /// Inserts or replaces a direct child of a table; returns it. @throws InputError when
  /// this is not a table.
  ConfigValue& set(std::string key, ConfigValue value);
  /// Appends a child to a table without looking for an existing one, in O(1): for readers
  /// that know the key is new (a duplicate would shadow nothing and confuse lookups).
  /// @throws InputError when this is not a table.
  ConfigValue& append(std::string key, ConfigValue value);

  /// The value as it would be written in TOML: `3`, `1.5`, `"text"`, `[1, 2]`, `true`.
  std::string to_string() const;
  /// The value and its kind for messages: `"abc" (a string)`, `1.5 (a float)`.
  std::string describe() const;
  /// Kind names for messages: "a string", "an integer", ...
  static const char* kind_name(Kind k);

  /// Where the value was written.
  SourceLocation where;
  /// The key as written in the source (namelist names keep their case here).
  std::string written_name;

 private:
  Kind kind_ = Kind::kNull;
  bool raw_ = false;
  bool b_ = false;
  std::int64_t i_ = 0;
  double d_ = 0.0;
  std::string s_;
  Array a_;
  Table t_;
};

/// A configuration: a root table plus the name of its source.
class Config {
 public:
  /// An empty configuration named "<config>".
  Config();
  /// An empty configuration read from `source` (a file name, for messages).
  explicit Config(std::string source);

  ConfigValue& root() noexcept { return root_; }
  const ConfigValue& root() const noexcept { return root_; }
  /// The source file (for messages).
  const std::string& source() const noexcept { return source_; }
  /// True when keys are case-insensitive (Fortran namelists); they are stored lower case.
  bool case_insensitive() const noexcept { return case_insensitive_; }
  void set_case_insensitive(bool v) noexcept { case_insensitive_ = v; }

  /// The value at a dotted path, or nullptr (const and mutable).
  const ConfigValue* find(std::string_view dotted) const;
  ConfigValue* find(std::string_view dotted);
  /// Sets the value at a dotted path, creating tables on the way.
  /// @throws InputError when a prefix of the path is a non-table value.
  ConfigValue& set(std::string_view dotted, ConfigValue value);
  /// Applies a command-line override "a.b=value": stores the text unparsed (the schema
  /// types it) with location "--set a.b=value". @throws InputError without "key=".
  void set_override(std::string_view assignment);
  /// Every non-table value with its dotted path, in insertion order.
  std::vector<std::pair<std::string, const ConfigValue*>> leaves() const;

  /// A namelist group of the file that was not read (a file may hold several, e.g. ParaMonte's
  /// &ParaDRAM beside &ParaDISE): its name as written and the line of its '&'.
  struct OtherGroup {
    std::string name;
    int line = 0;
  };
  /// The namelist groups of the source besides the one read, in file order (none for TOML).
  const std::vector<OtherGroup>& other_groups() const noexcept { return other_groups_; }
  void add_other_group(std::string name, int line) { other_groups_.push_back({std::move(name), line}); }

 private:
  std::string source_;
  std::vector<OtherGroup> other_groups_;
  bool case_insensitive_ = false;
  ConfigValue root_;
};

/// Reads an input file: a Fortran namelist when its first non-blank, non-comment character
/// is '&' or '$' (then `namelist_group`, e.g. "ParaDRAM", is the group read; empty: the
/// first group), else TOML; text that is not TOML but has a line opening a group ("&name")
/// is a namelist with free text before its first group. @throws IoError when unreadable,
/// InputError on a syntax error.
Config read_config(const std::string& path, std::string_view namelist_group = "");

/// `read_config` on text already in memory: `source` names it in messages (line numbers
/// count from the text's first line). The same rule decides namelist or TOML. @throws
/// InputError on a syntax error.
Config parse_config(std::string_view text, const std::string& source, std::string_view namelist_group = "");

/// Edit distance between two strings, for "did you mean" suggestions: insertions, deletions,
/// substitutions and transpositions of adjacent characters ("cdua" -> "cuda") each count 1
/// (optimal string alignment, a restricted Damerau-Levenshtein distance).
std::size_t edit_distance(std::string_view a, std::string_view b);

}  // namespace herd::io
