// The fp64 reference implementations:
//   "reference"     the whole layer on one rank, unsharded
//   "reference-tp"  the layer cut by case.plan: every rank runs on its shard only (all key positions,
//                   its own heads), the o_proj partials are summed in rank order and o_bias added once,
//                   dx is summed over ranks, gradients reduced as core/tp/tp_shard.hpp describes
// Both validate the case first (InputError on bad input) and run the decode schedule when present.
#pragma once

#include <vector>

#include "core/model/case.hpp"
#include "core/model/result.hpp"

namespace attncheck::reference {

struct RunOptions {
  bool gradients = true;       // run the backward pass with inputs.dout
  bool intermediates = false;  // fill Result::intermediates
  bool decode = true;          // run inputs.decode (if any) and fill Result::decode_out
};

Result run_reference(const Case& test_case, const RunOptions& options = {});
Result run_reference_tp(const Case& test_case, const RunOptions& options = {});
// Each rank's own gradients under the case's TP plan (its shard's layout, rank order) before any
// reduction across ranks (replica groups, norms), with every all-reduce of the forward in place: what a
// layer that skips those reductions reports (golden coverage measures that such a layer is caught).
std::vector<Parameters> rank_partial_gradients(const Case& test_case);

}  // namespace attncheck::reference
