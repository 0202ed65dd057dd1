// Geometry: the shape of one attention layer, and the rules that make a shape valid.
//
// A GeometrySpec is what a user, a config file or a preset states (optional fields stay absent when
// the source omits them). resolve_geometry() checks every rule, reports every violation at once as an
// InputError, and returns an immutable Geometry whose derived values (head_dim, num_kv_heads,
// rotary_dim, scale) are fixed. head_dim is derived as hidden_size / num_heads only when it is absent,
// and only in resolve_head_dim(); nothing else in attncheck may divide hidden_size by num_heads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/model/latent_attention.hpp"
#include "core/model/layer_kinds.hpp"
#include "core/model/rope_scaling.hpp"

namespace attncheck {

enum class HeadDimSource { explicit_value, derived };
enum class ScaleSource { head_dim, query_pre_attn_scalar, attention_multiplier, latent_qk_head_dim };

std::string_view to_string(HeadDimSource source);  // "explicit" | "derived"
// "head_dim" | "query_pre_attn_scalar" | "attention_multiplier" | "latent_qk_head_dim" (latent attention:
// qk_head_dim^-0.5, times yarn_mscale(factor, mscale_all_dim)^2 when the yarn scaling states mscale_all_dim)
std::string_view to_string(ScaleSource source);

// Upper bound on hidden_size and head_dim: keeps widths and parameter counts exact in int64.
inline constexpr std::int64_t kMaxDimension = std::int64_t{1} << 20;
// Upper bound on head counts (real models have at most a few hundred): keeps per-head and per-rank
// output bounded, so no input makes `attncheck plan` run for minutes or print gigabytes.
inline constexpr std::int64_t kMaxHeads = 4096;

struct GeometrySpec {
  std::int64_t hidden_size = 0;              // residual width entering and leaving the layer
  std::int64_t num_heads = 0;                // query heads H_q
  std::optional<std::int64_t> num_kv_heads;  // H_kv; absent = num_heads (plain MHA)
  std::optional<std::int64_t> head_dim;      // absent = hidden_size / num_heads, which must divide
  std::optional<double> rotary_pct;          // rotary_dim = int(head_dim * rotary_pct), as NeoX/HF
  std::optional<std::int64_t> rotary_dim;    // channels rotated; absent with rotary_pct absent = head_dim
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;  // transformers' rope_type and its parameters (rope_scaling.hpp)
  RopeStyle rope_style = RopeStyle::half_split;
  QkNorm qk_norm = QkNorm::none;
  double qk_norm_eps = 1e-6;
  bool qkv_bias = false;
  bool out_bias = false;
  std::optional<double> query_pre_attn_scalar;  // scale = query_pre_attn_scalar^-0.5 (Gemma)
  std::optional<double> attention_multiplier;   // scale = attention_multiplier itself (Granite)
  std::optional<double> softcap;                // scores -> softcap * tanh(scores / softcap)
  std::optional<std::int64_t> sliding_window;   // query i sees keys j with i - window < j (<= i if causal)
  bool causal = true;                           // bottom-right aligned when seq_q != seq_k
  // A learned logit s_h per query head that joins each softmax's denominator without a value (gpt-oss):
  // p_ij = exp(S_ij - m) / (sum_j exp(S_ij - m) + exp(s_h - m)), m the maximum over the row and s_h.
  // s_h is neither scaled nor capped; a query that sees no key puts all its weight on the sink (context 0).
  bool attention_sinks = false;
  // Multi-head latent attention (latent_attention.hpp). Then head_dim, rotary_pct and rotary_dim are
  // absent (q/k heads are qk_nope_head_dim + qk_rope_head_dim wide, RoPE on the last qk_rope_head_dim of
  // them), num_kv_heads is absent or num_heads (the expanded form has a K and V head per query head),
  // and there is no QK-norm, bias, query_pre_attn_scalar or attention_multiplier.
  std::optional<LatentAttentionSpec> latent;

  friend bool operator==(const GeometrySpec&, const GeometrySpec&) = default;
};

struct HeadDimResolution {
  std::int64_t head_dim = 0;
  HeadDimSource source = HeadDimSource::explicit_value;
  // hidden_size / num_heads when that divides exactly: what a framework that derives head_dim would
  // use. Shown beside an explicit head_dim to expose the trap (Qwen3-0.6B: 128 explicit, quotient 64).
  std::optional<std::int64_t> quotient;
};

// The one function that handles an omitted head_dim. Adds a violation (and returns nullopt) when the
// head_dim must be derived and hidden_size is not divisible by num_heads. Expects hidden_size >= 1
// and num_heads >= 1 (resolve_geometry checks those first).
class ViolationList;
std::optional<HeadDimResolution> resolve_head_dim(const GeometrySpec& spec, ViolationList& violations);

class Geometry {
 public:
  const GeometrySpec& spec() const { return spec_; }

  std::int64_t hidden_size() const { return spec_.hidden_size; }
  std::int64_t num_heads() const { return spec_.num_heads; }
  std::int64_t num_kv_heads() const { return num_kv_heads_; }
  std::int64_t head_dim() const { return head_dim_.head_dim; }
  HeadDimSource head_dim_source() const { return head_dim_.source; }
  std::optional<std::int64_t> quotient_head_dim() const { return head_dim_.quotient; }

  std::int64_t group_size() const { return spec_.num_heads / num_kv_heads_; }  // query heads per KV head
  std::int64_t query_width() const { return spec_.num_heads * head_dim(); }    // q_proj out (q_b_proj out)
  std::int64_t kv_width() const { return num_kv_heads_ * head_dim(); }         // k_proj / v_proj out
  std::int64_t qkv_width() const { return query_width() + 2 * kv_width(); }    // fused QKV rows (plain layers)
  // Value heads: head_dim wide in a plain layer, v_head_dim in a latent one. value_width() is the
  // context's width and o_proj's input: query_width() in a plain layer, num_heads * v_head_dim in MLA.
  std::int64_t v_head_dim() const { return spec_.latent ? spec_.latent->v_head_dim : head_dim(); }
  std::int64_t value_width() const { return spec_.num_heads * v_head_dim(); }
  // Multi-head latent attention (latent_attention.hpp), or absent for a plain layer.
  bool is_latent() const { return spec_.latent.has_value(); }
  const std::optional<LatentAttentionSpec>& latent() const { return spec_.latent; }
  // The first channel of a q/k head that RoPE rotates: 0 in a plain layer (the first rotary_dim
  // channels), qk_nope_head_dim in MLA (the last qk_rope_head_dim).
  std::int64_t rope_offset() const { return spec_.latent ? spec_.latent->qk_nope_head_dim : 0; }

  std::int64_t rotary_dim() const { return rotary_dim_; }
  double rope_theta() const { return spec_.rope_theta; }
  const RopeScaling& rope_scaling() const { return spec_.rope_scaling; }
  RopeStyle rope_style() const { return spec_.rope_style; }
  QkNorm qk_norm() const { return spec_.qk_norm; }
  double qk_norm_eps() const { return spec_.qk_norm_eps; }
  // Whole-width QK-norm: q_norm / k_norm are [query_width] / [kv_width] and shard with their heads.
  bool qk_norm_full_width() const { return spec_.qk_norm == QkNorm::rms_full_width; }
  bool qkv_bias() const { return spec_.qkv_bias; }
  bool out_bias() const { return spec_.out_bias; }
  double scale() const { return scale_; }
  ScaleSource scale_source() const { return scale_source_; }
  std::optional<double> softcap() const { return spec_.softcap; }
  std::optional<std::int64_t> sliding_window() const { return spec_.sliding_window; }
  bool causal() const { return spec_.causal; }
  bool attention_sinks() const { return spec_.attention_sinks; }

  friend bool operator==(const Geometry& a, const Geometry& b) { return a.spec_ == b.spec_; }

 private:
  friend Geometry resolve_geometry(const GeometrySpec& spec);
  Geometry() = default;

  GeometrySpec spec_;
  HeadDimResolution head_dim_;
  std::int64_t num_kv_heads_ = 0;
  std::int64_t rotary_dim_ = 0;
  double scale_ = 0.0;
  ScaleSource scale_source_ = ScaleSource::head_dim;
};

// Checks every rule and throws InputError("invalid geometry", ...) listing each violation with the
// field, its value, the rule and a nearby valid value.
Geometry resolve_geometry(const GeometrySpec& spec);

}  // namespace attncheck
