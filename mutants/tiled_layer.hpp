// The naive layer (naive_layer.hpp) with its context computed the way attention kernels compute it: an
// online softmax over key tiles of kTileKeys for blocks of kBlockRows queries (FlashAttention's
// forward), and for decoding calls (fewer queries than keys) a split-KV pass, one partial softmax per
// piece of the cache combined at the end (FlashDecoding). fp64 throughout, so that, correct, it matches
// the reference to rounding (long_properties_test checks it); the steps where kernels have gone wrong
// are virtual, and the long-sequence mutants (layer_mutants.cpp) override one each. With at most
// kTileKeys keys there is one tile and one piece, so those mutants are right on every short case and
// only the long profile (generators.hpp) catches them.
//
// Per query row the running state is its maximum m, its sum l and its accumulator acc [head_dim]:
//   for each key tile: m' = max(m, tile max); rescale by exp(m - m'); l += sum exp(s - m');
//                      acc += sum exp(s - m') v; m = m'
//   context = acc / l (0 for a row that sees no key)
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "mutants/naive_layer.hpp"
#include "reference/eigen_types.hpp"

namespace attncheck::mutants {

// One query row's online-softmax state over the keys seen so far.
struct SoftmaxState {
  double maximum = -std::numeric_limits<double>::infinity();  // before any key
  double sum = 0.0;                                           // sum of exp(score - maximum)
  reference::RowVector accumulator;                           // sum of exp(score - maximum) * v, [head_dim]
};

class TiledLayer : public NaiveLayer {
 public:
  static constexpr std::int64_t kBlockRows = 64;  // queries per block
  static constexpr std::int64_t kTileKeys = 64;   // keys per tile, and per split-KV piece when decoding

 protected:
  RowMatrix head_context(const RowMatrix& scores, std::span<const KeyRange> visible, const ConstMatrixRef& v,
                         const RowMatrix& probabilities) const override;

  // The kernels modelled here have no attention sinks: a case with sinks is unsupported, not answered
  // without them.
  std::optional<double> sink_logit(const Parameters& shard, std::int64_t local_head) const override;

  // The first key tile a block of queries visits (tiles before it are skipped for the whole block): the
  // tile of the smallest first visible key among the block's rows.
  virtual std::int64_t first_key_tile(std::span<const KeyRange> block_rows) const;
  // When a tile raises a row's maximum, the state kept so far is scaled by factor = exp(old - new).
  virtual void rescale(SoftmaxState& state, double factor) const;
  // Decoding: one row's context from the states of the cache's pieces (each over its own keys).
  virtual reference::RowVector combine_pieces(std::span<const SoftmaxState> pieces,
                                              std::span<const std::int64_t> visible_keys_per_piece) const;

  // Decoding: a piece of the cache none of whose keys the row sees is skipped, its V never read.
  // `released`: the piece lies wholly before the window of the call's first query, so a paged cache
  // holding it would have freed its blocks (v_rows is what the cache held there).
  virtual void skip_piece(SoftmaxState& state, const ConstMatrixRef& v_rows, bool released) const;
  // Adds one tile's exp(score - maximum) (exps [keys]) and their products with v (v_rows [keys, head_dim])
  // to the row sum and the accumulator, in fp64 (a kernel's fp32 registers, exactly).
  virtual void accumulate(SoftmaxState& state, const reference::RowVector& exps, const ConstMatrixRef& v_rows) const;
  // Folds the visible keys of one tile into a row's state.
  void add_keys(SoftmaxState& state, const RowMatrix& scores, std::int64_t row, const ConstMatrixRef& v,
                std::int64_t first_key, std::int64_t end_key) const;
};

}  // namespace attncheck::mutants
