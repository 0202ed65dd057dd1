#include "impl/implementation.hpp"

#include <fmt/format.h>

namespace attncheck::impl {

Unsupported::Unsupported(const std::string& implementation, const std::string& reason)
    : InputError(fmt::format("{} cannot run this case", implementation), {{"--impl", implementation, reason, ""}}) {}

NoAnswer::NoAnswer(const std::string& implementation, int seconds, const std::string& limit_source)
    : std::runtime_error(fmt::format("{}: no answer within {} s (the limit {} sets); it was stopped", implementation,
                                     seconds, limit_source)),
      seconds_(seconds) {}

const Capabilities& Implementation::capabilities() const {
  static const Capabilities everything = Capabilities::everything();
  return everything;
}

}  // namespace attncheck::impl
