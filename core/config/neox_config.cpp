#include "core/config/neox_config.hpp"

#include <fmt/format.h>

#include "core/config/config_parse.hpp"
#include "core/config/config_reader.hpp"
#include "core/config/text_file.hpp"

namespace attncheck {

namespace {

// attention_config is [[[types...], repeat], ...], expanded in order over the layers; only dense
// attention ("global", "flash") is modelled. Returns layer 0's type ("global" when absent, as NeoX).
std::string layer0_attention_type(ConfigReader& reader) {
  const nlohmann::json* config = reader.find("attention_config");
  if (config == nullptr) return "global";
  const auto reject = [&](const std::string& value, const std::string& rule) {
    reader.reject("attention_config", value, rule, "use [[[\"global\"], num_layers]] or [[[\"flash\"], num_layers]]");
    return std::string("global");
  };
  if (!config->is_array() || config->empty())
    return reject(ConfigReader::describe(*config), "must be a list of [[types], repeat]");
  std::string first;
  for (const nlohmann::json& entry : *config) {
    if (!entry.is_array() || entry.size() != 2 || !entry[0].is_array() || entry[0].empty() ||
        !entry[1].is_number_integer() || entry[1].get<std::int64_t>() < 1) {
      return reject(ConfigReader::describe(entry), "each entry must be [[types], repeat] with repeat >= 1");
    }
    for (const nlohmann::json& type : entry[0]) {
      if (type != "global" && type != "flash") {
        return reject(ConfigReader::describe(type),
                      "attention types other than \"global\" and \"flash\" (dense causal attention) are not modelled");
      }
      if (first.empty()) first = type.get<std::string>();
    }
  }
  return first;
}

}  // namespace

ImportedConfig import_neox_config_text(const std::string& text, const std::string& source) {
  const nlohmann::json root = parse_yaml_as_json(text, source);
  if (!root.is_object()) {
    throw InputError(source, {{"config", ConfigReader::describe(root), "must be a YAML mapping of NeoX arguments",
                               "pass a GPT-NeoX model config such as configs/20B.yml"}});
  }
  ImportedConfig imported;
  imported.source = source;
  imported.model_type = "gpt-neox";
  GeometrySpec& spec = imported.spec;
  ConfigReader reader(root, source, "", /*dash_aliases=*/true);

  spec.hidden_size = reader.required_integer("hidden_size", "add hidden-size, e.g. 6144").value_or(0);
  spec.num_heads = reader.required_integer("num_attention_heads", "add num-attention-heads, e.g. 64").value_or(0);
  spec.num_kv_heads = reader.integer("num_kv_heads");
  spec.head_dim = reader.integer("head_dim");
  imported.tp_size = reader.integer("model_parallel_size");

  const std::string pos_emb = reader.text("pos_emb").value_or("learned");
  const auto rotary_pct = reader.number("rotary_pct");
  spec.rope_theta = reader.number("rotary_emb_base").value_or(10000.0);
  spec.rope_style = RopeStyle::half_split;
  if (pos_emb == "rotary") {
    spec.rotary_pct = rotary_pct.value_or(1.0);
  } else if (pos_emb == "learned" || pos_emb == "sinusoidal" || pos_emb == "none") {
    spec.rotary_dim = 0;
    imported.notes.push_back(fmt::format("pos_emb \"{}\" acts outside attention: no RoPE (rotary_dim 0){}", pos_emb,
                                         rotary_pct ? "; rotary_pct ignored" : ""));
  } else {
    reader.reject(
        "pos_emb", "\"" + pos_emb + "\"",
        "must be \"rotary\", \"learned\", \"sinusoidal\" or \"none\": score biases (rpe, alibi) are not modelled",
        "pos_emb = \"rotary\"");
  }

  const bool bias = reader.boolean("use_bias_in_attn_linear").value_or(true);
  spec.qkv_bias = bias;
  spec.out_bias = bias;
  // NeoX passes window_size=(width, -1) to flash-attn: keys i - width ... i, that is width + 1 keys, and
  // only on "flash" layers; its other attention paths ignore the width.
  const std::string attention_type = layer0_attention_type(reader);
  if (const auto width = reader.integer("sliding_window_width")) {
    if (attention_type == "flash") {
      spec.sliding_window = *width + 1;
      imported.notes.push_back(
          fmt::format("sliding_window_width {} on a flash layer: each query sees {} keys", *width, *width + 1));
    } else {
      imported.notes.push_back(
          fmt::format("sliding_window_width {} ignored: GPT-NeoX applies it on \"flash\" layers only, and layer 0 "
                      "is \"{}\"",
                      *width, attention_type));
    }
  }
  if (reader.boolean("use_mup").value_or(false)) {
    reader.reject("use_mup", "true",
                  "is not modelled: with muP GPT-NeoX divides scores by head_dim instead of sqrt(head_dim)",
                  "set use_mup to false");
  }
  if (reader.boolean("use_qk_layernorm").value_or(false)) {
    reader.reject("use_qk_layernorm", "true",
                  "is not modelled: GPT-NeoX normalises q and k over [local heads, head_dim] jointly, which "
                  "depends on the TP size",
                  "set use_qk_layernorm to false");
  }
  spec.qk_norm = QkNorm::none;
  spec.causal = true;
  reader.finish();
  return imported;
}

ImportedConfig import_neox_config_file(const std::string& path) {
  return import_neox_config_text(read_text_file(path, "--neox-config"), "neox config '" + path + "'");
}

}  // namespace attncheck
