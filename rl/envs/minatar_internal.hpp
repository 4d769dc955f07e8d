#pragma once
// Helpers shared by the MinAtar game sources (rl/envs/minatar*.cpp); not installed.
#include <cmath>
#include <cstdint>
#include <string>

#include "herd/core/error.hpp"
#include "herd/rl/minatar.hpp"

namespace herd::rl::minatar_detail {

inline constexpr int kN = MinAtarEnv::kSize;
inline constexpr int kCells = kN * kN;

/// Reads an integral state value in [lo, hi] or throws herd::InputError naming the env and
/// the field.
inline int state_int(const std::string& id, const char* field, double v, int lo, int hi) {
  HERD_REQUIRE(v == std::floor(v) && v >= lo && v <= hi,
               "{}: state value {} is {}, but must be an integer in [{}, {}]", id, field, v, lo,
               hi);
  return static_cast<int>(v);
}

/// Sets cell (y, x) of `channel` in a `[channels, 10, 10]` grid.
inline void set_cell(std::uint8_t* grid, int channel, int y, int x) {
  grid[channel * kCells + y * kN + x] = 1;
}

constexpr int act(MinAtarAction a) { return static_cast<int>(a); }

}  // namespace herd::rl::minatar_detail
