// Multi-head latent attention (MLA: DeepSeek-V2, DeepSeek-V3, Kimi K2): the parameters that make a layer
// latent, and the rules they obey. Geometry (geometry.hpp) holds them as an optional part of the spec.
//
// Per token x [hidden_size] (Hugging Face's DeepseekV3Attention, names as its state dict has them):
//   q      = q_b_proj(q_a_layernorm(q_a_proj(x)))      with q_lora_rank; q_proj(x) without (DeepSeek-V2-Lite)
//                                                      [num_heads * qk_head_dim]; head h = [q_nope_h, q_pe_h]
//   kv_a   = kv_a_proj_with_mqa(x)                     [kv_lora_rank + qk_rope_head_dim] = [c_kv, k_pe]
//   c_kv_n = kv_a_layernorm(c_kv)                      the latent: what the absorbed cache stores
//   kv     = kv_b_proj(c_kv_n)                         [num_heads * (qk_nope_head_dim + v_head_dim)];
//                                                      head h = [k_nope_h, v_h]
//   k_h    = [k_nope_h, RoPE(k_pe)]                    k_pe: ONE rope part shared by every head
//   q_h    = [q_nope_h, RoPE(q_pe_h)]                  RoPE on the last qk_rope_head_dim channels only
//   out    = o_proj(concat_h softmax(scale q_h k_h^T) v_h)     o_proj: [hidden_size, num_heads * v_head_dim]
// The latent norms are RMSNorms over their whole width: y = x / sqrt(mean(x^2) + eps) * w.
// qk_head_dim = qk_nope_head_dim + qk_rope_head_dim is the q/k head width (the geometry's head_dim);
// v_head_dim the value head width; the config has no head_dim of its own, and hidden_size / num_heads
// plays no part.
//
// Decoding has two forms that must agree (reference/latent_layer.hpp): expanded (K and V decompressed
// per head and cached: num_heads * (qk_head_dim + v_head_dim) per token) and absorbed (kv_b_proj's key
// rows folded into the query and its value rows into the output; the cache holds c_kv_n and RoPE(k_pe):
// kv_lora_rank + qk_rope_head_dim per token, one "KV head" every query head reads).
#pragma once

#include <cstdint>
#include <optional>

namespace attncheck {

class ViolationList;

struct LatentAttentionSpec {
  std::optional<std::int64_t> q_lora_rank;  // absent: q_proj maps the hidden state to the heads directly
  std::int64_t kv_lora_rank = 0;            // width of the compressed KV latent c_kv
  std::int64_t qk_nope_head_dim = 0;        // per head, q/k channels without RoPE
  std::int64_t qk_rope_head_dim = 0;        // per head, q channels with RoPE; k's are shared by all heads
  std::int64_t v_head_dim = 0;              // per head, value channels (o_proj reads num_heads of them)
  double latent_norm_eps = 1e-6;            // q_a_layernorm and kv_a_layernorm (the config's rms_norm_eps)

  std::int64_t qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  // kv_b_proj rows per head: the head's k_nope rows, then its v rows.
  std::int64_t kv_b_rows_per_head() const { return qk_nope_head_dim + v_head_dim; }
  // kv_a_proj_with_mqa's rows: c_kv, then k_pe.
  std::int64_t kv_a_rows() const { return kv_lora_rank + qk_rope_head_dim; }
  // Cache elements per token, all heads: expanded K and V, or the absorbed latent and k_pe (which every
  // TP rank holds whole).
  std::int64_t expanded_cache_elements(std::int64_t num_heads) const {
    return num_heads * (qk_head_dim() + v_head_dim);
  }
  std::int64_t absorbed_cache_elements() const { return kv_lora_rank + qk_rope_head_dim; }

  friend bool operator==(const LatentAttentionSpec&, const LatentAttentionSpec&) = default;
};

// Adds a violation for each width outside [1, max_dimension] (q_lora_rank when present; qk_nope_head_dim
// may be 0, qk_rope_head_dim must be even) and for a negative or non-finite latent_norm_eps.
void check_latent_attention(const LatentAttentionSpec& latent, std::int64_t max_dimension, ViolationList& violations);

}  // namespace attncheck
