// MinAtar Space Invaders, written from the rules described in Young & Tian (2019); the
// details the paper leaves open were matched to observations of PyPI's minatar (see
// minatar.hpp).
#include <algorithm>
#include <array>
#include <cstdlib>
#include <memory>

#include "herd/rl/minatar.hpp"
#include "minatar_internal.hpp"

namespace herd::rl {

using namespace minatar_detail;

namespace {

class SpaceInvadersGame final : public MinAtarGame {
 public:
  void reset(RngCursor& /*rng*/) override {
    *this = SpaceInvadersGame{};  // the member initialisers are the start state
    new_wave();
  }

  double step(int action, RngCursor& /*rng*/, bool& terminal) override {
    terminal = false;
    if (action == act(MinAtarAction::kLeft)) cannon_x_ = std::max(0, cannon_x_ - 1);
    if (action == act(MinAtarAction::kRight)) cannon_x_ = std::min(kN - 1, cannon_x_ + 1);
    if (aliens_[at(kN - 1, cannon_x_)]) terminal = true;  // walked into an alien
    if (action == act(MinAtarAction::kFire) && shot_timer_ == 0) {
      friendly_[at(kN - 1, cannon_x_)] = 1;
      shot_timer_ = MinAtarSpaceInvaders::kShotCooldown;
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
      move_timer_ = std::min(MinAtarSpaceInvaders::wave_speed(waves_), std::max(1, n_aliens));
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
      enemy_shot_timer_ = MinAtarSpaceInvaders::kEnemyShotEvery;
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

  void observe(std::uint8_t* grid) const override {
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

  void get_state(StateWriter& w) const override {
    w.put(cannon_x_, dir_, waves_, shot_timer_, move_timer_, enemy_shot_timer_);
    w.cells(aliens_);
    w.cells(friendly_);
    w.cells(enemy_);
  }

  void set_state(StateReader& r) override {
    SpaceInvadersGame g = *this;  // read into a copy: a refused value changes nothing
    g.cannon_x_ = r.next("cannon_x", 0, kN - 1);
    g.dir_ = r.sign("direction");
    g.waves_ = r.next("waves", 0, 1 << 30);
    g.shot_timer_ = r.next("fire_cooldown", 0, MinAtarSpaceInvaders::kShotCooldown);
    g.move_timer_ = r.next("alien_move_timer", 1, 13);
    g.enemy_shot_timer_ = r.next("enemy_fire_timer", 1, 11);
    g.aliens_ = r.cells<std::uint8_t, kCells>("alien", 0, 1);
    g.friendly_ = r.cells<std::uint8_t, kCells>("friendly_bullet", 0, 1);
    g.enemy_ = r.cells<std::uint8_t, kCells>("enemy_bullet", 0, 1);
    HERD_REQUIRE(std::any_of(g.aliens_.begin(), g.aliens_.end(), [](std::uint8_t a) { return a != 0; }),
                 "{}: state has no alien, but a wave always has one", r.id());
    *this = g;
  }

 private:
  void new_wave() {
    for (int y = 0; y < 4; ++y) {
      for (int x = 2; x < 8; ++x) aliens_[at(y, x)] = 1;
    }
  }

  using Grid = std::array<std::uint8_t, 100>;
  int cannon_x_ = 5, dir_ = -1, waves_ = 0, shot_timer_ = 0, move_timer_ = 13;
  int enemy_shot_timer_ = 11;
  Grid aliens_{}, friendly_{}, enemy_{};
};

}  // namespace

MinAtarSpaceInvaders::MinAtarSpaceInvaders(bool full_actions)
    : MinAtarEnv(full_actions ? "MinAtar/SpaceInvaders-v0" : "MinAtar/SpaceInvaders-v1", 6, {0, 1, 3, 5}, full_actions,
                 6 + 3 * kCells, std::make_unique<SpaceInvadersGame>()) {}

int MinAtarSpaceInvaders::wave_speed(int waves) { return std::max(1, 12 - waves); }

}  // namespace herd::rl
