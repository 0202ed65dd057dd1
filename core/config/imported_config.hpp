// What a config importer produces: the geometry a file states, plus what the import decided.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/model/geometry.hpp"

namespace attncheck {

struct ImportedConfig {
  GeometrySpec spec;
  std::string source;                   // "hf config 'path'" — how messages name the file
  std::string model_type;               // HF model_type, or "gpt-neox" for NeoX YAML
  std::optional<std::int64_t> tp_size;  // a TP size the file states (NeoX model_parallel_size)
  std::vector<std::string> notes;       // decisions worth showing: defaults applied, layer kind chosen
  // The kind of layer imported, as `attncheck plan` shows it: "layer 3 of 36: full_attention, no RoPE
  // (no_rope_layers)"; empty for sources without layers.
  std::string layer_kind;
  // What the source's layer does that attncheck cannot express yet (the spec leaves it out): shown by
  // `plan`, and a reason for everything else to refuse the layer. Empty: nothing left out.
  std::vector<std::string> not_modelled;
};

}  // namespace attncheck
