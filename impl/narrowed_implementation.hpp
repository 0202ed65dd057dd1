// An implementation seen through narrower capabilities (`fuzz --only / --without`): it runs as itself, but
// admits, and is offered, only what the narrowed statement includes, so that every check of a fuzz campaign
// (its cases, their shrinking, the fresh instances that reproduce a failure) uses the same admission.
#pragma once

#include <memory>

#include "impl/implementation.hpp"

namespace attncheck::impl {

std::unique_ptr<Implementation> narrowed(std::unique_ptr<Implementation> implementation, Capabilities capabilities);

}  // namespace attncheck::impl
