#include "impl/function_implementation.hpp"

namespace attncheck::impl {

namespace {

class FunctionImplementation : public Implementation {
 public:
  FunctionImplementation(std::string name, bool sharded, std::function<Result(const Case&)> run, Precision precision,
                         RopeAngles rope_angles, LatentAttentionSupport latent)
      : name_(std::move(name)),
        sharded_(sharded),
        run_(std::move(run)),
        precision_(precision),
        rope_angles_(rope_angles),
        latent_(latent) {}
  const std::string& name() const override { return name_; }
  bool sharded() const override { return sharded_; }
  Precision precision() const override { return precision_; }
  RopeAngles rope_angles() const override { return rope_angles_; }
  const DeclinedParts& declined() const override { return declined_; }
  NamedTensors run(const Case& test_case) override {
    declined_.clear();
    if (test_case.geometry().is_latent() && latent_ == LatentAttentionSupport::refused) {
      throw Unsupported(name_,
                        "multi-head latent attention (DeepSeek-V2/V3, Kimi K2) is not implemented here; the fp64 "
                        "reference and reference-tp run it");
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
  LatentAttentionSupport latent_;
  DeclinedParts declined_;
};

}  // namespace

std::unique_ptr<Implementation> function_implementation(std::string name, bool sharded,
                                                        std::function<Result(const Case&)> run, Precision precision,
                                                        RopeAngles rope_angles, LatentAttentionSupport latent) {
  return std::make_unique<FunctionImplementation>(std::move(name), sharded, std::move(run), precision, rope_angles,
                                                  latent);
}

}  // namespace attncheck::impl
