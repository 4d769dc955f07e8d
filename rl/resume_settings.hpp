#pragma once
/// @file resume_settings.hpp
/// Private to rl/: how a resumed training run (PPO/A2C `Trainer`, `DqnTrainer`) compares the
/// resolved configuration saved in its checkpoint with the one it was started with. Not
/// installed. Pure functions of their arguments; thread-safe.

#include <map>
#include <string>
#include <vector>

namespace herd::rl::detail {

/// "key = value" pairs of a resolved configuration text (`io::Settings::describe` lines,
/// comments cut); the key "env" of checkpoints written before `[env]` had more keys is read
/// as "env.id".
std::map<std::string, std::string> config_values(const std::string& text);

/// "key = now (the checkpoint has saved)" for each key of `fixed` set in both texts with
/// different values: settings that fix the shapes of the saved state.
std::vector<std::string> fixed_conflicts(const std::string& saved_text, const std::string& now_text,
                                         const std::vector<std::string>& fixed);

/// The same list for env.clip_reward and env.episodic_life where their change adds or
/// removes the environment wrapper: either switch wraps the environment (as env.frame_stack
/// > 1 does), and the wrapper's values (lives, game steps, episode, stacked frames) join
/// each environment's saved state, so its size changes with the wrapper's presence. While
/// another of the three keeps the wrapper, the switches may change.
std::vector<std::string> wrapper_conflicts(const std::string& saved_text, const std::string& now_text);

/// Every setting that keeps a checkpoint from being resumed: `fixed_conflicts`, then
/// `wrapper_conflicts` (which stays silent while env.frame_stack itself differs).
std::vector<std::string> resume_conflicts(const std::string& saved_text, const std::string& now_text,
                                          const std::vector<std::string>& fixed);

/// The same list for every key whose change alters the training's trajectory (all but the
/// run's length, output names and periods, the sampler kind and threads, and max_memory):
/// a resumed run reports these, since it then differs from an uninterrupted one.
std::vector<std::string> trajectory_changes(const std::string& saved_text, const std::string& now_text);

/// @throws herd::InputError "<who>: <path> cannot be resumed with <conflicts, comma-separated>:
///         these settings fix the shapes of the saved state ..." when `conflicts` is not empty.
void throw_if_conflicts(const std::string& who, const std::string& path, const std::vector<std::string>& conflicts);

}  // namespace herd::rl::detail
