#include "impl/implementation.hpp"

#include <fmt/format.h>

namespace attncheck::impl {

Unsupported::Unsupported(const std::string& implementation, const std::string& reason)
    : InputError(fmt::format("{} cannot run this case", implementation), {{"--impl", implementation, reason, ""}}) {}

const DeclinedParts& Implementation::declined() const {
  static const DeclinedParts nothing;
  return nothing;
}

}  // namespace attncheck::impl
