#include "cli/pair_verdict.hpp"

#include <cmath>

#include "impl/implementation.hpp"
#include "reference/memory_estimate.hpp"

namespace attncheck::cli {

std::uint64_t PairMemory::bound_bytes() const {
  return static_cast<std::uint64_t>(std::ceil(reference::kPeakLayerBytesFactor * static_cast<double>(layer_bytes))) +
         reference::kPeakFixedAllowanceBytes;
}

PairVerdict::Kind failure_kind(const std::exception& error) {
  return dynamic_cast<const impl::NoAnswer*>(&error) != nullptr ? PairVerdict::Kind::no_answer
                                                                 : PairVerdict::Kind::raised;
}

std::string verdict_word(PairVerdict::Kind kind) {
  switch (kind) {
    case PairVerdict::Kind::judged:
      return "judged";
    case PairVerdict::Kind::unsupported:
      return "unsup.";
    case PairVerdict::Kind::raised:
      return "FAIL: raised";
    case PairVerdict::Kind::no_answer:
      return "NO ANSWER";
    case PairVerdict::Kind::not_stated:
      return "not stated";
    case PairVerdict::Kind::broken_promise:
      return "FAIL: broken promise";
    case PairVerdict::Kind::not_checked:
      return "NOT CHECKED";
  }
  return "judged";
}

std::string json_verdict(const CompareReport& report) {
  if (!report.passed()) return "fail";
  return report.declined_count() > 0 ? "pass_with_declined" : "pass";
}

std::string json_verdict(const PairVerdict& verdict) {
  switch (verdict.kind) {
    case PairVerdict::Kind::judged:
      return json_verdict(verdict.report);
    case PairVerdict::Kind::unsupported:
      return "declined";
    case PairVerdict::Kind::raised:
      return "raised";
    case PairVerdict::Kind::no_answer:
      return "no_answer";
    case PairVerdict::Kind::not_stated:
      return "not_stated";
    case PairVerdict::Kind::broken_promise:
      return "broken_promise";
    case PairVerdict::Kind::not_checked:
      return "not_checked";
  }
  return "raised";
}

std::string table_word(const std::string& json_word) {
  for (const PairVerdict::Kind kind :
       {PairVerdict::Kind::unsupported, PairVerdict::Kind::raised, PairVerdict::Kind::no_answer,
        PairVerdict::Kind::not_stated, PairVerdict::Kind::broken_promise, PairVerdict::Kind::not_checked}) {
    if (json_verdict(PairVerdict{.kind = kind}) == json_word) return verdict_word(kind);
  }
  return json_word;
}

nlohmann::json verdict_json(const PairVerdict& verdict) {
  const bool judged = verdict.kind == PairVerdict::Kind::judged;
  nlohmann::json json{{"golden", verdict.golden},
                      {"implementation", verdict.implementation},
                      {"verdict", json_verdict(verdict)},
                      {"passed", judged && verdict.report.passed()},
                      {"seconds", verdict.seconds}};
  if (judged) {
    json["report"] = render_json(verdict.report);
    if (!verdict.yardstick.empty()) json["yardstick"] = verdict.yardstick;
  } else {
    json["message"] = verdict.message;
  }
  if (verdict.memory) {
    json["memory"] = {{"peak_added_bytes", verdict.memory->peak_added_bytes},
                      {"layer_bytes", verdict.memory->layer_bytes},
                      {"bound_bytes", verdict.memory->bound_bytes()}};
  }
  return json;
}

bool failed(const PairVerdict& verdict) {
  switch (verdict.kind) {
    case PairVerdict::Kind::raised:
    case PairVerdict::Kind::no_answer:
    case PairVerdict::Kind::broken_promise:
      return true;
    case PairVerdict::Kind::judged:
      return !verdict.report.passed();
    case PairVerdict::Kind::unsupported:
    case PairVerdict::Kind::not_stated:
    case PairVerdict::Kind::not_checked:
      break;
  }
  return false;
}

}  // namespace attncheck::cli
