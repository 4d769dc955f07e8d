#include "herd/rl/registry.hpp"

#include <algorithm>
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "herd/core/error.hpp"
#include "herd/rl/envs.hpp"
#include "herd/rl/minatar.hpp"

namespace herd::rl {
namespace {

struct Registry {
  std::mutex mutex;
  std::map<std::string, EnvFactory> factories;

  Registry() {
    factories["CartPole-v1"] = [] { return std::make_unique<CartPole>(); };
    factories["Acrobot-v1"] = [] { return std::make_unique<Acrobot>(); };
    factories["MountainCar-v0"] = [] { return std::make_unique<MountainCar>(); };
    factories["MountainCarContinuous-v0"] = [] { return std::make_unique<MountainCarContinuous>(); };
    factories["Pendulum-v1"] = [] { return std::make_unique<Pendulum>(); };
    // MinAtar: -v0 the full 6-action set, -v1 the minimal action set.
    factories["MinAtar/Breakout-v0"] = [] { return std::make_unique<MinAtarBreakout>(true); };
    factories["MinAtar/Breakout-v1"] = [] { return std::make_unique<MinAtarBreakout>(false); };
    factories["MinAtar/Freeway-v0"] = [] { return std::make_unique<MinAtarFreeway>(true); };
    factories["MinAtar/Freeway-v1"] = [] { return std::make_unique<MinAtarFreeway>(false); };
    factories["MinAtar/Asterix-v0"] = [] { return std::make_unique<MinAtarAsterix>(true); };
    factories["MinAtar/Asterix-v1"] = [] { return std::make_unique<MinAtarAsterix>(false); };
    factories["MinAtar/Seaquest-v0"] = [] { return std::make_unique<MinAtarSeaquest>(true); };
    factories["MinAtar/Seaquest-v1"] = [] { return std::make_unique<MinAtarSeaquest>(false); };
    factories["MinAtar/SpaceInvaders-v0"] = [] { return std::make_unique<MinAtarSpaceInvaders>(true); };
    factories["MinAtar/SpaceInvaders-v1"] = [] { return std::make_unique<MinAtarSpaceInvaders>(false); };
  }
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

std::unique_ptr<Env> make_env(const std::string& id) {
  EnvFactory f;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.factories.find(id);
    if (it == r.factories.end()) {
      std::vector<std::string> ids;
      for (const auto& [k, v] : r.factories) ids.push_back(k);
      throw InputError(fmt::format("make_env: id is \"{}\", but must be one of: {}", id, fmt::join(ids, ", ")));
    }
    f = it->second;
  }
  auto env = f();
  HERD_CHECK(env != nullptr, "make_env: the factory of \"{}\" returned null", id);
  return env;
}

void register_env(const std::string& id, EnvFactory factory) {
  HERD_REQUIRE(!id.empty(), "register_env: id is empty, but must be a name");
  HERD_REQUIRE(static_cast<bool>(factory), "register_env: factory of \"{}\" is null", id);
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.factories[id] = std::move(factory);
}

bool is_registered(const std::string& id) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.factories.count(id) > 0;
}

std::vector<std::string> registered_env_ids() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<std::string> ids;
  for (const auto& [k, v] : r.factories) ids.push_back(k);
  return ids;
}

}  // namespace herd::rl
