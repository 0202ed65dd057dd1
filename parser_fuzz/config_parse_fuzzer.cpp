// The JSON and YAML readers (core/config/config_parse.hpp): bounded values, depth and bytes, linear time.
#include "core/config/config_parse.hpp"
#include "parser_fuzz/fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = attncheck::fuzz::as_text(data, size);
  attncheck::fuzz::expect_clean_refusal([&] { attncheck::parse_json(text, "fuzz.json"); });
  attncheck::fuzz::expect_clean_refusal([&] { attncheck::parse_yaml_as_json(text, "fuzz.yml"); });
  return 0;
}
