// The Hugging Face config.json importer (core/config/hf_config.hpp), then the geometry it describes:
// every accepted config must resolve, or be refused as bad input.
#include "core/config/hf_config.hpp"
#include "core/model/geometry.hpp"
#include "parser_fuzz/fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = attncheck::fuzz::as_text(data, size);
  for (const std::int64_t layer : {0, 1}) {  // per-layer kinds (layer_types, sliding_window_pattern) too
    attncheck::fuzz::expect_clean_refusal([&] {
      const attncheck::ImportedConfig imported =
          attncheck::import_hf_config_text(text, "config.json", {.layer = layer});
      attncheck::resolve_geometry(imported.spec);
    });
  }
  return 0;
}
