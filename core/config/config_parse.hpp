// Parses config text into a JSON tree: JSON directly, YAML by conversion, so GPT-NeoX configs are read
// by the same ConfigReader as HF config.json. YAML plain scalars are typed as YAML's core schema does
// (null, true/True/false/False, integers, floats); quoted scalars stay strings.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace attncheck {

// Parses YAML text; a syntax error becomes an InputError naming source, line and column.
nlohmann::json parse_yaml_as_json(const std::string& text, const std::string& source);

// Parses JSON text; a syntax error becomes an InputError naming source and byte offset.
nlohmann::json parse_json(const std::string& text, const std::string& source);

}  // namespace attncheck
