#include "core/model/latent_attention.hpp"

#include <cmath>
#include <string>

#include <fmt/format.h>

#include "core/errors/input_error.hpp"
#include "core/errors/nearby.hpp"

namespace attncheck {

void check_latent_attention(const LatentAttentionSpec& latent, std::int64_t max_dimension, ViolationList& violations) {
  const auto width = [&](const char* field, std::int64_t value, std::int64_t least, const char* example) {
    if (value >= least && value <= max_dimension) return;
    violations.add(field, std::to_string(value), fmt::format("must be an integer in [{}, {}]", least, max_dimension),
                   example);
  };
  if (latent.q_lora_rank) width("q_lora_rank", *latent.q_lora_rank, 1, "e.g. 1536 (DeepSeek-V3), or omit it (q_proj)");
  width("kv_lora_rank", latent.kv_lora_rank, 1, "e.g. 512 (DeepSeek-V3)");
  width("qk_nope_head_dim", latent.qk_nope_head_dim, 0, "e.g. 128 (DeepSeek-V3)");
  width("qk_rope_head_dim", latent.qk_rope_head_dim, 0, "e.g. 64 (DeepSeek-V3)");
  width("v_head_dim", latent.v_head_dim, 1, "e.g. 128 (DeepSeek-V3)");
  if (latent.qk_rope_head_dim % 2 != 0) {
    violations.add("qk_rope_head_dim", std::to_string(latent.qk_rope_head_dim),
                   "must be even: RoPE rotates channels in pairs",
                   "nearby valid: " + alternatives("qk_rope_head_dim",
                                                   {latent.qk_rope_head_dim - 1, latent.qk_rope_head_dim + 1}));
  }
  if (latent.qk_nope_head_dim + latent.qk_rope_head_dim < 1) {
    violations.add("qk_nope_head_dim", std::to_string(latent.qk_nope_head_dim),
                   "qk_nope_head_dim + qk_rope_head_dim (the q/k head width) must be >= 1",
                   "e.g. 128 + 64 (DeepSeek-V3)");
  }
  if (!std::isfinite(latent.latent_norm_eps) || latent.latent_norm_eps < 0) {
    violations.add("rms_norm_eps", format_number(latent.latent_norm_eps),
                   "must be a finite number >= 0 (the latent norms' epsilon)", "nearby valid: 1e-06 (DeepSeek-V3)");
  }
}

}  // namespace attncheck
