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

#include <cmath>
#include <limits>

#include "core/model/case.hpp"
#include "core/model/parallel_layout.hpp"
#include "core/model/result.hpp"
#include "reference/attention_head.hpp"
#include "reference/reference.hpp"

namespace attncheck::reference {

// The steps of a context-parallel run that frameworks have got wrong, each a virtual function whose default is
// the right one. run_reference_cp takes the defaults, run_context_parallel any others:
// mutants/context_parallel_mutants.cpp overrides one each. (The oracle a context-parallel run is held to is reference-tp, never this code.)
class ContextParallelSteps {
 public:
  virtual ~ContextParallelSteps() = default;
  // The RoPE position of sequence index s of batch row b, held in chunk `chunk`: the token's own position id.
  virtual std::int64_t position(const Inputs& inputs, std::int64_t b, std::int64_t s, const IndexRange& chunk) const;
  // Ring: the mask of query chunk q against key chunk k of a batch row, by their global sequence indices.
  virtual MaskSpec block_mask(const Geometry& geometry, const IndexRange& q, const IndexRange& k,
                              std::int64_t key_length) const;
  // Ring backward: the CP rank whose K/V chunks CP rank c's queries meet at step `step`: the forward's, c - step.
  virtual std::int64_t backward_kv_source(std::int64_t cp_rank, std::int64_t step, std::int64_t cp_size) const {
    return (cp_rank - step + cp_size) % cp_size;
  }
  // Ring: whether ring step `step`'s d(k) and d(v) reach the key chunk's owner (step 0: its own chunks).
  virtual bool returns_kv_gradient(std::int64_t /*step*/) const { return true; }
  // Ulysses: the first of its TP rank's local KV heads that a CP rank attends with: the layout's.
  virtual std::int64_t ulysses_kv_first(const ParallelLayout& layout, int tp_rank, std::int64_t cp_rank) const;
  // Ring: the log-sum-exp of two partial results' log-sum-exps (either finite), shifted by the larger so that
  // neither exp overflows. The merge weights each side's rows by exp(its lse - merged).
  virtual double merged_log_sum_exp(double total, double partial) const;
  // One block's partial result (rows `part`, log-sum-exp `partial`) merged into a running one (`target`, `total`):
  // a block that sees no key (-inf) is skipped, the first that does is taken as it is, later ones are weighted by
  // exp(lse - merged_log_sum_exp). The ring's steps and a decoding rank's cached runs merge this way.
  template <class Target, class Part>
  void merge_partial(Target&& target, double& total, const Part& part, double partial) const {
    constexpr double kNoKey = -std::numeric_limits<double>::infinity();
    if (partial == kNoKey) return;
    if (total == kNoKey) {
      target = part;
      total = partial;
      return;
    }
    const double merged = merged_log_sum_exp(total, partial);
    target = target * std::exp(total - merged) + part * std::exp(partial - merged);
    total = merged;
  }
  // Whether a TP rank's weight gradients are all-reduced over its CP ranks (each holds the weights whole and
  // computes their gradient from its own tokens only), or left as CP rank 0's own part.
  virtual bool reduces_weight_gradients_over_cp() const { return true; }
  // Decoding: the weights of two partial results (a running total over earlier CP ranks, and one rank's) of a
  // query and head, by their log-sum-exps, and the merged log-sum-exp. A side with no visible key (-inf) weighs
  // 0 and both at -inf merge to -inf (a query that sees no key has context 0).
  struct MergeWeights {
    double total = 0.0;
    double partial = 0.0;
    double merged = 0.0;
  };
  virtual MergeWeights rank_merge_weights(double total, double partial) const;
  // The all-gather of the output: for each row of the gathered buffer (CP rank 0's tokens in its chunk order,
  // then rank 1's, ...), the sequence index it is put back at, i.e. the layout's chunks undone. d(out) reaches
  // each rank through the same map (the gather's backward); x and d(x) follow the layout itself.
  virtual std::vector<std::int64_t> gathered_sequence(const Geometry& geometry, std::int64_t tp_size,
                                                      const CpSpec& cp, std::int64_t seq) const;
};

// The reference: the default steps; a non-finite value anywhere is an InputError (no valid answer exists).
// decode/out, when asked, is decoding after a CP prefill (context_parallel_decode.hpp).
Result run_reference_cp(const Case& test_case, const CpSpec& cp, const RunOptions& options = {});

// Any steps (a mutant's), the result as computed: a NaN is its answer, for compare to judge.
Result run_context_parallel(const Case& test_case, const CpSpec& cp, const RunOptions& options,
                            const ContextParallelSteps& steps);

}  // namespace attncheck::reference
