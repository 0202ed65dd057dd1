// The GPT-NeoX YAML importer (core/config/neox_config.hpp), then the geometry it describes.
#include "core/config/neox_config.hpp"
#include "core/model/geometry.hpp"
#include "parser_fuzz/fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = attncheck::fuzz::as_text(data, size);
  attncheck::fuzz::expect_clean_refusal([&] {
    const attncheck::ImportedConfig imported = attncheck::import_neox_config_text(text, "neox.yml");
    attncheck::resolve_geometry(imported.spec);
  });
  return 0;
}
