#include "cli/geometry_source.hpp"

#include <charconv>

#include <fmt/format.h>

#include "cli/flag_validators.hpp"
#include "core/config/hf_config.hpp"
#include "core/config/neox_config.hpp"
#include "core/config/presets.hpp"
#include "core/errors/input_error.hpp"

namespace attncheck::cli {

void add_geometry_options(CLI::App& command, GeometryOptions& options) {
  const std::vector<std::string> names = preset_names();
  auto* preset =
      command.add_option("--preset", options.preset, "built-in geometry of a real model")->check(CLI::IsMember(names));
  auto* hf = command.add_option("--hf-config", options.hf_config, "Hugging Face config.json to import");
  command.add_option("--hf-layer", options.hf_layer, "decoder layer of --hf-config to import (default 0)")
      ->check(integer_validator())
      ->needs(hf);
  auto* neox = command.add_option("--neox-config", options.neox_config, "GPT-NeoX YAML config to import");

  const char* flags_group = "Explicit geometry (instead of a preset or config)";
  auto* hidden = command.add_option("--hidden", options.hidden_size, "hidden_size (residual width)")
                     ->check(integer_validator())
                     ->group(flags_group);
  auto* heads = command.add_option("--heads", options.num_heads, "num_heads (query heads)")
                    ->check(integer_validator())
                    ->group(flags_group);
  hidden->needs(heads);
  heads->needs(hidden);
  std::vector<CLI::Option*> explicit_only = {
      command.add_option("--kv-heads", options.num_kv_heads, "num_kv_heads (default: --heads)")
          ->check(integer_validator()),
      command.add_option("--head-dim", options.head_dim, "head_dim (default: derived as hidden / heads)")
          ->check(integer_validator()),
      command.add_option("--rotary-pct", options.rotary_pct, "fraction of head_dim rotated (default 1)")
          ->check(finite_number_validator()),
      command.add_option("--rotary-dim", options.rotary_dim, "channels rotated (instead of --rotary-pct)")
          ->check(integer_validator()),
      command.add_option("--rope-theta", options.rope_theta, "RoPE base (default 10000)")
          ->check(finite_number_validator()),
      command.add_option("--rope-style", options.rope_style, "half-split (default) or interleaved")
          ->check(CLI::IsMember({"half-split", "interleaved"})),
      command
          .add_option("--qk-norm", options.qk_norm,
                      "none (default), rms or rms-one-plus (Gemma's 1+w), per head; rms-full-width (OLMo-2: over the "
                      "whole q / k projection)")
          ->check(CLI::IsMember({"none", "rms", "rms-one-plus", "rms-full-width"})),
      command.add_option("--qk-norm-eps", options.qk_norm_eps, "QK-norm epsilon (default 1e-6)")
          ->check(finite_number_validator()),
      command.add_flag("--qkv-bias", options.qkv_bias, "q/k/v projections have biases"),
      command.add_flag("--out-bias", options.out_bias, "o_proj has a bias"),
      command
          .add_option("--query-pre-attn-scalar", options.query_pre_attn_scalar,
                      "scale = value^-0.5 instead of head_dim^-0.5")
          ->check(finite_number_validator()),
      command.add_option("--softcap", options.softcap, "attention logit softcap")->check(finite_number_validator()),
      command.add_option("--sliding-window", options.sliding_window, "keys each query sees, itself included")
          ->check(integer_validator()),
      command.add_flag("--non-causal", options.non_causal, "no causal mask"),
      command.add_flag("--attention-sinks", options.attention_sinks,
                       "a learned sink logit per query head joins each softmax (gpt-oss)"),
  };
  for (CLI::Option* option : explicit_only) option->group(flags_group)->needs(hidden);

  // Exactly one source; CLI11 reports a second one, resolve_geometry_source() a missing one.
  const std::vector<CLI::Option*> sources = {preset, hf, neox, hidden};
  for (CLI::Option* a : sources) {
    for (CLI::Option* b : sources) {
      if (a != b) a->excludes(b);
    }
  }
}

namespace {

GeometrySpec spec_from_flags(const GeometryOptions& options) {
  GeometrySpec spec;
  spec.hidden_size = *options.hidden_size;
  spec.num_heads = *options.num_heads;
  spec.num_kv_heads = options.num_kv_heads;
  spec.head_dim = options.head_dim;
  spec.rotary_pct = options.rotary_pct;
  spec.rotary_dim = options.rotary_dim;
  spec.rope_theta = options.rope_theta.value_or(spec.rope_theta);
  spec.rope_style = parse_rope_style(options.rope_style).value_or(RopeStyle::half_split);
  spec.qk_norm = parse_qk_norm(options.qk_norm).value_or(QkNorm::none);
  spec.qk_norm_eps = options.qk_norm_eps.value_or(spec.qk_norm_eps);
  spec.qkv_bias = options.qkv_bias;
  spec.out_bias = options.out_bias;
  spec.query_pre_attn_scalar = options.query_pre_attn_scalar;
  spec.softcap = options.softcap;
  spec.sliding_window = options.sliding_window;
  spec.causal = !options.non_causal;
  spec.attention_sinks = options.attention_sinks;
  return spec;
}

}  // namespace

ResolvedGeometry resolve_geometry_source(const GeometryOptions& options) {
  GeometrySpec spec;
  std::string title, kind;
  std::optional<std::int64_t> config_tp_size;
  std::vector<std::string> notes, not_modelled;
  std::string layer_kind;
  if (!options.preset.empty()) {
    const Preset* preset = find_preset(options.preset);
    spec = preset->spec;
    title = fmt::format("{} (preset {})", preset->model, preset->name);
    kind = "preset";
  } else if (!options.hf_config.empty()) {
    ImportedConfig imported = import_hf_config_file(options.hf_config, {.layer = options.hf_layer});
    spec = imported.spec;
    title = fmt::format("{} (model_type {})", imported.source, imported.model_type);
    kind = "hf-config";
    notes = std::move(imported.notes);
    layer_kind = std::move(imported.layer_kind);
    not_modelled = std::move(imported.not_modelled);
  } else if (!options.neox_config.empty()) {
    ImportedConfig imported = import_neox_config_file(options.neox_config);
    spec = imported.spec;
    title = imported.source;
    kind = "neox-config";
    config_tp_size = imported.tp_size;
    notes = std::move(imported.notes);
  } else if (options.hidden_size) {
    spec = spec_from_flags(options);
    title = "explicit geometry (flags)";
    kind = "flags";
  } else {
    throw InputError(
        "no geometry given",
        {{"geometry", "absent", "exactly one of --preset, --hf-config, --neox-config or --hidden/--heads is required",
          "e.g. --preset qwen3-0.6b, or --hidden 1024 --heads 16 --kv-heads 8 --head-dim 128"}});
  }
  try {
    return {resolve_geometry(spec), title, kind, config_tp_size, std::move(notes), std::move(layer_kind),
            std::move(not_modelled)};
  } catch (const InputError& error) {
    throw InputError("invalid geometry from " + title, error.violations());
  }
}

}  // namespace attncheck::cli
