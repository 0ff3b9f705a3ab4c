// Test fixture: a small random-weight Llama model written as GGUF in memory, and a double-precision reference
// forward pass over the same (dequantized) weights.
//
// Thread-safety: thread-compatible.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "hxrt/base/dtype.h"
#include "hxrt/formats/gguf.h"

namespace hxrt::llm::testing {

struct TinyLlamaSpec {
  int n_layers = 2;
  int n_embd = 64;
  int n_heads = 4;
  int n_kv_heads = 2;
  int n_ff = 96;
  int vocab = 160;
  int context = 512;
  float rope_theta = 10000.0f;
  float rms_epsilon = 1e-5f;
  DType weight_type = DType::kF32;  // of the matrices: f32, q8_0 or q4_1 (norms stay f32)
  DType embedding_type = DType::kF32;
  bool tied = true;
  uint32_t seed = 1;
};

class TinyLlama {
 public:
  static std::unique_ptr<TinyLlama> create(const TinyLlamaSpec& spec);

  const TinyLlamaSpec& spec() const { return spec_; }
  const formats::GgufFile& file() const { return *file_; }
  // The GGUF bytes (e.g. to write to disk).
  const std::vector<std::byte>& bytes() const { return *bytes_; }

  // Logits (vocab) after each token of `tokens`, all positions, computed in double with the dequantized weights;
  // with `hidden`, each position's final hidden state (after output_norm, n_embd) too.
  std::vector<std::vector<double>> reference_logits(const std::vector<int32_t>& tokens,
                                                    std::vector<std::vector<double>>* hidden = nullptr) const;

 private:
  TinyLlamaSpec spec_;
  std::map<std::string, std::vector<float>> weights_;  // dequantized, row-major as hxrt sees them
  std::shared_ptr<std::vector<std::byte>> bytes_;
  std::unique_ptr<formats::GgufFile> file_;
};

}  // namespace hxrt::llm::testing
