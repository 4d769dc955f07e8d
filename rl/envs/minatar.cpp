// MinAtar games, written from the rules described in Young & Tian (2019).
#include "herd/rl/minatar.hpp"

#include <algorithm>
#include <cmath>

#include "herd/core/error.hpp"
#include "minatar_internal.hpp"

namespace herd::rl {
namespace {

using minatar_detail::kCells;
using minatar_detail::kN;
using minatar_detail::set_cell;
using minatar_detail::state_int;

Space grid_space(int channels) {
  const auto d = static_cast<std::size_t>(channels * kCells);
  return Space::box(std::vector<double>(d, 0.0), std::vector<double>(d, 1.0), {channels, kN, kN});
}

std::vector<int> full_set() { return {0, 1, 2, 3, 4, 5}; }

}  // namespace

// --- MinAtarEnv ---------------------------------------------------------------------------

MinAtarEnv::MinAtarEnv(std::string id, int n_channels, std::vector<int> minimal,
                       bool full_actions, std::size_t game_state_dim)
    : Env(std::move(id), grid_space(n_channels),
          Space::discrete(static_cast<std::int64_t>(full_actions ? 6 : minimal.size())),
          game_state_dim + 2, 0),
      n_channels_(n_channels),
      action_map_(full_actions ? full_set() : std::move(minimal)),
      game_state_dim_(game_state_dim) {}

void MinAtarEnv::set_sticky_action_prob(double p) {
  HERD_REQUIRE(p >= 0.0 && p <= 1.0, "{}: sticky_action_prob is {}, but must be in [0, 1]",
               id(), p);
  sticky_prob_ = p;
}

void MinAtarEnv::observe_u8(std::uint8_t* obs) const {
  std::fill(obs, obs + static_cast<std::size_t>(n_channels_) * kCells, std::uint8_t{0});
  game_observe(obs);
}

void MinAtarEnv::observe(float* obs) const {
  std::uint8_t grid[16 * kCells];
  const int n = n_channels_ * kCells;
  observe_u8(grid);
  // Through env.cpp's loop: this file is built without auto-vectorisation (rl/CMakeLists.txt).
  obs_to_f32(grid, static_cast<std::size_t>(n), obs);
}

std::vector<double> MinAtarEnv::get_state() const {
  std::vector<double> s(state_dim());
  game_get_state(s.data());
  s[game_state_dim_] = last_action_;
  s[game_state_dim_ + 1] = static_cast<double>(t_);
  return s;
}

void MinAtarEnv::set_state_impl(const double* state) {
  const int a = state_int(id(), "last_action", state[game_state_dim_], 0, 5);
  const double t = state[game_state_dim_ + 1];
  HERD_REQUIRE(t >= 0 && t == std::floor(t) && t < 9.0e15,
               "{}: state value t is {}, but must be a non-negative integer", id(), t);
  game_set_state(state);
  last_action_ = a;
  t_ = static_cast<std::uint64_t>(t);
}

void MinAtarEnv::reset_impl(RngCursor& rng, float* obs) {
  game_reset(rng);
  last_action_ = 0;
  t_ = 0;
  observe(obs);
}

StepResult MinAtarEnv::step_impl(const double* action, float* obs) {
  const StepResult r = advance(action);
  observe(obs);
  return r;
}

void MinAtarEnv::step_batch_u8(Env* const* envs, std::size_t n, const double* actions, std::uint8_t* obs,
                               double* rewards, std::uint8_t* terminated, std::uint8_t* truncated) const {
  const std::size_t ad = action_dim(), od = obs_dim();
  for (std::size_t i = 0; i < n; ++i) {
    auto* e = static_cast<MinAtarEnv*>(envs[i]);
    const StepResult r = e->advance(actions + i * ad);
    e->observe_u8(obs + i * od);
    rewards[i] = r.reward;
    terminated[i] = r.terminated;
    truncated[i] = e->count_step() || r.truncated;  // as Env::step_unchecked
  }
}

StepResult MinAtarEnv::advance(const double* action) {
  const std::uint64_t index = ((episode() & ((std::uint64_t{1} << 28) - 1)) << 20) |
                              (t_ & ((std::uint64_t{1} << 20) - 1));
  RngCursor rng = RngStream(seed(), global_id(), RngPurpose::kEnvStep).at(index);
  ++t_;
  int a = full_action(static_cast<int>(action[0]));
  // Sticky actions: one uniform per step, drawn whatever the probability.
  if (rng.uniform() < sticky_prob_) a = last_action_;
  last_action_ = a;
  StepResult r;
  r.reward = game_step(a, rng, r.terminated);
  return r;
}

// --- Breakout -----------------------------------------------------------------------------

MinAtarBreakout::MinAtarBreakout(bool full_actions)
    : MinAtarEnv(full_actions ? "MinAtar/Breakout-v0" : "MinAtar/Breakout-v1", 4, {0, 1, 3},
                 full_actions, 37) {}

void MinAtarBreakout::game_reset(RngCursor& rng) {
  const bool right = rng.uniform() < 0.5;
  ball_y_ = 3;
  ball_x_ = right ? 0 : 9;
  dx_ = right ? 1 : -1;
  dy_ = 1;
  last_x_ = ball_x_;
  last_y_ = ball_y_;
  paddle_x_ = 4;
  bricks_.fill(1);
}

double MinAtarBreakout::game_step(int action, RngCursor& /*rng*/, bool& terminal) {
  terminal = false;
  if (action == static_cast<int>(MinAtarAction::kLeft)) paddle_x_ = std::max(0, paddle_x_ - 1);
  if (action == static_cast<int>(MinAtarAction::kRight)) paddle_x_ = std::min(9, paddle_x_ + 1);

  last_x_ = ball_x_;
  last_y_ = ball_y_;
  // A reflection undoes the blocked component of the diagonal move: at a side wall the
  // ball keeps its column, at the ceiling, a brick or the paddle it keeps its row.
  int nx = ball_x_ + dx_, ny = ball_y_ + dy_;
  if (nx < 0 || nx >= kN) {  // side wall
    dx_ = -dx_;
    nx = ball_x_;
  }
  if (ny < 0) {  // ceiling
    dy_ = -dy_;
    ny = ball_y_;
  }
  double reward = 0.0;
  if (ny >= 1 && ny <= 3 && bricks_[static_cast<std::size_t>((ny - 1) * kN + nx)]) {
    bricks_[static_cast<std::size_t>((ny - 1) * kN + nx)] = 0;
    reward = 1.0;
    dy_ = -dy_;
    ny = ball_y_;
    if (std::all_of(bricks_.begin(), bricks_.end(), [](std::uint8_t b) { return b == 0; })) {
      bricks_.fill(1);
    }
  } else if (ny == kN - 1) {
    if (nx == paddle_x_) {  // the paddle's side facing the ball: back the way it came
      dy_ = -1;
      dx_ = -dx_;
      ny = ball_y_;
    } else if (ball_x_ == paddle_x_) {  // the paddle's far side: on in the same direction
      dy_ = -1;
      ny = ball_y_;
    } else {
      terminal = true;
    }
  }
  ball_x_ = nx;
  ball_y_ = ny;
  return reward;
}

void MinAtarBreakout::game_observe(std::uint8_t* grid) const {
  set_cell(grid, 0, kN - 1, paddle_x_);
  set_cell(grid, 1, ball_y_, ball_x_);
  set_cell(grid, 2, last_y_, last_x_);
  for (int r = 0; r < 3; ++r) {
    for (int c = 0; c < kN; ++c) {
      if (bricks_[static_cast<std::size_t>(r * kN + c)]) set_cell(grid, 3, r + 1, c);
    }
  }
}

void MinAtarBreakout::game_get_state(double* s) const {
  s[0] = ball_x_;
  s[1] = ball_y_;
  s[2] = dx_;
  s[3] = dy_;
  s[4] = paddle_x_;
  s[5] = last_x_;
  s[6] = last_y_;
  for (std::size_t i = 0; i < 30; ++i) s[7 + i] = bricks_[i];
}

void MinAtarBreakout::game_set_state(const double* s) {
  const std::string& n = id();
  const int bx = state_int(n, "ball_x", s[0], 0, 9), by = state_int(n, "ball_y", s[1], 0, 9);
  const int dx = state_int(n, "dx", s[2], -1, 1), dy = state_int(n, "dy", s[3], -1, 1);
  HERD_REQUIRE(dx != 0 && dy != 0, "{}: state values dx, dy are {}, {}, but must be -1 or 1", n,
               dx, dy);
  const int px = state_int(n, "paddle_x", s[4], 0, 9);
  const int lx = state_int(n, "last_x", s[5], 0, 9), ly = state_int(n, "last_y", s[6], 0, 9);
  std::array<std::uint8_t, 30> b{};
  for (std::size_t i = 0; i < 30; ++i) {
    b[i] = static_cast<std::uint8_t>(state_int(n, "brick", s[7 + i], 0, 1));
  }
  ball_x_ = bx;
  ball_y_ = by;
  dx_ = dx;
  dy_ = dy;
  paddle_x_ = px;
  last_x_ = lx;
  last_y_ = ly;
  bricks_ = b;
}

// --- Freeway ------------------------------------------------------------------------------

MinAtarFreeway::MinAtarFreeway(bool full_actions)
    : MinAtarEnv(full_actions ? "MinAtar/Freeway-v0" : "MinAtar/Freeway-v1", 7, {0, 2, 4},
                 full_actions, 3 + 4 * 8) {}

void MinAtarFreeway::randomize_cars(RngCursor& rng) {
  for (Car& c : cars_) {
    c.period = 1 + static_cast<int>(rng.next_u32() % 5u);
    c.dir = (rng.next_u32() & 1u) ? 1 : -1;
    c.timer = c.period + 1;
  }
}

bool MinAtarFreeway::chicken_on_car() const {
  return chicken_y_ >= 1 && chicken_y_ <= 8 &&
         cars_[static_cast<std::size_t>(chicken_y_ - 1)].x == 4;
}

void MinAtarFreeway::game_reset(RngCursor& rng) {
  chicken_y_ = kN - 1;
  cooldown_ = kMoveEvery;
  frame_ = 0;
  for (Car& c : cars_) c.x = 0;
  randomize_cars(rng);
}

double MinAtarFreeway::game_step(int action, RngCursor& rng, bool& terminal) {
  double reward = 0.0;
  if (cooldown_ == 0) {
    if (action == static_cast<int>(MinAtarAction::kUp)) {
      --chicken_y_;
      cooldown_ = kMoveEvery;
    } else if (action == static_cast<int>(MinAtarAction::kDown) && chicken_y_ < kN - 1) {
      ++chicken_y_;
      cooldown_ = kMoveEvery;
    }
  }
  if (chicken_y_ == 0) {
    reward = 1.0;
    chicken_y_ = kN - 1;
    randomize_cars(rng);
  }
  if (chicken_on_car()) chicken_y_ = kN - 1;  // walked into a car
  for (Car& c : cars_) {
    if (--c.timer == 0) {
      c.x = (c.x + c.dir + kN) % kN;
      c.timer = c.period + 1;
    }
  }
  if (chicken_on_car()) chicken_y_ = kN - 1;  // a car drove into the chicken
  if (cooldown_ > 0) --cooldown_;
  ++frame_;
  terminal = frame_ > kFrames;
  return reward;
}

void MinAtarFreeway::game_observe(std::uint8_t* grid) const {
  set_cell(grid, 0, chicken_y_, 4);
  for (int lane = 0; lane < 8; ++lane) {
    const Car& c = cars_[static_cast<std::size_t>(lane)];
    set_cell(grid, 1, lane + 1, c.x);
    set_cell(grid, 1 + c.period, lane + 1, (c.x - c.dir + kN) % kN);
  }
}

void MinAtarFreeway::game_get_state(double* s) const {
  s[0] = chicken_y_;
  s[1] = cooldown_;
  s[2] = frame_;
  for (std::size_t i = 0; i < 8; ++i) {
    s[3 + 4 * i] = cars_[i].x;
    s[4 + 4 * i] = cars_[i].period;
    s[5 + 4 * i] = cars_[i].dir;
    s[6 + 4 * i] = cars_[i].timer;
  }
}

void MinAtarFreeway::game_set_state(const double* s) {
  const std::string& n = id();
  const int y = state_int(n, "chicken_y", s[0], 0, 9);
  const int cd = state_int(n, "move_cooldown", s[1], 0, kMoveEvery);
  const int f = state_int(n, "frame", s[2], 0, kFrames + 1);
  std::array<Car, 8> cars{};
  for (std::size_t i = 0; i < 8; ++i) {
    cars[i].x = state_int(n, "car_x", s[3 + 4 * i], 0, 9);
    cars[i].period = state_int(n, "period", s[4 + 4 * i], 1, 5);
    cars[i].dir = state_int(n, "direction", s[5 + 4 * i], -1, 1);
    HERD_REQUIRE(cars[i].dir != 0, "{}: state value direction is 0, but must be -1 or 1", n);
    cars[i].timer = state_int(n, "timer", s[6 + 4 * i], 1, cars[i].period + 1);
  }
  chicken_y_ = y;
  cooldown_ = cd;
  frame_ = f;
  cars_ = cars;
}

}  // namespace herd::rl
