// The registry of implementations by name. Each backend registers its own from its own folder, with a
// namespace-scope BackendRegistration (or PrefixRegistration) in a file of its own
// (reference/reference_implementations.cpp, torch_impl/torch_implementations.cpp,
// cuda_impl/cuda_implementations.cpp, mutants/mutant_implementations.cpp,
// exec_worker/exec_worker_registration.cpp). Those files are built as object libraries and linked
// into every program through the interface target attncheck_implementations
// (cmake/AttncheckImplementations.cmake), so a backend that is built is registered and one that is not
// (no LibTorch, no nvcc) is simply absent: the registry itself knows no backend. The torch and CUDA
// registrations are their plugins' manifests: names only, each opened through impl/plugin_loader, so a
// program loads LibTorch or CUDA only when it opens one of theirs.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "impl/implementation.hpp"

namespace attncheck::impl {

enum class ImplementationKind {
  default_run,  // correct and runnable on any machine: `attncheck run` and the property suite check it
  device,       // needs a GPU (cuda-*, torch-cuda-*): named explicitly, as ci/gpu-check does
  mutant,       // a deliberately broken implementation (mutants/)
  // correct and runnable anywhere, but only for cases that state what it needs (reference-cp: a
  // context-parallel layout): named explicitly, not part of `attncheck run` or the property suite's default set
  on_request,
};
std::string_view to_string(ImplementationKind kind);  // "default" | "device" | "mutant" | "on-request"

struct ImplementationEntry {
  std::string name;
  ImplementationKind kind = ImplementationKind::default_run;
  std::function<std::unique_ptr<Implementation>()> open;
};

// A family of implementations named by a prefix and a free-form rest: "exec:COMMAND" (the exec: worker,
// exec_worker/worker.hpp). `usage` is how listings and errors name the family; `open` gets the rest.
struct ImplementationPrefix {
  std::string prefix;  // "exec:"
  std::string usage;   // "exec:COMMAND"
  std::function<std::unique_ptr<Implementation>(const std::string& rest)> open;
};

// Registers a backend's entries. `order` places the backend in listings (reference 0, torch 10, cuda 20,
// mutants 90); entries are produced on first use of the registry, not during static initialisation.
class BackendRegistration {
 public:
  BackendRegistration(int order, std::function<std::vector<ImplementationEntry>()> entries);
};

// Registers a family of names by prefix. No registered name may start with a registered prefix, and no
// prefix with another (a logic_error on first use of the registry).
class PrefixRegistration {
 public:
  explicit PrefixRegistration(ImplementationPrefix prefix);
};

// The default-kind names, in listing order: what `attncheck run` and the property suite check.
std::vector<std::string> implementation_names();

// Every registered name with its kind: default ones first, then device, then mutants; within a kind,
// by backend order, then as the backend listed them.
struct RegisteredImplementation {
  std::string name;
  ImplementationKind kind;
};
std::vector<RegisteredImplementation> registered_implementations();

// Any registered name, or a registered prefix and its rest (`exec:COMMAND`); InputError listing the valid
// names and prefix usages for anything else.
std::unique_ptr<Implementation> open_implementation(const std::string& name);

}  // namespace attncheck::impl
