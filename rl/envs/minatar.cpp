// MinAtar games, written from the rules described in Young & Tian (2019).
#include "herd/rl/minatar.hpp"

#include <algorithm>
#include <cmath>

#include "herd/core/error.hpp"
#include "minatar_internal.hpp"

namespace herd::rl {
namespace {

using namespace minatar_detail;

Space grid_space(int channels) {
  const auto d = static_cast<std::size_t>(channels) * static_cast<std::size_t>(kCells);
  return Space::box(std::vector<double>(d, 0.0), std::vector<double>(d, 1.0), {channels, kN, kN}, BoxValues::kInteger);
}

std::vector<int> full_set() { return {0, 1, 2, 3, 4, 5}; }

}  // namespace

// --- MinAtarEnv ---------------------------------------------------------------------------

MinAtarEnv::MinAtarEnv(std::string id, int n_channels, std::vector<int> minimal, bool full_actions,
                       std::size_t game_state_dim, std::unique_ptr<MinAtarGame> game)
    : Env(std::move(id), grid_space(n_channels),
          Space::discrete(static_cast<std::int64_t>(full_actions ? 6 : minimal.size())), game_state_dim + 2, 0),
      game_(std::move(game)),
      n_channels_(n_channels),
      action_map_(full_actions ? full_set() : std::move(minimal)),
      game_state_dim_(game_state_dim) {}

MinAtarEnv::~MinAtarEnv() = default;

void MinAtarEnv::set_sticky_action_prob(double p) {
  HERD_REQUIRE(p >= 0.0 && p <= 1.0, "{}: sticky_action_prob is {}, but must be in [0, 1]", id(), p);
  sticky_prob_ = p;
}

void MinAtarEnv::observe_u8(std::uint8_t* obs) const {
  std::fill(obs, obs + static_cast<std::size_t>(n_channels_) * kCells, std::uint8_t{0});
  game_->observe(obs);
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
  StateWriter w(s.data());
  game_->get_state(w);
  s[game_state_dim_] = last_action_;
  s[game_state_dim_ + 1] = static_cast<double>(t_);
  return s;
}

void MinAtarEnv::set_state_impl(const double* state) {
  const int a = state_int(id(), "last_action", state[game_state_dim_], 0, 5);
  const double t = state[game_state_dim_ + 1];
  HERD_REQUIRE(t >= 0 && t == std::floor(t) && t < 9.0e15,
               "{}: state value t is {}, but must be a non-negative integer", id(), t);
  StateReader r(id(), state);
  game_->set_state(r);
  last_action_ = a;
  t_ = static_cast<std::uint64_t>(t);
}

void MinAtarEnv::reset_impl(RngCursor& rng, float* obs) {
  game_->reset(rng);
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
  const std::uint64_t index =
      ((episode() & ((std::uint64_t{1} << 28) - 1)) << 20) | (t_ & ((std::uint64_t{1} << 20) - 1));
  RngCursor rng = RngStream(seed(), global_id(), RngPurpose::kEnvStep).at(index);
  ++t_;
  int a = full_action(static_cast<int>(action[0]));
  // Sticky actions: one uniform per step, drawn whatever the probability.
  if (rng.uniform() < sticky_prob_) a = last_action_;
  last_action_ = a;
  StepResult r;
  r.reward = game_->step(a, rng, r.terminated);
  return r;
}

// --- Breakout -----------------------------------------------------------------------------

namespace {

class BreakoutGame final : public MinAtarGame {
 public:
  void reset(RngCursor& rng) override {
    const bool right = rng.uniform() < 0.5;
    ball_y_ = 3;
    ball_x_ = right ? 0 : 9;
    dx_ = right ? 1 : -1;
    dy_ = 1;
    last_x_ = ball_x_;
    last_y_ = ball_y_;
    paddle_x_ = 4;
    strike_ = false;
    bricks_.fill(1);
  }

  double step(int action, RngCursor& /*rng*/, bool& terminal) override {
    terminal = false;
    if (action == static_cast<int>(MinAtarAction::kLeft)) paddle_x_ = std::max(0, paddle_x_ - 1);
    if (action == static_cast<int>(MinAtarAction::kRight)) paddle_x_ = std::min(9, paddle_x_ + 1);

    last_x_ = ball_x_;
    last_y_ = ball_y_;
    // A reflection undoes the blocked component of the diagonal move: at a side wall the
    // ball keeps its column, at the ceiling, a brick or the paddle it keeps its row.
    int nx = ball_x_ + dx_, ny = ball_y_ + dy_;
    const int dx_in = dx_;     // the direction the ball came in with, before a side wall turns it
    if (nx < 0 || nx >= kN) {  // side wall
      dx_ = -dx_;
      nx = ball_x_;
    }
    if (ny < 0) {  // ceiling
      dy_ = -dy_;
      ny = ball_y_;
    }
    double reward = 0.0;
    // The step after a strike, a ball moving into a brick passes into its cell: the brick
    // stays and the ball does not turn (minatar's behaviour, measured frame by frame through
    // its public API: every move into a brick right after a strike passed, every other one
    // broke the brick). So a ball breaks at most one brick per step pair inside the rows.
    const bool struck = strike_;
    strike_ = false;
    if (ny >= 1 && ny <= 3 && bricks_[at(ny - 1, nx)]) {
      if (!struck) {
        bricks_[at(ny - 1, nx)] = 0;
        reward = 1.0;
        strike_ = true;
        dy_ = -dy_;
        ny = ball_y_;
      }
    } else if (ny == kN - 1) {
      // Cleared rows come back when the ball next meets the paddle (in that step), not when
      // the last brick breaks (minatar's timing, measured as above).
      if ((nx == paddle_x_ || ball_x_ == paddle_x_) &&
          std::all_of(bricks_.begin(), bricks_.end(), [](std::uint8_t b) { return b == 0; })) {
        bricks_.fill(1);
      }
      if (nx == paddle_x_) {  // the paddle's side facing the ball: back the way it came
        // (in a corner the wall has turned dx_ already: turning it again would send the
        // ball back into the wall)
        dy_ = -1;
        dx_ = -dx_in;
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

  void observe(std::uint8_t* grid) const override {
    set_cell(grid, 0, kN - 1, paddle_x_);
    set_cell(grid, 1, ball_y_, ball_x_);
    set_cell(grid, 2, last_y_, last_x_);
    for (int r = 0; r < 3; ++r) {
      for (int c = 0; c < kN; ++c) {
        if (bricks_[at(r, c)]) set_cell(grid, 3, r + 1, c);
      }
    }
  }

  void get_state(StateWriter& w) const override {
    w.put(ball_x_, ball_y_, dx_, dy_, paddle_x_, last_x_, last_y_);
    w.cells(bricks_);
    w.put(strike_ ? 1 : 0);
  }

  void set_state(StateReader& r) override {
    BreakoutGame g = *this;  // read into a copy: a refused value changes nothing
    g.ball_x_ = r.next("ball_x", 0, 9);
    g.ball_y_ = r.next("ball_y", 0, 9);
    g.dx_ = r.sign("dx");
    g.dy_ = r.sign("dy");
    g.paddle_x_ = r.next("paddle_x", 0, 9);
    g.last_x_ = r.next("last_x", 0, 9);
    g.last_y_ = r.next("last_y", 0, 9);
    g.bricks_ = r.cells<std::uint8_t, 30>("brick", 0, 1);
    g.strike_ = r.next("strike", 0, 1) != 0;
    *this = g;
  }

 private:
  int ball_x_ = 0, ball_y_ = 3, dx_ = 1, dy_ = 1, paddle_x_ = 4, last_x_ = 0, last_y_ = 3;
  bool strike_ = false;  // the last step broke a brick
  std::array<std::uint8_t, 30> bricks_{};
};

}  // namespace

MinAtarBreakout::MinAtarBreakout(bool full_actions)
    : MinAtarEnv(full_actions ? "MinAtar/Breakout-v0" : "MinAtar/Breakout-v1", 4, {0, 1, 3}, full_actions, 38,
                 std::make_unique<BreakoutGame>()) {}

// --- Freeway ------------------------------------------------------------------------------

namespace {

class FreewayGame final : public MinAtarGame {
 public:
  void reset(RngCursor& rng) override {
    chicken_y_ = kN - 1;
    cooldown_ = MinAtarFreeway::kMoveEvery;
    frame_ = 0;
    for (Car& c : cars_) c.x = 0;
    randomize_cars(rng);
  }

  double step(int action, RngCursor& rng, bool& terminal) override {
    double reward = 0.0;
    if (cooldown_ == 0) {
      if (action == static_cast<int>(MinAtarAction::kUp)) {
        --chicken_y_;
        cooldown_ = MinAtarFreeway::kMoveEvery;
      } else if (action == static_cast<int>(MinAtarAction::kDown)) {
        // On the bottom row the chicken cannot move down, but the press still starts the
        // move cooldown (minatar's behaviour, measured frame by frame through its public API).
        if (chicken_y_ < kN - 1) ++chicken_y_;
        cooldown_ = MinAtarFreeway::kMoveEvery;
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
    terminal = frame_ > MinAtarFreeway::kFrames;
    return reward;
  }

  void observe(std::uint8_t* grid) const override {
    set_cell(grid, 0, chicken_y_, 4);
    for (int lane = 0; lane < 8; ++lane) {
      const Car& c = cars_[static_cast<std::size_t>(lane)];
      set_cell(grid, 1, lane + 1, c.x);
      set_cell(grid, 1 + c.period, lane + 1, (c.x - c.dir + kN) % kN);
    }
  }

  void get_state(StateWriter& w) const override {
    w.put(chicken_y_, cooldown_, frame_);
    for (const Car& c : cars_) w.put(c.x, c.period, c.dir, c.timer);
  }

  void set_state(StateReader& r) override {
    FreewayGame g = *this;  // read into a copy: a refused value changes nothing
    g.chicken_y_ = r.next("chicken_y", 0, 9);
    g.cooldown_ = r.next("move_cooldown", 0, MinAtarFreeway::kMoveEvery);
    g.frame_ = r.next("frame", 0, MinAtarFreeway::kFrames + 1);
    for (Car& c : g.cars_) {
      c.x = r.next("car_x", 0, 9);
      c.period = r.next("period", 1, 5);
      c.dir = r.sign("direction");
      c.timer = r.next("timer", 1, c.period + 1);
    }
    *this = g;
  }

 private:
  void randomize_cars(RngCursor& rng) {
    for (Car& c : cars_) {
      c.period = 1 + static_cast<int>(rng.next_u32() % 5u);
      c.dir = (rng.next_u32() & 1u) ? 1 : -1;
      c.timer = c.period + 1;
    }
  }

  bool chicken_on_car() const {
    return chicken_y_ >= 1 && chicken_y_ <= 8 && cars_[static_cast<std::size_t>(chicken_y_ - 1)].x == 4;
  }

  struct Car {
    int x = 0, period = 1, dir = 1, timer = 1;  // timer: frames until the next move
  };
  int chicken_y_ = 9, cooldown_ = 0, frame_ = 0;
  std::array<Car, 8> cars_{};
};

}  // namespace

MinAtarFreeway::MinAtarFreeway(bool full_actions)
    : MinAtarEnv(full_actions ? "MinAtar/Freeway-v0" : "MinAtar/Freeway-v1", 7, {0, 2, 4}, full_actions, 3 + 4 * 8,
                 std::make_unique<FreewayGame>()) {}

}  // namespace herd::rl
