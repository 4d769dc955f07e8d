// MinAtar Asterix, written from the rules described in Young & Tian (2019); the details the
// paper leaves open were matched to observations of PyPI's minatar (see minatar.hpp).
#include <algorithm>
#include <array>
#include <memory>

#include "herd/rl/minatar.hpp"
#include "minatar_internal.hpp"

namespace herd::rl {

using namespace minatar_detail;

namespace {

class AsterixGame final : public MinAtarGame {
 public:
  void reset(RngCursor& /*rng*/) override {
    *this = AsterixGame{};  // the member initialisers are the start state
  }

  double step(int action, RngCursor& rng, bool& terminal) override {
    terminal = false;
    if (action == act(MinAtarAction::kLeft)) player_x_ = std::max(0, player_x_ - 1);
    if (action == act(MinAtarAction::kRight)) player_x_ = std::min(kN - 1, player_x_ + 1);
    if (action == act(MinAtarAction::kUp)) player_y_ = std::max(1, player_y_ - 1);
    if (action == act(MinAtarAction::kDown)) player_y_ = std::min(8, player_y_ + 1);
    double reward = touch(terminal);
    if (terminal) return reward;

    if (--spawn_timer_ == 0) {
      spawn_timer_ = MinAtarAsterix::spawn_period(ramps_);
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
      move_timer_ = MinAtarAsterix::move_period(ramps_);
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
      ramp_timer_ = MinAtarAsterix::kRampEvery;
      ++ramps_;
    }
    return reward;
  }

  void observe(std::uint8_t* grid) const override {
    set_cell(grid, 0, player_y_, player_x_);
    for (int i = 0; i < 8; ++i) {
      const Lane& l = lanes_[static_cast<std::size_t>(i)];
      if (l.kind == 0) continue;
      set_cell(grid, l.kind == 1 ? 1 : 3, i + 1, l.x);
      if (l.moved) set_cell(grid, 2, i + 1, l.x - l.dir);
    }
  }

  void get_state(StateWriter& w) const override {
    w.put(player_x_, player_y_, ramps_, spawn_timer_, move_timer_, ramp_timer_);
    for (const Lane& l : lanes_) w.put(l.kind, l.x, l.dir, l.moved);
  }

  void set_state(StateReader& r) override {
    AsterixGame g = *this;  // read into a copy: a refused value changes nothing
    g.player_x_ = r.next("player_x", 0, kN - 1);
    g.player_y_ = r.next("player_y", 1, 8);
    g.ramps_ = r.next("ramps", 0, 1 << 30);
    g.spawn_timer_ = r.next("spawn_timer", 1, 11);
    g.move_timer_ = r.next("move_timer", 1, 5);
    g.ramp_timer_ = r.next("ramp_timer", 1, MinAtarAsterix::kRampEvery);
    for (Lane& l : g.lanes_) {
      l.kind = r.next("kind", 0, 2);
      l.x = r.next("x", 0, kN - 1);
      l.dir = r.sign("direction");
      l.moved = r.next("has_moved", 0, 1);
      HERD_REQUIRE(!l.moved || (l.x - l.dir >= 0 && l.x - l.dir < kN),
                   "{}: state value x is {} with direction {} and has_moved 1, but an object "
                   "that has moved cannot be at the edge it came from",
                   r.id(), l.x, l.dir);
      if (l.kind == 0) l = Lane{};
    }
    *this = g;
  }

 private:
  /// Applies the player's contact with the object in its lane; returns the reward.
  double touch(bool& terminal) {
    Lane& l = lanes_[static_cast<std::size_t>(player_y_ - 1)];
    if (l.kind == 0 || l.x != player_x_) return 0.0;
    if (l.kind == 1) {
      terminal = true;
      return 0.0;
    }
    l = Lane{};
    return 1.0;
  }

  struct Lane {
    int kind = 0, x = 0, dir = 1, moved = 0;  // kind: 0 none, 1 enemy, 2 gold
  };
  int player_x_ = 5, player_y_ = 5, ramps_ = 0, spawn_timer_ = 11, move_timer_ = 1;
  int ramp_timer_ = MinAtarAsterix::kRampEvery;
  std::array<Lane, 8> lanes_{};
};

}  // namespace

MinAtarAsterix::MinAtarAsterix(bool full_actions)
    : MinAtarEnv(full_actions ? "MinAtar/Asterix-v0" : "MinAtar/Asterix-v1", 4, {0, 1, 2, 3, 4}, full_actions,
                 6 + 4 * 8, std::make_unique<AsterixGame>()) {}

int MinAtarAsterix::spawn_period(int ramps) { return std::max(1, 10 - ramps); }

int MinAtarAsterix::move_period(int ramps) { return std::max(1, 5 - ramps / 2); }

}  // namespace herd::rl
