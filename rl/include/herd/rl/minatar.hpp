#pragma once
/// @file minatar.hpp
/// MinAtar games (Young & Tian 2019, "MinAtar: An Atari-inspired testbed for thorough and
/// reproducible reinforcement learning experiments"): 10x10 grids with n binary channels,
/// sticky actions, the minimal and the full 6-action sets. Written from the paper's
/// description of the rules (not from MinAtar's code); details the paper leaves open are
/// stated per game below and in docs/rl.md.
///
/// Observations are `[n_channels, 10, 10]` row-major (channel, row, column; row 0 is the
/// top of the screen), values 0 or 1: as float32 through the `Env` interface (so the pool
/// batches them as `[N, n_channels * 100]`) and as uint8 through `observe_u8`.
///
/// Actions: the full set is {0: no-op, 1: left, 2: up, 3: right, 4: down, 5: fire}
/// ("-v0" ids); the minimal set ("-v1" ids) lists the actions a game uses, in that order.
/// Sticky actions: with probability `sticky_action_prob()` (0.1 by default) a step
/// repeats the previously executed action instead of the given one (no-op after a reset).
///
/// Randomness: step t of episode e draws from
/// `RngStream(seed, global_id, kEnvStep).at(((e mod 2^28) << 20) | (t mod 2^20))`, the
/// start of an episode from the reset stream (see `Env`); so an episode depends only on
/// (seed, global id, episode number, actions). Thread-safety: as `Env`.

#include <cstdint>
#include <memory>
#include <vector>

#include "herd/rl/env.hpp"

namespace herd::rl {

namespace minatar_detail {
class MinAtarGame;
}  // namespace minatar_detail

/// Actions of MinAtar's full action set.
enum class MinAtarAction : std::uint8_t { kNoop = 0, kLeft, kUp, kRight, kDown, kFire };

/// The shared part of the MinAtar games: action sets, sticky actions, step randomness,
/// observation encoding, state layout `[game state..., last action, step in episode]`.
class MinAtarEnv : public Env {
 public:
  /// Grid side (rows and columns).
  static constexpr int kSize = 10;
  /// Destroys the env and its game.
  ~MinAtarEnv() override;
  /// Number of binary channels of an observation.
  int n_channels() const { return n_channels_; }
  /// Probability that a step repeats the previous action (0.1 as in the paper).
  double sticky_action_prob() const { return sticky_prob_; }
  /// Sets the sticky-action probability. @throws herd::InputError unless 0 <= p <= 1.
  void set_sticky_action_prob(double p);
  /// The full-set action (`MinAtarAction` value) that action index `a` stands for.
  int full_action(int a) const { return action_map_[static_cast<std::size_t>(a)]; }
  /// Writes the observation `[n_channels, 10, 10]` as uint8 0/1 to `obs`.
  void observe_u8(std::uint8_t* obs) const;
  /// Writes the float32 observation (0 or 1; layout as `observe_u8`).
  void observe(float* obs) const final;
  /// Steps `envs` (all of this game) and writes their observations as bytes straight into
  /// the uint8 batch rows (`observe_u8`), without a float32 row; same results as `step`.
  void step_batch_u8(Env* const* envs, std::size_t n, const double* actions, std::uint8_t* obs, double* rewards,
                     std::uint8_t* terminated, std::uint8_t* truncated) const final;
  /// The internal state: `[game_state_dim values, last executed full action, step t]`.
  std::vector<double> get_state() const final;

 protected:
  /// @param id registry id
  /// @param n_channels channels of the observation
  /// @param minimal the minimal action set (full-set values, increasing)
  /// @param full_actions whether the action space is the full 6-action set
  /// @param game_state_dim doubles of the game's own state
  /// @param game the game's rules and state (internal to the MinAtar sources)
  MinAtarEnv(std::string id, int n_channels, std::vector<int> minimal, bool full_actions, std::size_t game_state_dim,
             std::unique_ptr<minatar_detail::MinAtarGame> game);

 private:
  void reset_impl(RngCursor& rng, float* obs) final;
  StepResult step_impl(const double* action, float* obs) final;
  void set_state_impl(const double* state) final;
  /// One step of the game (sticky action, rules) without writing an observation.
  StepResult advance(const double* action);

  std::unique_ptr<minatar_detail::MinAtarGame> game_;
  int n_channels_;
  std::vector<int> action_map_;
  std::size_t game_state_dim_;
  double sticky_prob_ = 0.1;
  int last_action_ = 0;
  std::uint64_t t_ = 0;
};

/// MinAtar Breakout (channels: paddle, ball, trail, brick; minimal actions: no-op, left,
/// right). A one-cell paddle moves along row 9; three rows of bricks fill rows 1-3. The ball
/// moves one diagonal cell per frame. A side wall reverses its horizontal direction and the
/// ball keeps its column that frame; the ceiling, a brick or the paddle reverse its vertical
/// direction and the ball keeps its row that frame. Entering a brick's cell removes the
/// brick (+1); when all bricks are gone, three new rows appear. The paddle bounces a ball
/// that would enter row 9 at the paddle's column (hitting the side facing it: the
/// horizontal direction reverses too) or that comes down from above the paddle (the far
/// side: the horizontal direction is kept); a ball entering row 9 elsewhere ends the game.
/// Start: paddle at column 4, ball in row 3 at column 0 moving down-right or at column 9
/// moving down-left (equally likely). The trail channel marks the ball's previous cell. No
/// difficulty ramping (the paper ramps Asterix, Seaquest and Space Invaders). Game state:
/// `[ball_x, ball_y, dx, dy, paddle_x, last_x, last_y, bricks 3x10 (rows 1-3)]`.
class MinAtarBreakout final : public MinAtarEnv {
 public:
  /// A fresh instance; `full_actions` selects the 6-action set ("MinAtar/Breakout-v0")
  /// instead of the minimal one ("MinAtar/Breakout-v1").
  explicit MinAtarBreakout(bool full_actions = false);
};

/// MinAtar Freeway (channels: chicken, car, then the trails of cars of speed class 1-5;
/// minimal actions: no-op, up, down). The chicken lives in column 4, starts in row 9 and
/// may move up or down once every 3 frames (first at frame 4 of an episode). Lanes 1-8
/// (rows) hold one car each, of speed class p in 1-5, moving one cell every p + 1 frames
/// in its lane's direction and wrapping around the screen; its trail (the cell behind it)
/// is drawn in channel 1 + p. Reaching row 0 gives +1, returns the chicken to row 9 and
/// redraws every car's speed class and direction (cars keep their columns); being on a
/// car's cell, after the chicken's move or after the cars' moves, returns the chicken to
/// row 9 (its move cooldown runs on).
/// The episode ends on frame 2501 (after 2500 frames have elapsed). Start: every car in
/// column 0, speed classes uniform in 1-5, directions uniform. The paper words the speeds
/// as "once every frame to once every 5 frames"; the p + 1 frames, the start column and the
/// episode length follow what PyPI's minatar 1.0 does (observed through its public API).
/// Game state: `[chicken_y, move_cooldown, frame, (car_x, p, direction, frames to the next
/// move) x 8]`.
class MinAtarFreeway final : public MinAtarEnv {
 public:
  /// A fresh instance; `full_actions` selects the 6-action set ("MinAtar/Freeway-v0")
  /// instead of the minimal one ("MinAtar/Freeway-v1").
  explicit MinAtarFreeway(bool full_actions = false);
  /// Frames after which the episode ends (on the next one).
  static constexpr int kFrames = 2500;
  /// Frames between two chicken moves.
  static constexpr int kMoveEvery = 3;
};

/// MinAtar Asterix (channels: player, enemy, trail, gold; minimal actions: no-op, left, up,
/// right, down). The player moves one cell per frame within rows 1-8 (all columns), starting
/// at row 5, column 5. Rows 1-8 are lanes holding at most one object each: an enemy or gold.
/// Every `spawn period` frames (10 at the start; the first spawn on frame 11) an object
/// appears in a lane chosen uniformly among the empty ones (none when all are taken), at
/// column 0 moving right or at column 9 moving left (equally likely), gold with probability
/// 1/3. Every `move period` frames (5 at the start; frames 1, 6, 11, ...) all objects move
/// one cell and leave the screen past the edge; the trail channel marks the cell an object
/// came from (none before its first move). Touching gold gives +1 and removes it; touching
/// an enemy ends the game. The player touches an object when it stands on the object's
/// cell after the player's move, after a spawn or after the objects' move (in this order
/// within a frame), so an object and the player swapping cells collide. Difficulty
/// ramping: every 102 frames the spawn period drops by 1 and, every second time, the move
/// period by 1 (both down to 1). The paper states the rules and the ramping in words; the
/// periods, the gold probability, the start position and the ramp interval follow what
/// PyPI's minatar 1.0 does (observed through its public API). Game state: `[player_x,
/// player_y, ramps, spawn_timer, move_timer, ramp_timer, (kind 0 none / 1 enemy / 2 gold,
/// x, direction, has moved) x 8 lanes]`.
class MinAtarAsterix final : public MinAtarEnv {
 public:
  /// A fresh instance; `full_actions` selects the 6-action set ("MinAtar/Asterix-v0")
  /// instead of the minimal one ("MinAtar/Asterix-v1").
  explicit MinAtarAsterix(bool full_actions = false);
  /// Frames between two difficulty ramps.
  static constexpr int kRampEvery = 102;
  /// Spawn period after `ramps` ramps: max(1, 10 - ramps).
  static int spawn_period(int ramps);
  /// Move period after `ramps` ramps: max(1, 5 - ramps / 2).
  static int move_period(int ramps);
};

/// MinAtar Space Invaders (channels: cannon, alien, alien moving left, alien moving right,
/// friendly bullet, enemy bullet; minimal actions: no-op, left, right, fire). The cannon
/// moves along row 9 (start: column 5). A wave of 4x6 aliens starts in rows 0-3, columns
/// 2-7, moving left. Every `alien period` frames the aliens move one cell sideways or, when
/// one of them is at the edge they move towards, one row down, reversing direction; the
/// alien period is min(wave speed, number of aliens) (so one alien moves every frame) with
/// the wave speed 12 for the first wave and 1 less for each next one (down to 1); the first
/// move is on frame 13. Fire launches a bullet from the cannon if 5 frames have passed
/// since the last one; friendly bullets move up and enemy bullets down one cell per frame.
/// Every 10 frames (first on frame 11) the lowest alien of the alien column closest to the
/// cannon (the left one on a tie) drops a bullet in its own cell. A friendly bullet in an
/// alien's cell removes both (+1); clearing a wave brings a new one (the direction and the
/// move timer carry over). The game ends when an enemy bullet reaches the cannon, an alien
/// is on the cannon's cell (after the cannon's move or at the end of the frame) or the
/// aliens would move down while one is in row 9. Per frame: cannon move, contact, fire,
/// bullets move, bullet hits the cannon, aliens move, enemy fire, bullet hits on aliens,
/// contact, fire cooldown, new wave. The paper states the rules in words; the periods,
/// the order within a frame and the layout follow what PyPI's minatar 1.0 does (observed
/// through its public API: identical trajectories for the same actions). Game state:
/// `[cannon_x, direction, waves cleared, fire cooldown, alien move timer, enemy fire timer,
/// aliens 10x10, friendly bullets 10x10, enemy bullets 10x10]` (grids row-major, 0/1).
class MinAtarSpaceInvaders final : public MinAtarEnv {
 public:
  /// A fresh instance; `full_actions` selects the 6-action set ("MinAtar/SpaceInvaders-v0")
  /// instead of the minimal one ("MinAtar/SpaceInvaders-v1").
  explicit MinAtarSpaceInvaders(bool full_actions = false);
  /// Frames between two friendly shots.
  static constexpr int kShotCooldown = 5;
  /// Frames between two enemy shots.
  static constexpr int kEnemyShotEvery = 10;
  /// Wave speed (the largest alien period) after `waves` cleared waves: max(1, 12 - waves).
  static int wave_speed(int waves);
};

/// MinAtar Seaquest (channels: sub front, sub back, friendly bullet, trail, enemy bullet,
/// enemy fish, enemy sub, oxygen gauge, diver gauge, diver; minimal actions: all six). The
/// player's submarine is one cell (its front) with its back drawn behind it in the
/// direction it faces; it moves one cell per frame within rows 0-8 (row 0 is the surface),
/// turning with left/right; start: row 0, column 5, facing left. Fire launches a bullet
/// ahead of it if 5 frames have passed since the last one; bullets move one cell per frame.
/// Rows 1-8 are lanes. Every `spawn period` frames (20 at the start; first on frame 21) an
/// enemy is drawn: a lane (uniform), a side (column 0 moving right or column 9 moving
/// left, equally likely) and a kind (a sub with probability 1/3, else a fish); it enters
/// unless its lane holds an enemy moving the other way (a lane may hold several moving the
/// same way). Every 30 frames (first on frame 31) a diver enters a uniform lane from a
/// uniform side. Enemies move one cell every `move period` + 1 frames, the first time
/// `move period` frames after they appear (5 at the start), divers likewise with a fixed
/// period 5; both leave past the edge; the trail channel marks where a moving enemy or
/// diver came from. An enemy sub fires a bullet ahead of itself 10 frames after it appears
/// and then every 11 frames; enemy bullets move one cell per frame. A friendly bullet in an
/// enemy's cell removes both (+1). Touching a diver takes it aboard (at most 6). Touching an
/// enemy or an enemy bullet with the sub's front ends the game (contact after the sub's
/// move or after the other objects' moves; the back cell does not collide). Oxygen: 200 at
/// the start, one unit per frame below the surface (the gauge on row 9 shows oxygen / 20
/// cells); the game ends on the frame after it reached 0. Moving up into row 0 surfaces:
/// with no diver aboard the game ends; with 6 all leave and each gauge cell of oxygen
/// scores +1; otherwise one leaves; oxygen refills and the difficulty ramps: after k
/// surfacings the spawn period is max(1, 20 - k) and the move period max(2, 5 - k / 2).
/// The diver gauge (row 9) shows the divers aboard. The paper states the rules in words;
/// the periods, probabilities, lane rule, contact rules, surfacing reward and ramping follow
/// what PyPI's minatar 1.0 does (observed through its public API). At most `kMaxEnemies`
/// enemies and `kMaxDiverSlots` divers are on the screen (a spawn beyond is dropped; the
/// ramped spawn and move periods keep far fewer). Game state: `[sub_x, sub_y, facing,
/// oxygen, divers, fire cooldown, enemy spawn timer, diver spawn timer, surfacings, friendly
/// bullets 10x10 (direction -1/0/1), enemy bullets 10x10, (kind 0 none / 1 fish / 2 sub,
/// lane 1-8, x, direction, move timer, fire timer, has moved) x kMaxEnemies, (present,
/// lane, x, direction, move timer, has moved) x kMaxDiverSlots]` (empty slots all 0).
class MinAtarSeaquest final : public MinAtarEnv {
 public:
  /// A fresh instance; `full_actions` selects the 6-action set ("MinAtar/Seaquest-v0")
  /// instead of the minimal one ("MinAtar/Seaquest-v1"; for Seaquest both hold all six).
  explicit MinAtarSeaquest(bool full_actions = false);
  /// Oxygen of a full tank (frames below the surface).
  static constexpr int kMaxOxygen = 200;
  /// Divers the sub can carry.
  static constexpr int kMaxDivers = 6;
  /// Diver move period (frames between moves minus one).
  static constexpr int kDiverPeriod = 5;
  /// Enemy slots (the most enemies on the screen at once).
  static constexpr int kMaxEnemies = 32;
  /// Diver slots (the most divers on the screen at once).
  static constexpr int kMaxDiverSlots = 16;
  /// Enemy spawn period after `surfacings` surfacings: max(1, 20 - surfacings).
  static int spawn_period(int surfacings);
  /// Enemy move period after `surfacings` surfacings: max(2, 5 - surfacings / 2).
  static int move_period(int surfacings);
};

}  // namespace herd::rl
