// Built-in geometries of real models, each one layer's attention as the model's official config.json
// states it (layer 0: for Gemma 3 that is a sliding-window layer). presets_test.cpp checks that every
// preset with a config file equals import_hf_config_file() of that file.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/model/geometry.hpp"

namespace attncheck {

struct Preset {
  std::string_view name;            // e.g. "qwen3-0.6b"
  std::string_view model;           // the model it comes from, e.g. "Qwen/Qwen3-0.6B"
  std::string_view hf_config_file;  // file in core/config/hf_configs/, empty when no official file is held
  GeometrySpec spec;
};

std::span<const Preset> presets();
const Preset* find_preset(std::string_view name);  // nullptr when unknown
std::vector<std::string> preset_names();

}  // namespace attncheck
