// The boundary between attncheck and a backend plugin: a shared object (lib/attncheck/libattncheck_NAME.so
// beside the program's folder) that impl/plugin_loader opens the first time one of its implementations
// is, so that commands which run no backend (plan, compare, golden inspect) never load LibTorch or CUDA.
//
// A plugin exports exactly these two C symbols (impl/plugin_exports.map); everything else in it is local.
// It links its own copies of attncheck's static libraries, so state shared with the program must pass
// through these calls: today none is (the one mutable global of the core, --max-memory, is not read by
// any backend). Exceptions cross the boundary as any C++ call's do (one compiler, one libstdc++; type
// identity by mangled name): an implementation's Unsupported and InputError reach the program's handlers.
#pragma once

#include "attncheck/plugin_abi_tag.hpp"  // generated: ATTNCHECK_PLUGIN_ABI (cmake/AttncheckPlugins.cmake)
#include "impl/implementation.hpp"

namespace attncheck::impl {

// Version, compiler and a digest of the headers whose types cross the boundary: a plugin whose tag
// differs was built from other sources or by another compiler and is refused by name, never called.
inline constexpr const char* kPluginAbi = ATTNCHECK_PLUGIN_ABI;

}  // namespace attncheck::impl

extern "C" {
// The tag the plugin was compiled with (kPluginAbi on its side).
const char* attncheck_plugin_abi();
// A new implementation called `name`, owned by the caller (deleted through its virtual destructor);
// nullptr for a name the plugin does not have.
attncheck::impl::Implementation* attncheck_plugin_open(const char* name);
}
