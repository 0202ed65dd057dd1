#include "impl/registry.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>
#include <stdexcept>


namespace attncheck::impl {

std::string_view to_string(ImplementationKind kind) {
  switch (kind) {
    case ImplementationKind::default_run:
      return "default";
    case ImplementationKind::device:
      return "device";
    case ImplementationKind::mutant:
      return "mutant";
    case ImplementationKind::on_request:
      return "on-request";
  }
  return "default";
}

namespace {

struct Backend {
  int order = 0;
  std::function<std::vector<ImplementationEntry>()> entries;
};

// Filled by BackendRegistration objects during static initialisation (a function-local static, so it
// exists before the first of them runs, whatever the order of the object files).
std::vector<Backend>& backends() {
  static std::vector<Backend> registered;
  return registered;
}

std::vector<ImplementationPrefix>& prefixes() {
  static std::vector<ImplementationPrefix> registered;
  return registered;
}

// Every entry in listing order, built once on first use.
const std::vector<ImplementationEntry>& entries() {
  static const std::vector<ImplementationEntry> listed = [] {
    std::vector<Backend> ordered = backends();
    std::stable_sort(ordered.begin(), ordered.end(),
                     [](const Backend& a, const Backend& b) { return a.order < b.order; });
    std::vector<ImplementationEntry> all;
    for (const Backend& backend : ordered) {
      for (ImplementationEntry& entry : backend.entries()) all.push_back(std::move(entry));
    }
    std::stable_sort(all.begin(), all.end(), [](const ImplementationEntry& a, const ImplementationEntry& b) {
      return static_cast<int>(a.kind) < static_cast<int>(b.kind);
    });
    // A name registered twice, or one that a prefix would open instead, is a build's mistake.
    const auto shadowed = [](const std::string& name, const ImplementationPrefix* self) {
      return std::any_of(prefixes().begin(), prefixes().end(), [&](const ImplementationPrefix& prefix) {
        return &prefix != self && name.starts_with(prefix.prefix);
      });
    };
    std::set<std::string> names;
    for (const ImplementationEntry& entry : all) {
      if (!names.insert(entry.name).second || shadowed(entry.name, nullptr)) {
        throw std::logic_error(
            fmt::format("implementation registry: '{}' is registered twice or shadows a prefix", entry.name));
      }
    }
    for (const ImplementationPrefix& prefix : prefixes()) {
      if (prefix.prefix.empty() || shadowed(prefix.prefix, &prefix)) {
        throw std::logic_error(
            fmt::format("implementation registry: prefix '{}' is empty or overlaps another", prefix.prefix));
      }
    }
    return all;
  }();
  return listed;
}

}  // namespace

BackendRegistration::BackendRegistration(int order, std::function<std::vector<ImplementationEntry>()> entries) {
  backends().push_back({order, std::move(entries)});
}

PrefixRegistration::PrefixRegistration(ImplementationPrefix prefix) { prefixes().push_back(std::move(prefix)); }

std::vector<std::string> implementation_names() {
  std::vector<std::string> names;
  for (const ImplementationEntry& entry : entries()) {
    if (entry.kind == ImplementationKind::default_run) names.push_back(entry.name);
  }
  return names;
}

std::vector<RegisteredImplementation> registered_implementations() {
  std::vector<RegisteredImplementation> registered;
  for (const ImplementationEntry& entry : entries()) registered.push_back({entry.name, entry.kind});
  return registered;
}

std::unique_ptr<Implementation> open_implementation(const std::string& name) {
  for (const ImplementationEntry& entry : entries()) {
    if (entry.name == name) return entry.open();
  }
  for (const ImplementationPrefix& prefix : prefixes()) {
    if (name.starts_with(prefix.prefix)) return prefix.open(name.substr(prefix.prefix.size()));
  }
  std::vector<std::string> valid;
  for (const ImplementationEntry& entry : entries()) valid.push_back(entry.name);
  for (const ImplementationPrefix& prefix : prefixes()) valid.push_back(prefix.usage);
  ViolationList violations;
  violations.add("--impl", name, "must name an implementation attncheck has",
                 fmt::format("valid: {}", fmt::join(valid, ", ")));
  violations.throw_if_any("unknown implementation");
  return nullptr;
}

}  // namespace attncheck::impl
