#include "mutants/tiled_layer.hpp"

#include <algorithm>
#include <cmath>

#include "impl/implementation.hpp"

namespace attncheck::mutants {

using reference::RowVector;

namespace {

RowVector finish(const SoftmaxState& state) {
  return state.sum > 0.0 ? RowVector(state.accumulator / state.sum)
                         : RowVector(RowVector::Zero(state.accumulator.size()));
}

std::int64_t tiles_over(std::int64_t keys) {
  return (keys + TiledLayer::kTileKeys - 1) / TiledLayer::kTileKeys;
}

}  // namespace

void TiledLayer::add_keys(SoftmaxState& state, const RowMatrix& scores, std::int64_t row, const ConstMatrixRef& v,
                          std::int64_t first_key, std::int64_t end_key) const {
  const auto tile_scores = scores.row(row).segment(first_key, end_key - first_key);
  const double maximum = std::max(state.maximum, tile_scores.maxCoeff());
  if (maximum > state.maximum) rescale(state, std::exp(state.maximum - maximum));  // 0 before any key
  state.maximum = maximum;
  const RowVector exps = (tile_scores.array() - maximum).exp().matrix();
  accumulate(state, exps, v.middleRows(first_key, end_key - first_key));
}

void TiledLayer::accumulate(SoftmaxState& state, const RowVector& exps, const ConstMatrixRef& v_rows) const {
  state.sum += exps.sum();
  state.accumulator += exps * v_rows;
}

void TiledLayer::rescale(SoftmaxState& state, double factor) const {
  state.sum *= factor;
  state.accumulator *= factor;
}

void TiledLayer::skip_piece(SoftmaxState&, const ConstMatrixRef&, bool) const {}

std::int64_t TiledLayer::first_key_tile(std::span<const KeyRange> block_rows) const {
  std::int64_t first = -1;
  for (const KeyRange& keys : block_rows) {
    if (keys.end > keys.begin && (first < 0 || keys.begin < first)) first = keys.begin;
  }
  return first < 0 ? 0 : first / kTileKeys;
}

RowVector TiledLayer::combine_pieces(std::span<const SoftmaxState> pieces, std::span<const std::int64_t>) const {
  double maximum = -std::numeric_limits<double>::infinity();
  for (const SoftmaxState& piece : pieces) maximum = std::max(maximum, piece.maximum);
  RowVector numerator = RowVector::Zero(pieces.front().accumulator.size());
  double denominator = 0.0;
  for (const SoftmaxState& piece : pieces) {
    if (piece.sum == 0.0) continue;  // a piece with no visible key
    const double weight = std::exp(piece.maximum - maximum);
    numerator += weight * piece.accumulator;
    denominator += weight * piece.sum;
  }
  return denominator > 0.0 ? RowVector(numerator / denominator) : numerator;
}

std::optional<double> TiledLayer::sink_logit(const Parameters& shard, std::int64_t local_head) const {
  if (shard.sinks) {
    throw impl::Unsupported("tiled layer", "attention sinks: the online softmax modelled here has no sink term");
  }
  return NaiveLayer::sink_logit(shard, local_head);
}

RowMatrix TiledLayer::head_context(const RowMatrix& scores, std::span<const KeyRange> visible, const ConstMatrixRef& v,
                                   const RowMatrix&) const {
  const std::int64_t seq_q = scores.rows(), seq_k = scores.cols(), head_dim = v.cols();
  RowMatrix context = RowMatrix::Zero(seq_q, head_dim);
  const SoftmaxState empty{.accumulator = RowVector::Zero(head_dim)};
  if (seq_q < seq_k) {  // decoding from a cache: one partial softmax per piece of kTileKeys keys, combined
    const std::int64_t pieces = tiles_over(seq_k);
    for (std::int64_t i = 0; i < seq_q; ++i) {
      std::vector<SoftmaxState> states(static_cast<std::size_t>(pieces), empty);
      std::vector<std::int64_t> counts(static_cast<std::size_t>(pieces), 0);
      for (std::int64_t piece = 0; piece < pieces; ++piece) {
        const std::int64_t begin = std::max(piece * kTileKeys, visible[i].begin);
        const std::int64_t end = std::min((piece + 1) * kTileKeys, visible[i].end);
        if (begin >= end) {
          const std::int64_t piece_end = std::min((piece + 1) * kTileKeys, seq_k);
          skip_piece(states[piece], v.middleRows(piece * kTileKeys, piece_end - piece * kTileKeys),
                     piece_end <= visible[0].begin);
          continue;
        }
        add_keys(states[piece], scores, i, v, begin, end);
        counts[piece] = end - begin;
      }
      context.row(i) = combine_pieces(states, counts);
    }
    return context;
  }
  for (std::int64_t block = 0; block < seq_q; block += kBlockRows) {
    const std::span<const KeyRange> rows = visible.subspan(block, std::min(kBlockRows, seq_q - block));
    const std::int64_t first_tile = first_key_tile(rows);
    for (std::size_t r = 0; r < rows.size(); ++r) {
      const std::int64_t i = block + static_cast<std::int64_t>(r);
      SoftmaxState state = empty;
      for (std::int64_t tile = first_tile; tile < tiles_over(seq_k); ++tile) {
        const std::int64_t begin = std::max(tile * kTileKeys, visible[i].begin);
        const std::int64_t end = std::min((tile + 1) * kTileKeys, visible[i].end);
        if (begin < end) add_keys(state, scores, i, v, begin, end);
      }
      context.row(i) = finish(state);
    }
  }
  return context;
}

}  // namespace attncheck::mutants
