// MinAtar Seaquest, written from the rules described in Young & Tian (2019); the details the
// paper leaves open were matched to observations of PyPI's minatar (see minatar.hpp).
#include <algorithm>

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

/// Moves every bullet of `g` (cell value = its direction) one cell sideways.
void move_bullets(std::array<std::int8_t, 100>& g) {
  std::array<std::int8_t, 100> next{};
  for (int y = 0; y < kN; ++y) {
    for (int x = 0; x < kN; ++x) {
      const int d = g[at(y, x)];
      if (d != 0 && x + d >= 0 && x + d < kN) next[at(y, x + d)] = static_cast<std::int8_t>(d);
    }
  }
  g = next;
}

}  // namespace

MinAtarSeaquest::MinAtarSeaquest(bool full_actions)
    : MinAtarEnv(full_actions ? "MinAtar/Seaquest-v0" : "MinAtar/Seaquest-v1", 10,
                 {0, 1, 2, 3, 4, 5}, full_actions,
                 9 + 2 * kCells + 7 * kMaxEnemies + 6 * kMaxDiverSlots) {}

int MinAtarSeaquest::spawn_period(int surfacings) { return std::max(1, 20 - surfacings); }

int MinAtarSeaquest::move_period(int surfacings) { return std::max(2, 5 - surfacings / 2); }

void MinAtarSeaquest::game_reset(RngCursor& /*rng*/) {
  sub_x_ = 5;
  sub_y_ = 0;
  facing_ = -1;
  oxygen_ = kMaxOxygen;
  divers_ = 0;
  cooldown_ = 0;
  enemy_timer_ = 21;
  diver_timer_ = 31;
  surfacings_ = 0;
  friendly_.fill(0);
  enemy_bullets_.fill(0);
  enemies_.fill(Mover{});
  divers_on_screen_.fill(Mover{});
}

bool MinAtarSeaquest::touching_enemy() const {
  if (enemy_bullets_[at(sub_y_, sub_x_)] != 0) return true;
  return std::any_of(enemies_.begin(), enemies_.end(), [&](const Mover& e) {
    return e.kind != 0 && e.lane == sub_y_ && e.x == sub_x_;
  });
}

void MinAtarSeaquest::touch_diver() {
  for (Mover& d : divers_on_screen_) {
    if (d.kind != 0 && d.lane == sub_y_ && d.x == sub_x_ && divers_ < kMaxDivers) {
      ++divers_;
      d = Mover{};
    }
  }
}

int MinAtarSeaquest::hit_enemies() {
  int hits = 0;
  std::array<std::uint8_t, 100> spent{};
  for (Mover& e : enemies_) {
    if (e.kind != 0 && friendly_[at(e.lane, e.x)] != 0) {
      spent[at(e.lane, e.x)] = 1;
      e = Mover{};
      ++hits;
    }
  }
  for (std::size_t i = 0; i < spent.size(); ++i) {
    if (spent[i]) friendly_[i] = 0;
  }
  return hits;
}

double MinAtarSeaquest::game_step(int action, RngCursor& rng, bool& terminal) {
  terminal = false;
  const int prev_y = sub_y_;
  if (action == act(MinAtarAction::kLeft)) {
    sub_x_ = std::max(0, sub_x_ - 1);
    facing_ = -1;
  } else if (action == act(MinAtarAction::kRight)) {
    sub_x_ = std::min(kN - 1, sub_x_ + 1);
    facing_ = 1;
  } else if (action == act(MinAtarAction::kUp)) {
    sub_y_ = std::max(0, sub_y_ - 1);
  } else if (action == act(MinAtarAction::kDown)) {
    sub_y_ = std::min(8, sub_y_ + 1);
  }
  if (touching_enemy()) terminal = true;
  touch_diver();
  if (action == act(MinAtarAction::kFire) && cooldown_ == 0) {
    friendly_[at(sub_y_, sub_x_)] = static_cast<std::int8_t>(facing_);
    cooldown_ = 5;
  }
  move_bullets(friendly_);
  double reward = hit_enemies();
  move_bullets(enemy_bullets_);

  const int period = move_period(surfacings_);
  for (Mover& e : enemies_) {
    if (e.kind == 0) continue;
    if (--e.move_timer == 0) {
      e.move_timer = period + 1;
      e.x += e.dir;
      e.moved = 1;
      if (e.x < 0 || e.x >= kN) {
        e = Mover{};
        continue;
      }
    }
    if (e.kind == 2 && --e.fire_timer == 0) {
      e.fire_timer = 11;
      const int bx = e.x + e.dir;
      if (bx >= 0 && bx < kN) enemy_bullets_[at(e.lane, bx)] = static_cast<std::int8_t>(e.dir);
    }
  }
  reward += hit_enemies();
  for (Mover& d : divers_on_screen_) {
    if (d.kind == 0) continue;
    if (--d.move_timer == 0) {
      d.move_timer = kDiverPeriod + 1;
      d.x += d.dir;
      d.moved = 1;
      if (d.x < 0 || d.x >= kN) d = Mover{};
    }
  }
  if (--enemy_timer_ == 0) {
    enemy_timer_ = spawn_period(surfacings_);
    const int lane = 1 + static_cast<int>(rng.below(8));
    const int dir = rng.below(2) == 0 ? 1 : -1;
    const bool sub = rng.below(3) == 0;
    const bool blocked = std::any_of(enemies_.begin(), enemies_.end(), [&](const Mover& e) {
      return e.kind != 0 && e.lane == lane && e.dir == -dir;
    });
    auto slot = std::find_if(enemies_.begin(), enemies_.end(),
                             [](const Mover& e) { return e.kind == 0; });
    if (!blocked && slot != enemies_.end()) {
      *slot = Mover{sub ? 2 : 1, lane, dir > 0 ? 0 : kN - 1, dir, period, 10, 0};
    }
  }
  if (--diver_timer_ == 0) {
    diver_timer_ = 30;
    const int lane = 1 + static_cast<int>(rng.below(8));
    const int dir = rng.below(2) == 0 ? 1 : -1;
    auto slot = std::find_if(divers_on_screen_.begin(), divers_on_screen_.end(),
                             [](const Mover& d) { return d.kind == 0; });
    if (slot != divers_on_screen_.end()) {
      *slot = Mover{1, lane, dir > 0 ? 0 : kN - 1, dir, kDiverPeriod, 0, 0};
    }
  }
  if (touching_enemy()) terminal = true;
  touch_diver();

  if (sub_y_ == 0) {
    if (prev_y > 0) {  // surfacing
      if (divers_ == 0) {
        terminal = true;
      } else {
        if (divers_ == kMaxDivers) {
          reward += oxygen_ / 20;
          divers_ = 0;
        } else {
          --divers_;
        }
        oxygen_ = kMaxOxygen;
        ++surfacings_;
      }
    }
  } else if (--oxygen_ < 0) {  // out of oxygen after kMaxOxygen frames below the surface
    oxygen_ = 0;
    terminal = true;
  }
  if (cooldown_ > 0) --cooldown_;
  return reward;
}

void MinAtarSeaquest::game_observe(std::uint8_t* grid) const {
  set_cell(grid, 0, sub_y_, sub_x_);
  const int back = sub_x_ - facing_;
  if (back >= 0 && back < kN) set_cell(grid, 1, sub_y_, back);
  for (int y = 0; y < kN; ++y) {
    for (int x = 0; x < kN; ++x) {
      if (friendly_[at(y, x)] != 0) set_cell(grid, 2, y, x);
      if (enemy_bullets_[at(y, x)] != 0) set_cell(grid, 4, y, x);
    }
  }
  for (const Mover& e : enemies_) {
    if (e.kind == 0) continue;
    set_cell(grid, e.kind == 1 ? 5 : 6, e.lane, e.x);
    if (e.moved) set_cell(grid, 3, e.lane, e.x - e.dir);
  }
  for (const Mover& d : divers_on_screen_) {
    if (d.kind == 0) continue;
    set_cell(grid, 9, d.lane, d.x);
    if (d.moved) set_cell(grid, 3, d.lane, d.x - d.dir);
  }
  for (int x = 0; x < oxygen_ / 20; ++x) set_cell(grid, 7, kN - 1, x);
  for (int x = 0; x < divers_; ++x) set_cell(grid, 8, kN - 1, x);
}

void MinAtarSeaquest::game_get_state(double* s) const {
  s[0] = sub_x_;
  s[1] = sub_y_;
  s[2] = facing_;
  s[3] = oxygen_;
  s[4] = divers_;
  s[5] = cooldown_;
  s[6] = enemy_timer_;
  s[7] = diver_timer_;
  s[8] = surfacings_;
  for (std::size_t i = 0; i < 100; ++i) {
    s[9 + i] = friendly_[i];
    s[109 + i] = enemy_bullets_[i];
  }
  double* o = s + 209;
  for (const Mover& e : enemies_) {
    const int v[7] = {e.kind, e.lane, e.x, e.dir, e.move_timer, e.fire_timer, e.moved};
    o = std::copy(v, v + 7, o);
  }
  for (const Mover& d : divers_on_screen_) {
    const int v[6] = {d.kind, d.lane, d.x, d.dir, d.move_timer, d.moved};
    o = std::copy(v, v + 6, o);
  }
}

void MinAtarSeaquest::game_set_state(const double* s) {
  const std::string& n = id();
  const int x = state_int(n, "sub_x", s[0], 0, kN - 1);
  const int y = state_int(n, "sub_y", s[1], 0, 8);
  const int facing = state_int(n, "facing", s[2], -1, 1);
  HERD_REQUIRE(facing != 0, "{}: state value facing is 0, but must be -1 or 1", n);
  const int oxygen = state_int(n, "oxygen", s[3], 0, kMaxOxygen);
  const int divers = state_int(n, "divers", s[4], 0, kMaxDivers);
  const int cooldown = state_int(n, "fire_cooldown", s[5], 0, 5);
  const int et = state_int(n, "enemy_spawn_timer", s[6], 1, 21);
  const int dt = state_int(n, "diver_spawn_timer", s[7], 1, 31);
  const int surfacings = state_int(n, "surfacings", s[8], 0, 1 << 30);
  std::array<std::int8_t, 100> fr{}, en{};
  for (std::size_t i = 0; i < 100; ++i) {
    fr[i] = static_cast<std::int8_t>(state_int(n, "friendly_bullet", s[9 + i], -1, 1));
    en[i] = static_cast<std::int8_t>(state_int(n, "enemy_bullet", s[109 + i], -1, 1));
  }
  const double* o = s + 209;
  std::array<Mover, kMaxEnemies> enemies{};
  for (Mover& e : enemies) {
    e.kind = state_int(n, "enemy_kind", o[0], 0, 2);
    if (e.kind == 0) {  // an empty slot: the other values are not read
      o += 7;
      continue;
    }
    e.lane = state_int(n, "enemy_lane", o[1], 1, 8);
    e.x = state_int(n, "enemy_x", o[2], 0, kN - 1);
    e.dir = state_int(n, "enemy_direction", o[3], -1, 1);
    e.move_timer = state_int(n, "enemy_move_timer", o[4], 0, 6);
    e.fire_timer = state_int(n, "enemy_fire_timer", o[5], 0, 11);
    e.moved = state_int(n, "enemy_has_moved", o[6], 0, 1);
    o += 7;
    HERD_REQUIRE(e.dir != 0 && e.move_timer > 0 && (e.kind == 1 || e.fire_timer > 0),
                 "{}: state of an enemy in lane {} has direction {}, move timer {}, fire timer "
                 "{}, but needs a direction of -1 or 1 and positive timers",
                 n, e.lane, e.dir, e.move_timer, e.fire_timer);
  }
  std::array<Mover, kMaxDiverSlots> divers_list{};
  for (Mover& d : divers_list) {
    d.kind = state_int(n, "diver_present", o[0], 0, 1);
    if (d.kind == 0) {
      o += 6;
      continue;
    }
    d.lane = state_int(n, "diver_lane", o[1], 1, 8);
    d.x = state_int(n, "diver_x", o[2], 0, kN - 1);
    d.dir = state_int(n, "diver_direction", o[3], -1, 1);
    d.move_timer = state_int(n, "diver_move_timer", o[4], 0, 6);
    d.moved = state_int(n, "diver_has_moved", o[5], 0, 1);
    o += 6;
    HERD_REQUIRE(d.dir != 0 && d.move_timer > 0,
                 "{}: state of a diver in lane {} has direction {}, move timer {}, but needs a "
                 "direction of -1 or 1 and a positive timer",
                 n, d.lane, d.dir, d.move_timer);
  }
  sub_x_ = x;
  sub_y_ = y;
  facing_ = facing;
  oxygen_ = oxygen;
  divers_ = divers;
  cooldown_ = cooldown;
  enemy_timer_ = et;
  diver_timer_ = dt;
  surfacings_ = surfacings;
  friendly_ = fr;
  enemy_bullets_ = en;
  enemies_ = enemies;
  divers_on_screen_ = divers_list;
}

}  // namespace herd::rl
