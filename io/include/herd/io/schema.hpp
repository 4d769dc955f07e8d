#pragma once
/// @file schema.hpp
/// `herd::io::Schema`: an application declares its input keys once (type, default, allowed
/// range or choices, one-line doc, aliases) and gets validation of TOML and namelist input,
/// `--set key=value` overrides, resolved values with their origin for reports, and one-line
/// error messages that name the file, the line, the key, the value and what was expected:
/// ```
///   run.toml:7: unknown key "chain_sise"; did you mean "chain_size"?
///   run.toml:3: key "chain_size" is "abc" (a string), but must be an integer >= 1
///   --set scale=-1: key "scale" is -1 (text), but must be a float > 0
/// ```
/// Keys are dotted paths ("proposal.scale" = table `[proposal]`, key `scale`). With a
/// case-insensitive `Config` (a Fortran namelist) names and aliases match in any case, so
/// a key `chain_size` with alias `chainSize` accepts ParaMonte's `chainSize = 1000`.
///
/// A case-insensitive `Config` (a Fortran namelist) also matches choice values as Fortran
/// programs such as ParaMonte do: in any case, with blanks, '_' and '-' ignored ("Verbose",
/// "UNIFORM" and "single chain" are "verbose", "uniform" and "single_chain").
///
/// Conversions: integers are accepted where floats are expected, and floats with an exact
/// integer value where integers are expected; a single value where a list is expected is a
/// list of one. Null list elements (holes a namelist leaves) take the default's element.
///
/// Thread-safety: a built schema is immutable in use; `apply` and `check` are const and may
/// run concurrently.

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "herd/io/config.hpp"

namespace herd::io {

/// The type a key's value must have.
/// Matrices are lists of rows (TOML `[[1, 0], [0, 1]]`, namelist `m(i,j) = ...`).
enum class ValueType { kBool, kInt, kFloat, kString, kBoolList, kIntList, kFloatList, kStringList, kFloatMatrix };

/// One declared key. Configure it with the fluent setters after `Schema::add_*`.
class SchemaKey {
 public:
  /// Allowed closed interval [lo, hi] (for numbers and numeric list elements).
  SchemaKey& range(double lo, double hi);
  /// Lower bound: value >= lo, or > lo when `exclusive`.
  SchemaKey& min(double lo, bool exclusive = false);
  /// Upper bound: value <= hi, or < hi when `exclusive`.
  SchemaKey& max(double hi, bool exclusive = false);
  /// Numbers (and numeric list elements) must be finite: NaN and +-inf are refused with a
  /// message naming the key.
  SchemaKey& finite();
  /// Allowed strings (matched exactly; for string lists, per element).
  SchemaKey& choices(std::vector<std::string> allowed);
  /// Another accepted name (e.g. ParaMonte's "chainSize" for "chain_size").
  SchemaKey& alias(std::string name);
  /// The key must be given (no default).
  SchemaKey& required();
  /// List length limits (inclusive); for matrices, limits of the number of rows.
  SchemaKey& length(std::size_t min_len, std::size_t max_len);
  /// A string key whose text may be a number (e.g. ParaDRAM's scale factor "2.0" or
  /// "gelman"): a number given unquoted (TOML `2.0`, namelist `2.0d0`) is taken as its text.
  SchemaKey& number_as_text();
  /// A float (or string) list whose elements a Fortran namelist may leave unset, as Fortran
  /// reads an array: in a namelist file, holes (`x(5) = 1` leaves elements 1-4 unset,
  /// `x = 1, , 3` element 2) read as NaN (an empty string), and the list may be shorter than
  /// its full length (`x = 3*1.0`, `x = 1.0`: the elements after those given are unset;
  /// `Settings::partial`). The program fills the unset elements, whose defaults depend on
  /// other keys (ParaDRAM's start point: the domain's centre). A NaN (an empty string)
  /// written in the input is refused. TOML files and --set give
  /// whole lists, as for any other key. A list that holds a matrix in row-major order may be
  /// given by elements (`m(1,2) = 0.5`, `m(2:3,1) = ...`): its rows are padded with unset
  /// elements to the longest one and flattened (`Settings::matrix_columns` gives the column
  /// count), for the program to place them in its matrix of known size.
  SchemaKey& unset_elements();

  const std::string& name() const noexcept { return name_; }
  const std::string& doc() const noexcept { return doc_; }
  ValueType type() const noexcept { return type_; }
  const std::vector<std::string>& aliases() const noexcept { return aliases_; }
  /// The default value (null when there is none).
  const ConfigValue& default_value() const noexcept { return default_; }
  /// The expected form for messages: "an integer >= 1", "one of \"dram\", \"am\"",
  /// "a list of 2 to 3 floats in [0, 1]".
  std::string expected() const;

 private:
  friend class Schema;
  std::string name_, doc_;
  ValueType type_ = ValueType::kString;
  ConfigValue default_;
  bool required_ = false;
  bool number_as_text_ = false;
  bool unset_elements_ = false;
  std::optional<double> lo_, hi_;
  bool lo_open_ = false, hi_open_ = false, finite_ = false;
  std::vector<std::string> choices_;
  std::vector<std::string> aliases_;
  std::size_t min_len_ = 0, max_len_ = std::numeric_limits<std::size_t>::max();
};

/// Resolved settings: every key of the schema with its typed value and origin.
class Settings {
 public:
  /// True when `key` has a value (given, or defaulted).
  bool has(std::string_view key) const;
  /// True when `key` took its default.
  bool is_default(std::string_view key) const;
  /// True when the input gives `key` a value (not its default, not left unset).
  bool is_set(std::string_view key) const { return !is_default(key) && has(key); }
  /// Typed getters. @throws InputError when the key is unknown, unset or of another type.
  bool get_bool(std::string_view key) const;
  std::int64_t get_int(std::string_view key) const;
  double get_float(std::string_view key) const;
  const std::string& get_string(std::string_view key) const;
  std::vector<bool> get_bool_list(std::string_view key) const;
  std::vector<std::int64_t> get_int_list(std::string_view key) const;
  std::vector<double> get_float_list(std::string_view key) const;
  std::vector<std::string> get_string_list(std::string_view key) const;
  /// A matrix as rows, all of the same length.
  std::vector<std::vector<double>> get_float_matrix(std::string_view key) const;
  /// True when `key` (declared with `SchemaKey::unset_elements`) was given in a namelist
  /// file: its list may be shorter than the full length, the elements after it unset (NaN
  /// marks the unset ones inside it). @throws InputError when unknown.
  bool partial(std::string_view key) const;
  /// For a partial key given in a namelist by matrix elements (`m(i,j) = ...`): the number of
  /// columns of the rows it gives, flattened row-major into the list (unset elements NaN);
  /// 0 when the key was given as a list. @throws InputError when unknown.
  std::size_t matrix_columns(std::string_view key) const;
  /// The resolved value node (its `where` is the origin). @throws InputError when unknown.
  const ConfigValue& value(std::string_view key) const;
  /// Where the value came from: "run.toml:7", "--set chain_size=10", or "default".
  std::string origin(std::string_view key) const;
  /// The string key `key` as a file path to open: absolute as given; relative, joined to the
  /// folder of the input file that set it (as a path in a Makefile is), so that a run does not
  /// depend on the working directory, or left relative to the working directory when it came
  /// from --set, input text or the default. @throws InputError as get_string, or naming the
  /// key when its value is empty.
  std::string get_path(std::string_view key) const;
  /// The string key `key` as a memory size in bytes (herd::parse_memory_size: "16GiB", "500
  /// MB"; 0: no limit). @throws InputError in the one-line form naming the key's origin, as
  /// get_string, or when the text is not a size.
  std::uint64_t get_memory_size(std::string_view key) const;
  /// The key as the input spelled it (e.g. the namelist's `proposalStartCovMat` for
  /// `proposal_cov`), else its schema name: what messages about its value should say.
  /// @throws InputError when unknown.
  const std::string& written(std::string_view key) const;
  /// True when the settings were read from a Fortran namelist (ParaMonte's `&ParaDRAM`
  /// group), false for TOML and for `--set` alone: messages about a key the input does not
  /// set then name it as such an input would (ParaDRAM's `startPointVec`, not `start_point`).
  bool namelist() const noexcept { return namelist_; }
  /// Refuses keys that the input sets but the run would not read (rather than ignore them),
  /// in one line naming them all: `<origin>: key "<first>" is set, but <reason>; nor does it
  /// read "<second>" (<origin>), ..., also set`. `keys`: those of them the input sets
  /// (`is_set`), the one `reason` speaks of first. Returns when `keys` is empty.
  /// @throws InputError as described; naming an unknown key.
  void refuse_unread(const std::vector<std::string>& keys, std::string_view reason) const;
  /// A report of every key, one per line in declaration order, in TOML syntax with the
  /// origin and doc as a comment: `chain_size = 1000  # run.toml:3; accepted states`.
  /// `note(key)`, when given and not empty, goes into the comment between the origin and
  /// the doc (e.g. that the run does not read the key), and the line is commented out, so
  /// that the text read again as input leaves the key unset: `# x = 1  # default; <note>;
  /// <doc>`. `laid_out(key)`, when given and not null, is the list to show for a partial key
  /// in place of the one given (the program's layout at the full length, NaN at the unset
  /// elements); a list with NaN elements is shown commented out.
  std::string describe(const std::function<std::string(const std::string& key)>& note = {},
                       const std::function<const std::vector<double>*(const std::string& key)>& laid_out = {}) const;

 private:
  friend class Schema;
  struct Entry {
    std::string name, doc;
    ConfigValue value;
    bool is_default = false;
    std::string written;      // the key as the input spelled it (an alias, any case), else the name
    bool partial = false;     // an unset_elements key given in a namelist file
    std::size_t columns = 0;  // a partial key given by matrix elements: its column count
  };
  const Entry& entry(std::string_view key) const;
  std::vector<Entry> entries_;
  bool namelist_ = false;
};

/// A set of declared keys.
class Schema {
 public:
  /// `name` prefixes messages that have no file ("sampler").
  explicit Schema(std::string name = "input");

  /// Declare keys. `def` empty: no default (the key is optional and unset, or `required()`).
  /// @throws InputError when a key or alias is declared twice or a default violates nothing
  /// yet (defaults are checked in `apply`).
  SchemaKey& add_bool(std::string name, std::optional<bool> def, std::string doc);
  SchemaKey& add_int(std::string name, std::optional<std::int64_t> def, std::string doc);
  SchemaKey& add_float(std::string name, std::optional<double> def, std::string doc);
  SchemaKey& add_string(std::string name, std::optional<std::string> def, std::string doc);
  SchemaKey& add_bool_list(std::string name, std::optional<std::vector<bool>> def, std::string doc);
  SchemaKey& add_int_list(std::string name, std::optional<std::vector<std::int64_t>> def, std::string doc);
  SchemaKey& add_float_list(std::string name, std::optional<std::vector<double>> def, std::string doc);
  SchemaKey& add_string_list(std::string name, std::optional<std::vector<std::string>> def, std::string doc);
  /// A matrix of floats given as rows; missing elements (namelist holes, short rows) take
  /// the default's elements. Overrides use TOML syntax: `--set m=[[1,0],[0,1]]`.
  SchemaKey& add_float_matrix(std::string name, std::optional<std::vector<std::vector<double>>> def, std::string doc);

  /// Every problem of `config` (plus `overrides`, each "key=value"), one line each, in
  /// file order; empty when it is valid.
  std::vector<std::string> check(const Config& config, const std::vector<std::string>& overrides = {}) const;
  /// Validates `config` with `overrides` applied and resolves every key.
  /// @throws InputError with every problem, one per line in file order (as `check`).
  Settings apply(const Config& config, const std::vector<std::string>& overrides = {}) const;
  /// Help text: one line per key with type, default, allowed values and doc.
  std::string help() const;
  /// The declared keys, in declaration order.
  const std::vector<SchemaKey>& keys() const noexcept { return keys_; }

 private:
  SchemaKey& add(std::string name, ValueType type, ConfigValue def, std::string doc);
  Settings resolve(const Config& config, const std::vector<std::string>& overrides,
                   std::vector<std::string>& errors) const;

  std::string name_;
  std::vector<SchemaKey> keys_;
};

}  // namespace herd::io
