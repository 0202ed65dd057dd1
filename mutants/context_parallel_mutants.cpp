// The mutants of context parallelism: the context-parallel reference (reference/context_parallel.hpp) with one
// of its steps (ContextParallelSteps) done as a framework got it wrong. Each runs only cases that state a
// context-parallel layout (others are unsupported, by name) and `attncheck mutants` fuzzes it with the
// generators' context-parallel profile; its oracle is reference-tp, which knows nothing of CP.
#include <algorithm>
#include <cmath>
#include <limits>

#include "impl/implementation.hpp"
#include "mutants/catalog.hpp"
#include "reference/context_parallel.hpp"

namespace attncheck::mutants {

namespace {

// The ring's block mask from chunk-local indices: every (query chunk, key chunk) pair masked as if both began
// at 0, so a query sees the keys of a later chunk and misses those of an earlier one beyond its own index.
class MaskFromLocalPositions : public reference::ContextParallelSteps {
  reference::MaskSpec block_mask(const Geometry& geometry, const IndexRange& q, const IndexRange& k,
                      std::int64_t key_length) const override {
    reference::MaskSpec mask = reference::MaskSpec::for_geometry(geometry, q.size(), k.size(), key_length - k.begin);
    mask.key_offset = 0;
    mask.key_count = k.size();
    return mask;
  }
};

// RoPE positions restarting in every chunk (Megatron-LM#5243: packed sequences under CP took "[0,3,0,3]"
// instead of "[0,3,4,7]"): a chunk's tokens rotated with the position ids of the row's first tokens.
class RopePositionsPerChunk : public reference::ContextParallelSteps {
  std::int64_t position(const Inputs& inputs, std::int64_t b, std::int64_t s, const IndexRange& chunk) const override {
    return inputs.positions[b * inputs.seq + (s - chunk.begin)];
  }
};

// The ring's backward meeting the first step's K/V at every step (diffusers#14265: "every ring iteration of
// the backward re-computes gradients against the same iteration-0 KV").
class BackwardStaleKv : public reference::ContextParallelSteps {
  std::int64_t backward_kv_source(std::int64_t cp_rank, std::int64_t, std::int64_t) const override { return cp_rank; }
};

// The ring's backward keeping the d(k), d(v) of other ranks' chunks where they were computed: only each
// rank's own chunks get their gradients (the "KV gradient not returned around the ring").
class KvGradientNotReturned : public reference::ContextParallelSteps {
  bool returns_kv_gradient(std::int64_t step) const override { return step == 0; }
};

// Ulysses past a TP rank's KV heads reading KV head cp_rank mod H_kv_local, as if the heads were dealt round
// robin, instead of cp_rank / (CP / H_kv_local): the query heads of a CP rank then read another group's KV head.
class UlyssesKvHeadRoundRobin : public reference::ContextParallelSteps {
  std::int64_t ulysses_kv_first(const ParallelLayout& layout, int tp_rank, std::int64_t cp_rank) const override {
    const std::int64_t local_kv = layout.tp.ranks[tp_rank].kv_heads.size();
    if (local_kv >= layout.cp.cp_size) return ContextParallelSteps::ulysses_kv_first(layout, tp_rank, cp_rank);
    return cp_rank % local_kv;
  }
};

// The ring's log-sum-exp merge shifted by the running total instead of the larger side:
// total + log(1 + exp(partial - total)), ring-flash-attention's form until zhuzilin/ring-flash-attention#30
// ("fix exp overflow when updating lse"; seen as a training failure, jzhang38/EasyContext#14). Its lse was
// float32, so exp overflows once a later block's log-sum-exp exceeds the running one by 88.7; then the merge
// is inf and the rows' weights turn 0 and NaN. Emulated here with fp32's exp range and fp64's precision, so
// that only the overflow, the bug, shows (an fp32 merge's rounding would fail the fp64 contract by itself).
// The generators' context-parallel profile draws logits of order 10^2 to reach it.
class LseMergeWithoutMaxShift : public reference::ContextParallelSteps {
  double merged_log_sum_exp(double total, double partial) const override {
    const double exponent = partial - total;
    const double grown = exponent > kFloatExpLimit ? std::numeric_limits<double>::infinity() : std::exp(exponent);
    return total + std::log(1.0 + grown);
  }
  // log(FLT_MAX): beyond it a float exp is inf.
  static constexpr double kFloatExpLimit = 88.72283905206835;
};

// The output's gather undoing the other chunking than the one the inputs were split by (ms-swift#10071: the
// zigzag reconstruction of load-balanced ring attention applied to a contiguous split): a load-balanced ring's
// gathered rows put back as if contiguous, a contiguous one's as if load-balanced (2 CP chunks, rank c holding
// c and 2 CP - 1 - c). The same for Ulysses, whose split is contiguous, taken as load-balanced.
class GatherUndoesOtherChunking : public reference::ContextParallelSteps {
  std::vector<std::int64_t> gathered_sequence(const Geometry& geometry, std::int64_t tp_size, const CpSpec& cp,
                                              std::int64_t seq) const override {
    const bool load_balanced = cp.scheme == CpScheme::ring && cp.load_balanced;
    const CpSpec other{.cp_size = cp.cp_size, .scheme = CpScheme::ring, .load_balanced = !load_balanced};
    return ContextParallelSteps::gathered_sequence(geometry, tp_size, other, seq);
  }
};

// Decoding after a CP prefill, the ranks' partials merged by vLLM's Triton merge_attn_states before
// vllm-project/vllm#39148: max = max(lse_a, lse_b), weights exp(lse - max) / their sum, with no case for two
// partials that both see no key: -inf - (-inf) is NaN. A query that sees no key on two CP ranks in a row (a
// window shorter than the ranks' spread, padding) turns NaN.
class MergeOfEmptyPartialsUnguarded : public reference::ContextParallelSteps {
  MergeWeights rank_merge_weights(double total, double partial) const override {
    const double high = std::max(total, partial);
    const double total_weight = std::exp(total - high), partial_weight = std::exp(partial - high);
    const double sum = total_weight + partial_weight;
    return {.total = total_weight / sum, .partial = partial_weight / sum, .merged = high + std::log(sum)};
  }
};

// The weights' gradients not all-reduced over the CP ranks: each CP rank holds q/k/v/o_proj whole but computes
// their gradient from its own tokens, so without the reduction (a CP group left out of the data-parallel
// gradient all-reduce) a TP rank's gradients are its first CP rank's part alone. d(x) is unaffected: each token's
// belongs to the rank that holds it.
class WeightGradientsNotReducedOverCp : public reference::ContextParallelSteps {
  bool reduces_weight_gradients_over_cp() const override { return false; }
};

template <class Steps>
std::function<Result(const Case&)> run_with(std::string name) {
  return [name = std::move(name)](const Case& test_case) {
    if (!test_case.context_parallel) {
      throw impl::Unsupported(name, "a case without a context-parallel layout: this mutant runs the layout a case "
                                    "states (fuzz --profile context-parallel)");
    }
    return reference::run_context_parallel(test_case, *test_case.context_parallel, {}, Steps());
  };
}

template <class Steps>
Mutant cp_mutant(const std::string& name, std::string bug, std::string source = "") {
  const std::string full_name = "mutant-" + name;
  return {.name = full_name,
          .bug = std::move(bug),
          .sharded = true,
          .run = run_with<Steps>(full_name),
          .source = std::move(source),
          .context_parallel = true};
}

}  // namespace

std::vector<Mutant> context_parallel_mutants() {
  return {
      cp_mutant<MaskFromLocalPositions>("cp-ring-mask-local-positions",
                                        "ring attention: each block's causal mask from chunk-local instead of global "
                                        "positions"),
      cp_mutant<RopePositionsPerChunk>("megatron-lm-5243-cp-rope-positions-per-chunk",
                                       "context parallel: RoPE positions restart in every chunk",
                                       "NVIDIA/Megatron-LM#5243"),
      cp_mutant<BackwardStaleKv>("diffusers-14265-ring-backward-stale-kv",
                                 "ring attention backward: every step meets the first step's K/V",
                                 "huggingface/diffusers#14265"),
      cp_mutant<KvGradientNotReturned>("cp-ring-kv-grad-not-returned",
                                       "ring attention backward: d(k), d(v) of other ranks' chunks not sent back"),
      cp_mutant<UlyssesKvHeadRoundRobin>("cp-ulysses-kv-head-round-robin",
                                         "Ulysses past a TP rank's KV heads: CP rank c reads KV head c mod H_kv "
                                         "instead of c / (CP / H_kv)"),
      cp_mutant<LseMergeWithoutMaxShift>("cp-ring-lse-merge-without-max-shift",
                                         "ring attention: partial results merged by lse + log(1 + exp(block_lse - "
                                         "lse)), shifted by the running lse instead of the larger",
                                         "zhuzilin/ring-flash-attention#30"),
      cp_mutant<GatherUndoesOtherChunking>("ms-swift-10071-cp-gather-undoes-other-chunking",
                                           "context parallel: the output's gather undoes the other chunking "
                                           "(load-balanced zigzag vs contiguous) than the inputs were split by",
                                           "modelscope/ms-swift#10071"),
      cp_mutant<MergeOfEmptyPartialsUnguarded>("vllm-39148-cp-decode-merge-of-empty-partials-nan",
                                               "decoding after a CP prefill: two ranks' partials that both see no "
                                               "key merged to NaN (-inf - -inf)",
                                               "vllm-project/vllm#39148"),
      cp_mutant<WeightGradientsNotReducedOverCp>("cp-weight-grads-not-reduced-over-cp",
                                                 "context parallel: a TP rank's weight gradients are its first CP "
                                                 "rank's own part, not all-reduced over the CP ranks"),
  };
}

}  // namespace attncheck::mutants
