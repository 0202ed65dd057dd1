#include "cli/golden_pair.hpp"

#include <fmt/format.h>

#include <chrono>

#include "cli/golden_command.hpp"
#include "core/resources/memory_room.hpp"
#include "core/compare/judge.hpp"
#include "impl/candidate_run.hpp"
#include "reference/memory_estimate.hpp"

namespace attncheck::cli {

PairVerdict not_stated(const std::string& golden, const std::string& implementation, const Admission& admission) {
  return {.golden = golden,
          .implementation = implementation,
          .kind = PairVerdict::Kind::not_stated,
          .message = admission.reason()};
}

PairVerdict not_checked(const std::string& golden, const std::string& implementation, const std::string& why) {
  return {.golden = golden, .implementation = implementation, .kind = PairVerdict::Kind::not_checked, .message = why};
}

namespace {

PairVerdict::Kind verdict_kind(impl::CandidateRun::Kind kind) {
  using Kind = impl::CandidateRun::Kind;
  switch (kind) {
    case Kind::answered:
      return PairVerdict::Kind::judged;
    case Kind::not_stated:
      return PairVerdict::Kind::not_stated;
    case Kind::declined:
      return PairVerdict::Kind::unsupported;
    case Kind::broken_promise:
      return PairVerdict::Kind::broken_promise;
    case Kind::no_answer:
      return PairVerdict::Kind::no_answer;
    case Kind::out_of_memory:
      return PairVerdict::Kind::not_checked;
    case Kind::raised:
      break;
  }
  return PairVerdict::Kind::raised;
}

}  // namespace

GoldenPair judge_golden_pair(const std::string& path, const golden::Golden& golden,
                             impl::Implementation& implementation, const Admission& admission,
                             std::ostream* yardstick_log, const HeatmapOptions* drawing) {
  const auto started = std::chrono::steady_clock::now();
  GoldenPair pair;
  PairVerdict& verdict = pair.verdict;
  verdict = {.golden = path, .implementation = implementation.name()};
  const auto finish = [&] {
    verdict.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    return std::move(pair);
  };
  const Case& test_case = golden.test_case;
  // The room its run is held to (PairMemory: 3 x the layer's bytes + a fixed allowance), asked before it starts:
  // a pair that may not fit is named "not checked", and the goldens after it still run.
  try {
    const std::uint64_t layer =
        reference::layer_bytes(test_case.geometry(), {.batch = test_case.inputs.batch, .seq = test_case.inputs.seq});
    require_memory(fmt::format("{} on {}", implementation.name(), path), PairMemory{.layer_bytes = layer}.bound_bytes(),
                   [](std::uint64_t) { return std::string("a machine (or limit) with more memory"); });
  } catch (const NotEnoughMemory& error) {
    verdict = not_checked(path, implementation.name(), error.what());
    return finish();
  }
  impl::CandidateRun run = impl::run_candidate(implementation, test_case, admission);
  verdict.kind = verdict_kind(run.kind);
  if (verdict.kind != PairVerdict::Kind::judged) {
    verdict.message = run.message;
    return finish();
  }
  const Candidate& candidate = run.candidate;
  Judgement judgement = judge(
      {.test_case = test_case,
       .answers = golden::expected_tensors(golden),
       .held_as = golden.tp_convention,
       .yardstick =
           [&](const NamedTensors& expected, const Candidate& judged) {
             return golden_yardstick(path, golden, expected, judged.precision, judged.rope_angles,
                                     judged.tp_convention, yardstick_log);
           }},
      candidate, implementation.name());
  verdict.report = std::move(judgement.report);
  pair.yardstick = std::move(judgement.yardstick);
  verdict.yardstick = describe(pair.yardstick);
  pair.notes = std::move(judgement.notes);
  if (test_case.plan.tp_size > 1 && !admission.per_rank_gradients) {
    pair.notes = {fmt::format("rank gradients not compared: {} does not state tensor-parallel for this plan",
                              implementation.name())};
  }
  if (!verdict.yardstick.empty()) pair.notes.push_back(verdict.yardstick);
  if (drawing != nullptr) {
    pair.maps = error_heatmaps(test_case, judgement.expected, candidate.tensors, verdict.report, *drawing);
  }
  return finish();
}

}  // namespace attncheck::cli
