#include "mutants/naive_latent_layer.hpp"

#include <cmath>
#include <limits>
#include <optional>
#include <span>

#include "core/model/rope_frequencies.hpp"
#include "core/tp/tp_shard.hpp"
#include "impl/implementation.hpp"
#include "reference/attention_head.hpp"

namespace attncheck::mutants {

using reference::ConstMatrixMap;
using reference::MatrixMap;
using reference::RowMatrix;
using Column = Eigen::VectorXd;

double NaiveLatentLayer::score_scale(const Geometry& geometry) const { return geometry.scale(); }

std::int64_t NaiveLatentLayer::rope_first_channel(const LatentAttentionSpec& latent) const {
  return latent.qk_nope_head_dim;
}

std::vector<std::int64_t> NaiveLatentLayer::o_proj_input_columns(const LatentAttentionSpec& latent,
                                                                 std::int64_t heads) const {
  std::vector<std::int64_t> columns(static_cast<std::size_t>(heads * latent.v_head_dim));
  for (std::size_t j = 0; j < columns.size(); ++j) columns[j] = static_cast<std::int64_t>(j);
  return columns;
}

bool NaiveLatentLayer::k_pe_rows_first() const { return false; }
bool NaiveLatentLayer::decode_absorbed() const { return false; }
bool NaiveLatentLayer::absorbed_cache_normed() const { return true; }
bool NaiveLatentLayer::absorbed_k_pe_rotated_when_cached() const { return true; }

std::vector<Parameters> NaiveLatentLayer::reduce_gradients(const std::vector<Parameters>& rank_partials,
                                                           const TpPlan& plan) const {
  return reduce_rank_gradients(rank_partials, plan);
}

namespace {

ConstMatrixMap matrix(const Tensor& tensor) { return ConstMatrixMap(tensor.data(), tensor.shape[0], tensor.numel() / tensor.shape[0]); }

Tensor as_tensor(const RowMatrix& values) {
  return Tensor({values.rows(), values.cols()}, std::vector<double>(values.data(), values.data() + values.size()));
}

Tensor as_vector(const Eigen::RowVectorXd& values) {
  return Tensor({values.size()}, std::vector<double>(values.data(), values.data() + values.size()));
}

// RMSNorm over each row: y = x * inverse * w, inverse = 1 / sqrt(mean(x^2) + eps).
RowMatrix rms_norm(const RowMatrix& x, const Tensor& weight, double eps, Column& inverse) {
  inverse = ((x.array().square().rowwise().sum() / static_cast<double>(x.cols())) + eps).rsqrt().matrix();
  const Eigen::Map<const Eigen::RowVectorXd> w(weight.data(), weight.numel());
  return (x.array().colwise() * inverse.array()).rowwise() * w.array();
}

// Turns d(y) into d(x) in place; returns d(w).
Tensor rms_norm_backward(const RowMatrix& x, const Column& inverse, const Tensor& weight, RowMatrix& gradient) {
  const Eigen::Map<const Eigen::RowVectorXd> w(weight.data(), weight.numel());
  const RowMatrix normed = x.array().colwise() * inverse.array();
  const Tensor d_weight = as_vector((gradient.array() * normed.array()).colwise().sum().matrix());
  const RowMatrix d_normed = gradient.array().rowwise() * w.array();
  const Column dots = (d_normed.array() * normed.array()).rowwise().sum() / static_cast<double>(x.cols());
  gradient = (d_normed.array() - normed.array().colwise() * dots.array()).colwise() * inverse.array();
  return d_weight;
}

// Rotates `rope` channels from `first` of every `width`-wide head of each row by its position (sign -1: back).
void rotate(RowMatrix& rows, std::span<const std::int64_t> positions, std::int64_t width, std::int64_t first,
            std::int64_t rope, const RopeFrequencies& frequencies, bool interleaved, double sign) {
  const std::int64_t pairs = rope / 2;
  for (std::int64_t t = 0; t < rows.rows(); ++t) {
    for (std::int64_t head = 0; head * width < rows.cols(); ++head) {
      double* channels = rows.row(t).data() + head * width + first;
      for (std::int64_t i = 0; i < pairs; ++i) {
        const double angle = static_cast<double>(positions[t]) * frequencies.inv_freq[i];
        const double c = std::cos(angle) * frequencies.attention_factor;
        const double s = sign * std::sin(angle) * frequencies.attention_factor;
        double& a = channels[interleaved ? 2 * i : i];
        double& b = channels[interleaved ? 2 * i + 1 : i + pairs];
        const double ra = a * c - b * s, rb = b * c + a * s;
        a = ra;
        b = rb;
      }
    }
  }
}

// Everything one block of tokens projects to on one rank.
struct Projected {
  RowMatrix q_latent_input, q_latent;  // [tokens, q_lora_rank]; empty without it
  Column q_inverse;
  RowMatrix latent_input, latent;  // [tokens, L]
  Column latent_inverse;
  RowMatrix k_pe;  // [tokens, R], not rotated
  RowMatrix q, k, v;
};

struct Shape {
  std::int64_t heads, nope, rope, q_width, v_width, lora;
};

Shape shape_of(const LatentAttentionSpec& latent, std::int64_t heads) {
  return {heads, latent.qk_nope_head_dim, latent.qk_rope_head_dim, latent.qk_head_dim(), latent.v_head_dim,
          latent.kv_lora_rank};
}

// Projections and latent norms; q and k assembled per head but not rotated. k_pe_first: kv_a_proj_with_mqa's
// k_pe rows read as its first ones (the latent after them).
Projected project(const Parameters& shard, const LatentAttentionSpec& latent, const Shape& s, const RowMatrix& x,
                  bool k_pe_first) {
  Projected p;
  if (shard.q_a_proj) {
    p.q_latent_input = x * matrix(*shard.q_a_proj).transpose();
    p.q_latent = rms_norm(p.q_latent_input, *shard.q_a_layernorm, latent.latent_norm_eps, p.q_inverse);
    p.q = p.q_latent * matrix(*shard.q_b_proj).transpose();
  } else {
    p.q = x * matrix(shard.q_proj).transpose();
  }
  const RowMatrix kv_a = x * matrix(*shard.kv_a_proj_with_mqa).transpose();
  p.latent_input = k_pe_first ? kv_a.rightCols(s.lora) : kv_a.leftCols(s.lora);
  p.k_pe = k_pe_first ? kv_a.leftCols(s.rope) : kv_a.rightCols(s.rope);
  p.latent = rms_norm(p.latent_input, *shard.kv_a_layernorm, latent.latent_norm_eps, p.latent_inverse);
  const RowMatrix kv = p.latent * matrix(*shard.kv_b_proj).transpose();
  p.k.resize(x.rows(), s.heads * s.q_width);
  p.v.resize(x.rows(), s.heads * s.v_width);
  for (std::int64_t h = 0; h < s.heads; ++h) {
    p.k.middleCols(h * s.q_width, s.nope) = kv.middleCols(h * (s.nope + s.v_width), s.nope);
    p.k.middleCols(h * s.q_width + s.nope, s.rope) = p.k_pe;
    p.v.middleCols(h * s.v_width, s.v_width) = kv.middleCols(h * (s.nope + s.v_width) + s.nope, s.v_width);
  }
  return p;
}

// One head's attention over keys: probabilities (and softcap's tanh) kept for the backward pass.
struct HeadAttention {
  RowMatrix probabilities, capped;
  RowMatrix context;
};

HeadAttention attend(const Geometry& geometry, double scale, const RowMatrix& q, const RowMatrix& k,
                     const RowMatrix& v, std::int64_t key_length, std::optional<double> softcap) {
  const reference::MaskSpec mask = reference::MaskSpec::for_geometry(geometry, q.rows(), k.rows(), key_length);
  HeadAttention a;
  a.probabilities = scale * (q * k.transpose());
  if (softcap) {
    a.capped = (a.probabilities.array() / *softcap).tanh();
    a.probabilities = *softcap * a.capped;
  }
  for (std::int64_t i = 0; i < q.rows(); ++i) {
    const reference::KeyInterval keys = mask.visible_keys(i);
    auto row = a.probabilities.row(i);
    if (keys.end <= keys.begin) {
      row.setZero();
      continue;
    }
    const double top = row.segment(keys.begin, keys.end - keys.begin).maxCoeff();
    for (std::int64_t j = 0; j < row.size(); ++j) {
      row[j] = j >= keys.begin && j < keys.end ? std::exp(row[j] - top) : 0.0;
    }
    row /= row.sum();
  }
  a.context = a.probabilities * v;
  return a;
}

struct RankResult {
  RowMatrix partial_out, dx;
  Parameters gradients;
};

}  // namespace

Result NaiveLatentLayer::run(const Case& test_case) const {
  validate_case(test_case);
  const Geometry& geometry = test_case.geometry();
  if (!geometry.is_latent()) throw impl::Unsupported("naive latent layer", "a plain attention layer");
  if (geometry.attention_sinks()) throw impl::Unsupported("naive latent layer", "attention sinks");
  const LatentAttentionSpec& latent = *geometry.latent();
  const TpPlan& plan = test_case.plan;
  const Inputs& in = test_case.inputs;
  const std::int64_t tokens = in.batch * in.seq, hidden = geometry.hidden_size();
  const bool interleaved = geometry.rope_style() == RopeStyle::interleaved;
  const double scale = score_scale(geometry);
  const std::int64_t first = rope_first_channel(latent);
  const RowMatrix x = ConstMatrixMap(in.x.data(), tokens, hidden);
  const RowMatrix d_out = ConstMatrixMap(in.dout.data(), tokens, hidden);
  const RopeFrequencies frequencies = call_rope_frequencies(geometry, in.positions);

  RowMatrix out = RowMatrix::Zero(tokens, hidden), dx = RowMatrix::Zero(tokens, hidden);
  std::vector<Parameters> partials;
  for (int r = 0; r < plan.tp_size; ++r) {
    const Parameters shard = shard_parameters(test_case.weights, plan, r);
    const Shape s = shape_of(latent, plan.ranks[r].q_heads.size());
    Projected p = project(shard, latent, s, x, k_pe_rows_first());
    rotate(p.q, in.positions, s.q_width, first, s.rope, frequencies, interleaved, 1.0);
    rotate(p.k, in.positions, s.q_width, first, s.rope, frequencies, interleaved, 1.0);
    const std::vector<std::int64_t> columns = o_proj_input_columns(latent, s.heads);

    // Forward: each (batch row, head), then the o_proj input from the contexts.
    RowMatrix context = RowMatrix::Zero(tokens, s.heads * s.v_width);
    std::vector<HeadAttention> heads;
    for (std::int64_t b = 0; b < in.batch; ++b) {
      for (std::int64_t h = 0; h < s.heads; ++h) {
        heads.push_back(attend(geometry, scale, p.q.block(b * in.seq, h * s.q_width, in.seq, s.q_width),
                               p.k.block(b * in.seq, h * s.q_width, in.seq, s.q_width),
                               p.v.block(b * in.seq, h * s.v_width, in.seq, s.v_width), in.key_lengths[b],
                               geometry.softcap()));
        context.block(b * in.seq, h * s.v_width, in.seq, s.v_width) = heads.back().context;
      }
    }
    RowMatrix o_input = RowMatrix::Zero(tokens, static_cast<std::int64_t>(columns.size()));
    for (std::size_t j = 0; j < columns.size(); ++j) {
      if (columns[j] >= 0) o_input.col(static_cast<std::int64_t>(j)) = context.col(columns[j]);
    }
    out += o_input * matrix(shard.o_proj).transpose();

    // Backward, step by step in reverse.
    Parameters grads;
    grads.latent = true;
    grads.o_proj = as_tensor(d_out.transpose() * o_input);
    const RowMatrix d_o_input = d_out * matrix(shard.o_proj);
    RowMatrix d_context = RowMatrix::Zero(tokens, s.heads * s.v_width);
    for (std::size_t j = 0; j < columns.size(); ++j) {
      if (columns[j] >= 0) d_context.col(columns[j]) += d_o_input.col(static_cast<std::int64_t>(j));
    }
    RowMatrix d_q = RowMatrix::Zero(tokens, s.heads * s.q_width), d_k = d_q;
    RowMatrix d_v = RowMatrix::Zero(tokens, s.heads * s.v_width);
    for (std::int64_t b = 0; b < in.batch; ++b) {
      for (std::int64_t h = 0; h < s.heads; ++h) {
        const HeadAttention& a = heads[static_cast<std::size_t>(b * s.heads + h)];
        const RowMatrix d_c = d_context.block(b * in.seq, h * s.v_width, in.seq, s.v_width);
        const RowMatrix v = p.v.block(b * in.seq, h * s.v_width, in.seq, s.v_width);
        d_v.block(b * in.seq, h * s.v_width, in.seq, s.v_width) = a.probabilities.transpose() * d_c;
        const RowMatrix d_p = d_c * v.transpose();
        const Column weighted = (a.probabilities.array() * d_p.array()).rowwise().sum();
        RowMatrix d_scores = a.probabilities.array() * (d_p.array().colwise() - weighted.array());
        if (geometry.softcap()) d_scores = d_scores.array() * (1.0 - a.capped.array().square());
        d_scores *= scale;
        d_q.block(b * in.seq, h * s.q_width, in.seq, s.q_width) =
            d_scores * p.k.block(b * in.seq, h * s.q_width, in.seq, s.q_width);
        d_k.block(b * in.seq, h * s.q_width, in.seq, s.q_width) =
            d_scores.transpose() * p.q.block(b * in.seq, h * s.q_width, in.seq, s.q_width);
      }
    }
    rotate(d_q, in.positions, s.q_width, first, s.rope, frequencies, interleaved, -1.0);
    rotate(d_k, in.positions, s.q_width, first, s.rope, frequencies, interleaved, -1.0);
    RowMatrix d_kv(tokens, s.heads * (s.nope + s.v_width));
    RowMatrix d_k_pe = RowMatrix::Zero(tokens, s.rope);
    for (std::int64_t h = 0; h < s.heads; ++h) {
      d_kv.middleCols(h * (s.nope + s.v_width), s.nope) = d_k.middleCols(h * s.q_width, s.nope);
      d_kv.middleCols(h * (s.nope + s.v_width) + s.nope, s.v_width) = d_v.middleCols(h * s.v_width, s.v_width);
      d_k_pe += d_k.middleCols(h * s.q_width + s.nope, s.rope);
    }
    grads.kv_b_proj = as_tensor(d_kv.transpose() * p.latent);
    RowMatrix d_latent = d_kv * matrix(*shard.kv_b_proj);
    grads.kv_a_layernorm = rms_norm_backward(p.latent_input, p.latent_inverse, *shard.kv_a_layernorm, d_latent);
    RowMatrix d_kv_a(tokens, s.lora + s.rope);
    if (k_pe_rows_first()) {
      d_kv_a << d_k_pe, d_latent;
    } else {
      d_kv_a << d_latent, d_k_pe;
    }
    grads.kv_a_proj_with_mqa = as_tensor(d_kv_a.transpose() * x);
    RowMatrix rank_dx = d_kv_a * matrix(*shard.kv_a_proj_with_mqa);
    if (shard.q_a_proj) {
      grads.q_b_proj = as_tensor(d_q.transpose() * p.q_latent);
      RowMatrix d_q_latent = d_q * matrix(*shard.q_b_proj);
      grads.q_a_layernorm = rms_norm_backward(p.q_latent_input, p.q_inverse, *shard.q_a_layernorm, d_q_latent);
      grads.q_a_proj = as_tensor(d_q_latent.transpose() * x);
      rank_dx += d_q_latent * matrix(*shard.q_a_proj);
    } else {
      grads.q_proj = as_tensor(d_q.transpose() * x);
      rank_dx += d_q * matrix(shard.q_proj);
    }
    dx += rank_dx;
    partials.push_back(std::move(grads));
  }

  Result result;
  result.implementation = "naive latent layer";
  result.out = Tensor({in.batch, in.seq, hidden}, std::vector<double>(out.data(), out.data() + out.size()));
  result.rank_gradients = reduce_gradients(partials, plan);
  result.gradients = Gradients{.x = Tensor({in.batch, in.seq, hidden}, std::vector<double>(dx.data(), dx.data() + dx.size())),
                               .params = gather_gradients(result.rank_gradients, plan)};

  if (!in.decode.empty()) {
    // Every call of the schedule through each rank's cache, partial outputs summed in rank order.
    const std::int64_t total = in.decode.total();
    RowMatrix decoded = RowMatrix::Zero(in.batch * total, hidden);
    const std::vector<std::int64_t> calls = in.decode.calls();
    for (int r = 0; r < plan.tp_size; ++r) {
      const Parameters shard = shard_parameters(test_case.weights, plan, r);
      const Shape s = shape_of(latent, plan.ranks[r].q_heads.size());
      const std::vector<std::int64_t> columns = o_proj_input_columns(latent, s.heads);
      const ConstMatrixMap kv_b = matrix(*shard.kv_b_proj);
      // Per batch row: expanded K [cached, H * Q] and V [cached, H * V]; absorbed keys [cached, L + R] (k_pe
      // unrotated when absorbed_k_pe_rotated_when_cached() is false) and values [cached, L].
      std::vector<RowMatrix> cache_k(in.batch), cache_v(in.batch);
      std::int64_t start = 0;
      for (const std::int64_t count : calls) {
        RowMatrix call_x(in.batch * count, hidden);
        std::vector<std::int64_t> positions(static_cast<std::size_t>(in.batch * count));
        for (std::int64_t b = 0; b < in.batch; ++b) {
          call_x.middleRows(b * count, count) = x.middleRows(b * in.seq + start, count);
          for (std::int64_t i = 0; i < count; ++i) positions[b * count + i] = in.positions[b * in.seq + start + i];
        }
        const RopeFrequencies call_frequencies = call_rope_frequencies(geometry, positions);
        Projected p = project(shard, latent, s, call_x, k_pe_rows_first());
        rotate(p.q, positions, s.q_width, first, s.rope, call_frequencies, interleaved, 1.0);
        RowMatrix context(in.batch * count, s.heads * s.v_width);
        for (std::int64_t b = 0; b < in.batch; ++b) {
          const RowMatrix q = p.q.middleRows(b * count, count);
          if (!decode_absorbed()) {
            RowMatrix k = p.k.middleRows(b * count, count);
            rotate(k, std::span(positions).subspan(b * count, count), s.q_width, first, s.rope, call_frequencies,
                   interleaved, 1.0);
            RowMatrix keys(cache_k[b].rows() + count, k.cols()), values(cache_v[b].rows() + count, p.v.cols());
            keys << cache_k[b], k;
            values << cache_v[b], p.v.middleRows(b * count, count);
            cache_k[b] = keys;
            cache_v[b] = values;
            for (std::int64_t h = 0; h < s.heads; ++h) {
              context.block(b * count, h * s.v_width, count, s.v_width) =
                  attend(geometry, scale, q.middleCols(h * s.q_width, s.q_width), keys.middleCols(h * s.q_width, s.q_width),
                         values.middleCols(h * s.v_width, s.v_width), in.key_lengths[b], geometry.softcap())
                      .context;
            }
            continue;
          }
          RowMatrix k_pe = p.k_pe.middleRows(b * count, count);
          if (absorbed_k_pe_rotated_when_cached()) {
            rotate(k_pe, std::span(positions).subspan(b * count, count), s.rope, 0, s.rope, call_frequencies,
                   interleaved, 1.0);
          }
          const RowMatrix cached_latent = absorbed_cache_normed() ? RowMatrix(p.latent.middleRows(b * count, count))
                                                                  : RowMatrix(p.latent_input.middleRows(b * count, count));
          RowMatrix keys(cache_k[b].rows() + count, s.lora + s.rope);
          keys << cache_k[b], (RowMatrix(count, s.lora + s.rope) << cached_latent, k_pe).finished();
          cache_k[b] = keys;
          if (!absorbed_k_pe_rotated_when_cached()) {  // every cached k_pe at the call's last position
            const std::vector<std::int64_t> last(static_cast<std::size_t>(keys.rows()), positions[b * count + count - 1]);
            rotate(keys, last, s.lora + s.rope, s.lora, s.rope, call_frequencies, interleaved, 1.0);
          }
          for (std::int64_t h = 0; h < s.heads; ++h) {
            RowMatrix q_absorbed(count, s.lora + s.rope);
            q_absorbed << q.middleCols(h * s.q_width, s.nope) * kv_b.middleRows(h * (s.nope + s.v_width), s.nope),
                q.middleCols(h * s.q_width + s.nope, s.rope);
            const RowMatrix latent_context =
                attend(geometry, scale, q_absorbed, keys, keys.leftCols(s.lora), in.key_lengths[b], geometry.softcap())
                    .context;
            context.block(b * count, h * s.v_width, count, s.v_width) =
                latent_context * kv_b.middleRows(h * (s.nope + s.v_width) + s.nope, s.v_width).transpose();
          }
        }
        RowMatrix o_input = RowMatrix::Zero(context.rows(), static_cast<std::int64_t>(columns.size()));
        for (std::size_t j = 0; j < columns.size(); ++j) {
          if (columns[j] >= 0) o_input.col(static_cast<std::int64_t>(j)) = context.col(columns[j]);
        }
        const RowMatrix partial = o_input * matrix(shard.o_proj).transpose();
        for (std::int64_t b = 0; b < in.batch; ++b) {
          decoded.middleRows(b * total + start, count) += partial.middleRows(b * count, count);
        }
        start += count;
      }
    }
    result.decode_out =
        Tensor({in.batch, total, hidden}, std::vector<double>(decoded.data(), decoded.data() + decoded.size()));
  }
  return result;
}

}  // namespace attncheck::mutants
