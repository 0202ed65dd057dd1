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
  Candidate run(const Case& test_case) override {
    if (const Admission admission = admit(capabilities_, outline_of(test_case)); !admission.admitted()) {
      throw Unsupported(name_, admission.reason());
    }
    Result result = run_(test_case);
    DeclinedParts declined = std::move(result.declined);
    return {.tensors = named_tensors(std::move(result)),
            .precision = precision_,
            .rope_angles = rope_angles_,
            .tp_convention = TpConvention::replicated_kv,  // attncheck's own layers shard as the reference does
            .sharded = sharded_,
            .declined = std::move(declined)};
  }

 private:
  std::string name_;
  bool sharded_;
  std::function<Result(const Case&)> run_;
  Precision precision_;
  RopeAngles rope_angles_;
  Capabilities capabilities_;
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
