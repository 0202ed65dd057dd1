// The mutants that are not a reference fault (reference/fault.hpp) but a change around the reference:
// to the weights it is given, the geometry it is built with, or the positions it reads. catalog.cpp
// registers them.
#pragma once

#include "core/model/case.hpp"
#include "core/model/result.hpp"

namespace attncheck::properties::mutants {

// Weights (weight_mutants.cpp)
Result swapped_query_heads(const Case& test_case);  // query heads 0 and 1 exchange q_proj rows
Result kv_head_modulo(const Case& test_case);       // query head h reads KV head h % H_kv, not h / group
Result o_proj_hidden_wide(const Case& test_case);   // o_proj reads only the first hidden_size context channels

// Geometry and positions (geometry_mutants.cpp)
Result quotient_scale(const Case& test_case);             // scale (hidden / num_heads)^-0.5
Result head_dim_from_quotient(const Case& test_case);     // builds head_dim = hidden / num_heads: shape error
Result context_hidden_width(const Case& test_case);       // reshapes the context to hidden width: shape error
Result rope_full_head(const Case& test_case);             // rotates all of head_dim despite rotary_dim
Result rope_style_swapped(const Case& test_case);         // half-split and interleaved pairing exchanged
Result rope_ignores_position_ids(const Case& test_case);  // RoPE at the sequence index, not the position id

}  // namespace attncheck::properties::mutants
