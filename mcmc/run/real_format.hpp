#pragma once
// A fast exact formatter of doubles in scientific notation with a given number of
// significant digits (private to herd::mcmc): the text chain's numbers.

namespace herd::mcmc::detail {

/// Bytes `format_scientific` may write (sign, 17 digits, point, "e-324").
inline constexpr int kScientificMaxChars = 32;

/// Writes `v` with `precision` significant digits in scientific notation to `out` (at
/// least `kScientificMaxChars` bytes, not terminated) and returns the end, or returns
/// nullptr when it cannot vouch for the result: then the caller formats `v` itself
/// (std::to_chars). The bytes are those of std::to_chars(out, end, v,
/// std::chars_format::scientific, precision - 1): the decimal of `precision` digits
/// nearest the exact value of `v` (the first digit, a point unless `precision` is 1, the
/// others, "e", the exponent's sign and at least two of its digits).
///
/// Method: v = M 2^E (M normalized to 64 bits) times 10^q from a table of 128-bit
/// mantissas rounded to nearest (relative error < 2^-128), a 192-bit product, so that the
/// scaled value S = v 10^q is known to within 2^-63 absolute (S < 2^61). One q per value,
/// from k = floor(E' log10 2) where v lies in [2^E', 2^(E'+1)): S in [10^(p-1), 10^(p+1)),
/// so S has `precision` digits before the point or one more, which is then dropped into
/// the rounding. Rounding to nearest is exact wherever S is more than 2^-60 from the
/// halfway point; within it (exact ties such as 0.125 to 2 digits, or cases closer than
/// that), nullptr. A rounding up to 10^p gives 10^(p-1) and the next exponent, as
/// to_chars. The digits two at a time from a table, the divisions by constants unrolled
/// for each precision (one specialization per precision, `scientific_formatter`). Zero and
/// negative zero: "0.00..0e+00" with the sign. Infinities, NaN and precisions outside
/// 1..17: nullptr. Pure, thread-safe, host only.
char* format_scientific(char* out, double v, int precision) noexcept;

/// `format_scientific` at one precision: `fn(out, v)` is format_scientific(out, v, precision).
using ScientificFormatter = char* (*)(char* out, double v) noexcept;

/// The formatter of `precision` (1..17; otherwise nullptr), for callers that format many
/// values at one precision (one indirect call per value, no checks). Thread-safe.
ScientificFormatter scientific_formatter(int precision) noexcept;

}  // namespace herd::mcmc::detail
