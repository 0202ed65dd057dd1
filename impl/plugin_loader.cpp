#include "impl/plugin_loader.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <system_error>

#include <fmt/format.h>

#include "core/errors/input_error.hpp"
#include "impl/plugin_abi.hpp"

namespace attncheck::impl {

namespace {

constexpr const char* kPluginDirVariable = "ATTNCHECK_PLUGIN_DIR";

[[noreturn]] void refuse(const std::string& plugin, const std::filesystem::path& file, const std::string& rule) {
  const char* override_dir = std::getenv(kPluginDirVariable);
  const std::string fix =
      override_dir != nullptr
          ? fmt::format("{} is set to '{}': point it at the folder holding libattncheck_{}.so of this build",
                        kPluginDirVariable, override_dir, plugin)
          : fmt::format(
                "the plugin is built into lib/attncheck/ beside the program's folder; rebuild, or set {} "
                "to the folder holding libattncheck_{}.so of this build",
                kPluginDirVariable, plugin);
  ViolationList violations;
  violations.add("plugin " + plugin, file.string(), rule, fix);
  violations.throw_if_any("backend plugin");
  std::abort();  // throw_if_any threw: there is a violation
}

// libattncheck_PLUGIN.so in plugin_directory(): the one place the file name is formed.
std::filesystem::path plugin_file(const std::string& plugin) {
  return plugin_directory() / fmt::format("libattncheck_{}.so", plugin);
}

using AbiFunction = const char* (*)();
using OpenFunction = Implementation* (*)(const char*);

struct LoadedPlugin {
  OpenFunction open = nullptr;
};

// dlopen's handle is never closed (see plugin_loader.hpp), so a loaded plugin is a pointer to its open().
LoadedPlugin load(const std::string& plugin) {
  static std::mutex mutex;
  static std::map<std::string, LoadedPlugin> loaded;
  const std::lock_guard lock(mutex);
  if (const auto found = loaded.find(plugin); found != loaded.end()) return found->second;

  const std::filesystem::path file = plugin_file(plugin);
  std::error_code error;
  if (!std::filesystem::is_regular_file(file, error)) refuse(plugin, file, "must be a file (it is absent)");
  // RTLD_LOCAL: the plugin's symbols never serve another plugin; RTLD_NOW: a missing library or symbol is
  // reported here, not at the first call.
  void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* reason = dlerror();
    refuse(plugin, file, fmt::format("must load (dlopen: {})", reason != nullptr ? reason : "no reason given"));
  }
  const auto abi = reinterpret_cast<AbiFunction>(dlsym(handle, "attncheck_plugin_abi"));
  const auto open = reinterpret_cast<OpenFunction>(dlsym(handle, "attncheck_plugin_open"));
  if (abi == nullptr || open == nullptr) {
    refuse(plugin, file, "must export attncheck_plugin_abi and attncheck_plugin_open (impl/plugin_abi.hpp)");
  }
  if (std::strcmp(abi(), kPluginAbi) != 0) {
    refuse(plugin, file,
           fmt::format("must be built from the same sources by the same compiler as this attncheck "
                       "(its ABI tag '{}', this program's '{}')",
                       abi(), kPluginAbi));
  }
  return loaded.emplace(plugin, LoadedPlugin{open}).first->second;
}

}  // namespace

std::filesystem::path plugin_directory() {
  if (const char* directory = std::getenv(kPluginDirVariable)) {
    if (*directory == '\0') {
      ViolationList violations;
      violations.add(kPluginDirVariable, "", "must name a folder when set",
                     "unset it to use lib/attncheck/ beside the program's folder");
      violations.throw_if_any("environment");
    }
    return directory;
  }
  std::error_code error;
  const std::filesystem::path program = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) {
    ViolationList violations;
    violations.add("/proc/self/exe", "unreadable", fmt::format("must name the running program ({})", error.message()),
                   fmt::format("set {} to the folder holding attncheck's plugins", kPluginDirVariable));
    violations.throw_if_any("backend plugin");
  }
  return program.parent_path().parent_path() / "lib" / "attncheck";
}

std::unique_ptr<Implementation> open_plugin_implementation(const std::string& plugin, const std::string& name) {
  const LoadedPlugin loaded = load(plugin);
  std::unique_ptr<Implementation> implementation(loaded.open(name.c_str()));
  if (implementation == nullptr) {
    refuse(plugin, plugin_file(plugin), fmt::format("must provide the implementation '{}' its manifest names", name));
  }
  return implementation;
}

}  // namespace attncheck::impl
