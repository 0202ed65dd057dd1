// Presets equal the import of the official config they name, and every preset is a valid geometry.
#include "core/config/presets.hpp"

#include <set>

#include <gtest/gtest.h>

#include "core/config/hf_config.hpp"
#include "core/testing/source_tree.hpp"

namespace attncheck {
namespace {

TEST(Presets, EachEqualsTheImportOfItsOfficialConfig) {
  int compared = 0;
  for (const Preset& preset : presets()) {
    if (preset.hf_config_file.empty()) continue;
    SCOPED_TRACE(std::string(preset.name));
    const ImportedConfig imported =
        import_hf_config_file(source_tree_path("core/config/hf_configs/" + std::string(preset.hf_config_file)));
    EXPECT_EQ(imported.spec, preset.spec);
    ++compared;
  }
  EXPECT_EQ(compared, 12);
}

TEST(Presets, NamesAreUniqueAndEveryPresetIsValid) {
  std::set<std::string> names;
  for (const Preset& preset : presets()) {
    EXPECT_TRUE(names.insert(std::string(preset.name)).second) << preset.name;
    EXPECT_NO_THROW(resolve_geometry(preset.spec)) << preset.name;
    EXPECT_EQ(find_preset(preset.name), &preset);
  }
  for (const char* required : {"qwen3-0.6b", "qwen3-4b", "qwen3-32b", "gemma-3-270m", "gemma-7b", "llama-3-8b",
                               "gpt-neox-20b", "mistral-7b"}) {
    EXPECT_NE(find_preset(required), nullptr) << required;
  }
  EXPECT_EQ(find_preset("qwen9"), nullptr);
  EXPECT_EQ(preset_names().size(), presets().size());
}

TEST(Presets, Gemma7bHeadDimIsNotTheQuotient) {
  const Geometry geometry = resolve_geometry(find_preset("gemma-7b")->spec);
  EXPECT_EQ(geometry.head_dim(), 256);
  EXPECT_EQ(geometry.quotient_head_dim(), 192);
  EXPECT_EQ(geometry.query_width(), 4096);  // o_proj maps 4096 back to 3072
}

}  // namespace
}  // namespace attncheck
