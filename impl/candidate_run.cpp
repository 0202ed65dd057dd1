#include "impl/candidate_run.hpp"

#include <fmt/format.h>

#include <new>

namespace attncheck::impl {

std::string_view to_string(CandidateRun::Kind kind) {
  switch (kind) {
    case CandidateRun::Kind::answered:
      return "answered";
    case CandidateRun::Kind::not_stated:
      return "not stated";
    case CandidateRun::Kind::declined:
      return "declined";
    case CandidateRun::Kind::broken_promise:
      return "broken promise";
    case CandidateRun::Kind::raised:
      return "raised";
    case CandidateRun::Kind::no_answer:
      return "no answer";
    case CandidateRun::Kind::out_of_memory:
      return "out of memory";
  }
  return "answered";
}

namespace {

// Whether `part` is `whole` or lies inside it ("decode/out" in "decode", "ranks/2/grads" in "ranks").
bool within(std::string_view part, std::string_view whole) {
  return part == whole || (part.starts_with(whole) && part.size() > whole.size() && part[whole.size()] == '/');
}

// Whether a part the implementation declined was left out by its admission anyway.
bool left_out(std::string_view part, const Admission& admission) {
  for (const auto& [not_stated, reason] : admission.parts_not_stated) {
    if (within(part, not_stated)) return true;
  }
  return !admission.per_rank_gradients && within(part, "ranks");
}

CandidateRun failed(CandidateRun::Kind kind, std::string message, std::string reason = "") {
  CandidateRun run;
  run.kind = kind;
  run.message = std::move(message);
  run.reason = std::move(reason);
  return run;
}

// An Unsupported's reason alone (its one violation's rule), or its whole message.
std::string reason_of(const Unsupported& error) {
  return error.violations().empty() ? error.what() : error.violations().front().rule;
}

}  // namespace

CandidateRun run_candidate(Implementation& implementation, const Case& test_case, const Admission& admission) {
  const std::string& name = implementation.name();
  if (!admission.admitted()) {
    return failed(CandidateRun::Kind::not_stated, fmt::format("{}: {}", name, admission.reason()), admission.reason());
  }
  CandidateRun run;
  try {
    run.candidate = implementation.run(test_case);
  } catch (const Unavailable& error) {  // nothing about the case: it cannot run here at all
    return failed(CandidateRun::Kind::declined, error.what(), reason_of(error));
  } catch (const Unsupported& error) {
    if (!admission.stated) return failed(CandidateRun::Kind::declined, error.what(), reason_of(error));
    return failed(CandidateRun::Kind::broken_promise,
                  fmt::format("{} declined a case its stated capabilities include: {}", name, reason_of(error)));
  } catch (const NoAnswer& error) {
    return failed(CandidateRun::Kind::no_answer, error.what());
  } catch (const InputError&) {
    throw;  // the user's bad input (exit 2)
  } catch (const InternalFault&) {
    throw;  // attncheck's own failure (exit 3), never the implementation's
  } catch (const std::bad_alloc&) {
    return failed(CandidateRun::Kind::out_of_memory,
                  fmt::format("{}: attncheck's process ran out of memory running it (std::bad_alloc)", name));
  } catch (const std::exception& error) {
    return failed(CandidateRun::Kind::raised, error.what());
  }
  Candidate& candidate = run.candidate;
  const bool reported_ranks = candidate.sharded;
  // Its per-rank gradients are judged only where its statement admits the case's plan.
  candidate.sharded = admission.per_rank_gradients && reported_ranks;
  const Capabilities& capabilities = implementation.capabilities();
  if (admission.stated) {
    std::vector<std::string> broken;
    for (const auto& [part, reason] : candidate.declined) {
      if (!left_out(part, admission)) broken.push_back(fmt::format("it declined {} ({})", part, reason));
    }
    if (admission.per_rank_gradients && !reported_ranks) {
      broken.push_back(fmt::format("it returned no per-rank gradients for TP {}", test_case.plan.tp_size));
    }
    if (!capabilities.precisions.empty() && !capabilities.precisions.contains(candidate.precision)) {
      broken.push_back(
          fmt::format("its candidate declares {}, not a precision it states", to_string(candidate.precision)));
    }
    if (!broken.empty()) {
      std::string message = fmt::format("{} broke its stated capabilities: ", name);
      for (std::size_t i = 0; i < broken.size(); ++i) message += (i ? "; " : "") + broken[i];
      return failed(CandidateRun::Kind::broken_promise, message);
    }
  }
  for (const auto& [part, reason] : admission.parts_not_stated) {
    candidate.declined[part] = reason;
    std::erase_if(candidate.tensors, [&part](const auto& entry) { return within(entry.first, part); });
  }
  return run;
}

}  // namespace attncheck::impl
