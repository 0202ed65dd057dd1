// The mutants of multi-head latent attention: the naive latent layer (naive_latent_layer.hpp) with one step
// done the way an MLA implementation got it wrong, each from a failure mode real frameworks shipped or the
// issue tracker shows (the source where there is one).
#include <cmath>

#include "core/model/rope_frequencies.hpp"
#include "core/tp/tp_shard.hpp"
#include "mutants/catalog.hpp"
#include "mutants/naive_latent_layer.hpp"

namespace attncheck::mutants {

namespace {

// Values padded to the q/k head width (as flash kernels need one head width), then the context cropped to
// num_heads * v_head_dim columns as one block instead of each head's first v_head_dim: head h > 0 reads the
// padding and the next head's channels.
class ContextCroppedAsOneBlock : public NaiveLatentLayer {
  std::vector<std::int64_t> o_proj_input_columns(const LatentAttentionSpec& latent, std::int64_t heads) const override {
    const std::int64_t padded = latent.qk_head_dim(), v_dim = latent.v_head_dim;
    std::vector<std::int64_t> columns(static_cast<std::size_t>(heads * v_dim));
    for (std::size_t j = 0; j < columns.size(); ++j) {
      const std::int64_t head = static_cast<std::int64_t>(j) / padded, channel = static_cast<std::int64_t>(j) % padded;
      columns[j] = channel < v_dim ? head * v_dim + channel : -1;
    }
    return columns;
  }
};

// RoPE on each q/k head's first qk_rope_head_dim channels (a GPT-NeoX-style partial rotary) instead of its
// last: the no-RoPE part rotates and the shared k_pe does not.
class RopeOnFirstChannels : public NaiveLatentLayer {
  std::int64_t rope_first_channel(const LatentAttentionSpec&) const override { return 0; }
};

// kv_a_proj_with_mqa's output split k_pe first, then the latent (DeepSeek's layout is the latent first): a
// framework's weight loader or split reading the compressed projection in the other order.
class KPeRowsFirst : public NaiveLatentLayer {
  bool k_pe_rows_first() const override { return true; }
};

// The softmax scale from the value head width: v_head_dim^-0.5 (times yarn's mscale^2) instead of qk_head_dim's.
class ScaleFromValueWidth : public NaiveLatentLayer {
  double score_scale(const Geometry& geometry) const override {
    return geometry.scale() * std::sqrt(static_cast<double>(geometry.head_dim()) / static_cast<double>(geometry.v_head_dim()));
  }
};

// The softmax scale without yarn's mscale(factor, mscale_all_dim)^2 (only the cos/sin factor applied, which is
// 1 for DeepSeek's and Kimi's configs).
class MscaleMissing : public NaiveLatentLayer {
  double score_scale(const Geometry& geometry) const override {
    return std::pow(static_cast<double>(geometry.head_dim()), -0.5);
  }
};

// Absorbed decoding that caches the latent before kv_a_layernorm.
class AbsorbedLatentUnnormed : public NaiveLatentLayer {
  bool decode_absorbed() const override { return true; }
  bool absorbed_cache_normed() const override { return false; }
};

// Absorbed decoding that caches k_pe before RoPE and rotates the whole cache at read time, with the call's
// last position for every key.
class AbsorbedRopeAtRead : public NaiveLatentLayer {
  bool decode_absorbed() const override { return true; }
  bool absorbed_k_pe_rotated_when_cached() const override { return false; }
};

// k_pe's gradient not reduced over TP ranks: each rank keeps its own heads' share of kv_a_proj_with_mqa's
// k_pe rows (TransformerEngine #1975: MLA's k_pos_emb, expanded to the local heads, never all-reduced when
// linear_kv_down_proj is column-parallel). Everything else is reduced.
class KPeGradientUnreduced : public NaiveLatentLayer {
  std::vector<Parameters> reduce_gradients(const std::vector<Parameters>& partials, const TpPlan& plan) const override {
    std::vector<Parameters> reduced = NaiveLatentLayer::reduce_gradients(partials, plan);
    const std::int64_t lora = plan.geometry.latent()->kv_lora_rank;
    for (std::size_t r = 0; r < reduced.size(); ++r) {
      Tensor& rows = *reduced[r].kv_a_proj_with_mqa;
      const Tensor& own = *partials[r].kv_a_proj_with_mqa;
      const std::int64_t hidden = rows.shape[1];
      std::copy(own.values.begin() + lora * hidden, own.values.end(), rows.values.begin() + lora * hidden);
    }
    return reduced;
  }
};

// The latent norms' gradients not all-reduced: each rank keeps its own heads' share of q_a_layernorm's and
// kv_a_layernorm's gradient (a norm replicated on every rank whose gradient hook was never registered).
class LatentNormGradientsUnreduced : public NaiveLatentLayer {
  std::vector<Parameters> reduce_gradients(const std::vector<Parameters>& partials, const TpPlan& plan) const override {
    std::vector<Parameters> reduced = NaiveLatentLayer::reduce_gradients(partials, plan);
    for (std::size_t r = 0; r < reduced.size(); ++r) {
      reduced[r].kv_a_layernorm = partials[r].kv_a_layernorm;
      if (partials[r].q_a_layernorm) reduced[r].q_a_layernorm = partials[r].q_a_layernorm;
    }
    return reduced;
  }
};

// The replicated latent weights' gradients reduced twice (AReno #496: a second all-reduce on q_a_proj,
// kv_a_proj_with_mqa and their norms): every rank holds tp_size times the sum.
class LatentGradientsReducedTwice : public NaiveLatentLayer {
  std::vector<Parameters> reduce_gradients(const std::vector<Parameters>& partials, const TpPlan& plan) const override {
    std::vector<Parameters> reduced = NaiveLatentLayer::reduce_gradients(partials, plan);
    const double ranks = static_cast<double>(plan.tp_size);
    for (Parameters& rank : reduced) {
      for (auto* tensor : {&rank.q_a_proj, &rank.q_a_layernorm, &rank.kv_a_proj_with_mqa, &rank.kv_a_layernorm}) {
        if (*tensor) {
          for (double& value : (*tensor)->values) value *= ranks;
        }
      }
    }
    return reduced;
  }
};

template <class Layer>
std::function<Result(const Case&)> run_with() {
  return [](const Case& test_case) { return Layer().run(test_case); };
}

Mutant latent_mutant(std::string name, std::string bug, std::function<Result(const Case&)> run,
                     std::string source = "") {
  return {.name = "mutant-" + std::move(name),
          .bug = std::move(bug),
          .sharded = true,
          .run = std::move(run),
          .source = std::move(source),
          .latent = true};
}

}  // namespace

std::vector<Mutant> latent_mutants() {
  return {
      latent_mutant("mla-context-cropped-as-one-block",
                    "MLA: values padded to the q/k head width, the context cropped to num_heads * v_head_dim columns "
                    "as one block instead of per head",
                    run_with<ContextCroppedAsOneBlock>()),
      latent_mutant("mla-rope-on-first-channels",
                    "MLA: RoPE on each q/k head's first qk_rope_head_dim channels instead of its last (k_pe unrotated)",
                    run_with<RopeOnFirstChannels>()),
      latent_mutant("mla-k-pe-rows-first",
                    "MLA: kv_a_proj_with_mqa's output split as [k_pe, latent] instead of [latent, k_pe]",
                    run_with<KPeRowsFirst>()),
      latent_mutant("mla-scale-from-v-head-dim", "MLA: softmax scale v_head_dim^-0.5 (x mscale^2) instead of qk_head_dim's",
                    run_with<ScaleFromValueWidth>()),
      latent_mutant("transformers-47435-mla-mscale-missing",
                    "MLA: softmax scale qk_head_dim^-0.5 without yarn's mscale(factor, mscale_all_dim)^2",
                    run_with<MscaleMissing>(), "huggingface/transformers#47435, NVIDIA/Megatron-LM#1429"),
      latent_mutant("mla-absorbed-latent-unnormed", "MLA absorbed decoding: the latent cached before kv_a_layernorm",
                    run_with<AbsorbedLatentUnnormed>()),
      latent_mutant("mla-absorbed-rope-at-read",
                    "MLA absorbed decoding: k_pe cached unrotated, the cache rotated at the call's last position",
                    run_with<AbsorbedRopeAtRead>()),
      latent_mutant("transformer-engine-1975-k-pe-grad-unreduced",
                    "MLA under TP: the shared k_pe's gradient (kv_a_proj_with_mqa's k_pe rows) not summed over ranks",
                    run_with<KPeGradientUnreduced>(), "NVIDIA/TransformerEngine#1975 (NVIDIA/Megatron-LM#1699)"),
      latent_mutant("mla-latent-norm-grads-unreduced",
                    "MLA under TP: q_a_layernorm's and kv_a_layernorm's gradients not summed over ranks",
                    run_with<LatentNormGradientsUnreduced>()),
      latent_mutant("areno-496-latent-grads-reduced-twice",
                    "MLA under TP: the replicated latent weights' gradients all-reduced twice (tp_size x the sum)",
                    run_with<LatentGradientsReducedTwice>(), "inclusionAI/AReno#496"),
  };
}

}  // namespace attncheck::mutants
