#include "torch_impl/torch_layer.hpp"

#include "torch_impl/large_block_allocator.hpp"
#include "torch_impl/latent_self_attention.hpp"

#include <memory>
#include <optional>
#include <vector>

#include "core/tp/tp_shard.hpp"
#include "torch_impl/parallel_self_attention.hpp"

namespace attncheck::torch_impl {

namespace {

// A whole-width QK-norm's all-reduce of the ranks' sums of squares, in rank order; a replicated KV
// head's channels counted once, from the first rank of its replica group. Autograd's backward of this
// sum is the backward's all-reduce. Without such a norm: nothing (no sums).
std::optional<NormSums> all_reduce_sum_squares(const TpPlan& plan,
                                               const std::vector<std::unique_ptr<ParallelSelfAttention>>& ranks,
                                               const torch::Tensor& x) {
  if (!plan.geometry.qk_norm_full_width()) return std::nullopt;
  NormSums total;
  for (int r = 0; r < plan.tp_size; ++r) {
    const NormSums part = ranks[r]->partial_sum_squares(x);
    total.q = r == 0 ? part.q : total.q + part.q;
    if (r == plan.replica_groups[plan.ranks[r].replica_group].ranks.begin) {
      total.k = total.k.defined() ? total.k + part.k : part.k;
    }
  }
  return total;
}

torch::Tensor index_tensor(const std::vector<std::int64_t>& values, torch::Device device) {
  return torch::tensor(values, torch::kInt64).to(device);
}

// The decode schedule's calls (prefill, then each step), every rank with its own cache.
Tensor run_decode(const Case& test_case, std::vector<std::unique_ptr<ParallelSelfAttention>>& ranks,
                  const torch::Tensor& x, const torch::Tensor& positions, const torch::Tensor& key_lengths,
                  const torch::Tensor& o_bias) {
  const torch::NoGradGuard no_grad;
  const DecodeSchedule& decode = test_case.inputs.decode;
  const std::vector<std::int64_t> calls = decode.calls();
  std::vector<RankCache> caches(ranks.size());
  std::vector<torch::Tensor> outputs;
  std::int64_t start = 0;
  for (const std::int64_t count : calls) {
    const torch::Tensor tokens = x.narrow(1, start, count);
    const torch::Tensor token_positions = positions.narrow(1, start, count);
    torch::Tensor out;
    const std::optional<NormSums> sums = all_reduce_sum_squares(test_case.plan, ranks, tokens);
    for (std::size_t r = 0; r < ranks.size(); ++r) {
      const torch::Tensor partial =
          ranks[r]->forward(tokens, token_positions, key_lengths, &caches[r], sums ? &*sums : nullptr);
      out = r == 0 ? partial : out + partial;
    }
    if (o_bias.defined()) out = out + o_bias;
    outputs.push_back(out);
    start += count;
  }
  return from_torch(torch::cat(outputs, 1));
}

// Latent attention (latent_self_attention.hpp): every rank on its shard, partial outputs summed in rank order,
// the replicated latent weights' rank gradients summed over all ranks (reduce_rank_gradients); decoding through
// each rank's compressed cache.
Result run_latent(const Case& test_case, const TorchOptions& options, const std::string& name) {
  const TpPlan& plan = test_case.plan;
  const Inputs& inputs = test_case.inputs;
  const torch::Device device = options.cuda ? torch::kCUDA : torch::kCPU;
  const torch::TensorOptions tensor_options = torch::TensorOptions().dtype(dtype_of(options.precision)).device(device);
  const torch::Tensor x = to_torch(inputs.x, tensor_options).requires_grad_(true);
  const torch::Tensor positions = index_tensor(inputs.positions, device).view({inputs.batch, inputs.seq});
  const torch::Tensor key_lengths = index_tensor(inputs.key_lengths, device);
  std::vector<std::unique_ptr<LatentSelfAttention>> ranks;
  for (int r = 0; r < plan.tp_size; ++r) {
    ranks.push_back(
        std::make_unique<LatentSelfAttention>(plan, r, shard_parameters(test_case.weights, plan, r), options));
  }
  torch::Tensor out;
  for (int r = 0; r < plan.tp_size; ++r) {
    const torch::Tensor partial = ranks[r]->forward(x, positions, key_lengths);
    out = r == 0 ? partial : out + partial;
  }
  out.backward(to_torch(inputs.dout, tensor_options));
  std::vector<Parameters> partials;
  for (const auto& rank : ranks) partials.push_back(rank->take_shard_gradients());
  Result result;
  result.implementation = name;
  result.out = from_torch(out);
  result.gradients = Gradients{.x = from_torch(x.grad()), .params = assemble_gradients(partials, plan)};
  result.rank_gradients = reduce_rank_gradients(partials, plan);
  if (!inputs.decode.empty()) {
    const torch::NoGradGuard no_grad;
    const std::vector<std::int64_t> calls = inputs.decode.calls();
    std::vector<LatentCache> caches(ranks.size());
    std::vector<torch::Tensor> outputs;
    std::int64_t start = 0;
    for (const std::int64_t count : calls) {
      torch::Tensor call_out;
      for (std::size_t r = 0; r < ranks.size(); ++r) {
        const torch::Tensor partial = ranks[r]->forward(x.detach().narrow(1, start, count),
                                                        positions.narrow(1, start, count), key_lengths, &caches[r]);
        call_out = r == 0 ? partial : call_out + partial;
      }
      outputs.push_back(call_out);
      start += count;
    }
    result.decode_out = from_torch(torch::cat(outputs, 1));
  }
  return result;
}

}  // namespace

Result run_torch(const Case& test_case, const TorchOptions& options, const std::string& name) {
  install_large_block_allocator();
  // Declared first, so destroyed last: once this run's tensors are freed, the large blocks kept for reuse go.
  struct ReleaseKeptBlocks {
    ~ReleaseKeptBlocks() { release_kept_large_blocks(); }
  } const release_kept_blocks;
  if (options.cuda && !torch::cuda::is_available()) throw TorchUnavailable("no CUDA device");
  validate_case(test_case);
  if (test_case.geometry().is_latent()) return run_latent(test_case, options, name);
  const TpPlan& plan = test_case.plan;
  const Inputs& inputs = test_case.inputs;
  const torch::Device device = options.cuda ? torch::kCUDA : torch::kCPU;
  const torch::TensorOptions tensor_options = torch::TensorOptions().dtype(dtype_of(options.precision)).device(device);

  const torch::Tensor x = to_torch(inputs.x, tensor_options).requires_grad_(true);
  const torch::Tensor positions = index_tensor(inputs.positions, device).view({inputs.batch, inputs.seq});
  const torch::Tensor key_lengths = index_tensor(inputs.key_lengths, device);
  torch::Tensor o_bias;
  if (test_case.weights.o_bias) o_bias = to_torch(*test_case.weights.o_bias, tensor_options).requires_grad_(true);

  std::vector<std::unique_ptr<ParallelSelfAttention>> ranks;
  for (int r = 0; r < plan.tp_size; ++r) {
    // At TP 1 the rank's shard is the layer: read in place, not copied.
    const std::optional<Parameters> own_shard =
        plan.tp_size == 1 ? std::nullopt : std::optional(shard_parameters(test_case.weights, plan, r));
    ranks.push_back(std::make_unique<ParallelSelfAttention>(plan, r, own_shard ? *own_shard : test_case.weights, options));
  }
  std::optional<NormSums> sums = all_reduce_sum_squares(plan, ranks, x);
  torch::Tensor out;
  for (int r = 0; r < plan.tp_size; ++r) {
    const torch::Tensor partial = ranks[r]->forward(x, positions, key_lengths, nullptr, sums ? &*sums : nullptr);
    out = r == 0 ? partial : out + partial;  // the row-parallel all-reduce, in rank order
  }
  if (o_bias.defined()) out = out + o_bias;  // once, after the partials are summed
  out.backward(to_torch(inputs.dout, tensor_options));

  Result result;
  result.implementation = name;
  result.out = from_torch(out);
  // Decoding reads the weights, not their gradients: done before the gradients are taken, so that the ranks'
  // weights are freed before the layer's gradients are assembled (never resident beside every copy of them).
  if (!inputs.decode.empty()) {
    result.decode_out =
        run_decode(test_case, ranks, x.detach(), positions, key_lengths, o_bias.defined() ? o_bias.detach() : o_bias);
  }
  std::vector<Parameters> partials;
  for (const auto& rank : ranks) {
    Parameters partial = rank->take_shard_gradients();
    if (o_bias.defined()) partial.o_bias = from_torch(o_bias.grad());  // every rank sees the whole sum(dout)
    partials.push_back(std::move(partial));
  }
  out.reset();  // the graph's AccumulateGrad nodes hold the weights: out's and the sums' graph let go
  sums.reset();
  ranks.clear();
  // reduce_rank_gradients(partials) is rank_slices(assemble_gradients(partials)): assembled once for both.
  Parameters assembled = assemble_gradients(partials, plan);
  partials.clear();
  result.rank_gradients = rank_slices(assembled, plan);
  result.gradients = Gradients{.x = from_torch(x.grad()), .params = std::move(assembled)};
  return result;
}

}  // namespace attncheck::torch_impl
