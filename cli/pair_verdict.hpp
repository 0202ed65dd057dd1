// One (golden, implementation) pair's verdict as every report of `run`, `golden check`, `replay` and
// `compare` states it (table, JSON, JUnit, HTML): judged on its numbers; not run because the golden is outside
// the implementation's stated capabilities (not stated) or did not fit in memory (not checked); declined
// (unsupported: it made no promise); or not judged because the implementation failed: it declined what it
// promised (broken promise), raised (a crash, a worker's error or an invalid candidate file) or gave no answer
// in time (a worker's timeout). Only a judged pair has a report.
#pragma once

#include <cstdint>
#include <exception>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/compare/compare.hpp"

namespace attncheck::cli {

// `attncheck run`'s account of one pair's memory: the most resident memory the process added while the pair
// ran (implementation and judging, over what was resident at its start: the golden, the libraries), and the
// layer's own bytes (reference::layer_bytes) that it is held to kPeakLayerBytesFactor times. Pairs run side by
// side (--jobs above 1) share one measurement: the peak of their golden's whole batch.
struct PairMemory {
  std::uint64_t peak_added_bytes = 0;
  std::uint64_t layer_bytes = 0;
  int pairs_measured_together = 1;  // 1: this pair alone
  int pairs_at_a_time = 1;          // --jobs as the golden ran them
  // Held to kPeakLayerBytesFactor x layer_bytes + kPeakFixedAllowanceBytes (reference/memory_estimate.hpp).
  std::uint64_t bound_bytes() const;
  bool within_bound() const { return peak_added_bytes <= bound_bytes(); }
  double peak_over_layer() const {
    return layer_bytes == 0 ? 0.0 : static_cast<double>(peak_added_bytes) / static_cast<double>(layer_bytes);
  }
};

struct PairVerdict {
  std::string golden;          // file name
  std::string implementation;  // registered name or exec:COMMAND
  double seconds = 0.0;        // running the implementation and comparing
  enum class Kind {
    judged,
    unsupported,
    raised,
    no_answer,
    not_stated,
    broken_promise,
    not_checked
  } kind = Kind::judged;
  std::string message;    // unsupported / raised / no_answer: the reason
  CompareReport report;   // judged only
  std::string yardstick;  // judged below fp64: which yardstick set the tolerance (cli/yardstick_source.hpp)
  std::optional<PairMemory> memory;  // `run` only, where Linux reports resident memory
};

// raised or no_answer, for an exception an implementation's run() threw that is neither bad input nor
// impl::Unsupported: no_answer for impl::NoAnswer (a worker that timed out), raised for anything else.
PairVerdict::Kind failure_kind(const std::exception& error);

// The verdict in one word or two, as tables print it: "judged", "unsup.", "FAIL: raised", "NO ANSWER",
// "not stated", "FAIL: broken promise", "NOT CHECKED".
std::string verdict_word(PairVerdict::Kind kind);

// The verdict as every --json output states it (docs/JSON.md; lower case, one word): "pass",
// "pass_with_declined" (passed what it computed, some parts declined), "fail", "declined", "not_stated",
// "broken_promise", "raised", "no_answer", "not_checked".
std::string json_verdict(const PairVerdict& verdict);
// The verdict's table word (verdict_word) for a json_verdict word of a pair not judged ("raised" -> "FAIL:
// raised"); the word itself when it is not one.
std::string table_word(const std::string& json_word);
// The same for a judged report alone (`compare`): "pass", "pass_with_declined" or "fail".
std::string json_verdict(const CompareReport& report);

// {"golden", "implementation", "verdict" (json_verdict), "passed", "seconds",
// "message" (not judged), "report" (judged: render_json), "memory" (when measured)}: `run --json`'s pair.
nlohmann::json verdict_json(const PairVerdict& verdict);

// Whether the pair fails the run: it raised, gave no answer, broke a promise, or was judged and failed.
bool failed(const PairVerdict& verdict);

}  // namespace attncheck::cli
