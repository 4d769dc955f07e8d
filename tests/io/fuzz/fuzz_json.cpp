// libFuzzer target: JSON model data (nlohmann-json), then the typed accessors.
// Any exception other than herd::InputError, and any crash or sanitizer report, is a bug.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "herd/core/error.hpp"
#include "herd/io/data_set.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const herd::io::DataSet d = herd::io::parse_json_data(text, "fuzz.json");
    for (const auto& name : d.names()) {
      const auto& a = d.at(name);
      std::size_t n = 1;
      for (auto s : a.shape) n *= s;
      if (n != a.values.size()) __builtin_trap();  // shape and values must agree
      try {
        (void)d.scalar(name);
        (void)d.vector(name);
        (void)d.integer(name);
      } catch (const herd::InputError&) {
      }
    }
  } catch (const herd::InputError&) {
  }
  return 0;
}
