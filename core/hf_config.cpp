#include "core/hf_config.hpp"

#include <fmt/format.h>

#include "core/config_parse.hpp"
#include "core/config_reader.hpp"
#include "core/nearby.hpp"
#include "core/text_file.hpp"

namespace attncheck {

namespace {

enum class Family { gemma3, qwen3, qwen2, gpt_neox, other };

Family family_of(const std::string& model_type) {
  if (model_type == "gemma3" || model_type == "gemma3_text") return Family::gemma3;
  if (model_type == "qwen3" || model_type == "qwen3_moe") return Family::qwen3;
  if (model_type == "qwen2" || model_type == "qwen2_moe") return Family::qwen2;
  if (model_type == "gpt_neox") return Family::gpt_neox;
  return Family::other;
}

// transformers' Gemma3TextConfig defaults, applied to keys the file omits (Gemma 3 4B's text_config
// states only hidden_size, layers and sliding_window).
const nlohmann::json& gemma3_defaults() {
  static const nlohmann::json defaults = {{"hidden_size", 2304},      {"num_hidden_layers", 26},
                                          {"num_attention_heads", 8}, {"num_key_value_heads", 4},
                                          {"head_dim", 256},          {"query_pre_attn_scalar", 256},
                                          {"rope_theta", 1000000.0},  {"rope_local_base_freq", 10000.0},
                                          {"sliding_window", 4096},   {"sliding_window_pattern", 6},
                                          {"rms_norm_eps", 1e-6},     {"attention_bias", false}};
  return defaults;
}

enum class LayerKind { full, sliding };

std::string_view to_string(LayerKind kind) {
  return kind == LayerKind::full ? "full_attention" : "sliding_attention";
}

// Which kind of attention layer `layer` is, from layer_types, Gemma 3's pattern, or Qwen2-style
// use_sliding_window / max_window_layers, or a model-wide sliding_window (Mistral).
LayerKind layer_kind(ConfigReader& reader, Family family, std::int64_t layer) {
  if (const nlohmann::json* layer_types = reader.find("layer_types")) {
    if (!layer_types->is_array() || layer >= static_cast<std::int64_t>(layer_types->size())) {
      reader.reject("layer_types", ConfigReader::describe(*layer_types),
                    fmt::format("must be a list with an entry for layer {}", layer), "list one type per layer");
      return LayerKind::full;
    }
    const nlohmann::json& type = (*layer_types)[static_cast<std::size_t>(layer)];
    if (type == "full_attention") return LayerKind::full;
    if (type == "sliding_attention") return LayerKind::sliding;
    reader.reject(fmt::format("layer_types[{}]", layer), ConfigReader::describe(type),
                  "must be \"full_attention\" or \"sliding_attention\"; other layer kinds are not modelled",
                  "choose a layer of one of those kinds");
    return LayerKind::full;
  }
  if (family == Family::gemma3) {
    // transformers: layer i is sliding unless (i + 1) % pattern == 0.
    std::optional<std::int64_t> pattern = reader.integer("sliding_window_pattern");
    if (!pattern) pattern = reader.integer("_sliding_window_pattern");
    const std::int64_t every = pattern.value_or(6);
    if (every < 1) {
      reader.reject("sliding_window_pattern", std::to_string(every), "must be >= 1", "sliding_window_pattern = 6");
      return LayerKind::full;
    }
    return (layer + 1) % every == 0 ? LayerKind::full : LayerKind::sliding;
  }
  if (auto use_sliding = reader.boolean("use_sliding_window")) {
    if (!*use_sliding) return LayerKind::full;
    return layer >= reader.integer("max_window_layers").value_or(0) ? LayerKind::sliding : LayerKind::full;
  }
  return reader.find("sliding_window") != nullptr ? LayerKind::sliding : LayerKind::full;
}

// Reads rope_theta for this layer and rejects RoPE scaling attncheck does not model.
double rope_theta_for(ConfigReader& reader, Family family, LayerKind kind, ImportedConfig& imported) {
  const bool gemma_local = family == Family::gemma3 && kind == LayerKind::sliding;
  std::optional<double> theta;
  std::string scaling_key = "rope_scaling";
  const nlohmann::json* scaling = nullptr;
  if (const nlohmann::json* parameters = reader.find("rope_parameters")) {
    // transformers v5: {"rope_type", "rope_theta"} or one such object per layer kind.
    const nlohmann::json* chosen = parameters;
    if (parameters->is_object() && parameters->contains(to_string(kind))) {
      chosen = &(*parameters)[std::string(to_string(kind))];
      scaling_key = fmt::format("rope_parameters.{}", to_string(kind));
    } else {
      scaling_key = "rope_parameters";
    }
    ConfigReader nested = reader.child(*chosen, scaling_key);
    theta = nested.number("rope_theta");
    if (nested.text("rope_type").value_or("default") != "default") scaling = chosen;
  } else if (gemma_local) {
    theta = reader.number("rope_local_base_freq");
    imported.notes.push_back("RoPE base from rope_local_base_freq (Gemma 3 sliding layers)");
  } else {
    theta = reader.number("rope_theta");
    if (!theta && family == Family::gpt_neox) theta = reader.number("rotary_emb_base");
    scaling = reader.find("rope_scaling");
  }
  // Gemma 3's sliding layers use plain RoPE; rope_scaling applies to its full layers only.
  if (scaling != nullptr && !gemma_local) {
    const nlohmann::json* type = scaling->is_object() ? (scaling->contains("rope_type") ? &(*scaling)["rope_type"]
                                                         : scaling->contains("type")    ? &(*scaling)["type"]
                                                                                        : nullptr)
                                                      : nullptr;
    if (type == nullptr || *type != "default") {
      reader.reject(scaling_key, ConfigReader::describe(*scaling),
                    "RoPE scaling other than the default is not modelled by attncheck",
                    "remove rope_scaling, or import a layer that does not use it (Gemma 3 sliding layers)");
    }
  }
  return theta.value_or(10000.0);
}

}  // namespace

ImportedConfig import_hf_config_text(const std::string& text, const std::string& source,
                                     const HfImportOptions& options) {
  const nlohmann::json root = parse_json(text, source);
  if (!root.is_object()) {
    throw InputError(
        source, {{"config", ConfigReader::describe(root), "must be a JSON object", "pass a Hugging Face config.json"}});
  }
  ImportedConfig imported;
  imported.source = source;
  // Multimodal wrappers keep the language model's keys in text_config; read those instead.
  const auto text_config = root.find("text_config");
  const bool nested = text_config != root.end() && text_config->is_object();
  nlohmann::json config = nested ? *text_config : root;
  ConfigReader root_reader(root, source);
  ConfigReader reader = root_reader.child(config, nested ? "text_config" : "");
  if (const nlohmann::json* value = root_reader.find("text_config"); value != nullptr && !nested) {
    root_reader.reject("text_config", ConfigReader::describe(*value), "must be an object when present",
                       "remove it or give the language model's keys in it");
  }
  if (nested) imported.notes.push_back("read text_config (the language model of a multimodal config)");

  const std::string model_type = reader.text("model_type").value_or(root_reader.text("model_type").value_or(""));
  imported.model_type = model_type.empty() ? "unknown" : model_type;
  const Family family = family_of(model_type);

  if (family == Family::gemma3) {
    std::vector<std::string> filled;
    for (const auto& [key, value] : gemma3_defaults().items()) {
      if (config.contains(key)) continue;
      config[key] = value;
      if (key != "num_hidden_layers" && key != "sliding_window_pattern") filled.push_back(key);
    }
    if (!filled.empty()) {
      imported.notes.push_back(
          fmt::format("Gemma 3 defaults (as transformers applies them) for {}", fmt::join(filled, ", ")));
    }
  }

  ViolationList& violations = reader.violations();
  GeometrySpec& spec = imported.spec;

  const auto hidden_size = reader.required_integer("hidden_size", "add \"hidden_size\", the residual width, e.g. 1024");
  const auto num_heads =
      reader.required_integer("num_attention_heads", "add \"num_attention_heads\", the number of query heads, e.g. 16");
  spec.hidden_size = hidden_size.value_or(0);
  spec.num_heads = num_heads.value_or(0);
  spec.num_kv_heads = reader.integer("num_key_value_heads");
  spec.head_dim = reader.integer("head_dim");

  const std::int64_t layers = reader.integer("num_hidden_layers").value_or(INT64_MAX);
  if (options.layer < 0 || options.layer >= layers) {
    violations.add("layer", std::to_string(options.layer), fmt::format("must be a layer index in [0, {})", layers),
                   "nearby valid: layer = 0");
    reader.finish();
  }
  const LayerKind kind = layer_kind(reader, family, options.layer);
  imported.notes.push_back(fmt::format("layer {}: {}", options.layer, to_string(kind)));
  if (kind == LayerKind::sliding) {
    spec.sliding_window = reader.integer("sliding_window");
    if (!spec.sliding_window) {
      reader.reject("sliding_window", "absent", "is required for a sliding_attention layer",
                    "add \"sliding_window\", e.g. 4096");
    }
  }

  spec.rope_theta = rope_theta_for(reader, family, kind, imported);
  const auto partial = reader.number("partial_rotary_factor");
  const auto rotary_pct = reader.number("rotary_pct");
  if (partial && rotary_pct && *partial != *rotary_pct) {
    reader.reject("rotary_pct", format_number(*rotary_pct),
                  fmt::format("must agree with partial_rotary_factor ({})", format_number(*partial)),
                  "keep one of them");
  }
  spec.rotary_pct = partial ? partial : rotary_pct;

  switch (family) {
    case Family::qwen3:
      spec.qk_norm = QkNorm::rms;
      break;
    case Family::gemma3:
      spec.qk_norm = QkNorm::rms_one_plus;
      break;
    default:
      spec.qk_norm = QkNorm::none;
      break;
  }
  if (spec.qk_norm != QkNorm::none) spec.qk_norm_eps = reader.number("rms_norm_eps").value_or(1e-6);

  if (family == Family::qwen2) {
    spec.qkv_bias = true;  // hard-coded in transformers' Qwen2Attention
    spec.out_bias = false;
  } else {
    const bool bias = reader.boolean("attention_bias").value_or(family == Family::gpt_neox);
    spec.qkv_bias = bias;
    spec.out_bias = bias;
  }
  spec.query_pre_attn_scalar = reader.number("query_pre_attn_scalar");
  spec.softcap = reader.number("attn_logit_softcapping");
  spec.rope_style = RopeStyle::half_split;  // every HF decoder here uses rotate_half
  spec.causal = true;
  reader.finish();
  return imported;
}

ImportedConfig import_hf_config_file(const std::string& path, const HfImportOptions& options) {
  return import_hf_config_text(read_text_file(path, "--hf-config"), "hf config '" + path + "'", options);
}

}  // namespace attncheck
