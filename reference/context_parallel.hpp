// The fp64 reference under a context-parallel layout (core/model/parallel_layout.hpp) over the case's TP
// plan: every (tp, cp) rank projects only its own chunks' tokens and runs o_proj on them, and the
// communication is written out, sums in a fixed order:
//   ulysses: the first all-to-all gathers, for each CP rank, all tokens of its heads (its share of its TP
//     rank's query heads and the KV heads they read; a KV head replicated on several CP ranks is sent to
//     each); attention runs over the whole sequence; the second all-to-all returns each chunk's context. The
//     backward sends d(context) the same way and returns d(q), d(k), d(v), a replicated KV head's gradient
//     summed over its CP ranks in CP order.
//   ring: each CP rank keeps its query chunks; in step s it attends them to the K/V chunks of CP rank
//     c - s (mod CP), each query chunk against each key chunk with the mask of their global positions, and
//     merges the partial results by log-sum-exp in step order (the sinks' share added once, at the end). The
//     backward recomputes each block's probabilities from the final log-sum-exp and D = rowsum(dO o O)
//     (attention_block.hpp); d(k) and d(v) are sent back to the chunk's owner, summed in the order of the
//     query ranks that computed them.
// Each TP rank's gradients are its CP ranks' summed in CP order, then reduced over TP as run_reference_tp
// does; the Result is shaped as run_reference_tp's (per-rank gradients per TP rank).
//
// A whole-width QK-norm's two all-reduces run over the TP ranks for each CP rank's tokens (a CP rank's
// tokens are its own); longrope's factors are the whole call's (a chunk's own largest position would choose
// others). Decoding after a CP prefill: context_parallel_decode.hpp. Not yet modelled: latent attention and
// intermediates (InputError naming them).
#pragma once

#include "core/model/case.hpp"
#include "core/model/parallel_layout.hpp"
#include "core/model/result.hpp"
#include "reference/context_parallel_steps.hpp"
#include "reference/reference.hpp"

namespace attncheck::reference {

// The reference: the default steps; a non-finite value anywhere is an InputError (no valid answer exists).
// decode/out, when asked, is decoding after a CP prefill (context_parallel_decode.hpp).
Result run_reference_cp(const Case& test_case, const CpSpec& cp, const RunOptions& options = {});

// InputError naming what the context-parallel reference would refuse of the case under `cp` (latent attention; a
// ring or a decode schedule beyond its work bound, kMaxContextParallelBlocks), before anything runs: `golden make`
// writes no CP golden its reference then refuses.
void check_context_parallel_case(const Case& test_case, const CpSpec& cp);

// Any steps (a mutant's), the result as computed: a NaN is its answer, for compare to judge.
Result run_context_parallel(const Case& test_case, const CpSpec& cp, const RunOptions& options,
                            const ContextParallelSteps& steps);

}  // namespace attncheck::reference
