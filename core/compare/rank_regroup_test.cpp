#include "core/compare/rank_regroup.hpp"

#include <gtest/gtest.h>

#include "core/compare/sketch.hpp"
#include "core/errors/input_error.hpp"
#include "core/generation/input_generation.hpp"
#include "core/tp/tp_shard.hpp"

namespace attncheck {
namespace {

// 8 query heads, 2 KV heads, head_dim 4; TP 8 cuts heads and KV heads under megatron-equal-block.
const GeometrySpec kSpec = {
    .hidden_size = 5, .num_heads = 8, .num_kv_heads = 2, .head_dim = 4, .qk_norm = QkNorm::rms, .qkv_bias = true};

// The per-rank tensors of a Result holding `rank_gradients`, their projections sketched when asked.
NamedTensors rank_tensors(const std::vector<Parameters>& rank_gradients, bool sketched) {
  NamedTensors tensors;
  for (auto& [name, tensor] : named_tensors(Result{.rank_gradients = rank_gradients})) {
    if (name == "out") continue;
    if (sketched && sketchable(name)) {
      tensors[name + std::string(kSketchSuffix)] = sketch(name, tensor);
    } else {
      tensors[name] = tensor;
    }
  }
  return tensors;
}

TEST(RankRegroup, ParsesRankTensorNames) {
  const auto parsed = parse_rank_tensor_name("ranks/12/grads/o_proj#sketch");
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->rank, 12);
  EXPECT_EQ(parsed->parameter, "o_proj");
  EXPECT_TRUE(parsed->sketched);
  EXPECT_FALSE(parse_rank_tensor_name("grads/q_proj"));
  EXPECT_FALSE(parse_rank_tensor_name("ranks/x/grads/q_proj"));
  EXPECT_FALSE(parse_rank_tensor_name("ranks/1/q_proj"));
}

// Sketches regroup line by line exactly as the full gradients they sketch, and a rank holding no line
// of a tensor has no entry for it.
TEST(RankRegroup, SketchesRegroupAsTheirFullGradientsDo) {
  const Geometry geometry = resolve_geometry(kSpec);
  const TpPlan plan = make_tp_plan(geometry, 8);
  const std::vector<Parameters> replicated = rank_slices(generate_weights(geometry, 3), plan);
  const std::vector<Parameters> megatron =
      regroup_rank_gradients(replicated, plan, TpConvention::replicated_kv, TpConvention::megatron_equal_block);
  for (bool sketched : {false, true}) {
    NamedTensors source = rank_tensors(replicated, sketched);
    source["grads/x"] = Tensor({1, 1, 5});  // not per rank: passes unchanged
    NamedTensors expected = rank_tensors(megatron, sketched);
    expected["grads/x"] = source["grads/x"];
    const NamedTensors regrouped =
        regroup_rank_tensors(source, plan, TpConvention::replicated_kv, TpConvention::megatron_equal_block);
    EXPECT_EQ(regrouped, expected) << (sketched ? "sketched" : "full");
    EXPECT_FALSE(regrouped.contains(sketched ? "ranks/0/grads/k_proj#sketch" : "ranks/0/grads/k_proj"));
    EXPECT_TRUE(regrouped.contains(sketched ? "ranks/3/grads/v_proj#sketch" : "ranks/3/grads/v_proj"));
    EXPECT_FALSE(regrouped.contains("ranks/3/grads/q_bias"));  // rank 3 holds no q row
    EXPECT_EQ(regroup_rank_tensors(regrouped, plan, TpConvention::megatron_equal_block, TpConvention::replicated_kv),
              source);
  }
}

TEST(RankRegroup, WithoutPerRankTensorsNothingIsAskedOfTheConvention) {
  // (8 + 2) * 2 = 20 rows cannot be cut into 8 blocks, but there is nothing per rank to cut.
  const TpPlan plan =
      make_tp_plan(resolve_geometry({.hidden_size = 16, .num_heads = 8, .num_kv_heads = 1, .head_dim = 2}), 8);
  const NamedTensors unsharded{{"out", Tensor({1, 1, 16})}};
  EXPECT_EQ(regroup_rank_tensors(unsharded, plan, TpConvention::replicated_kv, TpConvention::megatron_equal_block),
            unsharded);
  const NamedTensors per_rank{{"ranks/0/grads/q_proj", Tensor({2, 16})}};
  EXPECT_THROW(regroup_rank_tensors(per_rank, plan, TpConvention::replicated_kv, TpConvention::megatron_equal_block),
               InputError);
}

}  // namespace
}  // namespace attncheck
