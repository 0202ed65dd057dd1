// An implementation that is a function of the case (the references, the mutants, the LibTorch and CUDA
// layers): its Result is returned under golden-file names. The function throws Unsupported for a case it
// cannot run (a backend translates its own refusals).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "core/capabilities/capabilities.hpp"
#include "core/model/result.hpp"
#include "impl/implementation.hpp"

namespace attncheck::impl {

// What a function implementation that states nothing is offered: every case but multi-head latent attention
// (core/model/latent_attention.hpp), which it is never called with: run() throws Unsupported naming the
// features outside, so no implementation built for q/k/v projections reads a latent layer's weights as if
// it had them.
Capabilities without_latent_attention();

// capabilities: what it states (a promise) or, unstated, the cases it is offered. run() refuses a case outside
// them by name (Unsupported, the function never called), so that a direct caller gets the same answer as
// one that admits cases first (impl/candidate_run.hpp).
std::unique_ptr<Implementation> function_implementation(std::string name, bool sharded,
                                                        std::function<Result(const Case&)> run,
                                                        Precision precision = Precision::fp64,
                                                        RopeAngles rope_angles = RopeAngles::float32,
                                                        Capabilities capabilities = without_latent_attention());

}  // namespace attncheck::impl
