// The implementations attncheck holds to the reference, by name: the fp64 references, the mutant
// catalog (properties/mutants), and external processes (`exec:COMMAND`, properties/worker.hpp). The
// golden commands, `attncheck run`, the property suite, the fuzzer and `attncheck mutants` all run
// implementations through this one registry, as do the LibTorch (torch-*) and CUDA (cuda-*) ones.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/compare/compare.hpp"
#include "core/errors/input_error.hpp"
#include "core/model/case.hpp"

namespace attncheck::properties {

// Thrown by an implementation that cannot run a case (a backend refusing a head_dim, transformers
// lacking a feature): reported as "unsupported", never as a failure. An InputError, so the golden
// commands exit 2 on it.
class Unsupported : public InputError {
 public:
  Unsupported(const std::string& implementation, const std::string& reason);
};

class Implementation {
 public:
  virtual ~Implementation() = default;
  virtual const std::string& name() const = 0;
  // Whether it reports per-rank gradients (runs the case's TP plan). One that does not is compared on
  // out, decode/out and the full gradients only.
  virtual bool sharded() const = 0;
  // The precision it computes in; below fp64 the checks hold it to DESIGN §3's yardstick
  // (core/compare.hpp, properties/checks.hpp).
  virtual Precision precision() const { return Precision::fp64; }
  // Forward, backward and decoding of the case, as tensors under their golden-file names ("out",
  // "grads/q_proj", "decode/out", "ranks/1/grads/k_proj"; golden/SCHEMA.md). Unsupported when it
  // cannot run the case; any other exception is the implementation failing.
  virtual NamedTensors run(const Case& test_case) = 0;
};

// The correct built-in implementations, which `attncheck run` and the property suite check.
std::vector<std::string> implementation_names();

// Every name open_implementation accepts (besides exec:COMMAND), with its kind: "default" (the list
// above), "device" (needs a GPU: torch-cuda-*, cuda-*), or "mutant" (properties/mutants).
struct RegisteredImplementation {
  std::string name;
  std::string kind;
};
std::vector<RegisteredImplementation> registered_implementations();

// Any registered name, or `exec:COMMAND`; InputError listing the valid names for anything else.
std::unique_ptr<Implementation> open_implementation(const std::string& name);

}  // namespace attncheck::properties
