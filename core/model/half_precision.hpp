// IEEE binary16 (fp16) and bfloat16 roundings for the emulated layers and the mutants: a float rounded to
// the nearest half (ties to even) and back, a half's bit pattern, and a float rounded to the nearest bf16. With F16C (part of x86-64-v3, the
// project's -march) they are one instruction each; GCC 12 lowers _Float16 casts to libgcc's software
// routines (__truncsfhf2, __extendhfdf2), which were a quarter of `attncheck mutants`' time. Checked
// against the _Float16 casts on all 2^32 floats (bit for bit, NaN payloads included) when written;
// half_precision_test.cpp keeps a sample of them.
#pragma once

#include <bit>
#include <cstdint>

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace attncheck {

// value rounded to the nearest fp16, as its 16 bits.
inline std::uint16_t half_bits(float value) {
#if defined(__F16C__)
  return static_cast<std::uint16_t>(_cvtss_sh(value, _MM_FROUND_TO_NEAREST_INT));
#else
  return std::bit_cast<std::uint16_t>(static_cast<_Float16>(value));
#endif
}

// The fp16 with these bits, exactly, as a float.
inline float from_half_bits(std::uint16_t bits) {
#if defined(__F16C__)
  return _cvtsh_ss(bits);
#else
  return static_cast<float>(std::bit_cast<_Float16>(bits));
#endif
}

// value rounded to the nearest fp16 (ties to even; overflow to infinity), as a float.
inline float round_to_half(float value) { return from_half_bits(half_bits(value)); }

// value rounded to the nearest bf16 (ties to even; overflow to infinity; NaN kept), as a float: bf16 is a
// float's top 16 bits.
inline float round_to_bfloat16(float value) {
  const auto bits = std::bit_cast<std::uint32_t>(value);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return value;  // NaN: rounding could carry it into infinity
  return std::bit_cast<float>((bits + 0x7FFFu + ((bits >> 16) & 1u)) & 0xFFFF0000u);
}

}  // namespace attncheck
