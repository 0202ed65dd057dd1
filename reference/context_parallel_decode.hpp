// KV-cache decoding after a context-parallel prefill (inputs.decode under the case's layout), as decode context
// parallelism (vLLM's DCP, Megatron-Core's CP inference) runs it:
//   - the prefill call is split as the layout splits a sequence (its P tokens cut into the layout's chunks), and
//     each CP rank caches the K/V of its own chunks;
//   - each later step's K/V go to one CP rank, round robin by sequence index (token t on CP rank t mod CP: the
//     cache interleaved one token per rank, vLLM's default);
//   - every call's queries meet every CP rank's cache: each rank attends them over its cached keys (with the
//     mask of their global indices) and returns its partial context and log-sum-exp; the partials are merged
//     by log-sum-exp in CP order (a rank that sees no key of a query contributes nothing to it), the sinks
//     once at the end, and o_proj runs on the merged context (TP ranks summed in order, o_bias once).
// Ulysses is the degenerate case: a CP rank caches every token of its heads, so each head has one partial.
// Every TP rank runs its own heads; a whole-width QK-norm's sums are all-reduced over TP per call; longrope
// takes each call's factors (as plain decoding does). Steps frameworks get wrong are the
// ContextParallelSteps (context_parallel.hpp) of the forward plus rank_merge_weights.
//
// Buffers (per TP rank): keys / values [batch * total, local KV width], row b * total + t for sequence index t,
// filled call by call; which CP rank holds a row is bookkeeping (a token's projection is the same anywhere).
#pragma once

#include "core/model/case.hpp"
#include "core/model/parallel_layout.hpp"
#include "core/model/tensor.hpp"
#include "reference/context_parallel_steps.hpp"

namespace attncheck::reference {

// InputError when decoding the case's schedule under `layout` would take more than kMaxContextParallelBlocks
// blocks (nothing to do without a schedule).
void refuse_unbounded_decode(const Case& test_case, const ParallelLayout& layout);

// decode/out [batch, decode.total(), hidden] of the case's schedule under `layout`. InputError when the
// schedule would take more than kMaxContextParallelBlocks blocks.
Tensor run_context_parallel_decode(const Case& test_case, const ParallelLayout& layout,
                                   const ContextParallelSteps& steps);

}  // namespace attncheck::reference
