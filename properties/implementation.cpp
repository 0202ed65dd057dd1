#include "properties/implementation.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <functional>

#include "properties/mutants/catalog.hpp"
#include "properties/worker.hpp"
#include "reference/reference.hpp"

namespace attncheck::properties {

Unsupported::Unsupported(const std::string& implementation, const std::string& reason)
    : InputError(fmt::format("{} cannot run this case", implementation), {{"--impl", implementation, reason, ""}}) {}

namespace {

// An implementation that is a function of the case (the references and the mutants).
class FunctionImplementation : public Implementation {
 public:
  FunctionImplementation(std::string name, bool sharded, std::function<Result(const Case&)> run)
      : name_(std::move(name)), sharded_(sharded), run_(std::move(run)) {}
  const std::string& name() const override { return name_; }
  bool sharded() const override { return sharded_; }
  NamedTensors run(const Case& test_case) override { return named_tensors(run_(test_case)); }

 private:
  std::string name_;
  bool sharded_;
  std::function<Result(const Case&)> run_;
};

}  // namespace

std::vector<std::string> implementation_names() {
  return {"reference", "reference-tp"};
}

std::unique_ptr<Implementation> open_implementation(const std::string& name) {
  if (name == "reference") {
    return std::make_unique<FunctionImplementation>(
        name, false, [](const Case& test_case) { return reference::run_reference(test_case); });
  }
  if (name == "reference-tp") {
    return std::make_unique<FunctionImplementation>(
        name, true, [](const Case& test_case) { return reference::run_reference_tp(test_case); });
  }
  for (const Mutant& mutant : mutant_catalog()) {
    if (mutant.name == name) return std::make_unique<FunctionImplementation>(name, mutant.sharded, mutant.run);
  }
  if (name.starts_with(kExecPrefix)) return open_worker(name.substr(kExecPrefix.size()));
  std::vector<std::string> valid = implementation_names();
  const std::vector<std::string> mutants = mutant_names();
  valid.insert(valid.end(), mutants.begin(), mutants.end());
  valid.push_back("exec:COMMAND");
  ViolationList violations;
  violations.add("--impl", name, "must name an implementation attncheck has",
                 fmt::format("valid: {}", fmt::join(valid, ", ")));
  violations.throw_if_any("unknown implementation");
  return nullptr;
}

}  // namespace attncheck::properties
