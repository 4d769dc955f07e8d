// MinAtar Asterix, Space Invaders and Seaquest: each rule in a hand-made deterministic
// scenario (set_state, sticky actions off), observation channels, ramping, termination.
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/core/error.hpp"
#include "herd/rl/minatar.hpp"
#include "herd/rl/registry.hpp"

using herd::rl::MinAtarAsterix;

namespace {

float cell(const std::vector<float>& obs, int ch, int y, int x) {
  return obs[static_cast<std::size_t>(ch) * 100 + static_cast<std::size_t>(y) * 10 + static_cast<std::size_t>(x)];
}

float channel_sum(const std::vector<float>& obs, int ch) {
  float s = 0;
  for (int i = 0; i < 100; ++i) s += obs[static_cast<std::size_t>(ch) * 100 + static_cast<std::size_t>(i)];
  return s;
}

/// Asterix state `[player_x, player_y, ramps, spawn_timer, move_timer, ramp_timer, lanes x8,
/// last action, t]` with every lane empty; timers far from firing unless given.
struct AsterixState {
  std::vector<double> s;
  AsterixState(int px, int py, int spawn_timer = 9, int move_timer = 4, int ramps = 0, int ramp_timer = 50) {
    s = {double(px), double(py), double(ramps), double(spawn_timer), double(move_timer), double(ramp_timer)};
    for (int i = 0; i < 8; ++i) s.insert(s.end(), {0.0, 0.0, 1.0, 0.0});
    s.push_back(0);
    s.push_back(0);
  }
  /// Puts an object (kind 1 enemy, 2 gold) in lane `row` (1-8).
  AsterixState& lane(int row, int kind, int x, int dir, int moved = 1) {
    const std::size_t o = 6 + 4 * static_cast<std::size_t>(row - 1);
    s[o] = kind;
    s[o + 1] = x;
    s[o + 2] = dir;
    s[o + 3] = moved;
    return *this;
  }
};

constexpr int kNoop = 0, kLeft = 1, kUp = 2, kRight = 3, kDown = 4;  // Asterix minimal set

}  // namespace

TEST_CASE("MinAtar Asterix: ids, action set, start, first spawn and moves", "[rl][minatar]") {
  for (const char* id : {"MinAtar/Asterix-v0", "MinAtar/Asterix-v1"}) {
    auto env = herd::rl::make_env(id);
    CHECK(env->observation_space().shape() == std::vector<std::int64_t>{4, 10, 10});
    CHECK(env->action_space().n() == (std::string(id).back() == '0' ? 6 : 5));
  }
  MinAtarAsterix env;
  for (int a = 0; a < 5; ++a) CHECK(env.full_action(a) == a);
  env.set_sticky_action_prob(0.0);
  std::vector<float> obs(env.obs_dim());
  int gold = 0, right = 0;
  const int episodes = 300;
  for (int e = 0; e < episodes; ++e) {
    env.reset(obs.data());
    if (e == 0) env.reset(17, obs.data());
    REQUIRE(channel_sum(obs, 0) == 1);
    REQUIRE(cell(obs, 0, 5, 5) == 1);
    REQUIRE(channel_sum(obs, 1) + channel_sum(obs, 2) + channel_sum(obs, 3) == 0);
    for (int t = 1; t <= 10; ++t) {
      REQUIRE_FALSE(env.step(kNoop, obs.data()).terminated);
      REQUIRE(channel_sum(obs, 1) + channel_sum(obs, 3) == 0);
    }
    // Frame 11: the first object appears at an edge and moves one cell in the same frame.
    const auto r = env.step(kNoop, obs.data());
    if (r.terminated) continue;  // spawned in lane 5 at the player's column: impossible
    REQUIRE(channel_sum(obs, 1) + channel_sum(obs, 3) == 1);
    REQUIRE(channel_sum(obs, 2) == 1);
    int row = -1, x = -1;
    for (int y = 0; y < 10; ++y) {
      for (int c = 0; c < 10; ++c) {
        if (cell(obs, 1, y, c) + cell(obs, 3, y, c) > 0) row = y, x = c;
      }
    }
    REQUIRE((row >= 1 && row <= 8));
    REQUIRE((x == 1 || x == 8));
    REQUIRE(cell(obs, 2, row, x == 1 ? 0 : 9) == 1);  // trail: where it came from
    right += x == 1;
    gold += channel_sum(obs, 3) == 1;
    // Next moves on frames 16 and 21 (every 5 frames).
    for (int t = 12; t <= 16; ++t) env.step(kNoop, obs.data());
    const int x16 = x == 1 ? 2 : 7;
    REQUIRE(cell(obs, 1, row, x16) + cell(obs, 3, row, x16) == 1);
  }
  // Gold with probability 1/3 (sd 0.027 over 300), right-moving with probability 1/2.
  CHECK(std::abs(gold / double(episodes) - 1.0 / 3.0) < 0.11);
  CHECK(std::abs(right / double(episodes) - 0.5) < 0.12);
}

TEST_CASE("MinAtar Asterix: player moves, collisions, gold, spawns, ramping", "[rl][minatar]") {
  MinAtarAsterix env;
  env.set_sticky_action_prob(0.0);
  std::vector<float> obs(env.obs_dim());
  env.reset(5, obs.data());

  SECTION("the player moves one cell per frame within rows 1-8") {
    env.set_state(AsterixState(0, 1).s);
    env.step(kUp, obs.data());
    CHECK(cell(obs, 0, 1, 0) == 1);
    env.step(kLeft, obs.data());
    CHECK(cell(obs, 0, 1, 0) == 1);
    env.step(kRight, obs.data());
    CHECK(cell(obs, 0, 1, 1) == 1);
    env.set_state(AsterixState(9, 8).s);
    env.step(kDown, obs.data());
    CHECK(cell(obs, 0, 8, 9) == 1);
    env.step(kRight, obs.data());
    CHECK(cell(obs, 0, 8, 9) == 1);
    env.step(kUp, obs.data());
    CHECK(cell(obs, 0, 7, 9) == 1);
  }
  SECTION("walking into an enemy ends the game") {
    env.set_state(AsterixState(4, 3).lane(3, 1, 5, 1).s);
    CHECK(env.step(kRight, obs.data()).terminated);
  }
  SECTION("an enemy moving onto the player ends the game") {
    env.set_state(AsterixState(4, 3, 9, 1).lane(3, 1, 5, -1).s);
    CHECK(env.step(kNoop, obs.data()).terminated);
  }
  SECTION("swapping cells with an enemy ends the game") {
    env.set_state(AsterixState(4, 3, 9, 1).lane(3, 1, 5, -1).s);
    CHECK(env.step(kRight, obs.data()).terminated);
  }
  SECTION("an enemy one cell ahead that does not move this frame is harmless") {
    env.set_state(AsterixState(4, 3, 9, 2).lane(3, 1, 5, -1).s);
    const auto r = env.step(kNoop, obs.data());
    CHECK_FALSE(r.terminated);
    CHECK(cell(obs, 1, 3, 5) == 1);
    CHECK(cell(obs, 2, 3, 6) == 1);  // trail behind a left-moving enemy
    // Stepping out of its lane as it moves in: no contact.
    CHECK_FALSE(env.step(kDown, obs.data()).terminated);
    CHECK(cell(obs, 1, 3, 4) == 1);
  }
  SECTION("gold gives +1 and disappears, whether walked into or moving in") {
    env.set_state(AsterixState(4, 3).lane(3, 2, 5, 1).s);
    auto r = env.step(kRight, obs.data());
    CHECK(r.reward == 1.0);
    CHECK_FALSE(r.terminated);
    CHECK(channel_sum(obs, 3) == 0);
    CHECK(channel_sum(obs, 2) == 0);
    env.set_state(AsterixState(4, 3, 9, 1).lane(3, 2, 3, 1).s);
    r = env.step(kNoop, obs.data());
    CHECK(r.reward == 1.0);
    CHECK(channel_sum(obs, 3) == 0);
  }
  SECTION("objects leave the screen past the edge") {
    env.set_state(AsterixState(4, 5, 9, 1).lane(1, 1, 9, 1).lane(2, 2, 0, -1).s);
    env.step(kNoop, obs.data());
    CHECK(channel_sum(obs, 1) == 0);
    CHECK(channel_sum(obs, 3) == 0);
    CHECK(channel_sum(obs, 2) == 0);
  }
  SECTION("a spawn takes the only empty lane; off a move frame it stays at the edge") {
    AsterixState st(4, 5, 1, 3);
    for (int row = 1; row <= 8; ++row) {
      if (row != 6) st.lane(row, 1, 4 + (row % 2 ? 1 : -1) * 3, 1);
    }
    for (int k = 0; k < 20; ++k) {
      st.s[st.s.size() - 1] = k;  // step index: another random draw
      env.set_state(st.s);
      const auto r = env.step(kNoop, obs.data());
      REQUIRE_FALSE(r.terminated);
      REQUIRE(cell(obs, 1, 6, 0) + cell(obs, 1, 6, 9) + cell(obs, 3, 6, 0) + cell(obs, 3, 6, 9) == 1);
      REQUIRE(cell(obs, 2, 6, 0) + cell(obs, 2, 6, 1) + cell(obs, 2, 6, 8) + cell(obs, 2, 6, 9) ==
              0);                         // no trail before the first move
      REQUIRE(env.get_state()[3] == 10);  // spawn timer restarted with the period
    }
    // All lanes taken: no spawn.
    st.lane(6, 1, 4, 1);
    env.set_state(st.s);
    env.step(kNoop, obs.data());
    CHECK(channel_sum(obs, 1) == 8);
  }
  SECTION("an object spawning on the player: an enemy ends the game, gold scores") {
    AsterixState st(0, 2, 1, 3);
    for (int row = 1; row <= 8; ++row) {
      if (row != 2) st.lane(row, 1, 5, 1);
    }
    int enemy = 0, gold = 0, missed = 0;
    for (int k = 0; k < 60; ++k) {
      st.s[st.s.size() - 1] = k;
      env.set_state(st.s);
      const auto r = env.step(kNoop, obs.data());
      if (r.terminated) {
        ++enemy;
      } else if (r.reward == 1.0) {
        ++gold;
        REQUIRE(channel_sum(obs, 3) == 0);
      } else {
        ++missed;  // spawned at column 9
        REQUIRE(cell(obs, 1, 2, 9) + cell(obs, 3, 2, 9) == 1);
      }
    }
    CHECK(enemy > 0);
    CHECK(gold > 0);
    CHECK(missed > 0);
  }
  SECTION("ramping every 102 frames: spawn period -1 each time, move period -1 every second") {
    CHECK(MinAtarAsterix::spawn_period(0) == 10);
    CHECK(MinAtarAsterix::move_period(0) == 5);
    CHECK(MinAtarAsterix::spawn_period(1) == 9);
    CHECK(MinAtarAsterix::move_period(1) == 5);
    CHECK(MinAtarAsterix::move_period(2) == 4);
    CHECK(MinAtarAsterix::spawn_period(9) == 1);
    CHECK(MinAtarAsterix::spawn_period(20) == 1);
    CHECK(MinAtarAsterix::move_period(8) == 1);
    CHECK(MinAtarAsterix::move_period(20) == 1);
    env.set_state(AsterixState(4, 5, 5, 3, 1, 1).s);
    env.step(kNoop, obs.data());
    auto s = env.get_state();
    CHECK(s[2] == 2);    // ramps
    CHECK(s[5] == 102);  // ramp timer restarted
    // The next spawn and move restart their timers with the new periods 8 and 4.
    for (int t = 0; t < 4; ++t) env.step(kNoop, obs.data());
    s = env.get_state();
    CHECK(s[3] == 8);
    CHECK(s[4] == 2);  // moved on frame 2 of 5 (timer 4) -> restarted 4, then 2 more frames
    // A fresh episode starts without ramps and ramps first after frame 102.
    env.reset(obs.data());
    s = env.get_state();
    CHECK(s[2] == 0);
    CHECK(s[5] == 102);
    env.set_state(AsterixState(4, 5, 9, 4, 0, 2).s);
    env.step(kNoop, obs.data());
    CHECK(env.get_state()[2] == 0);
    env.step(kNoop, obs.data());
    CHECK(env.get_state()[2] == 1);
  }
  SECTION("bad states are rejected") {
    CHECK_THROWS_AS(env.set_state(AsterixState(4, 0).s), herd::InputError);
    CHECK_THROWS_AS(env.set_state(AsterixState(4, 5).lane(2, 3, 1, 1).s), herd::InputError);
    CHECK_THROWS_AS(env.set_state(AsterixState(4, 5).lane(2, 1, 0, 1, 1).s), herd::InputError);
  }
}

namespace {

/// Space Invaders state `[cannon_x, direction, waves, fire cooldown, alien move timer, enemy
/// fire timer, aliens, friendly bullets, enemy bullets (10x10 each), last action, t]`.
struct InvadersState {
  std::vector<double> s;
  InvadersState(int cx, int dir = -1, int waves = 0, int cooldown = 0, int move_timer = 9, int enemy_timer = 9) {
    s = {double(cx), double(dir), double(waves), double(cooldown), double(move_timer), double(enemy_timer)};
    s.resize(6 + 300 + 2, 0.0);
  }
  InvadersState& alien(int y, int x) {
    s[6 + std::size_t(y * 10 + x)] = 1;
    return *this;
  }
  InvadersState& friendly(int y, int x) {
    s[106 + std::size_t(y * 10 + x)] = 1;
    return *this;
  }
  InvadersState& enemy(int y, int x) {
    s[206 + std::size_t(y * 10 + x)] = 1;
    return *this;
  }
};

constexpr int kSiNoop = 0, kSiLeft = 1, kSiRight = 2, kSiFire = 3;  // minimal set

}  // namespace

TEST_CASE("MinAtar Space Invaders: ids, start, firing, alien moves, enemy fire", "[rl][minatar]") {
  using herd::rl::MinAtarSpaceInvaders;
  for (const char* id : {"MinAtar/SpaceInvaders-v0", "MinAtar/SpaceInvaders-v1"}) {
    auto env = herd::rl::make_env(id);
    CHECK(env->observation_space().shape() == std::vector<std::int64_t>{6, 10, 10});
    CHECK(env->action_space().n() == (std::string(id).back() == '0' ? 6 : 4));
  }
  MinAtarSpaceInvaders env;
  CHECK(env.full_action(kSiLeft) == 1);
  CHECK(env.full_action(kSiRight) == 3);
  CHECK(env.full_action(kSiFire) == 5);
  env.set_sticky_action_prob(0.0);
  std::vector<float> obs(env.obs_dim());
  env.reset(3, obs.data());
  CHECK(cell(obs, 0, 9, 5) == 1);
  CHECK(channel_sum(obs, 1) == 24);
  CHECK(channel_sum(obs, 2) == 24);  // moving left
  CHECK(channel_sum(obs, 3) == 0);
  for (int y = 0; y < 4; ++y) {
    for (int x = 2; x < 8; ++x) CHECK(cell(obs, 1, y, x) == 1);
  }

  SECTION("fire launches a bullet at most every 5 frames; bullets rise one cell per frame") {
    std::vector<int> shots;
    for (int t = 1; t <= 11; ++t) {
      env.step(kSiFire, obs.data());
      if (cell(obs, 4, 8, 5) == 1) shots.push_back(t);
    }
    CHECK(shots == std::vector<int>{1, 6, 11});
    // The first bullet hit the alien at (3, 5) on frame 6; the second passes that cell on
    // frame 11 and hits (2, 5) on frame 12.
    CHECK(cell(obs, 1, 3, 5) == 0);
    CHECK(cell(obs, 4, 3, 5) == 1);
    CHECK(channel_sum(obs, 1) == 23);
    CHECK(env.step(kSiNoop, obs.data()).reward == 1.0);
    CHECK(channel_sum(obs, 1) == 22);
    CHECK(cell(obs, 1, 2, 5) == 0);
  }
  SECTION("a bullet in an alien's cell removes both and scores 1") {
    double total = 0;
    for (int t = 1; t <= 5; ++t) total += env.step(t == 1 ? kSiFire : kSiNoop, obs.data()).reward;
    CHECK(total == 0);
    CHECK(cell(obs, 4, 4, 5) == 1);
    const auto r = env.step(kSiNoop, obs.data());
    CHECK(r.reward == 1.0);
    CHECK(cell(obs, 1, 3, 5) == 0);
    CHECK(channel_sum(obs, 4) == 0);
  }
  SECTION("the first enemy bullet drops on frame 11 from the lowest alien closest to the cannon") {
    for (int t = 1; t <= 10; ++t) env.step(kSiNoop, obs.data());
    CHECK(channel_sum(obs, 5) == 0);
    env.step(kSiNoop, obs.data());
    CHECK(channel_sum(obs, 5) == 1);
    CHECK(cell(obs, 5, 3, 5) == 1);  // in the alien's own cell
    env.step(kSiNoop, obs.data());
    CHECK(cell(obs, 5, 4, 5) == 1);
    // Aliens first move on frame 13, one cell left.
    env.step(kSiNoop, obs.data());
    CHECK(cell(obs, 1, 0, 1) == 1);
    CHECK(cell(obs, 1, 0, 7) == 0);
    CHECK(env.get_state()[4] == 12);  // next move in 12 frames
    // The bullet falls one cell per frame and ends the game on the cannon's cell.
    bool done = false;
    int t = 13;
    while (!done && t < 30) {
      done = env.step(kSiNoop, obs.data()).terminated;
      ++t;
    }
    CHECK(done);
    CHECK(t == 17);  // dropped at (3, 5) on frame 11, in the cannon's row 9 on frame 17
  }
  SECTION("the enemy shooter: closest column, the left one on a tie, its lowest alien") {
    env.set_state(InvadersState(5, -1, 0, 0, 9, 1).alien(1, 3).alien(2, 3).alien(4, 7).s);
    env.step(kSiNoop, obs.data());
    CHECK(cell(obs, 5, 2, 3) == 1);  // columns 3 and 7 are both 2 away: the left one
    CHECK(env.get_state()[5] == 10);
    env.set_state(InvadersState(6, -1, 0, 0, 9, 1).alien(1, 3).alien(2, 3).alien(4, 7).s);
    env.step(kSiNoop, obs.data());
    CHECK(cell(obs, 5, 4, 7) == 1);
  }
  SECTION("at the edge the aliens move down and reverse; alien channels follow the direction") {
    env.set_state(InvadersState(5, -1, 0, 0, 1).alien(2, 0).alien(2, 4).s);
    env.step(kSiNoop, obs.data());
    CHECK(cell(obs, 1, 3, 0) == 1);
    CHECK(cell(obs, 1, 3, 4) == 1);
    CHECK(channel_sum(obs, 3) == 2);  // now moving right
    CHECK(channel_sum(obs, 2) == 0);
    CHECK(env.get_state()[4] == 2);  // period min(12, 2 aliens)
  }
  SECTION("the alien period shrinks with the aliens left; one alien moves every frame") {
    env.set_state(InvadersState(0, 1, 0, 0, 1).alien(0, 4).s);
    for (int t = 0; t < 3; ++t) env.step(kSiNoop, obs.data());
    CHECK(cell(obs, 1, 0, 7) == 1);
    CHECK(MinAtarSpaceInvaders::wave_speed(0) == 12);
    CHECK(MinAtarSpaceInvaders::wave_speed(1) == 11);
    CHECK(MinAtarSpaceInvaders::wave_speed(30) == 1);
  }
  SECTION("clearing a wave brings a new one, faster") {
    env.set_state(InvadersState(4, 1, 0, 0, 1).alien(5, 5).friendly(7, 6).s);
    const auto r = env.step(kSiNoop, obs.data());  // bullet to (6, 6), alien to (5, 6): miss
    CHECK(r.reward == 0);
    CHECK(env.step(kSiNoop, obs.data()).reward == 0.0);  // bullet (5, 6), alien (5, 7)
    env.set_state(InvadersState(4, 1, 0, 0, 1).alien(5, 5).friendly(5, 6).s);
    // The bullet rises to (4, 6) while the alien moves into (5, 6): no hit either.
    CHECK(env.step(kSiNoop, obs.data()).reward == 0.0);
    env.set_state(InvadersState(4, 1, 0, 0, 1).alien(5, 5).friendly(6, 6).s);
    CHECK(env.step(kSiNoop, obs.data()).reward == 1.0);  // both enter (5, 6)
    CHECK(channel_sum(obs, 1) == 24);
    CHECK(channel_sum(obs, 3) == 24);  // direction carries over
    CHECK(env.get_state()[2] == 1);
    // The move timer carries over too (1 after a lone alien's move): the wave moves next frame.
    env.step(kSiNoop, obs.data());
    CHECK(cell(obs, 1, 0, 8) == 1);
    CHECK(env.get_state()[4] == 11);
  }
  SECTION("contact with an alien ends the game, also when they swap cells") {
    env.set_state(InvadersState(4, 1, 0, 0, 5).alien(9, 5).s);
    CHECK(env.step(kSiRight, obs.data()).terminated);
    env.set_state(InvadersState(1, 1, 0, 0, 1).alien(9, 0).s);
    CHECK(env.step(kSiLeft, obs.data()).terminated);
    env.set_state(InvadersState(2, 1, 0, 0, 1).alien(9, 0).s);
    CHECK_FALSE(env.step(kSiNoop, obs.data()).terminated);  // alien to (9, 1), cannon at 2
  }
  SECTION("aliens that must move down from row 9 have landed: the game ends") {
    env.set_state(InvadersState(8, -1, 0, 0, 1).alien(9, 0).s);
    CHECK(env.step(kSiNoop, obs.data()).terminated);
    env.set_state(InvadersState(8, -1, 0, 0, 1).alien(8, 0).s);
    CHECK_FALSE(env.step(kSiNoop, obs.data()).terminated);
    CHECK(cell(obs, 1, 9, 0) == 1);
  }
  SECTION("an enemy bullet beside the cannon passes") {
    env.set_state(InvadersState(5).alien(0, 0).enemy(8, 4).s);
    CHECK_FALSE(env.step(kSiNoop, obs.data()).terminated);
    CHECK(cell(obs, 5, 9, 4) == 1);
    CHECK_FALSE(env.step(kSiNoop, obs.data()).terminated);
    CHECK(channel_sum(obs, 5) == 0);
  }
  SECTION("bad states are rejected") {
    CHECK_THROWS_AS(env.set_state(InvadersState(5).s), herd::InputError);  // no alien
    CHECK_THROWS_AS(env.set_state(InvadersState(5, 0).alien(0, 0).s), herd::InputError);
    CHECK_THROWS_AS(env.set_state(InvadersState(5, 1, 0, 6).alien(0, 0).s), herd::InputError);
  }
}

namespace {

/// Seaquest state `[sub_x, sub_y, facing, oxygen, divers, fire cooldown, enemy spawn timer,
/// diver spawn timer, surfacings, friendly bullets, enemy bullets (10x10), 32 enemy slots
/// (kind, lane, x, dir, move timer, fire timer, moved), 16 diver slots (present, lane, x,
/// dir, move timer, moved), last action, t]`; spawn timers far from firing unless given.
struct SeaquestState {
  std::vector<double> s;
  int n_enemies = 0, n_divers = 0;
  SeaquestState(int x, int y, int facing = -1, int oxygen = 200, int divers = 0, int cooldown = 0, int enemy_timer = 15,
                int diver_timer = 25, int surfacings = 0) {
    s = {double(x),        double(y),           double(facing),      double(oxygen),    double(divers),
         double(cooldown), double(enemy_timer), double(diver_timer), double(surfacings)};
    s.resize(9 + 200 + 7 * 32 + 6 * 16 + 2, 0.0);
  }
  SeaquestState& enemy(int lane, int kind, int x, int dir, int move_timer = 4, int fire_timer = 9, int moved = 1) {
    double* o = s.data() + 209 + 7 * n_enemies++;
    const double v[7] = {double(kind),       double(lane),       double(x),    double(dir),
                         double(move_timer), double(fire_timer), double(moved)};
    std::copy(v, v + 7, o);
    return *this;
  }
  SeaquestState& diver(int lane, int x, int dir, int move_timer = 4, int moved = 1) {
    double* o = s.data() + 209 + 7 * 32 + 6 * n_divers++;
    const double v[6] = {1.0, double(lane), double(x), double(dir), double(move_timer), double(moved)};
    std::copy(v, v + 6, o);
    return *this;
  }
  SeaquestState& friendly(int y, int x, int dir) {
    s[9 + std::size_t(y * 10 + x)] = dir;
    return *this;
  }
  SeaquestState& enemy_bullet(int y, int x, int dir) {
    s[109 + std::size_t(y * 10 + x)] = dir;
    return *this;
  }
};

constexpr int kSqNoop = 0, kSqLeft = 1, kSqUp = 2, kSqRight = 3, kSqDown = 4, kSqFire = 5;

}  // namespace

TEST_CASE("MinAtar Seaquest: ids, start, first spawns, moves and oxygen", "[rl][minatar]") {
  using herd::rl::MinAtarSeaquest;
  for (const char* id : {"MinAtar/Seaquest-v0", "MinAtar/Seaquest-v1"}) {
    auto env = herd::rl::make_env(id);
    CHECK(env->observation_space().shape() == std::vector<std::int64_t>{10, 10, 10});
    CHECK(env->action_space().n() == 6);
  }
  MinAtarSeaquest env;
  env.set_sticky_action_prob(0.0);
  std::vector<float> obs(env.obs_dim());
  env.reset(21, obs.data());
  CHECK(cell(obs, 0, 0, 5) == 1);  // front
  CHECK(cell(obs, 1, 0, 6) == 1);  // back, behind a sub facing left
  CHECK(channel_sum(obs, 7) == 10);
  for (int x = 0; x < 10; ++x) CHECK(cell(obs, 7, 9, x) == 1);
  CHECK(channel_sum(obs, 8) == 0);

  SECTION("staying at the surface neither ends the game nor uses oxygen") {
    for (int t = 1; t <= 20; ++t) {
      REQUIRE_FALSE(env.step(t % 2 ? kSqUp : kSqNoop, obs.data()).terminated);
      REQUIRE(channel_sum(obs, 5) + channel_sum(obs, 6) == 0);
    }
    CHECK(env.get_state()[3] == 200);
    // Frame 21: the first enemy at an edge of a lane in rows 1-8, not moved yet (no trail).
    env.step(kSqNoop, obs.data());
    CHECK(channel_sum(obs, 5) + channel_sum(obs, 6) == 1);
    int row = -1;
    for (int y = 1; y <= 8; ++y) {
      if (cell(obs, 5, y, 0) + cell(obs, 5, y, 9) + cell(obs, 6, y, 0) + cell(obs, 6, y, 9) > 0) row = y;
    }
    CHECK(row > 0);
    CHECK(channel_sum(obs, 3) == 0);
    for (int t = 22; t <= 30; ++t) env.step(kSqNoop, obs.data());
    CHECK(channel_sum(obs, 9) == 0);
    env.step(kSqNoop, obs.data());  // frame 31: the first diver
    CHECK(channel_sum(obs, 9) == 1);
  }
  SECTION("the sub moves one cell per frame and turns; its back is drawn behind it") {
    env.step(kSqRight, obs.data());
    CHECK(cell(obs, 0, 0, 6) == 1);
    CHECK(cell(obs, 1, 0, 5) == 1);
    env.step(kSqDown, obs.data());
    CHECK(cell(obs, 0, 1, 6) == 1);
    env.set_state(SeaquestState(9, 8, 1).s);
    env.step(kSqDown, obs.data());
    env.step(kSqRight, obs.data());
    CHECK(cell(obs, 0, 8, 9) == 1);
    CHECK(cell(obs, 1, 8, 8) == 1);
    env.step(kSqLeft, obs.data());
    CHECK(cell(obs, 0, 8, 8) == 1);
    CHECK(cell(obs, 1, 8, 9) == 1);
  }
  SECTION("oxygen: one unit per frame below the surface, the game ends the frame after 0") {
    env.step(kSqDown, obs.data());
    CHECK(channel_sum(obs, 7) == 9);  // 199 units: 9 gauge cells
    CHECK(env.get_state()[3] == 199);
    env.set_state(SeaquestState(5, 3, -1, 1).s);
    CHECK_FALSE(env.step(kSqNoop, obs.data()).terminated);
    CHECK(channel_sum(obs, 7) == 0);
    CHECK(env.step(kSqNoop, obs.data()).terminated);
  }
  SECTION("ramping with the surfacings") {
    CHECK(MinAtarSeaquest::spawn_period(0) == 20);
    CHECK(MinAtarSeaquest::spawn_period(5) == 15);
    CHECK(MinAtarSeaquest::spawn_period(30) == 1);
    CHECK(MinAtarSeaquest::move_period(0) == 5);
    CHECK(MinAtarSeaquest::move_period(1) == 5);
    CHECK(MinAtarSeaquest::move_period(2) == 4);
    CHECK(MinAtarSeaquest::move_period(6) == 2);
    CHECK(MinAtarSeaquest::move_period(30) == 2);
  }
}

TEST_CASE("MinAtar Seaquest: surfacing, divers, shooting, collisions", "[rl][minatar]") {
  using herd::rl::MinAtarSeaquest;
  MinAtarSeaquest env;
  env.set_sticky_action_prob(0.0);
  std::vector<float> obs(env.obs_dim());
  env.reset(22, obs.data());

  SECTION("surfacing without a diver ends the game") {
    env.set_state(SeaquestState(5, 1, -1, 150).s);
    CHECK(env.step(kSqUp, obs.data()).terminated);
  }
  SECTION("surfacing with divers: one leaves, oxygen refills, difficulty ramps") {
    env.set_state(SeaquestState(5, 1, -1, 150, 2, 0, 1).s);
    const auto r = env.step(kSqUp, obs.data());
    CHECK_FALSE(r.terminated);
    CHECK(r.reward == 0);
    const auto s = env.get_state();
    CHECK(s[4] == 1);
    CHECK(s[3] == 200);
    CHECK(s[8] == 1);
    CHECK(channel_sum(obs, 8) == 1);
    CHECK(cell(obs, 8, 9, 0) == 1);
    CHECK(channel_sum(obs, 7) == 10);
    CHECK(s[6] == 20);  // the spawn that frame restarted the timer before the ramp
  }
  SECTION("surfacing with 6 divers: all leave, +1 per oxygen gauge cell") {
    env.set_state(SeaquestState(5, 1, -1, 141, 6).s);
    const auto r = env.step(kSqUp, obs.data());
    CHECK_FALSE(r.terminated);
    CHECK(r.reward == 7.0);  // 141 units: 7 gauge cells
    CHECK(env.get_state()[4] == 0);
  }
  SECTION("touching a diver takes it aboard, up to 6") {
    env.set_state(SeaquestState(4, 3).diver(3, 3, 1, 1).s);  // the diver moves into the sub
    env.step(kSqNoop, obs.data());
    CHECK(env.get_state()[4] == 1);
    CHECK(channel_sum(obs, 9) == 0);
    env.set_state(SeaquestState(4, 3).diver(4, 4, 1).s);  // the sub moves onto it
    env.step(kSqDown, obs.data());
    CHECK(env.get_state()[4] == 1);
    env.set_state(SeaquestState(4, 3, -1, 200, 6).diver(4, 4, 1).s);
    env.step(kSqDown, obs.data());
    CHECK(env.get_state()[4] == 6);
    CHECK(cell(obs, 9, 4, 4) == 1);  // left where it was
    CHECK(channel_sum(obs, 8) == 6);
  }
  SECTION("fire: a bullet ahead of the sub, at most every 5 frames; a hit scores 1") {
    env.set_state(SeaquestState(8, 2, -1).enemy(2, 1, 2, 1, 6).s);
    std::vector<int> shots;
    double total = 0;
    for (int t = 1; t <= 6; ++t) {
      const auto r = env.step(kSqFire, obs.data());
      total += r.reward;
      if (cell(obs, 2, 2, 7) == 1) shots.push_back(t);
    }
    CHECK(shots == std::vector<int>{1, 6});
    CHECK(total == 1.0);  // the first bullet met the fish at column 2 on frame 6
    CHECK(channel_sum(obs, 5) == 0);
  }
  SECTION("a fish moving into a bullet is hit too") {
    env.set_state(SeaquestState(8, 2, -1).enemy(2, 1, 4, 1, 1).friendly(2, 6, -1).s);
    const auto r = env.step(kSqNoop, obs.data());  // bullet to 5, fish to 5
    CHECK(r.reward == 1.0);
    CHECK(channel_sum(obs, 2) == 0);
  }
  SECTION("contact with an enemy or an enemy bullet ends the game; the back cell is safe") {
    env.set_state(SeaquestState(4, 3).enemy(3, 1, 3, 1).s);
    CHECK(env.step(kSqLeft, obs.data()).terminated);  // onto the fish
    env.set_state(SeaquestState(4, 3).enemy(3, 1, 3, 1, 1).s);
    CHECK(env.step(kSqNoop, obs.data()).terminated);  // the fish moves in
    env.set_state(SeaquestState(4, 3).enemy(3, 1, 5, -1, 1).s);
    CHECK(env.step(kSqRight, obs.data()).terminated);  // swapping cells
    env.set_state(SeaquestState(4, 3).enemy_bullet(3, 3, 1).s);
    CHECK(env.step(kSqNoop, obs.data()).terminated);
    env.set_state(SeaquestState(4, 3, -1).enemy(3, 2, 6, -1, 1).s);
    CHECK_FALSE(env.step(kSqNoop, obs.data()).terminated);  // the sub enters the back cell
    CHECK(cell(obs, 6, 3, 5) == 1);
    CHECK(cell(obs, 1, 3, 5) == 1);
  }
  SECTION("an enemy sub fires ahead of itself every 11 frames") {
    env.set_state(SeaquestState(0, 8).enemy(3, 2, 5, -1, 6, 1).s);
    env.step(kSqNoop, obs.data());
    CHECK(cell(obs, 4, 3, 4) == 1);
    CHECK(env.get_state()[209 + 5] == 11);  // fire timer of enemy slot 0
    env.step(kSqNoop, obs.data());
    CHECK(cell(obs, 4, 3, 3) == 1);
  }
  SECTION("enemies move every period + 1 frames and leave the screen") {
    env.set_state(SeaquestState(0, 8).enemy(4, 1, 8, 1, 1).s);
    env.step(kSqNoop, obs.data());
    CHECK(cell(obs, 5, 4, 9) == 1);
    CHECK(cell(obs, 3, 4, 8) == 1);  // trail
    for (int t = 0; t < 5; ++t) env.step(kSqNoop, obs.data());
    CHECK(cell(obs, 5, 4, 9) == 1);
    env.step(kSqNoop, obs.data());  // 6 frames later
    CHECK(channel_sum(obs, 5) == 0);
    CHECK(channel_sum(obs, 3) == 0);
  }
  SECTION("a spawn is dropped only when its lane holds an enemy moving the other way") {
    // Every lane holds a fish at column 5 moving right: a spawn from column 0 (moving right)
    // enters, one from column 9 (moving left) does not; both happen over the draws.
    SeaquestState st(0, 0, -1, 200, 0, 0, 1);
    for (int lane = 1; lane <= 8; ++lane) st.enemy(lane, 1, 5, 1);
    int entered = 0, dropped = 0;
    for (int k = 0; k < 40; ++k) {
      st.s[st.s.size() - 1] = k;
      env.set_state(st.s);
      env.step(kSqNoop, obs.data());
      REQUIRE(env.get_state()[6] == 20);
      const float n = channel_sum(obs, 5) + channel_sum(obs, 6);
      if (n == 9) {
        ++entered;
        float left_edge = 0;
        for (int y = 1; y <= 8; ++y) left_edge += cell(obs, 5, y, 0) + cell(obs, 6, y, 0);
        REQUIRE(left_edge == 1);
      } else {
        REQUIRE(n == 8);
        ++dropped;
      }
    }
    CHECK(entered > 0);
    CHECK(dropped > 0);
  }
  SECTION("divers may share a lane") {
    SeaquestState st(0, 0, -1, 200, 0, 0, 15, 1);
    for (int lane = 1; lane <= 8; ++lane) st.diver(lane, 5, 1);
    env.set_state(st.s);
    env.step(kSqNoop, obs.data());
    CHECK(channel_sum(obs, 9) == 9);
  }
  SECTION("bad states are rejected") {
    CHECK_THROWS_AS(env.set_state(SeaquestState(5, 9).s), herd::InputError);
    CHECK_THROWS_AS(env.set_state(SeaquestState(5, 1, 0).s), herd::InputError);
    CHECK_THROWS_AS(env.set_state(SeaquestState(5, 1).enemy(2, 1, 3, 0).s), herd::InputError);
    CHECK_THROWS_AS(env.set_state(SeaquestState(5, 1, -1, 201).s), herd::InputError);
  }
}
