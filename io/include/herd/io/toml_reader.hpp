#pragma once
/// @file toml_reader.hpp
/// TOML input files (TOML v1.0 through toml++ 3, kept out of public headers) read into a
/// `herd::io::Config`, every value carrying its file and line.
///
/// Mapping: tables -> tables, arrays -> arrays, integers, floats, booleans and strings ->
/// the same kinds; dates and times -> strings in TOML notation. Thread-safe (no shared state).

#include <string>
#include <string_view>

#include "herd/io/config.hpp"

namespace herd::io {

/// Parses TOML text; `source` names it in messages and locations.
/// @throws InputError "run.toml:7:12: <toml++ description>" on a syntax error, and
/// "run.toml:3: TOML nesting of N levels, but at most 64 are accepted ..." for a text nested
/// deeper than 64 levels (tables, arrays, inline tables and dotted-key parts together),
/// found by a scan before parsing, so no input can exhaust the parser's stack.
Config parse_toml(std::string_view text, const std::string& source);

/// Reads a TOML file. @throws IoError when unreadable, InputError on a syntax error.
Config read_toml(const std::string& path);

}  // namespace herd::io
