#pragma once
#include "herd/core/cxx20.hpp"  // C++20 or one clear error
/// @file memory.hpp
/// Sizes computed from input, checked before they are used, and the memory a run needs,
/// compared up front with what the machine (or the user's `max_memory`) allows, so that a
/// run that cannot fit is refused with a message instead of failing with
/// `std::bad_alloc` (or overflowing a size) hours later.
///
/// Thread-safety: every function is thread-safe (no shared state).

#include <cstdint>
#include <exception>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

namespace herd {

/// The product of the factors as a `std::size_t`, or InputError "<what>: a x b x ... is
/// too large (more than 2^63 - 1)" when a factor is negative or the product overflows.
/// Use it for every element count computed from input (chains x draws x ndim).
/// @throws herd::InputError
std::size_t checked_count(std::initializer_list<std::int64_t> factors, std::string_view what);

/// Bytes of memory this process may still use: the smaller of the kernel's MemAvailable
/// (/proc/meminfo) and the room left below the cgroup (v2 `memory.max`, v1
/// `memory.limit_in_bytes`) limit; empty when neither can be read.
std::optional<std::uint64_t> available_memory_bytes();

/// Parses a memory size: a non-negative number with an optional unit B, kB/KB, MB, GB, TB
/// (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024), case-insensitive, spaces
/// allowed ("16GiB", "500 MB", "2e9"). "0" or "" means no limit of the user's (0 is
/// returned). @throws herd::InputError "must be a size such as \"16GiB\"" (no key named:
/// the caller adds it).
std::uint64_t parse_memory_size(std::string_view text);

/// "1.5 GiB", "812 MiB", "1020 MiB", "96 B": binary units, three significant digits below 1000
/// of a unit and whole units from there to 1023.99 (never an exponent). Thread-safe.
std::string format_bytes(double bytes);

/// Refuses a run that would not fit: InputError "<what> needs about N, but max_memory is
/// M" when `max_memory` > 0 and `need_bytes` exceeds it, else "<what> needs about N, but
/// this machine has M available" when `need_bytes` exceeds `available_memory_bytes()`.
/// `need_bytes` is a double so that an estimate from huge inputs cannot overflow.
/// `hint` ends the message (what to change); `setting` is how the user gives max_memory
/// (a key, or a command-line option). @throws herd::InputError
void check_memory_need(double need_bytes, std::uint64_t max_memory, std::string_view what, std::string_view hint,
                       std::string_view setting = "max_memory");

/// The one-line text of an exception for a program's error message: `e.what()`, except
/// for an allocation failure (`std::bad_alloc`, or `std::length_error` from a container
/// asked for more than it can hold), whose bare text says nothing; that becomes "out of
/// memory while <doing> (std::bad_alloc): <hint>".
std::string error_text(const std::exception& e, std::string_view doing);

}  // namespace herd
