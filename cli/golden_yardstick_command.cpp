// `attncheck golden yardstick FILES... [--precision P]... [--rope-angles A]... [--tp-convention C] [--verify]`:
// computes the yardstick of each golden for each contract given (default: fp32 with float32 angles, the
// golden's own TP convention) and stores it in the golden (golden/stored_yardstick.hpp), so that later
// checks read it instead of running the emulated layer 9 to 20 times. A yardstick is bound to the file's
// integrity digest when it has one (golden/stored_yardstick.hpp); in a file without one it is stored unbound,
// and every check recomputes it to verify it. --verify recomputes and compares with what is stored, changing
// nothing: exit 1 when one is missing, stale, unbound, or differs.
#include <fmt/format.h>

#include <chrono>
#include <cmath>

#include "cli/exit_codes.hpp"
#include "cli/golden_command.hpp"
#include "cli/heartbeat.hpp"
#include "golden/golden_file.hpp"
#include "golden/stored_yardstick.hpp"
#include "reference/run_time_estimate.hpp"
#include "reference/yardstick.hpp"

namespace attncheck::cli {

void add_golden_yardstick_command(CLI::App& golden, GoldenCommands& commands, GoldenOptions& options) {
  commands.yardstick = golden.add_subcommand(
      "yardstick", "Compute each golden's yardstick for low-precision candidates and store it in the golden");
  commands.yardstick->add_option("files", options.files, "golden files (changed in place)")->required();
  commands.yardstick->add_option("--precision", options.yardstick_precisions, "candidate precisions (repeatable)")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}))
      ->expected(1)  // one value per occurrence, so that the files after it stay files
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->allow_extra_args(false)
      ->capture_default_str();
  commands.yardstick
      ->add_option("--rope-angles", options.yardstick_angles,
                   "RoPE angle policies (repeatable): float32 (as transformers) or float64")
      ->check(CLI::IsMember({"float32", "float64"}))
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->allow_extra_args(false)
      ->capture_default_str();
  std::vector<std::string> convention_names;
  for (TpConvention convention : kAllTpConventions) convention_names.emplace_back(to_string(convention));
  commands.yardstick
      ->add_option("--tp-convention", options.yardstick_conventions,
                   "TP conventions of the candidates' per-rank gradients (repeatable; default: the golden's)")
      ->check(CLI::IsMember(convention_names))
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->allow_extra_args(false);
  commands.yardstick->add_flag("--verify", options.verify,
                               "recompute and compare with the stored yardsticks; write nothing");
}

int run_golden_yardstick(const GoldenOptions& options, std::ostream& out, std::ostream& err) {
  int problems = 0;
  for (const std::string& file : options.files) {
    const golden::Golden golden = golden::read_golden(file);
    std::vector<TpConvention> conventions;
    for (const std::string& name : options.yardstick_conventions) conventions.push_back(*parse_tp_convention(name));
    if (conventions.empty()) conventions.push_back(golden.tp_convention);
    for (const std::string& precision_name : options.yardstick_precisions) {
      for (const std::string& angles_name : options.yardstick_angles) {
        for (const TpConvention convention : conventions) {
          const golden::YardstickContract contract{*parse_precision(precision_name), *parse_rope_angles(angles_name),
                                                   convention};
          const auto started = std::chrono::steady_clock::now();
          const NamedTensors expected = golden::expected_tensors(golden, true, convention);
          YardstickErrors computed;
          {
            const Heartbeat heartbeat(
                err, fmt::format("golden yardstick: {} {}", file, golden::contract_key(contract)),
                reference::estimated_yardstick_seconds(golden.test_case, contract.precision));
            computed = reference::yardstick_errors(golden.test_case, expected, contract.precision,
                                                   contract.rope_angles, convention);
          }
          const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
          const std::string key = golden::contract_key(contract);
          if (!options.verify) {
            const bool bound = golden::write_stored_yardstick(file, contract, reference::kYardstickVersion, computed,
                                                              golden.verified_digest);
            out << fmt::format("{}: stored yardstick {} ({} tensors, computed in {:.1f} s){}\n", file, key,
                               computed.size(), seconds,
                               bound ? ", bound to the file's integrity digest"
                                     : "; NOT bound: the file carries no integrity digest, so every check will "
                                       "recompute it to verify it (`attncheck golden seal` the file, then store "
                                       "it again)");
            continue;
          }
          const std::optional<golden::StoredYardstick> stored_yardstick = golden::read_stored_yardstick(
              file, contract, reference::kYardstickVersion, golden.verified_digest);
          const std::optional<YardstickErrors> stored =
              stored_yardstick ? std::optional<YardstickErrors>(stored_yardstick->errors) : std::nullopt;
          if (!stored) {
            ++problems;
            out << fmt::format(
                "{}: yardstick {} is not stored for version {} and this case (absent or stale); "
                "store it with `attncheck golden yardstick {}`\n",
                file, key, reference::kYardstickVersion, file);
            continue;
          }
          std::vector<std::string> differing;
          for (const auto& [name, error] : computed) {
            const auto found = stored->find(name);
            if (found == stored->end() || !golden::same_yardstick_value(found->second, error)) {
              differing.push_back(fmt::format("{} (stored {}, computed {:.17g})", name,
                                              found == stored->end() ? "none" : fmt::format("{:.17g}", found->second),
                                              error));
            }
          }
          if (stored->size() != computed.size()) differing.push_back("a different set of tensors");
          if (differing.empty() && !stored_yardstick->bound) {
            ++problems;
            out << fmt::format(
                "{}: yardstick {} equals its recomputation but is NOT bound to a verified integrity digest (the "
                "file has none, or it changed since the yardstick was stored): every check recomputes it; store it "
                "again with `attncheck golden yardstick {}`\n",
                file, key, file);
          } else if (differing.empty()) {
            out << fmt::format("{}: yardstick {} is current and bound ({} tensors, recomputed in {:.1f} s)\n", file,
                               key, computed.size(), seconds);
          } else {
            ++problems;
            out << fmt::format(
                "{}: yardstick {} DIFFERS from a recomputation under version {}: {}. If the emulated layer "
                "changed, change reference::kYardstickVersion and store the yardsticks again "
                "(golden/data/make_goldens.sh)\n",
                file, key, reference::kYardstickVersion, fmt::join(differing, "; "));
          }
        }
      }
    }
  }
  return problems == 0 ? kExitOk : kExitCheckFailed;
}

}  // namespace attncheck::cli
