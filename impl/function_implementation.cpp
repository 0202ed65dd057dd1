#include "impl/function_implementation.hpp"

namespace attncheck::impl {

namespace {

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

std::unique_ptr<Implementation> function_implementation(std::string name, bool sharded,
                                                        std::function<Result(const Case&)> run) {
  return std::make_unique<FunctionImplementation>(std::move(name), sharded, std::move(run));
}

}  // namespace attncheck::impl
