#include "impl/function_implementation.hpp"

namespace attncheck::impl {

namespace {

class FunctionImplementation : public Implementation {
 public:
  FunctionImplementation(std::string name, bool sharded, std::function<Result(const Case&)> run, Precision precision)
      : name_(std::move(name)), sharded_(sharded), run_(std::move(run)), precision_(precision) {}
  const std::string& name() const override { return name_; }
  bool sharded() const override { return sharded_; }
  Precision precision() const override { return precision_; }
  NamedTensors run(const Case& test_case) override { return named_tensors(run_(test_case)); }

 private:
  std::string name_;
  bool sharded_;
  std::function<Result(const Case&)> run_;
  Precision precision_;
};

}  // namespace

std::unique_ptr<Implementation> function_implementation(std::string name, bool sharded,
                                                        std::function<Result(const Case&)> run, Precision precision) {
  return std::make_unique<FunctionImplementation>(std::move(name), sharded, std::move(run), precision);
}

}  // namespace attncheck::impl
