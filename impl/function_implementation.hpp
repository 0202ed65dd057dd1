// An implementation that is a function of the case (the fp64 references, the mutants): its Result is
// returned under golden-file names.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "core/model/result.hpp"
#include "impl/implementation.hpp"

namespace attncheck::impl {

std::unique_ptr<Implementation> function_implementation(std::string name, bool sharded,
                                                        std::function<Result(const Case&)> run);

}  // namespace attncheck::impl
