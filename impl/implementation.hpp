// What attncheck holds to the reference: an Implementation runs a Case and returns its tensors under
// their golden-file names. Everything that runs implementations (the golden commands, `attncheck run`,
// the property suite, the fuzzer, `attncheck mutants`) sees only this interface; the registry
// (impl/registry.hpp) finds one by name.
#pragma once

#include <stdexcept>
#include <string>

#include "core/capabilities/capabilities.hpp"
#include "core/compare/candidate.hpp"
#include "core/compare/compare.hpp"
#include "core/errors/input_error.hpp"
#include "core/model/case.hpp"
#include "core/model/precision.hpp"

namespace attncheck::impl {

// Thrown by an implementation that cannot run a case (a backend refusing a head_dim, transformers
// lacking a feature, no GPU): reported as "unsupported", never as a failure. An InputError, so the
// golden commands exit 2 on it.
class Unsupported : public InputError {
 public:
  Unsupported(const std::string& implementation, const std::string& reason);
};

// An Unsupported that says nothing about the case: the implementation cannot run on this machine at all (no
// CUDA device). Reported as a decline like any Unsupported, and never as a broken promise of an implementation
// whose stated capabilities include the case (core/capabilities/capabilities.hpp).
class Unavailable : public Unsupported {
 public:
  using Unsupported::Unsupported;
};

// Thrown by an implementation that gave no answer within its time limit (an exec: worker past
// ATTNCHECK_WORKER_TIMEOUT; it has been stopped): a verdict of its own, "no answer within N s", never a
// mismatch and never bad input. Not an InputError: a caller that does not tell it apart reports it as the
// implementation failing. The limit is wall time, so it only stops runaways; it never judges numbers.
class NoAnswer : public std::runtime_error {
 public:
  // implementation: its name; seconds: the limit it ran past; limit_source: what set it
  // ("ATTNCHECK_WORKER_TIMEOUT").
  NoAnswer(const std::string& implementation, int seconds, const std::string& limit_source);
  int seconds() const { return seconds_; }

 private:
  int seconds_;
};

// attncheck's own failure while running an implementation (its case file for a worker could not be written, its
// worker folder could not be made): never the implementation's verdict, never bad input. It propagates through
// every command to the internal-error exit (3), naming what failed.
class InternalFault : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Implementation {
 public:
  virtual ~Implementation() = default;
  virtual const std::string& name() const = 0;
  // What it states it supports (core/capabilities/capabilities.hpp): every command admits a case by these
  // before anything runs or is computed for it, fuzz and mutants draw only cases within them, and a stated
  // one is a promise (impl/candidate_run.hpp: declining what it states is its failure). Everything, unstated,
  // unless it says otherwise; an exec: worker states its own in the protocol (exec_worker/worker.hpp).
  virtual const Capabilities& capabilities() const;
  // Forward, backward and decoding of the case, as a Candidate (core/compare/candidate.hpp): its tensors
  // under their golden-file names ("out", "grads/q_proj", "decode/out", "ranks/1/grads/k_proj";
  // golden/SCHEMA.md) with everything it declares about them (precision contract, whether it reports per-rank
  // gradients and how it holds them, the parts it declined). Nothing is asked of it after the run. Unsupported
  // when it cannot run the case; NoAnswer when it ran past its time limit; any other exception is the
  // implementation failing (a bad candidate from an exec: worker included: never an InputError).
  virtual Candidate run(const Case& test_case) = 0;
};

}  // namespace attncheck::impl
