// Every GGUF type hxrt computes, against outside references (tests/quant/goldens/quant_blocks.gguf, written by
// scripts/make_quant_goldens.py):
//   - hxrt's dequantization of blocks written by llama.cpp's own quantizer, and of random blocks, equals the PyPI
//     `gguf` package's numpy dequantization bit for bit (float) and to rounding (the exact double reference);
//   - the quantization error of llama.cpp's blocks and the dot-product error of hxrt's MatMulQ on them, on
//     llama.cpp's test-quantize-fns data, stay under test-quantize-fns' thresholds;
//   - every ISA of this CPU computes every type.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "hxrt/base/quant_types.h"
#include "hxrt/formats/gguf.h"
#include "kernels/cpu/quant_matmul.h"

namespace hxrt {
namespace {

using formats::GgufFile;

const GgufFile& goldens() {
  static const GgufFile file = [] {
    Result<GgufFile> f = GgufFile::open(std::string(HXRT_SOURCE_DIR) + "/tests/quant/goldens/quant_blocks.gguf");
    HXRT_CHECK(f.ok(), "{}", f.status().to_string());
    return std::move(*f);
  }();
  return file;
}

struct Tensor {
  DType dtype;
  Shape shape;
  std::span<const std::byte> bytes;
};

Tensor tensor(const std::string& name) {
  Result<const formats::GgufTensor*> t = goldens().tensor(name);
  HXRT_CHECK(t.ok(), "{}", t.status().to_string());
  Result<DType> dtype = goldens().tensor_dtype(**t);
  HXRT_CHECK(dtype.ok(), "{}", dtype.status().to_string());
  return {*dtype, (*t)->shape(), goldens().tensor_bytes(**t)};
}

std::vector<float> floats(const Tensor& t) {
  std::vector<float> out(t.bytes.size() / sizeof(float));
  std::memcpy(out.data(), t.bytes.data(), t.bytes.size());
  return out;
}

// The computed types of dtype.h with a golden tensor: every quantized type plus f16 and bf16.
std::vector<DType> golden_types() {
  std::vector<DType> out;
  for (DType d : row_dequantizable_types()) {
    if (d != DType::kF32) out.push_back(d);
  }
  return out;
}

// Dequantizes `name` row by row with hxrt and compares it with `name`.ref.
void expect_matches_reference(const std::string& name) {
  const Tensor q = tensor(name);
  const std::vector<float> ref = floats(tensor(name + ".ref"));
  const int64_t rows = q.shape.dim(0);
  const int64_t cols = q.shape.dim(1);
  ASSERT_EQ(static_cast<int64_t>(ref.size()), rows * cols) << name;
  const uint64_t row_bytes = storage_bytes(q.dtype, static_cast<uint64_t>(cols)).value();
  std::vector<float> got(static_cast<size_t>(cols));
  std::vector<double> exact(static_cast<size_t>(cols));
  int64_t mismatches = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const std::byte* row = q.bytes.data() + r * row_bytes;
    ASSERT_TRUE(dequantize_row(q.dtype, row, cols, got.data()).ok());
    ASSERT_TRUE(dequantize_row_f64(q.dtype, row, cols, exact.data()).ok());
    for (int64_t c = 0; c < cols; ++c) {
      const float want = ref[static_cast<size_t>(r * cols + c)];
      if (std::memcmp(&got[static_cast<size_t>(c)], &want, sizeof(float)) != 0 && mismatches++ < 5) {
        ADD_FAILURE() << name << "[" << r << ", " << c << "]: hxrt " << got[static_cast<size_t>(c)] << ", gguf "
                      << want;
      }
      // The exact value rounds to gguf's float (to within the one or two roundings of the float formula).
      EXPECT_NEAR(exact[static_cast<size_t>(c)], want, std::fabs(want) * 3e-7 + 1e-30) << name << " " << r << "," << c;
    }
  }
  EXPECT_EQ(mismatches, 0) << name;
}

TEST(QuantGoldens, DequantizationEqualsGgufNumpyOnLlamaCppBlocks) {
  for (DType d : golden_types()) expect_matches_reference(fmt::format("{}.llama", d));
}

TEST(QuantGoldens, DequantizationEqualsGgufNumpyOnRandomBlocks) {
  for (DType d : golden_types()) {
    if (dtype_info(d).is_quantized) expect_matches_reference(fmt::format("{}.random", d));
  }
}

// llama.cpp's test-quantize-fns thresholds (tests/test-quantize-fns.cpp): total quantization error and
// dot-product error, each as sqrt(Σ err²) / n and |Δ| / n, on its data 0.1 + 2·cos(i + offset) (source rows 0, 1).
double max_quantization_error(DType d) {
  if (d == DType::kQ2_K) return 0.0075;
  if (d == DType::kQ3_K) return 0.0040;
  return 0.002;
}
double max_dot_error(DType d) { return d == DType::kQ2_K || d == DType::kQ3_K ? 0.04 : 0.02; }

TEST(QuantGoldens, ErrorsStayUnderLlamaCppThresholdsOnEveryIsa) {
  const std::vector<float> source = floats(tensor("source"));
  const int64_t cols = tensor("source").shape.dim(1);
  for (DType d : golden_types()) {
    SCOPED_TRACE(dtype_name(d));
    const Tensor q = tensor(fmt::format("{}.llama", d));
    const uint64_t row_bytes = storage_bytes(d, static_cast<uint64_t>(cols)).value();
    std::vector<float> back(static_cast<size_t>(cols));
    for (int64_t r = 0; r < 2; ++r) {
      const float* x = source.data() + r * cols;
      ASSERT_TRUE(dequantize_row(d, q.bytes.data() + r * row_bytes, cols, back.data()).ok());
      double sq = 0.0;
      for (int64_t c = 0; c < cols; ++c) sq += std::pow(double{back[static_cast<size_t>(c)]} - x[c], 2);
      EXPECT_LT(std::sqrt(sq) / static_cast<double>(cols), max_quantization_error(d)) << "row " << r;

      // The dot product of the quantized row with the other source row, against the float dot of the sources.
      const float* a = source.data() + (1 - r) * cols;
      double want = 0.0;
      for (int64_t c = 0; c < cols; ++c) want += double{a[c]} * x[c];
      std::vector<double> w(static_cast<size_t>(cols));
      ASSERT_TRUE(dequantize_row_f64(d, q.bytes.data() + r * row_bytes, cols, w.data()).ok());
      double bound = 0.0;  // f16/bf16 rows use exact activations: float rounding only
      for (int64_t b = 0; b < cols / 32; ++b) {
        double amax = 0.0;
        double asum = 0.0;
        double wmax = 0.0;
        double wsum = 0.0;
        double wa = 0.0;
        for (int64_t c = 32 * b; c < 32 * b + 32; ++c) {
          amax = std::max(amax, std::fabs(double{a[c]}));
          asum += std::fabs(double{a[c]});
          wmax = std::max(wmax, std::fabs(w[static_cast<size_t>(c)]));
          wsum += std::fabs(w[static_cast<size_t>(c)]);
          wa += std::fabs(w[static_cast<size_t>(c)] * a[c]);
        }
        const double rounding = dtype_info(d).is_quantized ? amax * (1.0 / 254.0 + std::ldexp(1.0, -11)) * wsum : 0.0;
        // q4_0/q4_1's offset c (|c| <= 2 max|w|) times their f16-rounded activation sum.
        bound += rounding + 2.0 * wmax * std::ldexp(1.0, -11) * asum + std::ldexp(1.0, -20) * wa;
      }
      for (auto isa : {kernels::cpu::QuantIsa::kScalar, kernels::cpu::QuantIsa::kAvx2,
                       kernels::cpu::QuantIsa::kAvx512Vnni}) {
        if (!kernels::cpu::quant_isa_supported(isa)) continue;
        float y = std::nanf("");
        ASSERT_TRUE(kernels::cpu::quant_matmul(d, a, 1, cols, q.bytes.data() + r * row_bytes, 1, nullptr, &y, {},
                                               isa)
                        .ok());
        EXPECT_LT(std::fabs(double{y} - want) / static_cast<double>(cols), max_dot_error(d))
            << kernels::cpu::quant_isa_name(isa) << " row " << r << ": " << y << " vs " << want;
        // Against the exact dot of the quantized row: within Note [Error bounds] (base/quant_types.cc).
        const double exact = dot_row_f64(d, q.bytes.data() + r * row_bytes, {a, static_cast<size_t>(cols)}).value();
        EXPECT_LE(std::fabs(double{y} - exact), bound) << kernels::cpu::quant_isa_name(isa);
      }
    }
  }
}

}  // namespace
}  // namespace hxrt
