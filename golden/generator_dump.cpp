// Prints generate_weights() for a few geometries, generated x and dout, and two sketches, as JSON, for
// python/attncheck/generator.py
// --check (ctest golden.python_generator): the Python rebuild of SCHEMA.md's weight generator must give
// the same values as the C++ one, value for value.
#include <nlohmann/json.hpp>

#include <iostream>

#include "core/compare/sketch.hpp"
#include "core/generation/input_generation.hpp"

int main() {
  using namespace attncheck;
  const struct {
    GeometrySpec spec;
    std::uint64_t seed;
  } cases[] = {
      {{.hidden_size = 12,
        .num_heads = 4,
        .num_kv_heads = 2,
        .head_dim = 6,
        .qk_norm = QkNorm::rms,
        .qkv_bias = true,
        .out_bias = true},
       1},
      {{.hidden_size = 10, .num_heads = 3, .num_kv_heads = 1, .head_dim = 8, .qk_norm = QkNorm::rms_one_plus},
       0xDEADBEEFCAFEULL},
      {{.hidden_size = 1, .num_heads = 64, .head_dim = 2}, 9},
      // One value per head block and 64 heads: equal blocks are certain, so the redraw rule is exercised.
      {{.hidden_size = 1, .num_heads = 64, .head_dim = 1, .rotary_dim = 0}, 5},
      {{.hidden_size = 64, .num_heads = 2, .head_dim = 16}, 42},
      {{.hidden_size = 16, .num_heads = 8, .num_kv_heads = 2, .head_dim = 4, .attention_sinks = true}, 7},
      // Whole-width QK-norm: q_norm [num_heads * head_dim], k_norm [num_kv_heads * head_dim].
      {{.hidden_size = 12, .num_heads = 4, .num_kv_heads = 2, .head_dim = 6, .qk_norm = QkNorm::rms_full_width}, 11},
      // Latent attention (schema version 3), with and without q_lora_rank.
      {{.hidden_size = 12,
        .num_heads = 3,
        .attention_sinks = true,
        .latent = LatentAttentionSpec{
            .q_lora_rank = 5, .kv_lora_rank = 4, .qk_nope_head_dim = 3, .qk_rope_head_dim = 2, .v_head_dim = 2}},
       13},
      {{.hidden_size = 8,
        .num_heads = 2,
        .latent = LatentAttentionSpec{.kv_lora_rank = 6, .qk_nope_head_dim = 4, .qk_rope_head_dim = 4, .v_head_dim = 5}},
       14},
  };
  nlohmann::json dump = {{"generator", "attncheck-splitmix64-v1"}, {"cases", nlohmann::json::array()}};
  for (const auto& c : cases) {
    const Geometry g = resolve_geometry(c.spec);
    nlohmann::json weights = nlohmann::json::object();
    const Parameters generated = generate_weights(g, c.seed);
    for_each_parameter(generated,
                       [&](std::string_view name, const Tensor& t) { weights[std::string(name)] = t.values; });
    nlohmann::json latent = nlohmann::json::object();
    if (const auto& spec = g.latent()) {
      latent = {{"attention", "latent"},
                {"q_lora_rank", spec->q_lora_rank.value_or(0)},
                {"kv_lora_rank", spec->kv_lora_rank},
                {"qk_nope_head_dim", spec->qk_nope_head_dim},
                {"qk_rope_head_dim", spec->qk_rope_head_dim},
                {"v_head_dim", spec->v_head_dim}};
    }
    dump["cases"].push_back({{"seed", c.seed},
                             {"geometry",
                              {{"hidden_size", g.hidden_size()},
                               {"num_attention_heads", g.num_heads()},
                               {"num_key_value_heads", g.num_kv_heads()},
                               {"head_dim", g.head_dim()},
                               {"qk_norm", std::string(to_string(g.qk_norm()))},
                               {"qkv_bias", g.qkv_bias()},
                               {"out_bias", g.out_bias()},
                               {"attention_sinks", g.attention_sinks() ? 1 : 0}}},
                             {"weights", weights}});
    dump["cases"].back()["geometry"].update(latent);
  }
  // Inputs x and dout in each distribution (SCHEMA.md, "Input generator v1").
  dump["activations"] = nlohmann::json::array();
  for (const auto distribution :
       {ActivationDistribution::uniform, ActivationDistribution::heavy_tailed, ActivationDistribution::outliers}) {
    for (const char* name : {"x", "dout"}) {
      const Shape shape = {2, 5, 70};
      dump["activations"].push_back({{"seed", 2026},
                                     {"name", name},
                                     {"shape", shape},
                                     {"distribution", std::string(to_string(distribution))},
                                     {"values", generate_activations(name, shape, distribution, 2026).values}});
    }
  }
  // Sketches of two generated matrices standing in for gradients (sums may round differently in
  // another language: the check allows 1e-12 relative).
  dump["sketches"] = nlohmann::json::array();
  const Parameters weights = generate_weights(resolve_geometry(cases[0].spec), cases[0].seed);
  for (const auto& [name, tensor] :
       {std::pair{"grads/q_proj", &weights.q_proj}, std::pair{"grads/o_proj", &weights.o_proj}}) {
    dump["sketches"].push_back({{"name", name},
                                {"rows", tensor->shape[0]},
                                {"cols", tensor->shape[1]},
                                {"along_columns", std::string_view(name) == "grads/o_proj"},
                                {"values", tensor->values},
                                {"sketch", sketch(name, *tensor).values}});
  }
  std::cout << dump.dump() << '\n';
  return 0;
}
