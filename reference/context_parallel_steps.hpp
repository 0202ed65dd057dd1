// The steps of a context-parallel run (context_parallel.hpp) and of decoding after it
// (context_parallel_decode.hpp) that frameworks have got wrong, in one class both use: neither of those two
// files includes the other's header for it.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/model/case.hpp"
#include "core/model/parallel_layout.hpp"
#include "reference/attention_head.hpp"

namespace attncheck::reference {

// The most (query block, key block) attention blocks a context-parallel run takes on (the ring's forward, or
// decoding): a bound on work, never on time.
inline constexpr std::int64_t kMaxContextParallelBlocks = std::int64_t{1} << 24;

// The steps of a context-parallel run that frameworks have got wrong, each a virtual function whose default is
// the right one. run_reference_cp takes the defaults, run_context_parallel any others:
// mutants/context_parallel_mutants.cpp overrides one each. (The oracle a context-parallel run is held to is
// reference-tp, never this code.)
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
  virtual std::vector<std::int64_t> gathered_sequence(const Geometry& geometry, std::int64_t tp_size, const CpSpec& cp,
                                                      std::int64_t seq) const;
};

}  // namespace attncheck::reference
