#pragma once
// Helpers shared by the MinAtar game sources (rl/envs/minatar*.cpp); not installed.
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "herd/core/error.hpp"
#include "herd/rl/minatar.hpp"

namespace herd::rl::minatar_detail {

inline constexpr int kN = MinAtarEnv::kSize;
inline constexpr int kCells = kN * kN;

/// Reads an integral state value in [lo, hi] or throws herd::InputError naming the env and
/// the field.
inline int state_int(const std::string& id, const std::string& field, double v, int lo, int hi) {
  HERD_REQUIRE(v == std::floor(v) && v >= lo && v <= hi, "{}: state value {} is {}, but must be an integer in [{}, {}]",
               id, field, v, lo, hi);
  return static_cast<int>(v);
}

/// Writes a game's state values one after another (the layout `MinAtarGame::get_state`
/// documents per game).
class StateWriter {
 public:
  explicit StateWriter(double* s) : s_(s) {}
  /// Appends the values in order.
  template <class... T>
  void put(T... values) {
    ((*s_++ = static_cast<double>(values)), ...);
  }
  /// Appends every cell of `grid` in order (a 10x10 grid row-major, or any array).
  template <class T, std::size_t N>
  void cells(const std::array<T, N>& grid) {
    for (const T v : grid) *s_++ = static_cast<double>(v);
  }

 private:
  double* s_;
};

/// Reads a game's state values in the order `StateWriter` wrote them, checking each one's
/// range (herd::InputError naming the env, the field and the value).
class StateReader {
 public:
  StateReader(const std::string& id, const double* s) : id_(id), s_(s) {}
  /// The env's id (for messages).
  const std::string& id() const { return id_; }
  /// The next value, an integer in [lo, hi].
  int next(const std::string& field, int lo, int hi) { return state_int(id_, field, *s_++, lo, hi); }
  /// The next N values, integers in [lo, hi], as the cells of an array.
  template <class T, std::size_t N>
  std::array<T, N> cells(const std::string& field, int lo, int hi) {
    std::array<T, N> out{};
    for (T& v : out) v = static_cast<T>(next(field, lo, hi));
    return out;
  }
  /// The next value, -1 or 1 (a direction).
  int sign(const std::string& field) {
    const int v = next(field, -1, 1);
    HERD_REQUIRE(v != 0, "{}: state value {} is 0, but must be -1 or 1", id_, field);
    return v;
  }
  /// Passes over `n` values without reading them.
  void skip(std::size_t n) { s_ += n; }

 private:
  const std::string& id_;
  const double* s_;
};

/// The rules and state of one MinAtar game, driven by `MinAtarEnv` (which adds sticky
/// actions, randomness, the action set and the episode's step counter).
class MinAtarGame {
 public:
  virtual ~MinAtarGame() = default;
  /// Starts a new game from `rng`.
  virtual void reset(RngCursor& rng) = 0;
  /// Advances the game by one frame under the full-set `action`; returns the reward and sets
  /// `terminal`.
  virtual double step(int action, RngCursor& rng, bool& terminal) = 0;
  /// Sets the cells of the game's channels in `grid` (`[n_channels, 10, 10]`, zeroed).
  virtual void observe(std::uint8_t* grid) const = 0;
  /// Writes the game state (the env's `game_state_dim` values).
  virtual void get_state(StateWriter& w) const = 0;
  /// Reads the game state; nothing changes when a value is out of range (herd::InputError).
  virtual void set_state(StateReader& r) = 0;
};

/// Sets cell (y, x) of `channel` in a `[channels, 10, 10]` grid.
inline void set_cell(std::uint8_t* grid, int channel, int y, int x) { grid[channel * kCells + y * kN + x] = 1; }

/// Index of cell (y, x) in a row-major 10x10 grid.
constexpr std::size_t at(int y, int x) {
  return static_cast<std::size_t>(y) * static_cast<std::size_t>(kN) + static_cast<std::size_t>(x);
}

constexpr int act(MinAtarAction a) { return static_cast<int>(a); }

}  // namespace herd::rl::minatar_detail
