#include "herd/rl/env_library.hpp"

#include <map>
#include <mutex>
#include <new>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "herd/core/error.hpp"
#include "herd/core/shared_library.hpp"
#include "herd/rl/c_env.hpp"

namespace herd::rl {
namespace {

struct Loaded {
  SharedLibrary library;
  herd_env_spec spec;
};

struct Libraries {
  std::mutex mutex;
  std::map<std::pair<std::string, std::string>, Loaded> loaded;  // (path, symbol)
  std::set<std::string> ids;
};

Libraries& libraries() {
  static Libraries l;
  return l;
}

}  // namespace

void load_env_library(const std::string& path, const std::string& symbol, const std::string& id) {
  Libraries& l = libraries();
  std::lock_guard<std::mutex> lock(l.mutex);
  auto it = l.loaded.find({path, symbol});
  if (it == l.loaded.end()) {
    SharedLibrary lib(path);
    const auto fill = reinterpret_cast<herd_env_spec_fn>(lib.function(symbol));
    // A library built against a newer c_env.h fills a longer struct (fields are appended):
    // give it zeroed room past this herd's struct, and refuse a spec that set any of it,
    // instead of letting it write past the end of ours.
    constexpr std::size_t kRoom = 4096;
    alignas(herd_env_spec) unsigned char buffer[sizeof(herd_env_spec) + kRoom] = {};
    auto* filled = new (buffer) herd_env_spec{};
    const std::int32_t status = fill(filled);
    if (status != 0)
      throw InputError(
          fmt::format("{} in '{}' returned status {}, but must return 0 after filling the spec", symbol, path, status));
    for (std::size_t i = sizeof(herd_env_spec); i < sizeof(buffer); ++i)
      if (buffer[i] != 0)
        throw InputError(fmt::format(
            "{} in '{}' wrote at byte offset {} of the spec, past the {} bytes of this herd's herd_env_spec: the "
            "library was built against a newer herd/rl/c_env.h, whose fields this herd-rl does not know; rebuild it "
            "against this herd's header",
            symbol, path, i, sizeof(herd_env_spec)));
    const herd_env_spec spec = *filled;
    it = l.loaded.emplace(std::make_pair(path, symbol), Loaded{std::move(lib), spec}).first;
  }
  try {
    register_c_env(id, it->second.spec);
  } catch (const InputError& e) {
    // A bad spec stays bad: forget it, so that a rebuilt library is read again.
    l.loaded.erase(it);
    throw InputError(fmt::format("the spec filled by {} in '{}' is invalid: {}", symbol, path, e.what()));
  }
  l.ids.insert(id);
}

bool is_library_env(const std::string& id) {
  Libraries& l = libraries();
  std::lock_guard<std::mutex> lock(l.mutex);
  return l.ids.count(id) != 0;
}

}  // namespace herd::rl
