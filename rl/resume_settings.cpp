#include "resume_settings.hpp"

#include <set>

#include <fmt/format.h>

#include "herd/core/error.hpp"

namespace herd::rl::detail {

std::map<std::string, std::string> config_values(const std::string& text) {
  std::map<std::string, std::string> out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    if (const auto c = line.find("  # "); c != std::string::npos) line.resize(c);
    const auto eq = line.find(" = ");
    if (eq == std::string::npos || line.empty() || line[0] == '#') continue;
    const std::string key = line.substr(0, eq);
    out[key == "env" ? "env.id" : key] = line.substr(eq + 3);
  }
  return out;
}

std::vector<std::string> fixed_conflicts(const std::string& saved_text, const std::string& now_text,
                                         const std::vector<std::string>& fixed) {
  const auto saved = config_values(saved_text), now = config_values(now_text);
  std::vector<std::string> out;
  for (const std::string& key : fixed) {
    const auto s = saved.find(key), n = now.find(key);
    if (s != saved.end() && n != now.end() && s->second != n->second)
      out.push_back(fmt::format("{} = {} (the checkpoint has {})", key, n->second, s->second));
  }
  return out;
}

std::vector<std::string> wrapper_conflicts(const std::string& saved_text, const std::string& now_text) {
  const auto saved = config_values(saved_text), now = config_values(now_text);
  const auto wrapped = [](const std::map<std::string, std::string>& v) {
    const auto is = [&v](const char* key, const char* value) {
      const auto it = v.find(key);
      return it != v.end() && it->second == value;
    };
    return !is("env.frame_stack", "1") || is("env.clip_reward", "true") || is("env.episodic_life", "true");
  };
  // A checkpoint from before these keys existed says nothing of them (nor does fixed_conflicts);
  // a changed frame_stack is reported by fixed_conflicts, and restoring it alone may suffice.
  const auto stack = [](const std::map<std::string, std::string>& v) {
    const auto it = v.find("env.frame_stack");
    return it == v.end() ? std::string() : it->second;
  };
  if (saved.count("env.frame_stack") == 0 || stack(saved) != stack(now) || wrapped(saved) == wrapped(now)) return {};
  std::vector<std::string> out;
  for (const char* key : {"env.clip_reward", "env.episodic_life"}) {
    const auto s = saved.find(key), n = now.find(key);
    if (s != saved.end() && n != now.end() && s->second != n->second)
      out.push_back(fmt::format("{} = {} (the checkpoint has {})", key, n->second, s->second));
  }
  return out;
}

std::vector<std::string> resume_conflicts(const std::string& saved_text, const std::string& now_text,
                                          const std::vector<std::string>& fixed) {
  auto out = fixed_conflicts(saved_text, now_text, fixed);
  for (auto& c : wrapper_conflicts(saved_text, now_text)) out.push_back(std::move(c));
  return out;
}

std::vector<std::string> trajectory_changes(const std::string& saved_text, const std::string& now_text) {
  static const std::set<std::string> may_change = {
      "output_prefix",       "checkpoint_period",   "checkpoint_period_seconds",
      "progress_period",     "logging.tensorboard", "sampler.kind",
      "sampler.num_threads", "max_memory",          "eval.max_episode_steps",
      "eval.every_steps",    "eval.episodes",       "eval.stochastic",
      "eval.save_best",      "eval.stop_return"};
  const auto saved = config_values(saved_text), now = config_values(now_text);
  std::vector<std::string> out;
  for (const auto& [key, value] : saved) {
    const auto it = now.find(key);
    if (it == now.end() || it->second == value || may_change.count(key) != 0) continue;
    // total_steps sets the length of every schedule: the run goes on, on the new one.
    out.push_back(
        key == "total_steps"
            ? fmt::format("{} = {} (the checkpoint has {}; the schedules over total_steps, e.g. learning-rate "
                          "and clip annealing, epsilon and prioritized replay's beta, follow the new length "
                          "from here on)",
                          key, it->second, value)
            : fmt::format("{} = {} (the checkpoint has {})", key, it->second, value));
  }
  return out;
}

void throw_if_conflicts(const std::string& who, const std::string& path, const std::vector<std::string>& conflicts) {
  if (conflicts.empty()) return;
  std::string list;
  for (const auto& x : conflicts) list += (list.empty() ? "" : ", ") + x;
  throw InputError(who + ": " + path + " cannot be resumed with " + list +
                   ": these settings fix the shapes of the saved state and cannot change on resume");
}

}  // namespace herd::rl::detail
