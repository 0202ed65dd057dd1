// An implementation that is a function of the case (the references, the mutants, the LibTorch and CUDA
// layers): its Result is returned under golden-file names. The function throws Unsupported for a case it
// cannot run (a backend translates its own refusals).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "core/model/result.hpp"
#include "impl/implementation.hpp"

namespace attncheck::impl {

// Whether the function runs multi-head latent attention (core/model/latent_attention.hpp). One that does
// not is never called with such a case: run() throws Unsupported naming MLA, so no implementation built for
// q/k/v projections reads a latent layer's weights as if it had them.
enum class LatentAttentionSupport { refused, runs };

std::unique_ptr<Implementation> function_implementation(
    std::string name, bool sharded, std::function<Result(const Case&)> run, Precision precision = Precision::fp64,
    RopeAngles rope_angles = RopeAngles::float32, LatentAttentionSupport latent = LatentAttentionSupport::refused);

}  // namespace attncheck::impl
