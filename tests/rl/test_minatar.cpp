// MinAtar games: each rule in a hand-made deterministic scenario (set_state, sticky actions
// off), observation layout, sticky-action frequency, determinism, state round trips, and
// the EnvPool against standalone envs.
#include <cstring>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/core/error.hpp"
#include "herd/core/rng.hpp"
#include "herd/rl/env_pool.hpp"
#include "herd/rl/minatar.hpp"
#include "herd/rl/registry.hpp"

using herd::rl::MinAtarBreakout;
using herd::rl::MinAtarEnv;
using herd::rl::MinAtarFreeway;

namespace {

float cell(const std::vector<float>& obs, int ch, int y, int x) {
  return obs[static_cast<std::size_t>(ch) * 100 + static_cast<std::size_t>(y) * 10 + static_cast<std::size_t>(x)];
}

float channel_sum(const std::vector<float>& obs, int ch) {
  float s = 0;
  for (int i = 0; i < 100; ++i) s += obs[static_cast<std::size_t>(ch) * 100 + static_cast<std::size_t>(i)];
  return s;
}

/// Breakout state `[ball_x, ball_y, dx, dy, paddle_x, last_x, last_y, bricks x30, strike,
/// last action, t]` with the given bricks (all by default) and strike flag (the last step
/// broke a brick).
std::vector<double> breakout_state(int bx, int by, int dx, int dy, int px,
                                   const std::vector<int>& bricks = std::vector<int>(30, 1), int strike = 0) {
  std::vector<double> s = {double(bx), double(by), double(dx), double(dy), double(px), double(bx), double(by)};
  for (int b : bricks) s.push_back(b);
  s.push_back(strike);
  s.push_back(0);
  s.push_back(0);
  return s;
}

/// Freeway state with every car at column 0, moving right every 5 frames (timer 5).
std::vector<double> freeway_state(int y, int cooldown, int frame) {
  std::vector<double> s = {double(y), double(cooldown), double(frame)};
  for (int i = 0; i < 8; ++i) {
    s.insert(s.end(), {0.0, 5.0, 1.0, 5.0});
  }
  s.push_back(0);
  s.push_back(0);
  return s;
}

void set_car(std::vector<double>& s, int lane_row, int x, int period, int dir, int timer) {
  const std::size_t o = 3 + 4 * static_cast<std::size_t>(lane_row - 1);
  s[o] = x;
  s[o + 1] = period;
  s[o + 2] = dir;
  s[o + 3] = timer;
}

}  // namespace

TEST_CASE("MinAtar ids, spaces and action sets", "[rl][minatar]") {
  struct Case {
    const char* id;
    int channels;
    std::int64_t actions;
  };
  for (const Case& c : {Case{"MinAtar/Breakout-v0", 4, 6}, Case{"MinAtar/Breakout-v1", 4, 3},
                        Case{"MinAtar/Freeway-v0", 7, 6}, Case{"MinAtar/Freeway-v1", 7, 3}}) {
    auto env = herd::rl::make_env(c.id);
    CHECK(env->obs_dim() == static_cast<std::size_t>(c.channels * 100));
    CHECK(env->action_space().n() == c.actions);
    CHECK(env->observation_space().low()[0] == 0.0);
    CHECK(env->observation_space().high()[0] == 1.0);
    CHECK(env->observation_space().shape() == std::vector<std::int64_t>{c.channels, 10, 10});
  }
  MinAtarBreakout b(false);
  CHECK(b.full_action(0) == 0);
  CHECK(b.full_action(1) == 1);  // left
  CHECK(b.full_action(2) == 3);  // right
  MinAtarFreeway f(false);
  CHECK(f.full_action(1) == 2);  // up
  CHECK(f.full_action(2) == 4);  // down
  CHECK_THROWS_AS(b.set_sticky_action_prob(1.5), herd::InputError);
}

TEST_CASE("Box shapes: default flat, image shapes checked against the component count", "[rl][spaces]") {
  using herd::rl::Space;
  const Space flat = Space::box({0, 0, 0}, {1, 1, 1});
  CHECK(flat.shape() == std::vector<std::int64_t>{3});
  CHECK(Space::discrete(4).shape().empty());
  const Space img = Space::box(std::vector<double>(12, 0.0), std::vector<double>(12, 1.0), {3, 2, 2});
  CHECK(img.shape() == std::vector<std::int64_t>{3, 2, 2});
  CHECK(img.dim() == 12);
  CHECK_THROWS_AS(Space::box(std::vector<double>(12, 0.0), std::vector<double>(12, 1.0), {3, 2, 3}), herd::InputError);
  CHECK_THROWS_AS(Space::box(std::vector<double>(12, 0.0), std::vector<double>(12, 1.0), {12, 0}), herd::InputError);
  CHECK_THROWS_AS(Space::box({0.0}, {1.0}, {}), herd::InputError);
}

TEST_CASE("MinAtar Breakout: start layout and channels", "[rl][minatar]") {
  int left_starts = 0;
  for (std::uint32_t g = 0; g < 40; ++g) {
    MinAtarBreakout env;
    env.set_global_id(g);
    std::vector<float> obs(env.obs_dim());
    env.reset(5, obs.data());
    CHECK(channel_sum(obs, 0) == 1);
    CHECK(cell(obs, 0, 9, 4) == 1);  // paddle
    CHECK(channel_sum(obs, 1) == 1);
    const bool at_left = cell(obs, 1, 3, 0) == 1;
    CHECK((at_left || cell(obs, 1, 3, 9) == 1));
    left_starts += at_left;
    CHECK(channel_sum(obs, 2) == 1);  // trail on the ball at the start
    CHECK(channel_sum(obs, 3) == 30);
    for (int y = 1; y <= 3; ++y) {
      for (int x = 0; x < 10; ++x) CHECK(cell(obs, 3, y, x) == 1);
    }
    std::vector<std::uint8_t> u8(env.obs_dim());
    env.observe_u8(u8.data());
    for (std::size_t i = 0; i < u8.size(); ++i) REQUIRE(float(u8[i]) == obs[i]);
  }
  CHECK(left_starts > 5);
  CHECK(left_starts < 35);
}

TEST_CASE("MinAtar Breakout: walls, ceiling, bricks, paddle, termination", "[rl][minatar]") {
  MinAtarBreakout env;
  env.set_sticky_action_prob(0.0);
  std::vector<float> obs(env.obs_dim());
  env.reset(1, obs.data());

  SECTION("a side wall reverses the horizontal direction; the ball keeps its column") {
    env.set_state(breakout_state(0, 5, -1, 1, 4));
    const auto r = env.step(0, obs.data());
    CHECK(cell(obs, 1, 6, 0) == 1);
    CHECK(cell(obs, 2, 5, 0) == 1);  // trail
    CHECK(env.get_state()[2] == 1);
    CHECK(r.reward == 0);
    CHECK_FALSE(r.terminated);
  }
  SECTION("the ceiling reverses the vertical direction; the ball keeps its row") {
    std::vector<int> bricks(30, 0);
    bricks[29] = 1;
    env.set_state(breakout_state(5, 0, 1, -1, 4, bricks));
    env.step(0, obs.data());
    CHECK(cell(obs, 1, 0, 6) == 1);
    CHECK(env.get_state()[3] == 1);
    env.step(0, obs.data());
    CHECK(cell(obs, 1, 1, 7) == 1);
  }
  SECTION("a brick is removed, scores 1 and reflects the ball, which keeps its row") {
    env.set_state(breakout_state(4, 4, 1, -1, 4));
    const auto r = env.step(0, obs.data());
    CHECK(r.reward == 1.0);
    CHECK(cell(obs, 3, 3, 5) == 0);
    CHECK(channel_sum(obs, 3) == 29);
    CHECK(cell(obs, 1, 4, 5) == 1);
    CHECK(cell(obs, 2, 4, 4) == 1);  // trail
    CHECK(env.get_state()[3] == 1);  // now moving down
    env.step(0, obs.data());
    CHECK(cell(obs, 1, 5, 6) == 1);
  }
  SECTION("cleared rows come back when the ball next meets the paddle, in that step") {
    std::vector<int> bricks(30, 0);
    bricks[2 * 10 + 5] = 1;  // row 3, column 5
    env.set_state(breakout_state(4, 4, 1, -1, 9, bricks));
    auto r = env.step(0, obs.data());
    CHECK(r.reward == 1.0);
    CHECK(channel_sum(obs, 3) == 0);
    // Down the diagonal (6,5) (7,6) (8,7) (9,8): still no bricks.
    for (int k = 0; k < 4; ++k) {
      r = env.step(0, obs.data());
      CHECK(channel_sum(obs, 3) == 0);
      CHECK_FALSE(r.terminated);
    }
    CHECK(cell(obs, 1, 8, 9) == 1);
    // Into the corner: the wall and the paddle (column 9) send it back up; three rows return.
    r = env.step(0, obs.data());
    CHECK_FALSE(r.terminated);
    CHECK(r.reward == 0);
    CHECK(channel_sum(obs, 3) == 30);
    CHECK(cell(obs, 1, 8, 9) == 1);
  }
  SECTION("the step after a strike, a ball moving into a brick passes into its cell") {
    // Ball in a hole of row 2 (column 9) moving up-left: it breaks (row 1, column 8) and
    // turns down; the next move into the brick at (row 3, column 7) passes into that cell.
    std::vector<int> bricks(30, 1);
    bricks[1 * 10 + 9] = 0;
    env.set_state(breakout_state(9, 2, -1, -1, 4, bricks));
    auto r = env.step(0, obs.data());
    CHECK(r.reward == 1.0);
    CHECK(cell(obs, 3, 1, 8) == 0);
    CHECK(cell(obs, 1, 2, 8) == 1);
    CHECK(env.get_state()[37] == 1);  // strike
    r = env.step(0, obs.data());
    CHECK(r.reward == 0);
    CHECK(cell(obs, 1, 3, 7) == 1);  // the ball is in the brick's cell
    CHECK(cell(obs, 3, 3, 7) == 1);  // the brick stays
    CHECK(channel_sum(obs, 3) == 28);
    CHECK(env.get_state()[3] == 1);  // still moving down
    CHECK(env.get_state()[37] == 0);
    r = env.step(0, obs.data());
    CHECK(cell(obs, 1, 4, 6) == 1);
    // Without a strike in the step before, the same move breaks the brick.
    env.set_state(breakout_state(8, 2, -1, 1, 4, bricks));
    r = env.step(0, obs.data());
    CHECK(r.reward == 1.0);
    CHECK(cell(obs, 3, 3, 7) == 0);
    CHECK(cell(obs, 1, 2, 7) == 1);
    // The flag comes back from a saved state.
    env.set_state(breakout_state(8, 2, -1, 1, 4, bricks, 1));
    r = env.step(0, obs.data());
    CHECK(r.reward == 0);
    CHECK(cell(obs, 3, 3, 7) == 1);
    CHECK(cell(obs, 1, 3, 7) == 1);
  }
  SECTION("the paddle's near side bounces the ball up and back") {
    env.set_state(breakout_state(3, 8, 1, 1, 4));
    auto r = env.step(0, obs.data());
    CHECK_FALSE(r.terminated);
    CHECK(cell(obs, 1, 8, 4) == 1);
    r = env.step(0, obs.data());
    CHECK(cell(obs, 1, 7, 3) == 1);
    CHECK_FALSE(r.terminated);
  }
  SECTION("the paddle's far side bounces the ball up and on") {
    env.set_state(breakout_state(3, 8, 1, 1, 3));
    auto r = env.step(0, obs.data());
    CHECK_FALSE(r.terminated);
    CHECK(cell(obs, 1, 8, 4) == 1);
    r = env.step(0, obs.data());
    CHECK(cell(obs, 1, 7, 5) == 1);
    CHECK_FALSE(r.terminated);
  }
  SECTION("a ball meeting a side wall and the paddle in the same step goes back up, away from the wall") {
    // Right corner: the wall reflects the ball (now moving left), the paddle sends it up.
    env.set_state(breakout_state(9, 8, 1, 1, 9));
    auto r = env.step(0, obs.data());
    CHECK_FALSE(r.terminated);
    CHECK(cell(obs, 1, 8, 9) == 1);
    CHECK(env.get_state()[2] == -1);
    CHECK(env.get_state()[3] == -1);
    r = env.step(0, obs.data());
    CHECK(cell(obs, 1, 7, 8) == 1);
    // Left corner, mirrored.
    env.set_state(breakout_state(0, 8, -1, 1, 0));
    r = env.step(0, obs.data());
    CHECK_FALSE(r.terminated);
    CHECK(cell(obs, 1, 8, 0) == 1);
    CHECK(env.get_state()[2] == 1);
    r = env.step(0, obs.data());
    CHECK(cell(obs, 1, 7, 1) == 1);
  }
  SECTION("missing the ball ends the game") {
    env.set_state(breakout_state(3, 8, 1, 1, 0));
    const auto r = env.step(0, obs.data());
    CHECK(r.terminated);
    CHECK(r.reward == 0);
    CHECK(cell(obs, 1, 9, 4) == 1);
  }
  SECTION("the paddle moves and stops at the walls") {
    env.set_state(breakout_state(5, 5, 1, -1, 1));
    env.step(1, obs.data());  // left
    CHECK(cell(obs, 0, 9, 0) == 1);
    env.step(1, obs.data());
    CHECK(cell(obs, 0, 9, 0) == 1);
    env.step(2, obs.data());  // right (minimal set)
    CHECK(cell(obs, 0, 9, 1) == 1);
  }
  SECTION("full action set: 3 is right, up/down/fire do not move the paddle") {
    MinAtarBreakout full(true);
    full.set_sticky_action_prob(0.0);
    full.reset(1, obs.data());
    full.set_state(breakout_state(5, 5, 1, -1, 4));
    full.step(3, obs.data());
    CHECK(cell(obs, 0, 9, 5) == 1);
    for (int a : {0, 2, 4, 5}) {
      full.step(a, obs.data());
      CHECK(cell(obs, 0, 9, 5) == 1);
      full.set_state(breakout_state(5, 5, 1, -1, 5));
    }
  }
  SECTION("bad states are rejected") {
    auto s = breakout_state(3, 8, 1, 1, 4);
    s[2] = 0;
    CHECK_THROWS_AS(env.set_state(s), herd::InputError);
    s = breakout_state(3, 8, 1, 1, 4);
    s[4] = 10;
    CHECK_THROWS_AS(env.set_state(s), herd::InputError);
    s = breakout_state(3, 8, 1, 1, 4, std::vector<int>(30, 1), 2);
    CHECK_THROWS_AS(env.set_state(s), herd::InputError);
  }
}

TEST_CASE("MinAtar sticky actions repeat the previous action with probability 0.1", "[rl][minatar]") {
  // Previous action left, command right: the paddle moves left exactly when the step was
  // sticky. 20000 trials: standard deviation of the frequency 0.0021; tolerance 0.011 (5 sd).
  MinAtarBreakout env;
  std::vector<float> obs(env.obs_dim());
  env.reset(2024, obs.data());
  int sticky = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    auto s = breakout_state(5, 5, 1, -1, 4);
    s[38] = 1;  // last executed action: left
    s[39] = i;  // step in the episode (the step's random index)
    env.set_state(s);
    env.step(2, obs.data());
    sticky += cell(obs, 0, 9, 3) == 1;
    if (cell(obs, 0, 9, 3) != 1) REQUIRE(cell(obs, 0, 9, 5) == 1);
  }
  CHECK(std::abs(double(sticky) / n - 0.1) < 0.011);
  env.set_sticky_action_prob(0.0);
  for (int i = 0; i < 200; ++i) {
    auto s = breakout_state(5, 5, 1, -1, 4);
    s[38] = 1;
    s[39] = i;
    env.set_state(s);
    env.step(2, obs.data());
    REQUIRE(cell(obs, 0, 9, 5) == 1);
  }
}

TEST_CASE("MinAtar Freeway: start layout and channels", "[rl][minatar]") {
  MinAtarFreeway env;
  std::vector<float> obs(env.obs_dim());
  env.reset(3, obs.data());
  CHECK(channel_sum(obs, 0) == 1);
  CHECK(cell(obs, 0, 9, 4) == 1);
  CHECK(channel_sum(obs, 1) == 8);
  const auto s = env.get_state();
  float trails = 0;
  for (int ch = 2; ch < 7; ++ch) trails += channel_sum(obs, ch);
  CHECK(trails == 8);
  for (int lane = 1; lane <= 8; ++lane) {
    const std::size_t o = 3 + 4 * static_cast<std::size_t>(lane - 1);
    const int x = int(s[o]), period = int(s[o + 1]), dir = int(s[o + 2]);
    CHECK(cell(obs, 1, lane, x) == 1);
    CHECK(cell(obs, 1 + period, lane, (x - dir + 10) % 10) == 1);  // trail behind the car
    CHECK(x == 0);
    CHECK(s[o + 3] == period + 1);
  }
}

TEST_CASE("MinAtar Freeway: moves, cooldown, scoring, collisions, wrap, time", "[rl][minatar]") {
  MinAtarFreeway env;
  env.set_sticky_action_prob(0.0);
  std::vector<float> obs(env.obs_dim());
  env.reset(4, obs.data());

  SECTION("after a reset the chicken first moves on frame 4") {
    std::vector<int> ys;
    for (int t = 0; t < 4; ++t) {
      env.step(1, obs.data());
      ys.push_back(int(env.get_state()[0]));
    }
    CHECK(ys == std::vector<int>{9, 9, 9, 8});
  }
  SECTION("the chicken moves at most once every 3 frames") {
    env.set_state(freeway_state(9, 0, 0));
    std::vector<int> ys;
    for (int t = 0; t < 7; ++t) {
      env.step(1, obs.data());  // up
      ys.push_back(int(env.get_state()[0]));
    }
    CHECK(ys == std::vector<int>{8, 8, 8, 7, 7, 7, 6});
    env.step(2, obs.data());  // down, cooldown still running
    CHECK(env.get_state()[0] == 6);
  }
  SECTION("down is blocked at the bottom, but the press starts the move cooldown") {
    env.set_state(freeway_state(9, 0, 0));
    env.step(2, obs.data());
    CHECK(env.get_state()[0] == 9);
    CHECK(env.get_state()[1] == 2);
    std::vector<int> ys;
    for (int k = 0; k < 3; ++k) {
      env.step(1, obs.data());  // up
      ys.push_back(static_cast<int>(env.get_state()[0]));
    }
    CHECK(ys == std::vector<int>{9, 9, 8});
  }
  SECTION("reaching the top scores and returns the chicken to the bottom") {
    env.set_state(freeway_state(1, 0, 0));
    const auto r = env.step(1, obs.data());
    CHECK(r.reward == 1.0);
    CHECK(cell(obs, 0, 9, 4) == 1);
    const auto s = env.get_state();
    for (int lane = 0; lane < 8; ++lane) {
      const double p = s[4 + 4 * lane];
      CHECK((p >= 1 && p <= 5));
    }
  }
  SECTION("walking into a car returns the chicken to the bottom") {
    auto s = freeway_state(9, 0, 0);
    set_car(s, 8, 4, 5, 1, 5);
    env.set_state(s);
    const auto r = env.step(1, obs.data());
    CHECK(r.reward == 0);
    CHECK(env.get_state()[0] == 9);
  }
  SECTION("walking into a car that leaves in the same frame still counts") {
    auto s = freeway_state(9, 0, 0);
    set_car(s, 8, 4, 1, 1, 1);
    env.set_state(s);
    env.step(1, obs.data());
    CHECK(env.get_state()[0] == 9);
    CHECK(cell(obs, 1, 8, 5) == 1);
  }
  SECTION("scoring redraws speed classes and directions; cars keep their columns") {
    auto s = freeway_state(1, 0, 0);
    for (int lane = 1; lane <= 8; ++lane) set_car(s, lane, lane, 5, 1, 6);
    env.set_state(s);
    REQUIRE(env.step(1, obs.data()).reward == 1.0);
    const auto t = env.get_state();
    int left = 0;
    for (int lane = 1; lane <= 8; ++lane) {
      const std::size_t o = 3 + 4 * static_cast<std::size_t>(lane - 1);
      const int p = int(t[o + 1]), dir = int(t[o + 2]);
      // A car of class p moved in this frame only if p == 1 (its timer was set to p + 1 = 2
      // and counted down once: no move).
      CHECK(t[o] == lane);
      CHECK(t[o + 3] == p);
      left += dir == -1;
    }
    CHECK(left > 0);  // all eight were moving right before; P(no redraw to left) = 2^-8
  }
  SECTION("a car driving into the chicken returns it to the bottom") {
    auto s = freeway_state(5, 0, 0);
    set_car(s, 5, 3, 2, 1, 1);
    env.set_state(s);
    env.step(0, obs.data());
    CHECK(env.get_state()[0] == 9);
    CHECK(cell(obs, 1, 5, 4) == 1);
    CHECK(cell(obs, 1 + 2, 5, 3) == 1);  // trail in the period-2 channel
  }
  SECTION("cars move every p + 1 frames and wrap around") {
    auto s = freeway_state(9, 0, 0);
    set_car(s, 2, 9, 1, 1, 1);
    set_car(s, 3, 0, 3, -1, 3);
    env.set_state(s);
    env.step(0, obs.data());
    CHECK(cell(obs, 1, 2, 0) == 1);
    CHECK(cell(obs, 1, 3, 0) == 1);
    env.step(0, obs.data());
    env.step(0, obs.data());
    CHECK(cell(obs, 1, 2, 1) == 1);  // speed class 1: 9 -> 0 (frame 1) -> 1 (frame 3)
    CHECK(cell(obs, 1, 3, 9) == 1);
  }
  SECTION("the game ends after 2500 frames") {
    env.set_state(freeway_state(9, 0, 2499));
    CHECK_FALSE(env.step(0, obs.data()).terminated);
    CHECK(env.step(0, obs.data()).terminated);
    herd::rl::MinAtarFreeway fresh;
    fresh.reset(9, obs.data());
    int steps = 0;
    bool done = false;
    const herd::RngStream actions(8, 0);
    while (!done) {
      done = fresh.step(std::int64_t(actions.u32(steps) % 3), obs.data()).terminated;
      ++steps;
    }
    CHECK(steps == 2501);
  }
  SECTION("bad states are rejected") {
    auto s = freeway_state(9, 0, 0);
    set_car(s, 1, 0, 6, 1, 1);
    CHECK_THROWS_AS(env.set_state(s), herd::InputError);
  }
}

TEST_CASE("MinAtar: deterministic per seed; state round trip continues identically", "[rl][minatar]") {
  for (const char* id : {"MinAtar/Breakout-v0", "MinAtar/Freeway-v1", "MinAtar/Asterix-v1", "MinAtar/SpaceInvaders-v1",
                         "MinAtar/Seaquest-v1"}) {
    auto a = herd::rl::make_env(id), b = herd::rl::make_env(id);
    a->set_global_id(3);
    b->set_global_id(3);
    std::vector<float> oa(a->obs_dim()), ob(b->obs_dim());
    a->reset(11, oa.data());
    b->reset(11, ob.data());
    const herd::RngStream acts(5, 3);
    const std::int64_t n = a->action_space().n();
    for (int t = 0; t < 300; ++t) {
      if (t == 150) {  // checkpoint: b restarts from a's state
        auto c = herd::rl::make_env(id);
        c->set_global_id(3);
        c->restore_stream(a->seed(), a->episode());
        c->set_state(a->get_state());
        b = std::move(c);
      }
      const auto act = std::int64_t(acts.u32(std::uint64_t(t)) % std::uint64_t(n));
      const auto ra = a->step(act, oa.data());
      const auto rb = b->step(act, ob.data());
      REQUIRE(ra.reward == rb.reward);
      REQUIRE(ra.terminated == rb.terminated);
      REQUIRE(oa == ob);
      if (ra.terminated) {
        a->reset(oa.data());
        b->reset(ob.data());
      }
    }
  }
}

TEST_CASE("MinAtar in the EnvPool equals standalone envs", "[rl][minatar]") {
  for (const char* id : {"MinAtar/Breakout-v1", "MinAtar/Breakout-v0", "MinAtar/Freeway-v1", "MinAtar/Freeway-v0",
                         "MinAtar/Asterix-v1", "MinAtar/Asterix-v0", "MinAtar/SpaceInvaders-v1",
                         "MinAtar/SpaceInvaders-v0", "MinAtar/Seaquest-v1", "MinAtar/Seaquest-v0"}) {
    herd::rl::EnvPoolOptions o;
    o.env_id = id;
    o.num_envs = 24;
    o.num_threads = 2;
    o.seed = 99;
    o.min_task_seconds = 0;
    herd::rl::EnvPool pool(o);
    std::vector<std::unique_ptr<herd::rl::Env>> ref;
    const std::size_t od = pool.obs_dim();
    std::vector<float> obs(od);
    for (std::uint32_t k = 0; k < o.num_envs; ++k) {
      ref.push_back(herd::rl::make_env(id));
      ref.back()->set_global_id(k);
      ref.back()->reset(99, obs.data());
    }
    pool.reset();
    const std::int64_t n = pool.action_space().n();
    std::vector<std::int64_t> actions(o.num_envs);
    int episodes = 0;
    for (int t = 0; t < 400; ++t) {
      for (std::uint32_t k = 0; k < o.num_envs; ++k) {
        actions[k] = std::int64_t(herd::RngStream(7, k).u32(std::uint64_t(t)) % std::uint64_t(n));
      }
      pool.step(actions);
      for (std::uint32_t k = 0; k < o.num_envs; ++k) {
        const auto r = ref[k]->step(actions[k], obs.data());
        REQUIRE(pool.rewards()[k] == r.reward);
        REQUIRE(bool(pool.terminated()[k]) == r.terminated);
        if (r.terminated) {
          ++episodes;
          REQUIRE(std::memcmp(pool.final_obs().data() + k * od, obs.data(), od * 4) == 0);
          ref[k]->reset(obs.data());
        }
        REQUIRE(std::memcmp(pool.obs().data() + k * od, obs.data(), od * 4) == 0);
      }
    }
    if (std::string(id).find("Freeway") == std::string::npos) CHECK(episodes > 24);
  }
}
