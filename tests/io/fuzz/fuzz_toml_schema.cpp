// libFuzzer target: TOML through toml++ and the schema. The input is TOML text, optionally
// followed by NUL-separated `--set` overrides. Any exception other than herd::InputError,
// and any crash or sanitizer report, is a bug.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_common.hpp"
#include "herd/core/error.hpp"
#include "herd/io/toml_reader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const std::size_t nul = all.find('\0');
  const std::string_view text = all.substr(0, nul);
  std::vector<std::string> overrides;
  if (nul != std::string_view::npos) {
    std::string_view rest = all.substr(nul + 1);
    while (!rest.empty() && overrides.size() < 8) {
      const std::size_t n = rest.find('\0');
      overrides.emplace_back(rest.substr(0, n));
      if (n == std::string_view::npos) break;
      rest.remove_prefix(n + 1);
    }
  }
  try {
    const herd::io::Config c = herd::io::parse_toml(text, "fuzz.toml");
    (void)c.root().to_string();
    const auto problems = herd::fuzz::schema().check(c, overrides);
    if (problems.empty()) (void)herd::fuzz::schema().apply(c, overrides).describe();
  } catch (const herd::InputError&) {
  }
  return 0;
}
