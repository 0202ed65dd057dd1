// `attncheck golden coverage FILES... [--require-all]`: for each golden, the features its case claims and
// whether each bites (reference/feature_coverage.hpp); then, per feature, the goldens where it bites.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>

#include "cli/exit_codes.hpp"
#include "cli/golden_command.hpp"
#include "golden/golden_file.hpp"
#include "impl/registry.hpp"
#include "mutants/catalog.hpp"
#include "reference/feature_coverage.hpp"

namespace attncheck::cli {

namespace {

// Latent attention's features (reference/feature_coverage.hpp, AlternativeAnswer): each "off" is the answer of
// the latent mutant that gets it wrong, run through the registry.
std::vector<reference::AlternativeAnswer> latent_alternatives(const Case& test_case) {
  const Geometry& g = test_case.geometry();
  std::vector<reference::AlternativeAnswer> alternatives;
  if (!g.is_latent()) return alternatives;
  const LatentAttentionSpec& latent = *g.latent();
  const RopeScaling& scaling = g.rope_scaling();
  struct Feature {
    const char* feature;
    bool claimed;
    std::string claim;
    const char* mutant;
  };
  const Feature features[] = {
      {"latent value width", latent.v_head_dim != latent.qk_head_dim(),
       fmt::format("v heads {} wide, q/k heads {}", latent.v_head_dim, latent.qk_head_dim()),
       "mutant-mla-context-cropped-as-one-block"},
      {"latent rope part", latent.qk_rope_head_dim > 0 && latent.qk_nope_head_dim > 0,
       fmt::format("RoPE on the last {} of {} channels", latent.qk_rope_head_dim, latent.qk_head_dim()),
       "mutant-mla-rope-on-first-channels"},
      {"latent scale width", latent.v_head_dim != latent.qk_head_dim(),
       fmt::format("scale from qk_head_dim {}, not v_head_dim {}", latent.qk_head_dim(), latent.v_head_dim),
       "mutant-mla-scale-from-v-head-dim"},
      {"latent mscale",
       scaling.type == RopeScalingType::yarn && scaling.mscale_all_dim && *scaling.mscale_all_dim != 0.0,
       fmt::format("yarn mscale_all_dim {} in the scale", scaling.mscale_all_dim.value_or(0.0)),
       "mutant-transformers-47435-mla-mscale-missing"},
      {"absorbed latent norm", !test_case.inputs.decode.empty(), "decoding (the absorbed cache holds the normed latent)",
       "mutant-mla-absorbed-latent-unnormed"},
      {"k_pe gradient reduce", test_case.plan.tp_size > 1 && latent.qk_rope_head_dim > 0,
       fmt::format("k_pe shared by the heads of {} ranks", test_case.plan.tp_size),
       "mutant-transformer-engine-1975-k-pe-grad-unreduced"},
  };
  for (const Feature& feature : features) {
    if (!feature.claimed) continue;
    const auto implementation = impl::open_implementation(feature.mutant);
    alternatives.push_back({.feature = feature.feature,
                            .claim = feature.claim,
                            .off = mutants::find_mutant(feature.mutant)->bug,
                            .answer = implementation->run(test_case).tensors});
  }
  return alternatives;
}

}  // namespace

int run_golden_coverage(const GoldenOptions& options, std::ostream& out) {
  std::map<std::string, std::vector<std::string>> biting, inert;  // feature -> golden files
  for (const std::string& file : options.files) {
    const golden::Golden golden = golden::read_golden(file);
    out << fmt::format("== {}\n{:<23} {:<5} {:>10} {:>11}  {:<22} {:<44} {}\n", file, "feature", "bites", "change",
                       "tolerances", "most changed", "claim", "switched off");
    const reference::StoredForm stored{.activations_sketched = golden.activations_sketched,
                                       .gradients_sketched = golden.gradients_sketched,
                                       .tp_convention = golden.tp_convention,
                                       .weight_generator_seed = golden.weights_by_generator
                                                                    ? std::optional<std::uint64_t>(golden.seed)
                                                                    : std::nullopt};
    for (const reference::FeatureBite& bite :
         reference::feature_coverage(golden.test_case, stored, latent_alternatives(golden.test_case))) {
      out << fmt::format("{:<23} {:<5} {:>10.3g} {:>11.3g}  {:<22} {:<44} {}\n", bite.feature,
                         bite.bites ? "yes" : "NO", bite.change, bite.tolerances, bite.tensor, bite.claim, bite.off);
      (bite.bites ? biting : inert)[bite.feature].push_back(file);
    }
  }
  out << "\n";
  // Claimed somewhere but biting nowhere: those goldens cannot catch a bug in that feature.
  std::vector<std::string> never;
  for (const auto& [feature, files] : inert) {
    if (!biting.contains(feature)) never.push_back(feature);
  }
  std::vector<std::string> unclaimed;
  if (options.require_all) {
    for (const std::string& feature : reference::coverage_features()) {
      if (!biting.contains(feature) && !inert.contains(feature)) unclaimed.push_back(feature);
    }
  }
  for (const auto& [feature, files] : biting) {
    out << fmt::format("{:<23} bites in {} golden(s)\n", feature, files.size());
  }
  for (const std::string& feature : never) out << fmt::format("{:<23} claimed but bites in none\n", feature);
  for (const std::string& feature : unclaimed) out << fmt::format("{:<23} in none of these goldens\n", feature);
  const bool passed = never.empty() && unclaimed.empty();
  out << (passed ? fmt::format("COVERED: every claimed feature bites in at least one of {} golden(s){}\n",
                               options.files.size(), options.require_all ? ", and every feature is claimed" : "")
                 : fmt::format("NOT COVERED: {}\n", fmt::join(never.empty() ? unclaimed : never, ", ")));
  return passed ? kExitOk : kExitCheckFailed;
}

}  // namespace attncheck::cli
