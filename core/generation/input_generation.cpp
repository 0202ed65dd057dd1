#include "core/generation/input_generation.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/errors/input_error.hpp"
#include "core/generation/splitmix_stream.hpp"

namespace attncheck {

namespace {

using Stream = SplitMixStream;

// Per-head integer amplitudes: different per-head scales, all within 8 significant bits.
constexpr std::int64_t kHeadAmplitudes[] = {112, 64, 88, 48, 127, 72, 56, 100};

// Root mean square of the amplitudes: the amplitude a tensor's overall scale follows.
double rms_head_amplitude() {
  double sum = 0.0;
  for (std::int64_t amplitude : kHeadAmplitudes) sum += static_cast<double>(amplitude * amplitude);
  return std::sqrt(sum / static_cast<double>(std::size(kHeadAmplitudes)));
}

// The power of two that gives integers uniform in [-amplitude, amplitude] a standard deviation within
// a factor sqrt(2) of `target` (the nearest power of two in log scale).
int exponent_for(double target, double amplitude) {
  const double integer_std = amplitude / std::sqrt(3.0);
  return static_cast<int>(std::lround(std::log2(target / integer_std)));
}

// Fills rows [first_row, first_row + rows) of a row-major [*, cols] tensor.
void fill_block(Tensor& tensor, std::int64_t first_row, std::int64_t rows, std::int64_t cols, std::int64_t amplitude,
                int exponent, Stream& stream) {
  const double unit = std::ldexp(1.0, exponent);
  const SymmetricInteger draw(amplitude);  // stream.symmetric_integer(amplitude), its rejection limit computed once
  double* values = tensor.values.data() + first_row * cols;
  for (std::int64_t i = 0; i < rows * cols; ++i) values[i] = static_cast<double>(draw(stream)) * unit;
}

// A [heads * head_dim, cols] matrix whose rows come in per-head blocks of head_dim rows, each block
// distinct from every other, entries with a standard deviation near target_std.
Tensor head_blocked_rows(std::string_view name, std::int64_t heads, std::int64_t head_dim, std::int64_t cols,
                         double target_std, std::uint64_t seed, HeadBlocks head_blocks) {
  Tensor tensor({heads * head_dim, cols});
  // One exponent per tensor, set for the heads' mean-square amplitude; the amplitudes set each head's scale.
  const int exponent = exponent_for(target_std, rms_head_amplitude());
  const std::int64_t block = head_dim * cols;
  auto block_begin = [&](std::int64_t head) { return tensor.values.begin() + head * block; };
  auto equals_earlier_head = [&](std::int64_t head) {
    for (std::int64_t other = 0; other < head; ++other) {
      if (std::equal(block_begin(head), block_begin(head) + block, block_begin(other))) return true;
    }
    return false;
  };
  // Every head's first draw in parallel (each head has its own stream), then, in head order, a head equal
  // to an earlier one takes its next draw: the same weights as drawing head by head.
  const auto fill = [&](std::int64_t head, std::uint64_t draw) {
    Stream stream(seed, fmt::format("{}/head{}", name, head), draw);
    fill_block(tensor, head * head_dim, head_dim, cols, kHeadAmplitudes[head % std::size(kHeadAmplitudes)], exponent,
               stream);
  };
#pragma omp parallel for schedule(dynamic) if (heads * block >= (std::int64_t{1} << 20))
  for (std::int64_t head = 0; head < heads; ++head) fill(head, 0);
  if (head_blocks == HeadBlocks::first_draws) return tensor;
  for (std::int64_t head = 0; head < heads; ++head) {
    for (std::uint64_t draw = 1; equals_earlier_head(head); ++draw) {
      if (draw == 65) throw std::logic_error("input generation: cannot make head weights distinct");
      fill(head, draw);
    }
  }
  return tensor;
}

// q_proj, k_proj, v_proj: [heads * head_dim, hidden], fan-in hidden.
Tensor input_projection(std::string_view name, std::int64_t heads, std::int64_t head_dim, std::int64_t hidden,
                        std::uint64_t seed, HeadBlocks head_blocks) {
  return head_blocked_rows(name, heads, head_dim, hidden, 1.0 / std::sqrt(static_cast<double>(hidden)), seed,
                           head_blocks);
}

// o_proj [hidden, query_width], fan-in query_width: column blocks per query head, made distinct by
// generating the transpose (whose row blocks are those column blocks) and transposing it.
Tensor output_projection(std::int64_t hidden, std::int64_t heads, std::int64_t head_dim, std::uint64_t seed,
                         HeadBlocks head_blocks) {
  const std::int64_t query_width = heads * head_dim;
  const Tensor transposed = head_blocked_rows(
      "o_proj", heads, head_dim, hidden, 1.0 / std::sqrt(static_cast<double>(query_width)), seed, head_blocks);
  // tensor[col, row] = transposed[row, col], in square tiles: row by row, every write would land on another
  // cache line of a matrix of hundreds of megabytes.
  Tensor tensor({hidden, query_width});
  constexpr std::int64_t kTile = 64;
  const std::int64_t row_tiles = (query_width + kTile - 1) / kTile;
#pragma omp parallel for schedule(static) if (query_width * hidden >= (std::int64_t{1} << 20))
  for (std::int64_t row_tile = 0; row_tile < row_tiles; ++row_tile) {
    const std::int64_t row_end = std::min(query_width, (row_tile + 1) * kTile);
    for (std::int64_t col_begin = 0; col_begin < hidden; col_begin += kTile) {
      const std::int64_t col_end = std::min(hidden, col_begin + kTile);
      for (std::int64_t col = col_begin; col < col_end; ++col) {
        for (std::int64_t row = row_tile * kTile; row < row_end; ++row) {
          tensor.values[col * query_width + row] = transposed.values[row * hidden + col];
        }
      }
    }
  }
  return tensor;
}

Tensor small_vector(std::string_view name, std::int64_t size, double base, int exponent, std::uint64_t seed) {
  Tensor tensor({size});
  Stream stream(seed, name);
  for (double& value : tensor.values)
    value = base + std::ldexp(static_cast<double>(stream.symmetric_integer(32)), exponent);
  return tensor;
}

// Latent attention's weights (core/model/parameters.hpp): every projection drawn like the plain layer's, in
// head blocks where it has heads (q_b_proj / q_proj, kv_b_proj, o_proj) and as one block where it has none
// (q_a_proj, kv_a_proj_with_mqa); the latent norms' weights near 1 like q_norm's.
Parameters latent_weights(const Geometry& geometry, std::uint64_t seed, HeadBlocks head_blocks) {
  const LatentAttentionSpec& latent = *geometry.latent();
  const std::int64_t hidden = geometry.hidden_size();
  const std::int64_t heads = geometry.num_heads();
  const auto fan_in = [](std::int64_t width) { return 1.0 / std::sqrt(static_cast<double>(width)); };
  Parameters weights;
  weights.latent = true;
  if (latent.q_lora_rank) {
    const std::int64_t rank = *latent.q_lora_rank;
    weights.q_a_proj = head_blocked_rows("q_a_proj", 1, rank, hidden, fan_in(hidden), seed, head_blocks);
    weights.q_a_layernorm = small_vector("q_a_layernorm", rank, 1.0, -7, seed);
    weights.q_b_proj =
        head_blocked_rows("q_b_proj", heads, latent.qk_head_dim(), rank, fan_in(rank), seed, head_blocks);
  } else {
    weights.q_proj = input_projection("q_proj", heads, latent.qk_head_dim(), hidden, seed, head_blocks);
  }
  weights.kv_a_proj_with_mqa =
      head_blocked_rows("kv_a_proj_with_mqa", 1, latent.kv_a_rows(), hidden, fan_in(hidden), seed, head_blocks);
  weights.kv_a_layernorm = small_vector("kv_a_layernorm", latent.kv_lora_rank, 1.0, -7, seed);
  weights.kv_b_proj = head_blocked_rows("kv_b_proj", heads, latent.kv_b_rows_per_head(), latent.kv_lora_rank,
                                        fan_in(latent.kv_lora_rank), seed, head_blocks);
  weights.o_proj = output_projection(hidden, heads, latent.v_head_dim, seed, head_blocks);
  if (geometry.attention_sinks()) weights.sinks = small_vector("sinks", heads, 0.0, -3, seed);
  return weights;
}

}  // namespace

Tensor generate_activations(std::string_view name, const Shape& shape, ActivationDistribution distribution,
                            std::uint64_t seed) {
  Tensor tensor(shape);
  Stream stream(seed, name);
  const std::int64_t hidden = shape.back();
  std::vector<bool> outlier_channel(hidden, false);
  if (distribution == ActivationDistribution::outliers) {
    Stream channel_stream(seed, std::string(name) + "/outlier-channels");
    const std::int64_t count = std::max<std::int64_t>(1, hidden / 32);
    for (std::int64_t i = 0; i < count; ++i) outlier_channel[channel_stream.uniform_below(hidden)] = true;
  }
  const SymmetricInteger draw(64);  // stream.symmetric_integer(64), its rejection limit computed once
  for (std::int64_t i = 0; i < tensor.numel(); ++i) {
    double value = std::ldexp(static_cast<double>(draw(stream)), -6);
    if (distribution == ActivationDistribution::heavy_tailed) {
      int doublings = 0;
      while (doublings < 6 && stream.coin()) ++doublings;
      value = std::ldexp(value, doublings);
    } else if (distribution == ActivationDistribution::outliers && outlier_channel[i % hidden]) {
      value = std::ldexp(value, 5);
    }
    tensor.values[i] = value;
  }
  return tensor;
}

std::string_view to_string(ActivationDistribution distribution) {
  switch (distribution) {
    case ActivationDistribution::uniform:
      return "uniform";
    case ActivationDistribution::heavy_tailed:
      return "heavy-tailed";
    case ActivationDistribution::outliers:
      return "outliers";
  }
  return "?";
}

std::optional<ActivationDistribution> parse_activation_distribution(std::string_view text) {
  for (auto distribution :
       {ActivationDistribution::uniform, ActivationDistribution::heavy_tailed, ActivationDistribution::outliers}) {
    if (text == to_string(distribution)) return distribution;
  }
  return std::nullopt;
}

Parameters generate_weights(const Geometry& geometry, std::uint64_t seed, HeadBlocks head_blocks) {
  // Parameter counts are exact in int64 (core/model/geometry.hpp bounds the dimensions); the bound keeps a
  // typo like --heads 4096 --head-dim 1048576 an InputError instead of an allocation failure.
  const std::int64_t parameters = make_tp_plan(geometry, 1).unsharded_params.total();
  if (parameters > kMaxParameterElements) {
    ViolationList violations;
    violations.add("parameters", std::to_string(parameters),
                   "a generated layer holds at most 2^31 parameters (16 GiB in fp64)",
                   "smaller hidden_size, head counts or head_dim");
    violations.throw_if_any("invalid geometry for input generation");
  }
  if (geometry.is_latent()) return latent_weights(geometry, seed, head_blocks);
  const std::int64_t hidden = geometry.hidden_size();
  const std::int64_t head_dim = geometry.head_dim();
  Parameters weights;
  weights.q_proj = input_projection("q_proj", geometry.num_heads(), head_dim, hidden, seed, head_blocks);
  weights.k_proj = input_projection("k_proj", geometry.num_kv_heads(), head_dim, hidden, seed, head_blocks);
  weights.v_proj = input_projection("v_proj", geometry.num_kv_heads(), head_dim, hidden, seed, head_blocks);
  weights.o_proj = output_projection(hidden, geometry.num_heads(), head_dim, seed, head_blocks);
  // Biases: entries up to 1/4 on a 2^-7 grid, large enough to matter against x @ W^T.
  if (geometry.qkv_bias()) {
    weights.q_bias = small_vector("q_bias", geometry.query_width(), 0.0, -7, seed);
    weights.k_bias = small_vector("k_bias", geometry.kv_width(), 0.0, -7, seed);
    weights.v_bias = small_vector("v_bias", geometry.kv_width(), 0.0, -7, seed);
  }
  if (geometry.out_bias()) weights.o_bias = small_vector("o_bias", hidden, 0.0, -7, seed);
  if (geometry.qk_norm() != QkNorm::none) {
    // rms and rms-full-width multiply by w (centred on 1); rms-one-plus by 1 + w (w centred on 0).
    // Entries within 1/4. A whole-width norm has a weight per channel of q / k.
    const double base = geometry.qk_norm() == QkNorm::rms_one_plus ? 0.0 : 1.0;
    const bool full_width = geometry.qk_norm_full_width();
    weights.q_norm = small_vector("q_norm", full_width ? geometry.query_width() : head_dim, base, -7, seed);
    weights.k_norm = small_vector("k_norm", full_width ? geometry.kv_width() : head_dim, base, -7, seed);
  }
  // Sink logits within 4 on a 1/8 grid: as large as the scores, so the sink takes a real share.
  if (geometry.attention_sinks()) weights.sinks = small_vector("sinks", geometry.num_heads(), 0.0, -3, seed);
  return weights;
}

Inputs generate_inputs(const Geometry& geometry, const InputOptions& options) {
  ViolationList violations;
  if (options.batch < 1 || options.batch > kMaxBatchOrSeq) {
    violations.add("batch", std::to_string(options.batch), "must lie in [1, 2^20]", "1");
  }
  if (options.seq < 1 || options.seq > kMaxBatchOrSeq) {
    violations.add("seq", std::to_string(options.seq), "must lie in [1, 2^20]", "8");
  }
  // Activations x and dout hold batch * seq * hidden values each: at most 2^28 (2 GiB each in fp64).
  if (violations.empty() && options.batch * options.seq * geometry.hidden_size() > kMaxActivationElements) {
    violations.add("batch * seq * hidden_size",
                   fmt::format("{} * {} * {}", options.batch, options.seq, geometry.hidden_size()),
                   "must be at most 2^28 values per activation tensor", "a shorter sequence or a smaller batch");
  }
  if (options.position_offset &&
      (*options.position_offset < 0 ||
       *options.position_offset > kMaxPosition - (options.seq - 1) * (options.position_gaps ? 4 : 1))) {
    violations.add("position_offset", std::to_string(*options.position_offset),
                   "offset + (seq - 1) * (4 with position_gaps, else 1) must lie in [0, 2^31)", "0");
  }
  if (!options.key_lengths.empty()) {
    if (static_cast<std::int64_t>(options.key_lengths.size()) != options.batch) {
      violations.add("key_lengths", fmt::format("{} values", options.key_lengths.size()),
                     "must hold one key length per batch row, or none", fmt::format("{} values", options.batch));
    }
    for (const std::int64_t length : options.key_lengths) {
      if (length < 0 || length > options.seq) {
        violations.add("key_lengths", std::to_string(length), "must lie in [0, seq]", std::to_string(options.seq));
        break;
      }
    }
  }
  violations.throw_if_any("invalid input options");

  Inputs inputs;
  inputs.batch = options.batch;
  inputs.seq = options.seq;
  const Shape activation_shape = {options.batch, options.seq, geometry.hidden_size()};
  inputs.x = generate_activations("x", activation_shape, options.activations, options.seed);
  inputs.dout = generate_activations("dout", activation_shape, options.activations, options.seed);

  // The last query (index seq - 1) sees keys from seq - window on: it needs that many plus one.
  const std::optional<std::int64_t> window = geometry.sliding_window();
  const std::int64_t fewest_keys = !options.every_query_sees_a_key ? 0
                                   : window ? std::max<std::int64_t>(1, options.seq - *window + 1)
                                            : 1;
  Stream position_stream(options.seed, "positions");
  Stream length_stream(options.seed, "key_lengths");
  Stream gap_stream(options.seed, "position_gaps");
  for (std::int64_t b = 0; b < options.batch; ++b) {
    std::int64_t offset = 0;
    if (options.position_offset)
      offset = *options.position_offset;
    else if (b == 0)
      offset = position_stream.uniform_below(16);
    else
      offset = (std::int64_t{1} << 16) + position_stream.uniform_below((std::int64_t{1} << 20) - (1 << 16));
    for (std::int64_t s = 0; s < options.seq; ++s) {
      inputs.positions.push_back(offset);
      offset += options.position_gaps ? 1 + gap_stream.uniform_below(4) : 1;
    }
    const bool padded = options.pad_keys && b > 0;
    const std::int64_t drawn = padded ? 1 + length_stream.uniform_below(options.seq) : options.seq;
    inputs.key_lengths.push_back(std::max(fewest_keys, options.key_lengths.empty() ? drawn : options.key_lengths[b]));
  }
  inputs.decode = options.decode;
  return inputs;
}

Case generate_case(const Geometry& geometry, const InputOptions& options) {
  Case test_case{.plan = make_tp_plan(geometry, options.tp_size),
                 .inputs = generate_inputs(geometry, options),
                 .weights = generate_weights(geometry, options.seed),
                 .context_parallel = options.context_parallel};
  validate_case(test_case);
  return test_case;
}

bool is_exact_in_half_precisions(double value) {
  if (value == 0.0) return true;
  if (!std::isfinite(value)) return false;
  const double magnitude = std::fabs(value);
  if (magnitude < std::ldexp(1.0, -24) || magnitude >= std::ldexp(1.0, 15)) return false;
  int exponent = 0;
  const double mantissa = std::frexp(magnitude, &exponent);  // magnitude = mantissa * 2^exponent
  const double scaled = std::ldexp(mantissa, 8);             // 8 significant bits must suffice
  if (scaled != std::floor(scaled)) return false;
  // fp16 subnormals have a fixed grid of 2^-24: the value must be a multiple of it.
  const double grid = magnitude / std::ldexp(1.0, -24);
  return grid == std::floor(grid);
}

}  // namespace attncheck
