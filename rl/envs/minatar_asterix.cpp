// MinAtar Asterix, written from the rules described in Young & Tian (2019); the details the
// paper leaves open were matched to observations of PyPI's minatar (see minatar.hpp).
#include <algorithm>

#include "herd/rl/minatar.hpp"
#include "minatar_internal.hpp"

namespace herd::rl {

using minatar_detail::act;
using minatar_detail::kN;
using minatar_detail::set_cell;
using minatar_detail::state_int;

MinAtarAsterix::MinAtarAsterix(bool full_actions)
    : MinAtarEnv(full_actions ? "MinAtar/Asterix-v0" : "MinAtar/Asterix-v1", 4, {0, 1, 2, 3, 4},
                 full_actions, 6 + 4 * 8) {}

int MinAtarAsterix::spawn_period(int ramps) { return std::max(1, 10 - ramps); }

int MinAtarAsterix::move_period(int ramps) { return std::max(1, 5 - ramps / 2); }

void MinAtarAsterix::game_reset(RngCursor& /*rng*/) {
  player_x_ = 5;
  player_y_ = 5;
  ramps_ = 0;
  spawn_timer_ = 11;
  move_timer_ = 1;
  ramp_timer_ = kRampEvery;
  lanes_.fill(Lane{});
}

double MinAtarAsterix::touch(bool& terminal) {
  Lane& l = lanes_[static_cast<std::size_t>(player_y_ - 1)];
  if (l.kind == 0 || l.x != player_x_) return 0.0;
  if (l.kind == 1) {
    terminal = true;
    return 0.0;
  }
  l = Lane{};
  return 1.0;
}

double MinAtarAsterix::game_step(int action, RngCursor& rng, bool& terminal) {
  terminal = false;
  if (action == act(MinAtarAction::kLeft)) player_x_ = std::max(0, player_x_ - 1);
  if (action == act(MinAtarAction::kRight)) player_x_ = std::min(kN - 1, player_x_ + 1);
  if (action == act(MinAtarAction::kUp)) player_y_ = std::max(1, player_y_ - 1);
  if (action == act(MinAtarAction::kDown)) player_y_ = std::min(8, player_y_ + 1);
  double reward = touch(terminal);
  if (terminal) return reward;

  if (--spawn_timer_ == 0) {
    spawn_timer_ = spawn_period(ramps_);
    int free[8];
    int n_free = 0;
    for (int i = 0; i < 8; ++i) {
      if (lanes_[static_cast<std::size_t>(i)].kind == 0) free[n_free++] = i;
    }
    if (n_free > 0) {
      const int lane = free[rng.below(static_cast<std::uint32_t>(n_free))];
      Lane& l = lanes_[static_cast<std::size_t>(lane)];
      const bool right = rng.below(2) == 0;
      l.x = right ? 0 : kN - 1;
      l.dir = right ? 1 : -1;
      l.kind = rng.below(3) == 0 ? 2 : 1;
      l.moved = 0;
      reward += touch(terminal);
      if (terminal) return reward;
    }
  }
  if (--move_timer_ == 0) {
    move_timer_ = move_period(ramps_);
    for (Lane& l : lanes_) {
      if (l.kind == 0) continue;
      l.x += l.dir;
      l.moved = 1;
      if (l.x < 0 || l.x >= kN) l = Lane{};
    }
    reward += touch(terminal);
    if (terminal) return reward;
  }
  if (--ramp_timer_ == 0) {
    ramp_timer_ = kRampEvery;
    ++ramps_;
  }
  return reward;
}

void MinAtarAsterix::game_observe(std::uint8_t* grid) const {
  set_cell(grid, 0, player_y_, player_x_);
  for (int i = 0; i < 8; ++i) {
    const Lane& l = lanes_[static_cast<std::size_t>(i)];
    if (l.kind == 0) continue;
    set_cell(grid, l.kind == 1 ? 1 : 3, i + 1, l.x);
    if (l.moved) set_cell(grid, 2, i + 1, l.x - l.dir);
  }
}

void MinAtarAsterix::game_get_state(double* s) const {
  s[0] = player_x_;
  s[1] = player_y_;
  s[2] = ramps_;
  s[3] = spawn_timer_;
  s[4] = move_timer_;
  s[5] = ramp_timer_;
  for (std::size_t i = 0; i < 8; ++i) {
    s[6 + 4 * i] = lanes_[i].kind;
    s[7 + 4 * i] = lanes_[i].x;
    s[8 + 4 * i] = lanes_[i].dir;
    s[9 + 4 * i] = lanes_[i].moved;
  }
}

void MinAtarAsterix::game_set_state(const double* s) {
  const std::string& n = id();
  const int px = state_int(n, "player_x", s[0], 0, kN - 1);
  const int py = state_int(n, "player_y", s[1], 1, 8);
  const int ramps = state_int(n, "ramps", s[2], 0, 1 << 30);
  const int st = state_int(n, "spawn_timer", s[3], 1, 11);
  const int mt = state_int(n, "move_timer", s[4], 1, 5);
  const int rt = state_int(n, "ramp_timer", s[5], 1, kRampEvery);
  std::array<Lane, 8> lanes{};
  for (std::size_t i = 0; i < 8; ++i) {
    Lane& l = lanes[i];
    l.kind = state_int(n, "kind", s[6 + 4 * i], 0, 2);
    l.x = state_int(n, "x", s[7 + 4 * i], 0, kN - 1);
    l.dir = state_int(n, "direction", s[8 + 4 * i], -1, 1);
    HERD_REQUIRE(l.dir != 0, "{}: state value direction is 0, but must be -1 or 1", n);
    l.moved = state_int(n, "has_moved", s[9 + 4 * i], 0, 1);
    HERD_REQUIRE(!l.moved || (l.x - l.dir >= 0 && l.x - l.dir < kN),
                 "{}: state value x is {} with direction {} and has_moved 1, but an object "
                 "that has moved cannot be at the edge it came from",
                 n, l.x, l.dir);
    if (l.kind == 0) l = Lane{};
  }
  player_x_ = px;
  player_y_ = py;
  ramps_ = ramps;
  spawn_timer_ = st;
  move_timer_ = mt;
  ramp_timer_ = rt;
  lanes_ = lanes;
}

}  // namespace herd::rl
