#include "golden/sha256_fields.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace attncheck::golden {

Sha256Fields::Sha256Fields() : context_(EVP_MD_CTX_new(), &EVP_MD_CTX_free) {
  if (!context_ || EVP_DigestInit_ex(context_.get(), EVP_sha256(), nullptr) != 1) {
    throw std::runtime_error("OpenSSL: SHA-256 is not available");
  }
}

void Sha256Fields::bytes(const void* data, std::size_t size) {
  if (size > 0 && EVP_DigestUpdate(context_.get(), data, size) != 1) throw std::runtime_error("OpenSSL: SHA-256 update");
}

std::string Sha256Fields::hex() {
  unsigned char value[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_DigestFinal_ex(context_.get(), value, &length) != 1) throw std::runtime_error("OpenSSL: SHA-256 final");
  std::string text;
  for (unsigned int i = 0; i < length; ++i) text += fmt::format("{:02x}", value[i]);
  return text;
}

}  // namespace attncheck::golden
