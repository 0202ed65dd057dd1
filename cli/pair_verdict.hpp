// One (golden, implementation) pair's verdict as every report of `run`, `golden check`, `replay` and
// `compare` states it (table, JSON, JUnit, HTML): judged on its numbers, declined (unsupported), or not
// judged because the implementation failed to produce a candidate: it raised (a crash, a worker's error or an
// invalid candidate file) or gave no answer in time (a worker's timeout). Only a judged pair has a report.
#pragma once

#include <exception>
#include <string>

#include "core/compare/compare.hpp"

namespace attncheck::cli {

struct PairVerdict {
  std::string golden;          // file name
  std::string implementation;  // registered name or exec:COMMAND
  double seconds = 0.0;        // running the implementation and comparing
  enum class Kind { judged, unsupported, raised, no_answer } kind = Kind::judged;
  std::string message;    // unsupported / raised / no_answer: the reason
  CompareReport report;   // judged only
  std::string yardstick;  // judged below fp64: which yardstick set the tolerance (cli/yardstick_source.hpp)
};

// raised or no_answer, for an exception an implementation's run() threw that is neither bad input nor
// impl::Unsupported: no_answer for impl::NoAnswer (a worker that timed out), raised for anything else.
PairVerdict::Kind failure_kind(const std::exception& error);

// The verdict in one word or two, as tables print it: "pass", "pass*", "FAIL", "unsup.", "FAIL: raised",
// "NO ANSWER".
std::string verdict_word(PairVerdict::Kind kind);

}  // namespace attncheck::cli
