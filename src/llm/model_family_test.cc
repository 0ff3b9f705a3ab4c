// ModelConfig::from_gguf on the family goldens (tests/llm/goldens/families): the per-layer choices each family's
// keys make, and the errors a wrong file gets (unknown architecture, missing or misshapen tensors, unsupported
// variants), each naming what is wrong.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "hxrt/formats/gguf.h"
#include "hxrt/llm/decoder.h"
#include "hxrt/llm/model_family.h"

namespace hxrt::llm {
namespace {

const std::filesystem::path kFamilies =
    std::filesystem::path(HXRT_SOURCE_DIR) / "tests" / "llm" / "goldens" / "families";

formats::GgufFile open_family(const std::string& arch) {
  Result<formats::GgufFile> file = formats::GgufFile::open((kFamilies / (arch + ".gguf")).string());
  EXPECT_TRUE(file.ok()) << file.status().to_string();
  return std::move(file).value();
}

// `file` rewritten: `edit` may replace a key's value (return false to drop the key), the tensor named `drop` left
// out, `extra` keys added.
struct Rewritten {
  std::shared_ptr<std::vector<std::byte>> bytes;
  formats::GgufFile file;
};
Rewritten rewrite(const formats::GgufFile& file, const std::function<bool(const std::string&, formats::GgufValue&)>& edit,
                  const std::string& drop = "",
                  const std::vector<std::pair<std::string, formats::GgufValue>>& extra = {}) {
  formats::GgufWriter writer;
  for (const formats::GgufKeyValue& kv : file.metadata()) {
    formats::GgufValue value = kv.value;
    if (edit(kv.key, value)) {
      EXPECT_TRUE(writer.add(kv.key, value).ok());
    }
  }
  for (const auto& [key, value] : extra) EXPECT_TRUE(writer.add(key, value).ok());
  for (const formats::GgufTensor& t : file.tensors()) {
    if (t.name == drop) continue;
    EXPECT_TRUE(writer.add_tensor(t.name, t.ggml_type, t.dims, file.weight(t).value()).ok());
  }
  auto bytes = std::make_shared<std::vector<std::byte>>(writer.serialize().value());
  formats::GgufFile out = formats::GgufFile::from_memory(*bytes, bytes).value();
  return {bytes, std::move(out)};
}

TEST(ModelFamily, EveryFamilyIsFoundAndAnUnknownOneListsThem) {
  for (const ModelFamily* family : model_families()) {
    Result<const ModelFamily*> found = find_model_family(family->architecture);
    ASSERT_TRUE(found.ok());
    EXPECT_EQ(*found, family);
  }
  Result<const ModelFamily*> unknown = find_model_family("mamba");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kUnimplemented);
  for (const char* arch : {"llama", "qwen2", "qwen3", "qwen3moe", "gemma2", "gemma3", "phi3"}) {
    EXPECT_NE(unknown.status().message().find(arch), std::string::npos) << unknown.status().to_string();
  }
}

TEST(ModelFamily, Gemma3HasFiveLocalLayersPerGlobalOne) {
  const formats::GgufFile file = open_family("gemma3");
  Result<ModelConfig> c = ModelConfig::from_gguf(file);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->family->architecture, "gemma3");
  EXPECT_EQ(c->head_dim, 128);
  EXPECT_EQ(c->q_dim(), 512);  // != n_embd 256
  ASSERT_EQ(c->layers.size(), 6u);
  for (int l = 0; l < 5; ++l) {
    EXPECT_EQ(c->layers[static_cast<size_t>(l)].window, 5) << l;
    EXPECT_EQ(c->layers[static_cast<size_t>(l)].rope_theta, 10000.0f) << l;
  }
  EXPECT_EQ(c->layers[5].window, 0);
  EXPECT_EQ(c->layers[5].rope_theta, 1.0e6f);
  EXPECT_TRUE(c->tied_embeddings);
  EXPECT_EQ(c->attention_softcap, 0.0f);
  EXPECT_NE(c->to_string().find("5 sliding-window layers (window 5"), std::string::npos) << c->to_string();
  EXPECT_NE(c->family->variants().find("qk_norm post_norms scale_embeddings"), std::string::npos)
      << c->family->variants();
  // attention.sliding_window_pattern overrides the family's 6: every other layer local.
  Rewritten two = rewrite(file, [](const std::string&, formats::GgufValue&) { return true; }, "",
                          {{"gemma3.attention.sliding_window_pattern", formats::GgufValue(uint32_t{2})}});
  Result<ModelConfig> alternating = ModelConfig::from_gguf(two.file);
  ASSERT_TRUE(alternating.ok()) << alternating.status().to_string();
  for (int l = 0; l < 6; ++l) EXPECT_EQ(alternating->layers[static_cast<size_t>(l)].window, l % 2 == 0 ? 5 : 0) << l;
}

TEST(ModelFamily, Gemma2AlternatesLayersAndCapsScores) {
  Result<ModelConfig> c = ModelConfig::from_gguf(open_family("gemma2"));
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->layers[0].window, 5);
  EXPECT_EQ(c->layers[1].window, 0);
  EXPECT_FLOAT_EQ(c->attention_softcap, 1.5f);
  EXPECT_FLOAT_EQ(c->final_softcap, 10.0f);
}

TEST(ModelFamily, FusedProjectionsAndBiasesAreSeenInTheFile) {
  Result<ModelConfig> phi3 = ModelConfig::from_gguf(open_family("phi3"));
  ASSERT_TRUE(phi3.ok()) << phi3.status().to_string();
  EXPECT_TRUE(phi3->fused_qkv);
  EXPECT_TRUE(phi3->family->fused_gate_up);
  Result<ModelConfig> qwen2 = ModelConfig::from_gguf(open_family("qwen2"));
  ASSERT_TRUE(qwen2.ok()) << qwen2.status().to_string();
  EXPECT_TRUE(qwen2->attention_bias);
  EXPECT_FALSE(qwen2->fused_qkv);
}

TEST(ModelFamily, WrongFilesAreErrorsNamingWhatIsWrong) {
  const auto keep = [](const std::string&, formats::GgufValue&) { return true; };
  const auto expect_error = [](const formats::GgufFile& file, StatusCode code, const std::string& needle) {
    Result<ModelConfig> c = ModelConfig::from_gguf(file);
    ASSERT_FALSE(c.ok()) << needle;
    EXPECT_EQ(c.status().code(), code) << c.status().to_string();
    EXPECT_NE(c.status().to_string().find(needle), std::string::npos) << c.status().to_string();
  };
  const formats::GgufFile qwen2 = open_family("qwen2");
  expect_error(rewrite(qwen2, keep, "blk.1.attn_k.bias").file, StatusCode::kNotFound, "blk.1.attn_k.bias");
  expect_error(rewrite(qwen2, keep, "blk.0.attn_q.bias").file, StatusCode::kInvalidArgument, "blk.0.attn_q.bias");
  const formats::GgufFile qwen3 = open_family("qwen3");
  expect_error(rewrite(qwen3, keep, "blk.1.attn_q_norm.weight").file, StatusCode::kNotFound, "blk.1.attn_q_norm.weight");
  // A key_length that contradicts the tensors names the tensor and both shapes.
  expect_error(rewrite(qwen3,
                       [](const std::string& key, formats::GgufValue& value) {
                         if (key == "qwen3.attention.key_length" || key == "qwen3.attention.value_length" ||
                             key == "qwen3.rope.dimension_count") {
                           value = formats::GgufValue(uint32_t{32});
                         }
                         return true;
                       })
                   .file,
               StatusCode::kInvalidArgument, "blk.0.attn_q.weight");
  expect_error(rewrite(qwen3,
                       [](const std::string& key, formats::GgufValue& value) {
                         if (key == "general.architecture") value = formats::GgufValue(std::string("mamba"));
                         return true;
                       })
                   .file,
               StatusCode::kUnimplemented, "'mamba' is not supported");
  // Variants no family computes yet are refused by name, never ignored.
  expect_error(rewrite(qwen3, keep, "",
                       {{"qwen3.rope.scaling.type", formats::GgufValue(std::string("longrope"))},
                        {"qwen3.rope.scaling.factor", formats::GgufValue(4.0f)}})
                   .file,
               StatusCode::kUnimplemented, "qwen3.rope.scaling.type");
  expect_error(rewrite(qwen3, keep, "",
                       {{"qwen3.rope.scaling.type", formats::GgufValue(std::string("yarn"))},
                        {"qwen3.rope.scaling.factor", formats::GgufValue(4.0f)},
                        {"qwen3.rope.scaling.yarn_log_multiplier", formats::GgufValue(0.1f)}})
                   .file,
               StatusCode::kUnimplemented, "yarn_log_multiplier");
  expect_error(rewrite(qwen3, keep, "", {{"qwen3.expert_count", formats::GgufValue(uint32_t{8})}}).file,
               StatusCode::kUnimplemented, "expert_count");
}

// Expert FFNs: the keys and tensors llama.cpp reads, and the files hxrt cannot compute refused by name.
TEST(ModelFamily, ExpertsAreReadAndWhatIsNotComputedIsRefused) {
  const formats::GgufFile qwen3moe = open_family("qwen3moe");
  Result<ModelConfig> c = ModelConfig::from_gguf(qwen3moe);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->n_experts, 8);
  EXPECT_EQ(c->n_experts_used, 2);
  EXPECT_EQ(c->n_ff_expert, 128);
  EXPECT_TRUE(c->expert_weights_norm);
  EXPECT_NE(c->to_string().find("2 of 8 experts"), std::string::npos) << c->to_string();
  const formats::GgufFile mixtral = open_family("llama-moe");
  Result<ModelConfig> m = ModelConfig::from_gguf(mixtral);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->family->architecture, "llama");
  EXPECT_EQ(m->n_experts, 4);
  const auto keep = [](const std::string&, formats::GgufValue&) { return true; };
  const auto expect_error = [](const formats::GgufFile& file, StatusCode code, const std::string& needle) {
    Result<ModelConfig> bad = ModelConfig::from_gguf(file);
    ASSERT_FALSE(bad.ok()) << needle;
    EXPECT_EQ(bad.status().code(), code) << bad.status().to_string();
    EXPECT_NE(bad.status().to_string().find(needle), std::string::npos) << bad.status().to_string();
  };
  const auto drop_key = [](const std::string& name) {
    return [name](const std::string& key, formats::GgufValue&) { return key != name; };
  };
  expect_error(rewrite(qwen3moe, drop_key("qwen3moe.expert_count")).file, StatusCode::kInvalidArgument, "expert_count");
  expect_error(rewrite(qwen3moe, drop_key("qwen3moe.expert_used_count")).file, StatusCode::kNotFound, "expert_used_count");
  expect_error(rewrite(qwen3moe, keep, "blk.1.ffn_down_exps.weight").file, StatusCode::kNotFound, "blk.1.ffn_down_exps");
  expect_error(rewrite(qwen3moe, keep, "", {{"qwen3moe.expert_shared_count", formats::GgufValue(uint32_t{1})}}).file,
               StatusCode::kUnimplemented, "shared experts");
  expect_error(rewrite(qwen3moe, keep, "", {{"qwen3moe.expert_gating_func", formats::GgufValue(uint32_t{2})}}).file,
               StatusCode::kUnimplemented, "expert_gating_func");
  expect_error(rewrite(qwen3moe,
                       [](const std::string& key, formats::GgufValue& value) {
                         if (key == "qwen3moe.expert_used_count") value = formats::GgufValue(uint32_t{9});
                         return true;
                       })
                   .file,
               StatusCode::kInvalidArgument, "exceeds expert_count");
}

// {arch}.rope.scaling.* become the RoPE op's attributes as llama.cpp computes them.
TEST(ModelFamily, RopeScalingKeysAsLlamaCppReadsThem) {
  const formats::GgufFile qwen3 = open_family("qwen3");
  const auto keep = [](const std::string&, formats::GgufValue&) { return true; };
  const auto with = [&](std::vector<std::pair<std::string, formats::GgufValue>> keys) {
    return ModelConfig::from_gguf(rewrite(qwen3, keep, "", std::move(keys)).file);
  };
  Result<ModelConfig> plain = ModelConfig::from_gguf(qwen3);
  ASSERT_TRUE(plain.ok()) << plain.status().to_string();
  EXPECT_EQ(plain->rope_scaling.type, "none");
  EXPECT_EQ(plain->rope_scaling.freq_scale, 1.0f);
  EXPECT_EQ(plain->rope_scaling.magnitude(1.0f), 1.0f);
  // No type key: linear, as llama.cpp defaults it.
  Result<ModelConfig> linear = with({{"qwen3.rope.scaling.factor", formats::GgufValue(4.0f)}});
  ASSERT_TRUE(linear.ok()) << linear.status().to_string();
  EXPECT_EQ(linear->rope_scaling.type, "linear");
  EXPECT_EQ(linear->rope_scaling.freq_scale, 0.25f);
  EXPECT_EQ(linear->rope_scaling.ext_factor, 0.0f);
  EXPECT_EQ(linear->layers[1].rope_freq_scale, 0.25f);
  Result<ModelConfig> yarn = with({{"qwen3.rope.scaling.type", formats::GgufValue(std::string("yarn"))},
                                   {"qwen3.rope.scaling.factor", formats::GgufValue(4.0f)},
                                   {"qwen3.rope.scaling.original_context_length", formats::GgufValue(uint32_t{128})}});
  ASSERT_TRUE(yarn.ok()) << yarn.status().to_string();
  EXPECT_EQ(yarn->rope_scaling.ext_factor, 1.0f);
  EXPECT_EQ(yarn->rope_scaling.n_ctx_orig, 128);
  // cos/sin scale by 0.1·ln(4) + 1, the mscale of YaRN.
  EXPECT_NEAR(yarn->rope_scaling.magnitude(0.25f), 0.1 * std::log(4.0) + 1.0, 1e-6);
  EXPECT_NE(yarn->to_string().find("rope scaling yarn"), std::string::npos) << yarn->to_string();
  // type none: the factor is ignored.
  Result<ModelConfig> none = with({{"qwen3.rope.scaling.type", formats::GgufValue(std::string("none"))},
                                   {"qwen3.rope.scaling.factor", formats::GgufValue(4.0f)}});
  ASSERT_TRUE(none.ok()) << none.status().to_string();
  EXPECT_EQ(none->rope_scaling.freq_scale, 1.0f);
}

// The family loader's fuzz seeds (tests/fuzz/make_seeds.py) are valid models, so fuzzing starts past the checks.
TEST(ModelFamily, EveryFuzzSeedLoadsAndBuilds) {
  const std::filesystem::path dir = std::filesystem::path(HXRT_SOURCE_DIR) / "tests" / "fuzz" / "corpus" / "model_family";
  int seeds = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".gguf") continue;
    SCOPED_TRACE(entry.path().filename().string());
    Result<formats::GgufFile> file = formats::GgufFile::open(entry.path().string());
    ASSERT_TRUE(file.ok()) << file.status().to_string();
    Result<ModelConfig> config = ModelConfig::from_gguf(*file);
    ASSERT_TRUE(config.ok()) << config.status().to_string();
    Result<graph::Graph> graph = build_decoder_graph(*file, *config, {.block_size = 4});
    EXPECT_TRUE(graph.ok()) << graph.status().to_string();
    ++seeds;
  }
  EXPECT_GE(seeds, 7);
}

}  // namespace
}  // namespace hxrt::llm
