#pragma once
/// @file namelist.hpp
/// ParaMonte input files: one Fortran namelist group (`&ParaDRAM ... /`) parsed into a
/// `herd::io::Config` (case-insensitive; keys stored lower case, the spelling as written
/// kept in `ConfigValue::written_name` for messages).
///
/// Supported constructs (Fortran 2008 list-directed namelist input, as ParaMonte uses it):
/// - groups `&name ... /` (also `&end`, `$name ... $end`); text outside groups is ignored;
/// - `!` comments to the end of the line, outside strings;
/// - strings in '...' or "...", a doubled quote inside being one quote;
/// - logicals `.true.` `.false.` `.t.` `.f.` `T` `F` `true` `false` (any case);
/// - integers, reals with `e`, `d` or `q` exponents (`1.5d-3`), `inf`, `nan`;
/// - values separated by commas, blanks or newlines; empty values between commas are nulls;
/// - repeat counts: `4*-1.e300` (four copies), `3*` (three nulls: elements left unset);
/// - element and section assignment: `x(2) = 5`, `x(3:5) = 1, 2, 3`, and 2-D
///   `m(1,2) = 0.5`, `m(1:2, 1:2) = 1, 0, 0, 1` (filled in Fortran order, first index
///   fastest; stored as rows, `m[i-1][j-1]`);
/// - derived-type components `spec%chainSize = 10` (stored as "spec.chainsize").
/// Indices are 1-based. Arrays hold nulls where nothing was assigned. A whole-name
/// assignment of one value gives a scalar, of several values an array (for a 2-D variable a
/// flat array in Fortran order; `Schema` matrices want the `m(i,j)` form). Later assignments
/// overwrite earlier ones element by element; a null (`,,` or `r*`) leaves an element as it was.
///
/// Limits that guard against hostile input: indices and repeat counts up to 10^6, and at
/// most 10^6 values and array elements in all. Parsing is linear in the input size.
/// Thread-safe (no shared state).

#include <string>
#include <string_view>

#include "herd/io/config.hpp"

namespace herd::io {

/// Parses the namelist group `group` (case-insensitive; empty: the first group) of `text`.
/// @throws InputError "in.nml:12: <what is wrong>" on a syntax error or a missing group.
Config parse_namelist(std::string_view text, const std::string& source, std::string_view group = "");

/// Reads a namelist file. @throws IoError when unreadable, InputError as `parse_namelist`.
Config read_namelist(const std::string& path, std::string_view group = "");

}  // namespace herd::io
