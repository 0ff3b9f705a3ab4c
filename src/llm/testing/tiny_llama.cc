#include "llm/testing/tiny_llama.h"

#include <cmath>
#include <cstring>
#include <random>

#include <fmt/format.h>

#include "hxrt/base/check.h"
#include "hxrt/base/float16.h"

namespace hxrt::llm::testing {
namespace {

// Quantizes rows of k values (k a multiple of 32) the way GGUF converters do; returns the bytes and writes the
// dequantized values back into `values`.
std::vector<std::byte> quantize(DType type, std::vector<float>& values) {
  const size_t blocks = values.size() / 32;
  std::vector<std::byte> out;
  if (type == DType::kF32) {
    out.resize(values.size() * 4);
    std::memcpy(out.data(), values.data(), out.size());
    return out;
  }
  if (type == DType::kQ8_0) {
    out.resize(blocks * 34);
    for (size_t b = 0; b < blocks; ++b) {
      float* x = values.data() + b * 32;
      float amax = 0.0f;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
      const uint16_t d16 = f32_to_f16(amax / 127.0f);
      const float d = f16_to_f32(d16);
      std::byte* p = out.data() + b * 34;
      std::memcpy(p, &d16, 2);
      for (int i = 0; i < 32; ++i) {
        const int q = d > 0 ? static_cast<int>(std::lround(x[i] / d)) : 0;
        const auto qs = static_cast<int8_t>(std::clamp(q, -127, 127));
        std::memcpy(p + 2 + i, &qs, 1);
        x[i] = d * qs;
      }
    }
    return out;
  }
  HXRT_CHECK(type == DType::kQ4_1);
  out.resize(blocks * 20);
  for (size_t b = 0; b < blocks; ++b) {
    float* x = values.data() + b * 32;
    float lo = x[0], hi = x[0];
    for (int i = 1; i < 32; ++i) lo = std::min(lo, x[i]), hi = std::max(hi, x[i]);
    const uint16_t d16 = f32_to_f16((hi - lo) / 15.0f), m16 = f32_to_f16(lo);
    const float d = f16_to_f32(d16), m = f16_to_f32(m16);
    std::byte* p = out.data() + b * 20;
    std::memcpy(p, &d16, 2);
    std::memcpy(p + 2, &m16, 2);
    uint8_t nib[32];
    for (int i = 0; i < 32; ++i) {
      const int q = d > 0 ? static_cast<int>(std::lround((x[i] - m) / d)) : 0;
      nib[i] = static_cast<uint8_t>(std::clamp(q, 0, 15));
      x[i] = d * nib[i] + m;
    }
    for (int j = 0; j < 16; ++j) p[4 + j] = static_cast<std::byte>(nib[j] | (nib[j + 16] << 4));
  }
  return out;
}

// y (n) = W (n, k) · x (k)
std::vector<double> matvec(const std::vector<float>& w, const std::vector<double>& x, int n) {
  const size_t k = x.size();
  std::vector<double> y(static_cast<size_t>(n));
  for (size_t j = 0; j < static_cast<size_t>(n); ++j) {
    double s = 0.0;
    for (size_t i = 0; i < k; ++i) s += double{w[j * k + i]} * x[i];
    y[j] = s;
  }
  return y;
}

std::vector<double> rms_norm(const std::vector<double>& x, const std::vector<float>& w, double eps) {
  double ss = 0.0;
  for (double v : x) ss += v * v;
  const double inv = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * w[i];
  return y;
}

// ggml's "normal" rope: pairs (2i, 2i+1) of each head rotate by pos * theta^(-2i/head_dim).
void rope(std::vector<double>& v, int heads, int head_dim, int pos, double theta) {
  for (int h = 0; h < heads; ++h) {
    for (int i = 0; i < head_dim / 2; ++i) {
      const double angle = pos * std::pow(theta, -2.0 * i / head_dim);
      double& a = v[static_cast<size_t>(h * head_dim + 2 * i)];
      double& b = v[static_cast<size_t>(h * head_dim + 2 * i + 1)];
      const double x0 = a, x1 = b;
      a = x0 * std::cos(angle) - x1 * std::sin(angle);
      b = x0 * std::sin(angle) + x1 * std::cos(angle);
    }
  }
}

}  // namespace

std::unique_ptr<TinyLlama> TinyLlama::create(const TinyLlamaSpec& spec) {
  auto model = std::unique_ptr<TinyLlama>(new TinyLlama());
  model->spec_ = spec;
  std::mt19937 rng(spec.seed);
  formats::GgufWriter writer;
  auto add = [&](const std::string& key, formats::GgufValue value) { HXRT_CHECK(writer.add(key, std::move(value)).ok()); };
  add("general.architecture", formats::GgufValue("llama"));
  add("general.name", formats::GgufValue("tiny-llama-test"));
  add("llama.block_count", formats::GgufValue(static_cast<uint32_t>(spec.n_layers)));
  add("llama.context_length", formats::GgufValue(static_cast<uint32_t>(spec.context)));
  add("llama.embedding_length", formats::GgufValue(static_cast<uint32_t>(spec.n_embd)));
  add("llama.feed_forward_length", formats::GgufValue(static_cast<uint32_t>(spec.n_ff)));
  add("llama.attention.head_count", formats::GgufValue(static_cast<uint32_t>(spec.n_heads)));
  add("llama.attention.head_count_kv", formats::GgufValue(static_cast<uint32_t>(spec.n_kv_heads)));
  add("llama.rope.freq_base", formats::GgufValue(spec.rope_theta));
  add("llama.attention.layer_norm_rms_epsilon", formats::GgufValue(spec.rms_epsilon));
  const int head_dim = spec.n_embd / spec.n_heads;
  const int kv = spec.n_kv_heads * head_dim;
  // Tensors are held by the writer until serialize(); keep their bytes alive here.
  std::vector<std::shared_ptr<std::vector<std::byte>>> held;
  auto tensor = [&](const std::string& name, int rows, int cols, DType type, float scale, float offset = 0.0f) {
    std::normal_distribution<float> dist(offset, scale);
    std::vector<float> values(static_cast<size_t>(rows) * static_cast<size_t>(cols));
    for (float& v : values) v = dist(rng);
    auto bytes = std::make_shared<std::vector<std::byte>>(quantize(type, values));
    graph::WeightData data{bytes->data(), bytes->size(), bytes};
    std::vector<uint64_t> dims = {static_cast<uint64_t>(cols)};
    if (rows > 1 || name.find("norm") == std::string::npos) dims.push_back(static_cast<uint64_t>(rows));
    HXRT_CHECK(writer.add_tensor(name, type, dims, data).ok());
    model->weights_[name] = std::move(values);
    held.push_back(std::move(bytes));
  };
  const float w_scale = 0.5f / std::sqrt(static_cast<float>(spec.n_embd));
  tensor("token_embd.weight", spec.vocab, spec.n_embd, spec.embedding_type, 1.0f);
  for (int l = 0; l < spec.n_layers; ++l) {
    const std::string b = fmt::format("blk.{}.", l);
    tensor(b + "attn_norm.weight", 1, spec.n_embd, DType::kF32, 0.1f, 1.0f);
    tensor(b + "attn_q.weight", spec.n_embd, spec.n_embd, spec.weight_type, 2.0f * w_scale);
    tensor(b + "attn_k.weight", kv, spec.n_embd, spec.weight_type, 2.0f * w_scale);
    tensor(b + "attn_v.weight", kv, spec.n_embd, spec.weight_type, w_scale);
    tensor(b + "attn_output.weight", spec.n_embd, spec.n_embd, spec.weight_type, w_scale);
    tensor(b + "ffn_norm.weight", 1, spec.n_embd, DType::kF32, 0.1f, 1.0f);
    tensor(b + "ffn_gate.weight", spec.n_ff, spec.n_embd, spec.weight_type, w_scale);
    tensor(b + "ffn_up.weight", spec.n_ff, spec.n_embd, spec.weight_type, w_scale);
    tensor(b + "ffn_down.weight", spec.n_embd, spec.n_ff, spec.weight_type, w_scale);
  }
  tensor("output_norm.weight", 1, spec.n_embd, DType::kF32, 0.1f, 1.0f);
  if (!spec.tied) tensor("output.weight", spec.vocab, spec.n_embd, spec.weight_type, 1.0f);
  Result<std::vector<std::byte>> bytes = writer.serialize();
  HXRT_CHECK(bytes.ok());
  model->bytes_ = std::make_shared<std::vector<std::byte>>(std::move(bytes).value());
  Result<formats::GgufFile> file = formats::GgufFile::from_memory(*model->bytes_, model->bytes_);
  HXRT_CHECK(file.ok());
  model->file_ = std::make_unique<formats::GgufFile>(std::move(file).value());
  return model;
}

std::vector<std::vector<double>> TinyLlama::reference_logits(const std::vector<int32_t>& tokens,
                                                            std::vector<std::vector<double>>* hidden) const {
  const TinyLlamaSpec& s = spec_;
  const int head_dim = s.n_embd / s.n_heads;
  const int kv = s.n_kv_heads * head_dim;
  auto w = [&](const std::string& name) -> const std::vector<float>& { return weights_.at(name); };
  std::vector<std::vector<std::vector<double>>> keys(static_cast<size_t>(s.n_layers)), values(static_cast<size_t>(s.n_layers));
  std::vector<std::vector<double>> logits;
  for (size_t pos = 0; pos < tokens.size(); ++pos) {
    const std::vector<float>& embd = w("token_embd.weight");
    std::vector<double> x(embd.begin() + tokens[pos] * s.n_embd, embd.begin() + (tokens[pos] + 1) * s.n_embd);
    for (int l = 0; l < s.n_layers; ++l) {
      const std::string b = fmt::format("blk.{}.", l);
      std::vector<double> h = rms_norm(x, w(b + "attn_norm.weight"), s.rms_epsilon);
      std::vector<double> q = matvec(w(b + "attn_q.weight"), h, s.n_embd);
      std::vector<double> k = matvec(w(b + "attn_k.weight"), h, kv);
      std::vector<double> v = matvec(w(b + "attn_v.weight"), h, kv);
      rope(q, s.n_heads, head_dim, static_cast<int>(pos), s.rope_theta);
      rope(k, s.n_kv_heads, head_dim, static_cast<int>(pos), s.rope_theta);
      keys[static_cast<size_t>(l)].push_back(k);
      values[static_cast<size_t>(l)].push_back(v);
      std::vector<double> attn(static_cast<size_t>(s.n_embd), 0.0);
      for (int hd = 0; hd < s.n_heads; ++hd) {
        const int g = hd / (s.n_heads / s.n_kv_heads);
        std::vector<double> scores(pos + 1);
        double mx = -INFINITY;
        for (size_t j = 0; j <= pos; ++j) {
          double dot = 0.0;
          for (int d = 0; d < head_dim; ++d) {
            dot += q[static_cast<size_t>(hd * head_dim + d)] * keys[static_cast<size_t>(l)][j][static_cast<size_t>(g * head_dim + d)];
          }
          scores[j] = dot / std::sqrt(static_cast<double>(head_dim));
          mx = std::max(mx, scores[j]);
        }
        double sum = 0.0;
        for (double& e : scores) sum += (e = std::exp(e - mx));
        for (size_t j = 0; j <= pos; ++j) {
          for (int d = 0; d < head_dim; ++d) {
            attn[static_cast<size_t>(hd * head_dim + d)] +=
                scores[j] / sum * values[static_cast<size_t>(l)][j][static_cast<size_t>(g * head_dim + d)];
          }
        }
      }
      std::vector<double> o = matvec(w(b + "attn_output.weight"), attn, s.n_embd);
      for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
      std::vector<double> h2 = rms_norm(x, w(b + "ffn_norm.weight"), s.rms_epsilon);
      std::vector<double> gate = matvec(w(b + "ffn_gate.weight"), h2, s.n_ff);
      std::vector<double> up = matvec(w(b + "ffn_up.weight"), h2, s.n_ff);
      for (size_t i = 0; i < gate.size(); ++i) gate[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
      std::vector<double> down = matvec(w(b + "ffn_down.weight"), gate, s.n_embd);
      for (size_t i = 0; i < x.size(); ++i) x[i] += down[i];
    }
    std::vector<double> out = rms_norm(x, w("output_norm.weight"), s.rms_epsilon);
    if (hidden != nullptr) hidden->push_back(out);
    logits.push_back(matvec(w(s.tied ? "token_embd.weight" : "output.weight"), out, s.vocab));
  }
  return logits;
}

}  // namespace hxrt::llm::testing
