// libFuzzer target: the checkpoint reader on arbitrary bytes. Truncated, foreign or corrupt
// input must be an herd::IoError, never a crash or an out-of-bounds read.
#include <cstddef>
#include <cstdint>
#include <span>

#include "herd/core/error.hpp"
#include "herd/io/checkpoint.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const herd::io::CheckpointReader r(std::as_bytes(std::span<const std::uint8_t>(data, size)), "fuzz.ckpt");
    for (const auto& name : r.names()) {
      (void)r.bytes(name);
      (void)r.string(name);
      try {
        (void)r.get<double>(name);
      } catch (const herd::IoError&) {
      }
    }
  } catch (const herd::IoError&) {
  }
  return 0;
}
