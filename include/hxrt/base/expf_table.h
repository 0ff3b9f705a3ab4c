// glibc's expf table, shared by the CPU's vector exp and the JIT preludes' hx_exp (Note [Exact vector exp] in
// kernels/cpu/vector_exp.h, Note [Matching the CPU kernels] in kernels/opencl/jit_program.cc).
//
// Thread-safety: constants and a pure function.
#pragma once

#include <cstdint>
#include <string>

#include <fmt/format.h>

namespace hxrt {

// The bits of 2^(i/32) rounded to double, minus i << 47: adding k << 47 to entry k % 32 scales it by 2^(k/32)
// (glibc's __exp2f_data.tab).
alignas(64) inline constexpr uint64_t kExp2fTable[32] = {
    0x3ff0000000000000ULL, 0x3fefd9b0d3158574ULL, 0x3fefb5586cf9890fULL, 0x3fef9301d0125b51ULL,
    0x3fef72b83c7d517bULL, 0x3fef54873168b9aaULL, 0x3fef387a6e756238ULL, 0x3fef1e9df51fdee1ULL,
    0x3fef06fe0a31b715ULL, 0x3feef1a7373aa9cbULL, 0x3feedea64c123422ULL, 0x3feece086061892dULL,
    0x3feebfdad5362a27ULL, 0x3feeb42b569d4f82ULL, 0x3feeab07dd485429ULL, 0x3feea47eb03a5585ULL,
    0x3feea09e667f3bcdULL, 0x3fee9f75e8ec5f74ULL, 0x3feea11473eb0187ULL, 0x3feea589994cce13ULL,
    0x3feeace5422aa0dbULL, 0x3feeb737b0cdc5e5ULL, 0x3feec49182a3f090ULL, 0x3feed503b23e255dULL,
    0x3feee89f995ad3adULL, 0x3feeff76f2fb5e47ULL, 0x3fef199bdd85529cULL, 0x3fef3720dcef9069ULL,
    0x3fef5818dcfba487ULL, 0x3fef7c97337b9b5fULL, 0x3fefa4afa2a490daULL, 0x3fefd0765b6e4540ULL};

// The table as the initializer of a device source ("{0x3ff0...UL, ...}"), each entry followed by `suffix`.
inline std::string exp2f_table_source(const char* suffix) {
  std::string out = "{";
  for (int i = 0; i < 32; ++i) out += fmt::format("{}0x{:016x}{}", i == 0 ? "" : ", ", kExp2fTable[i], suffix);
  return out + "}";
}

// `source` with every "HX_EXP2F_TABLE" replaced by exp2f_table_source(suffix).
inline std::string with_exp2f_table(std::string source, const char* suffix) {
  const std::string table = exp2f_table_source(suffix);
  for (size_t at = source.find("HX_EXP2F_TABLE"); at != std::string::npos; at = source.find("HX_EXP2F_TABLE", at)) {
    source.replace(at, 14, table);
    at += table.size();
  }
  return source;
}

}  // namespace hxrt
