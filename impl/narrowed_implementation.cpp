#include "impl/narrowed_implementation.hpp"

namespace attncheck::impl {

namespace {

class NarrowedImplementation : public Implementation {
 public:
  NarrowedImplementation(std::unique_ptr<Implementation> inner, Capabilities capabilities)
      : inner_(std::move(inner)), capabilities_(std::move(capabilities)) {}
  const std::string& name() const override { return inner_->name(); }
  const Capabilities& capabilities() const override { return capabilities_; }
  Candidate run(const Case& test_case) override { return inner_->run(test_case); }

 private:
  std::unique_ptr<Implementation> inner_;
  Capabilities capabilities_;
};

}  // namespace

std::unique_ptr<Implementation> narrowed(std::unique_ptr<Implementation> implementation, Capabilities capabilities) {
  return std::make_unique<NarrowedImplementation>(std::move(implementation), std::move(capabilities));
}

}  // namespace attncheck::impl
