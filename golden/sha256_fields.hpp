// SHA-256 (OpenSSL's EVP interface) over length-prefixed fields (length_prefixed_fields.hpp): the hasher of
// a golden's integrity digest (integrity.cpp) and of its stored yardsticks' binding (stored_yardstick.cpp).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include <openssl/evp.h>

#include "golden/length_prefixed_fields.hpp"

namespace attncheck::golden {

class Sha256Fields : public LengthPrefixedFields<Sha256Fields> {
 public:
  Sha256Fields();
  void bytes(const void* data, std::size_t size);
  std::string hex();  // 64 lowercase hex digits; ends the digest

 private:
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> context_;
};

}  // namespace attncheck::golden
