#include "impl/function_implementation.hpp"

namespace attncheck::impl {

namespace {

class FunctionImplementation : public Implementation {
 public:
  FunctionImplementation(std::string name, bool sharded, std::function<Result(const Case&)> run, Precision precision,
                         RopeAngles rope_angles, Capabilities capabilities)
      : name_(std::move(name)),
        sharded_(sharded),
        run_(std::move(run)),
        precision_(precision),
        rope_angles_(rope_angles),
        capabilities_(std::move(capabilities)) {}
  const std::string& name() const override { return name_; }
  const Capabilities& capabilities() const override { return capabilities_; }
  bool sharded() const override { return sharded_; }
  Precision precision() const override { return precision_; }
  RopeAngles rope_angles() const override { return rope_angles_; }
  const DeclinedParts& declined() const override { return declined_; }
  NamedTensors run(const Case& test_case) override {
    declined_.clear();
    if (const Admission admission = admit(capabilities_, outline_of(test_case)); !admission.admitted()) {
      throw Unsupported(name_, admission.reason());
    }
    Result result = run_(test_case);
    declined_ = std::move(result.declined);  // what this case's Result declined, asked after run()
    return named_tensors(std::move(result));
  }

 private:
  std::string name_;
  bool sharded_;
  std::function<Result(const Case&)> run_;
  Precision precision_;
  RopeAngles rope_angles_;
  Capabilities capabilities_;
  DeclinedParts declined_;
};

}  // namespace

Capabilities without_latent_attention() {
  Capabilities capabilities;
  capabilities.features.erase(Feature::latent);
  return capabilities;
}

std::unique_ptr<Implementation> function_implementation(std::string name, bool sharded,
                                                        std::function<Result(const Case&)> run, Precision precision,
                                                        RopeAngles rope_angles, Capabilities capabilities) {
  return std::make_unique<FunctionImplementation>(std::move(name), sharded, std::move(run), precision, rope_angles,
                                                  std::move(capabilities));
}

}  // namespace attncheck::impl
