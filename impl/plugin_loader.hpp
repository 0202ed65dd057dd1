// Opens implementations that live in backend plugins (impl/plugin_abi.hpp): the registry holds each
// plugin's names (its manifest, compiled into the program), and the shared object is loaded with dlopen
// the first time one of them is opened, then kept for the life of the process (LibTorch and the CUDA
// libraries do not support being unloaded).
//
// Where plugins are: $ATTNCHECK_PLUGIN_DIR when set, else lib/attncheck/ beside the folder of the running
// program (/proc/self/exe), which is build/lib/attncheck/ for every program of a build tree (each sits
// one folder below build/) and PREFIX/lib/attncheck/ for PREFIX/bin/attncheck. No build path is compiled in.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "impl/implementation.hpp"

namespace attncheck::impl {

// The folder searched for libattncheck_PLUGIN.so; InputError naming ATTNCHECK_PLUGIN_DIR when it is set
// but empty.
std::filesystem::path plugin_directory();

// The implementation `name` from plugin `plugin` (libattncheck_PLUGIN.so). InputError naming the file,
// the loader's reason and ATTNCHECK_PLUGIN_DIR when the plugin is missing, cannot be loaded, was built
// from other sources (kPluginAbi differs) or lacks the name.
std::unique_ptr<Implementation> open_plugin_implementation(const std::string& plugin, const std::string& name);

}  // namespace attncheck::impl
