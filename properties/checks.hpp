// The check the fuzzer and `attncheck mutants` run on every case, shared with the property suite:
// an implementation against the fp64 oracle (reference-tp: out, every gradient, each rank's gradients,
// the KV-cache decoding output), in the tolerance model of core/compare/tolerance.hpp.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/compare/compare.hpp"
#include "impl/implementation.hpp"

namespace attncheck::properties {

enum class Verdict { pass, fail, unsupported };

// The property a case fails when the implementation gives no answer within its limit (impl::NoAnswer): a
// verdict of its own, never a mismatch, and never shrunk (each candidate could cost the whole limit).
inline constexpr std::string_view kAnswersInTime = "answers-in-time";
// The property a case fails when the implementation declines a case, or a part of one, that its stated
// capabilities include (impl/candidate_run.hpp): a failure, never a decline.
inline constexpr std::string_view kKeepsItsPromise = "keeps-its-promise";

struct CheckOutcome {
  Verdict verdict = Verdict::pass;
  std::string property;            // "matches-reference"
  std::string detail;              // failing tensors, the exception, or why it is unsupported
  std::string unsupported_reason;  // unsupported only: the implementation's reason alone (tallied by fuzz)
  std::optional<CompareReport> report;
};

// The case admitted by the implementation's capabilities, run (impl::run_candidate), then judged against the
// oracle, which is computed only for a case it answered. Unsupported when the case is outside its capabilities,
// when it declines a case it made no promise about, or when the oracle has no answer (a non-finite fp64 result);
// fail when it declines what it promised (kKeepsItsPromise), throws anything else, or a tensor is beyond
// tolerance, missing or of another shape.
CheckOutcome check_matches_reference(impl::Implementation& implementation, const Case& test_case);

// The oracle's answer to a case (oracle_tensors with the per-rank gradients), or why it has none: computed once
// where several implementations are checked on the same case (the property suite's every-implementation
// properties), since the oracle is a pure function of the case. The check below is the one above, given it.
struct OracleAnswer {
  std::optional<NamedTensors> tensors;  // absent when the oracle declined the case
  std::string declined;                 // then why (its InputError's message, on one line)
};
// NotEnoughMemory propagates: a case this machine cannot hold now is never tallied as one the oracle declined.
OracleAnswer oracle_answer(const Case& test_case);
// `text` with every run of blanks and line breaks as one space (a reason in a tally, on one line).
std::string one_line(std::string_view text);
CheckOutcome check_matches_reference(impl::Implementation& implementation, const Case& test_case,
                                     const OracleAnswer& oracle);

// The oracle's answers as the check compares them: all of reference-tp's tensors, without the per-rank
// gradients for an unsharded implementation or a TP 1 case (whose one rank holds the layer's).
NamedTensors oracle_tensors(const Case& test_case, bool sharded);

}  // namespace attncheck::properties
