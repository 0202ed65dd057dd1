#include "core/generation/splitmix_stream.hpp"

namespace attncheck {

namespace {

// FNV-1a of the name: keys each stream so adding a tensor never shifts another's values.
std::uint64_t name_hash(std::string_view name) {
  std::uint64_t hash = 0xCBF29CE484222325ULL;
  for (char c : name) hash = (hash ^ static_cast<unsigned char>(c)) * 0x100000001B3ULL;
  return hash;
}

}  // namespace

SplitMixStream::SplitMixStream(std::uint64_t seed, std::string_view name, std::uint64_t draw)
    : state_(seed ^ name_hash(name) ^ (draw * 0xD1B54A32D192ED03ULL)) {
  next();  // the first output is discarded
}

std::int64_t SplitMixStream::symmetric_integer(std::int64_t amplitude) {
  return SymmetricInteger(amplitude)(*this);
}

std::int64_t SplitMixStream::uniform_below(std::int64_t bound) {
  return static_cast<std::int64_t>(UniformBelow(static_cast<std::uint64_t>(bound))(*this));
}

}  // namespace attncheck
