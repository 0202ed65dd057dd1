// The fp64 reference for a latent-attention layer (core/model/latent_attention.hpp): the TP plan's ranks
// one after another on their shards (reference/latent_layer.hpp), partial outputs and d(x) summed in rank
// order, gradients assembled by core/tp/tp_shard (the replicated down-projections and latent norms summed
// over every rank), decode calls in the form RunOptions asks for. reference.cpp dispatches here.
#pragma once

#include <functional>

#include "core/model/case.hpp"
#include "core/model/result.hpp"
#include "reference/reference.hpp"

namespace attncheck::reference {

// on_rank_partial, when set, receives each rank's own gradients before any reduction.
Result run_latent_ranks(const Case& test_case, const TpPlan& plan, const RunOptions& options, const char* name,
                        bool report_rank_gradients,
                        const std::function<void(int rank, const Parameters& partial)>& on_rank_partial);

}  // namespace attncheck::reference
