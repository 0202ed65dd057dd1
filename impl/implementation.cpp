#include "impl/implementation.hpp"

#include <fmt/format.h>

namespace attncheck::impl {

Unsupported::Unsupported(const std::string& implementation, const std::string& reason)
    : InputError(fmt::format("{} cannot run this case", implementation), {{"--impl", implementation, reason, ""}}) {}

}  // namespace attncheck::impl
