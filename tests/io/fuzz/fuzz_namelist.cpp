// libFuzzer target: the ParaMonte namelist parser, then schema validation of its result.
// Any exception other than herd::InputError, and any crash or sanitizer report, is a bug.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_common.hpp"
#include "herd/core/error.hpp"
#include "herd/io/namelist.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (std::string_view group : {"", "ParaDRAM"}) {
    try {
      const herd::io::Config c = herd::io::parse_namelist(text, "fuzz.nml", group);
      for (const auto& [key, value] : c.leaves()) (void)value->describe();
      (void)herd::fuzz::schema().check(c);
    } catch (const herd::InputError&) {
    }
  }
  return 0;
}
