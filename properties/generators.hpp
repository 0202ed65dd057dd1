// RapidCheck generators of attention cases: random geometries whose head_dim is often not
// hidden_size / num_heads, GQA groups, partial RoPE in both pairings, QK-norm, biases, softcap, windows,
// TP sizes from the valid set (replicated KV included), and inputs with large position offsets, gaps,
// key padding and decode schedules. Built constructively (gen::mapcat on what each choice depends on),
// never by filtering, so every generated spec is valid and shrinking keeps it valid.
#pragma once

#include <cstdint>

#include <rapidcheck.h>

#include "properties/case_spec.hpp"

namespace attncheck::properties {

// Upper bounds at RapidCheck size 100; smaller sizes scale them down (size 0: the smallest case).
struct GenLimits {
  std::int64_t max_kv_heads = 4;
  std::int64_t max_group = 4;
  std::int64_t max_head_dim = 256;  // even head_dims 2 .. this
  std::int64_t max_hidden = 256;
  std::int64_t max_batch = 3;
  std::int64_t max_seq = 12;  // at least 3: a single token cannot reveal a mask bug

  // `attncheck fuzz --max-size F`: every bound times F (at least the minimum each needs).
  GenLimits scaled(double factor) const;
};

rc::Gen<CaseSpec> case_specs(const GenLimits& limits = {});

}  // namespace attncheck::properties
