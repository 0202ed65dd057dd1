// The mutants of context parallelism: the context-parallel reference (reference/context_parallel.hpp) with one
// of its steps (ContextParallelSteps) done as a framework got it wrong. Each runs only cases that state a
// context-parallel layout (others are unsupported, by name) and `attncheck mutants` fuzzes it with the
// generators' context-parallel profile; its oracle is reference-tp, which knows nothing of CP.
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

template <class Steps>
std::function<Result(const Case&)> run_with(std::string name) {
  return [name = std::move(name)](const Case& test_case) {
    if (!test_case.context_parallel) {
      throw impl::Unsupported(name, "a case without a context-parallel layout: this mutant runs the layout a case "
                                    "states (fuzz --profile context-parallel)");
    }
    return reference::run_reference_cp(test_case, *test_case.context_parallel, {}, Steps());
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
  };
}

}  // namespace attncheck::mutants
