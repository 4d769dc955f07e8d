// MinAtar Space Invaders, written from the rules described in Young & Tian (2019); the
// details the paper leaves open were matched to observations of PyPI's minatar (see
// minatar.hpp).
#include <algorithm>
#include <cstdlib>

#include "herd/rl/minatar.hpp"
#include "minatar_internal.hpp"

namespace herd::rl {

using minatar_detail::act;
using minatar_detail::kCells;
using minatar_detail::kN;
using minatar_detail::set_cell;
using minatar_detail::state_int;

namespace {
constexpr std::size_t at(int y, int x) { return static_cast<std::size_t>(y * kN + x); }
}  // namespace

MinAtarSpaceInvaders::MinAtarSpaceInvaders(bool full_actions)
    : MinAtarEnv(full_actions ? "MinAtar/SpaceInvaders-v0" : "MinAtar/SpaceInvaders-v1", 6,
                 {0, 1, 3, 5}, full_actions, 6 + 3 * kCells) {}

int MinAtarSpaceInvaders::wave_speed(int waves) { return std::max(1, 12 - waves); }

void MinAtarSpaceInvaders::new_wave() {
  for (int y = 0; y < 4; ++y) {
    for (int x = 2; x < 8; ++x) aliens_[at(y, x)] = 1;
  }
}

void MinAtarSpaceInvaders::game_reset(RngCursor& /*rng*/) {
  cannon_x_ = 5;
  dir_ = -1;
  waves_ = 0;
  shot_timer_ = 0;
  move_timer_ = 13;
  enemy_shot_timer_ = 11;
  aliens_.fill(0);
  friendly_.fill(0);
  enemy_.fill(0);
  new_wave();
}

double MinAtarSpaceInvaders::game_step(int action, RngCursor& /*rng*/, bool& terminal) {
  terminal = false;
  if (action == act(MinAtarAction::kLeft)) cannon_x_ = std::max(0, cannon_x_ - 1);
  if (action == act(MinAtarAction::kRight)) cannon_x_ = std::min(kN - 1, cannon_x_ + 1);
  if (aliens_[at(kN - 1, cannon_x_)]) terminal = true;  // walked into an alien
  if (action == act(MinAtarAction::kFire) && shot_timer_ == 0) {
    friendly_[at(kN - 1, cannon_x_)] = 1;
    shot_timer_ = kShotCooldown;
  }
  // Bullets: friendly ones up, enemy ones down, one cell; off-screen ones vanish.
  std::copy(friendly_.begin() + kN, friendly_.end(), friendly_.begin());
  std::fill(friendly_.end() - kN, friendly_.end(), std::uint8_t{0});
  std::copy_backward(enemy_.begin(), enemy_.end() - kN, enemy_.end());
  std::fill(enemy_.begin(), enemy_.begin() + kN, std::uint8_t{0});
  if (enemy_[at(kN - 1, cannon_x_)]) terminal = true;

  int n_aliens = 0, min_x = kN, max_x = -1;
  bool bottom = false;
  for (int y = 0; y < kN; ++y) {
    for (int x = 0; x < kN; ++x) {
      if (!aliens_[at(y, x)]) continue;
      ++n_aliens;
      min_x = std::min(min_x, x);
      max_x = std::max(max_x, x);
      bottom = bottom || y == kN - 1;
    }
  }
  if (--move_timer_ == 0) {
    move_timer_ = std::min(wave_speed(waves_), std::max(1, n_aliens));
    if ((dir_ < 0 && min_x == 0) || (dir_ > 0 && max_x == kN - 1)) {
      if (bottom) {
        terminal = true;  // the aliens have landed
      } else {
        std::copy_backward(aliens_.begin(), aliens_.end() - kN, aliens_.end());
        std::fill(aliens_.begin(), aliens_.begin() + kN, std::uint8_t{0});
      }
      dir_ = -dir_;
    } else {
      Grid moved{};
      for (int y = 0; y < kN; ++y) {
        for (int x = 0; x < kN; ++x) {
          if (aliens_[at(y, x)]) moved[at(y, x + dir_)] = 1;
        }
      }
      aliens_ = moved;
    }
  }
  if (--enemy_shot_timer_ == 0) {
    enemy_shot_timer_ = kEnemyShotEvery;
    int best_x = -1, best_y = -1;
    for (int x = 0; x < kN; ++x) {
      for (int y = kN - 1; y >= 0; --y) {
        if (!aliens_[at(y, x)]) continue;
        if (best_x < 0 || std::abs(x - cannon_x_) < std::abs(best_x - cannon_x_)) {
          best_x = x;
          best_y = y;
        }
        break;
      }
    }
    if (best_x >= 0) enemy_[at(best_y, best_x)] = 1;
  }
  double reward = 0.0;
  for (std::size_t i = 0; i < aliens_.size(); ++i) {
    if (aliens_[i] && friendly_[i]) {
      aliens_[i] = 0;
      friendly_[i] = 0;
      reward += 1.0;
    }
  }
  if (aliens_[at(kN - 1, cannon_x_)]) terminal = true;
  if (shot_timer_ > 0) --shot_timer_;
  if (std::all_of(aliens_.begin(), aliens_.end(), [](std::uint8_t a) { return a == 0; })) {
    new_wave();
    ++waves_;
  }
  return reward;
}

void MinAtarSpaceInvaders::game_observe(std::uint8_t* grid) const {
  set_cell(grid, 0, kN - 1, cannon_x_);
  for (int y = 0; y < kN; ++y) {
    for (int x = 0; x < kN; ++x) {
      if (aliens_[at(y, x)]) {
        set_cell(grid, 1, y, x);
        set_cell(grid, dir_ < 0 ? 2 : 3, y, x);
      }
      if (friendly_[at(y, x)]) set_cell(grid, 4, y, x);
      if (enemy_[at(y, x)]) set_cell(grid, 5, y, x);
    }
  }
}

void MinAtarSpaceInvaders::game_get_state(double* s) const {
  s[0] = cannon_x_;
  s[1] = dir_;
  s[2] = waves_;
  s[3] = shot_timer_;
  s[4] = move_timer_;
  s[5] = enemy_shot_timer_;
  for (std::size_t i = 0; i < 100; ++i) {
    s[6 + i] = aliens_[i];
    s[106 + i] = friendly_[i];
    s[206 + i] = enemy_[i];
  }
}

void MinAtarSpaceInvaders::game_set_state(const double* s) {
  const std::string& n = id();
  const int cx = state_int(n, "cannon_x", s[0], 0, kN - 1);
  const int dir = state_int(n, "direction", s[1], -1, 1);
  HERD_REQUIRE(dir != 0, "{}: state value direction is 0, but must be -1 or 1", n);
  const int waves = state_int(n, "waves", s[2], 0, 1 << 30);
  const int st = state_int(n, "fire_cooldown", s[3], 0, kShotCooldown);
  const int mt = state_int(n, "alien_move_timer", s[4], 1, 13);
  const int et = state_int(n, "enemy_fire_timer", s[5], 1, 11);
  Grid al{}, fr{}, en{};
  int n_aliens = 0;
  for (std::size_t i = 0; i < 100; ++i) {
    al[i] = static_cast<std::uint8_t>(state_int(n, "alien", s[6 + i], 0, 1));
    fr[i] = static_cast<std::uint8_t>(state_int(n, "friendly_bullet", s[106 + i], 0, 1));
    en[i] = static_cast<std::uint8_t>(state_int(n, "enemy_bullet", s[206 + i], 0, 1));
    n_aliens += al[i];
  }
  HERD_REQUIRE(n_aliens > 0, "{}: state has no alien, but a wave always has one", n);
  cannon_x_ = cx;
  dir_ = dir;
  waves_ = waves;
  shot_timer_ = st;
  move_timer_ = mt;
  enemy_shot_timer_ = et;
  aliens_ = al;
  friendly_ = fr;
  enemy_ = en;
}

}  // namespace herd::rl
