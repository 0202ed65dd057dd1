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
};

}  // namespace attncheck
