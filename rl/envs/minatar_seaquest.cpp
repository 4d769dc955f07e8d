// MinAtar Seaquest, written from the rules described in Young & Tian (2019); the details the
// paper leaves open were matched to observations of PyPI's minatar (see minatar.hpp).
#include <algorithm>
#include <array>
#include <memory>
#include <string>

#include "herd/rl/minatar.hpp"
#include "minatar_internal.hpp"

namespace herd::rl {

using namespace minatar_detail;

namespace {

/// Moves every bullet of `g` (cell value = its direction) one cell sideways.
void move_bullets(std::array<std::int8_t, 100>& g) {
  std::array<std::int8_t, 100> next{};
  for (int y = 0; y < kN; ++y) {
    for (int x = 0; x < kN; ++x) {
      const int d = g[at(y, x)];  // NOLINT(bugprone-signed-char-misuse): a direction, -1, 0 or 1
      if (d != 0 && x + d >= 0 && x + d < kN) next[at(y, x + d)] = static_cast<std::int8_t>(d);
    }
  }
  g = next;
}

class SeaquestGame final : public MinAtarGame {
 public:
  void reset(RngCursor& /*rng*/) override {
    *this = SeaquestGame{};  // the member initialisers are the start state
  }

  double step(int action, RngCursor& rng, bool& terminal) override {
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

    const int period = MinAtarSeaquest::move_period(surfacings_);
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
        d.move_timer = MinAtarSeaquest::kDiverPeriod + 1;
        d.x += d.dir;
        d.moved = 1;
        if (d.x < 0 || d.x >= kN) d = Mover{};
      }
    }
    if (--enemy_timer_ == 0) {
      enemy_timer_ = MinAtarSeaquest::spawn_period(surfacings_);
      const int lane = 1 + static_cast<int>(rng.below(8));
      const int dir = rng.below(2) == 0 ? 1 : -1;
      const bool sub = rng.below(3) == 0;
      const bool blocked = std::any_of(enemies_.begin(), enemies_.end(),
                                       [&](const Mover& e) { return e.kind != 0 && e.lane == lane && e.dir == -dir; });
      auto slot = std::find_if(enemies_.begin(), enemies_.end(), [](const Mover& e) { return e.kind == 0; });
      if (!blocked && slot != enemies_.end()) {
        *slot = Mover{sub ? 2 : 1, lane, dir > 0 ? 0 : kN - 1, dir, period, 10, 0};
      }
    }
    if (--diver_timer_ == 0) {
      diver_timer_ = 30;
      const int lane = 1 + static_cast<int>(rng.below(8));
      const int dir = rng.below(2) == 0 ? 1 : -1;
      auto slot =
          std::find_if(divers_on_screen_.begin(), divers_on_screen_.end(), [](const Mover& d) { return d.kind == 0; });
      if (slot != divers_on_screen_.end()) {
        *slot = Mover{1, lane, dir > 0 ? 0 : kN - 1, dir, MinAtarSeaquest::kDiverPeriod, 0, 0};
      }
    }
    if (touching_enemy()) terminal = true;
    touch_diver();

    if (sub_y_ == 0) {
      if (prev_y > 0) {  // surfacing
        if (divers_ == 0) {
          terminal = true;
        } else {
          if (divers_ == MinAtarSeaquest::kMaxDivers) {
            // MinAtar's bonus `oxygen * 10 // max_oxygen`: whole points, rounded down.
            const int bonus = oxygen_ * 10 / MinAtarSeaquest::kMaxOxygen;
            reward += bonus;
            divers_ = 0;
          } else {
            --divers_;
          }
          oxygen_ = MinAtarSeaquest::kMaxOxygen;
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

  void observe(std::uint8_t* grid) const override {
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

  void get_state(StateWriter& w) const override {
    w.put(sub_x_, sub_y_, facing_, oxygen_, divers_, cooldown_, enemy_timer_, diver_timer_, surfacings_);
    w.cells(friendly_);
    w.cells(enemy_bullets_);
    for (const Mover& e : enemies_) put_mover(w, e, true);
    for (const Mover& d : divers_on_screen_) put_mover(w, d, false);
  }

  void set_state(StateReader& r) override {
    SeaquestGame g = *this;  // read into a copy: a refused value changes nothing
    g.sub_x_ = r.next("sub_x", 0, kN - 1);
    g.sub_y_ = r.next("sub_y", 0, 8);
    g.facing_ = r.sign("facing");
    g.oxygen_ = r.next("oxygen", 0, MinAtarSeaquest::kMaxOxygen);
    g.divers_ = r.next("divers", 0, MinAtarSeaquest::kMaxDivers);
    g.cooldown_ = r.next("fire_cooldown", 0, 5);
    g.enemy_timer_ = r.next("enemy_spawn_timer", 1, 21);
    g.diver_timer_ = r.next("diver_spawn_timer", 1, 31);
    g.surfacings_ = r.next("surfacings", 0, 1 << 30);
    g.friendly_ = r.cells<std::int8_t, kCells>("friendly_bullet", -1, 1);
    g.enemy_bullets_ = r.cells<std::int8_t, kCells>("enemy_bullet", -1, 1);
    for (Mover& e : g.enemies_) {
      e = read_mover(r, "enemy", "enemy_kind", 2, true);
      HERD_REQUIRE(e.kind == 0 || (e.dir != 0 && e.move_timer > 0 && (e.kind == 1 || e.fire_timer > 0)),
                   "{}: state of an enemy in lane {} has direction {}, move timer {}, fire timer "
                   "{}, but needs a direction of -1 or 1 and positive timers",
                   r.id(), e.lane, e.dir, e.move_timer, e.fire_timer);
    }
    for (Mover& d : g.divers_on_screen_) {
      d = read_mover(r, "diver", "diver_present", 1, false);
      HERD_REQUIRE(d.kind == 0 || (d.dir != 0 && d.move_timer > 0),
                   "{}: state of a diver in lane {} has direction {}, move timer {}, but needs a "
                   "direction of -1 or 1 and a positive timer",
                   r.id(), d.lane, d.dir, d.move_timer);
    }
    *this = g;
  }

 private:
  struct Mover {
    int kind = 0, lane = 0, x = 0, dir = 0, move_timer = 0, fire_timer = 0, moved = 0;
  };
  /// Writes an enemy (`fire`: with its fire timer) or a diver in the state layout: kind,
  /// lane, x, direction, move timer, [fire timer,] has moved.
  static void put_mover(StateWriter& w, const Mover& m, bool fire) {
    w.put(m.kind, m.lane, m.x, m.dir, m.move_timer);
    if (fire) w.put(m.fire_timer);
    w.put(m.moved);
  }

  /// Reads what `put_mover` wrote; `what` ("enemy" or "diver") prefixes the field names. An
  /// empty slot (kind 0) is not read further and comes back as `Mover{}`.
  static Mover read_mover(StateReader& r, const std::string& what, const char* kind_field, int max_kind, bool fire) {
    Mover m;
    m.kind = r.next(kind_field, 0, max_kind);
    if (m.kind == 0) {
      r.skip(fire ? 6 : 5);
      return m;
    }
    m.lane = r.next(what + "_lane", 1, 8);
    m.x = r.next(what + "_x", 0, kN - 1);
    m.dir = r.next(what + "_direction", -1, 1);
    m.move_timer = r.next(what + "_move_timer", 0, 6);
    if (fire) m.fire_timer = r.next(what + "_fire_timer", 0, 11);
    m.moved = r.next(what + "_has_moved", 0, 1);
    return m;
  }

  bool touching_enemy() const {
    if (enemy_bullets_[at(sub_y_, sub_x_)] != 0) return true;
    return std::any_of(enemies_.begin(), enemies_.end(),
                       [&](const Mover& e) { return e.kind != 0 && e.lane == sub_y_ && e.x == sub_x_; });
  }

  void touch_diver() {
    for (Mover& d : divers_on_screen_) {
      if (d.kind != 0 && d.lane == sub_y_ && d.x == sub_x_ && divers_ < MinAtarSeaquest::kMaxDivers) {
        ++divers_;
        d = Mover{};
      }
    }
  }

  int hit_enemies() {
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

  int sub_x_ = 5, sub_y_ = 0, facing_ = -1, oxygen_ = MinAtarSeaquest::kMaxOxygen, divers_ = 0, cooldown_ = 0;
  int enemy_timer_ = 21, diver_timer_ = 31, surfacings_ = 0;
  std::array<std::int8_t, 100> friendly_{}, enemy_bullets_{};
  std::array<Mover, MinAtarSeaquest::kMaxEnemies> enemies_{};
  std::array<Mover, MinAtarSeaquest::kMaxDiverSlots> divers_on_screen_{};
};

}  // namespace

MinAtarSeaquest::MinAtarSeaquest(bool full_actions)
    : MinAtarEnv(full_actions ? "MinAtar/Seaquest-v0" : "MinAtar/Seaquest-v1", 10, {0, 1, 2, 3, 4, 5}, full_actions,
                 9 + 2 * kCells + 7 * kMaxEnemies + 6 * kMaxDiverSlots, std::make_unique<SeaquestGame>()) {}

int MinAtarSeaquest::spawn_period(int surfacings) { return std::max(1, 20 - surfacings); }

int MinAtarSeaquest::move_period(int surfacings) { return std::max(2, 5 - surfacings / 2); }

}  // namespace herd::rl
