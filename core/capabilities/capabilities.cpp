#include "core/capabilities/capabilities.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace attncheck {

Capabilities Capabilities::narrowed(const FeatureSet& only, const FeatureSet& without) const {
  Capabilities result = *this;
  if (!only.empty()) result.features = result.features.intersect(only);
  result.features = result.features.minus(without);
  return result;
}

std::string describe(const Capabilities& capabilities) {
  if (!capabilities.stated && capabilities == Capabilities::everything()) return "everything (it states nothing)";
  std::vector<std::string> parts;
  // Whichever is shorter: the features, or every one but those missing.
  const FeatureSet missing = FeatureSet::all().minus(capabilities.features);
  parts.push_back(missing.empty() ? std::string("every feature")
                  : missing.list().size() < capabilities.features.list().size()
                      ? "every feature but " + to_string(missing)
                      : to_string(capabilities.features));
  std::vector<std::string> head_dim;
  if (capabilities.head_dim_multiple_of > 1)
    head_dim.push_back(fmt::format("a multiple of {}", capabilities.head_dim_multiple_of));
  if (capabilities.max_head_dim) head_dim.push_back(fmt::format("at most {}", *capabilities.max_head_dim));
  if (!head_dim.empty()) parts.push_back(fmt::format("head_dim {}", fmt::join(head_dim, ", ")));
  for (const auto& [name, limit] :
       {std::pair{"seq", capabilities.max_seq}, std::pair{"batch", capabilities.max_batch},
        std::pair{"num_heads", capabilities.max_num_heads}, std::pair{"hidden_size", capabilities.max_hidden_size},
        std::pair{"tp_size", capabilities.max_tp_size}}) {
    if (limit) parts.push_back(fmt::format("{} at most {}", name, *limit));
  }
  if (capabilities.tp_convention)
    parts.push_back(fmt::format("tp_convention {}", to_string(*capabilities.tp_convention)));
  if (!capabilities.precisions.empty()) {
    std::vector<std::string_view> names;
    for (const Precision precision : capabilities.precisions.list()) names.push_back(to_string(precision));
    parts.push_back(fmt::format("precision {}", fmt::join(names, " or ")));
  }
  return fmt::format("{}{}", fmt::join(parts, "; "), capabilities.stated ? "" : " (assumed: it states nothing)");
}

std::string Admission::reason() const {
  return fmt::format("outside {}: {}", stated ? "its stated capabilities" : "what it runs", fmt::join(outside, ", "));
}

namespace {

// The widths a head_dim statement covers: q/k heads, and latent attention's value heads.
std::vector<std::pair<std::string, std::int64_t>> head_widths(const Geometry& geometry) {
  std::vector<std::pair<std::string, std::int64_t>> widths{{"head_dim", geometry.head_dim()}};
  if (geometry.is_latent()) widths.emplace_back("v_head_dim", geometry.v_head_dim());
  return widths;
}

}  // namespace

Admission admit(const Capabilities& capabilities, const CaseOutline& outline) {
  const Geometry& geometry = outline.geometry();
  Admission admission{.features = features_of(outline), .stated = capabilities.stated};
  const FeatureSet& stated = capabilities.features;
  for (const Feature feature : admission.features.minus(stated).list()) {
    if (info(feature).kind == FeatureKind::requirement) admission.outside.emplace_back(to_string(feature));
  }
  for (const auto& [name, width] : head_widths(geometry)) {
    if (width % capabilities.head_dim_multiple_of != 0) {
      admission.outside.push_back(
          fmt::format("{} {} (a multiple of {} stated)", name, width, capabilities.head_dim_multiple_of));
    }
    if (capabilities.max_head_dim && width > *capabilities.max_head_dim) {
      admission.outside.push_back(fmt::format("{} {} (at most {} stated)", name, width, *capabilities.max_head_dim));
    }
  }
  for (const auto& [name, value, limit] :
       {std::tuple{"seq", outline.seq, capabilities.max_seq},
        std::tuple{"batch", outline.batch, capabilities.max_batch},
        std::tuple{"num_heads", geometry.num_heads(), capabilities.max_num_heads},
        std::tuple{"hidden_size", geometry.hidden_size(), capabilities.max_hidden_size}}) {
    if (limit && value > *limit)
      admission.outside.push_back(fmt::format("{} {} (at most {} stated)", name, value, *limit));
  }
  // Parts: left out, the rest judged.
  const bool backward = stated.contains(Feature::backward);
  if (!backward) admission.parts_not_stated["grads"] = fmt::format("backward {}", kNotStatedPart);
  if (!outline.decode.empty() && !stated.contains(Feature::decode)) {
    admission.parts_not_stated["decode"] = fmt::format("decode {}", kNotStatedPart);
  }
  const std::int64_t tp = outline.plan.tp_size;
  admission.per_rank_gradients =
      tp > 1 && backward && stated.contains(Feature::tensor_parallel) &&
      (!capabilities.max_tp_size || tp <= *capabilities.max_tp_size) &&
      (tp <= geometry.num_kv_heads() || stated.contains(Feature::kv_replication)) &&
      (!capabilities.tp_convention || partition_problem(outline.plan, *capabilities.tp_convention).empty());
  // A layout over a TP plan the implementation does not run would not be a layout of the case it is given.
  admission.context_parallel = outline.context_parallel.has_value() && stated.contains(Feature::context_parallel) &&
                               (tp == 1 || admission.per_rank_gradients);
  return admission;
}

}  // namespace attncheck
