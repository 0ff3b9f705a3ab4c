// The model-family loader: a GGUF file that parses must give a ModelConfig or a Status naming the key or tensor
// that is wrong (ModelConfig::from_gguf: families, hyperparameters, RoPE scaling, every tensor's presence, dtype and
// shape), and a config must give a decoder graph or a Status (build_decoder_graph: zero-copy row slices of fused
// tensors, per-layer RoPE and windows), never a crash or a read outside the input. Seeds: one tiny f32 decoder per
// family and variant (tests/fuzz/make_seeds.py).
#include <cstdint>
#include <span>

#include "fuzz/fuzz_target.h"
#include "hxrt/formats/gguf.h"
#include "hxrt/llm/decoder.h"
#include "hxrt/llm/model_family.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hxrt;
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  Result<formats::GgufFile> file = formats::GgufFile::from_memory(bytes, nullptr);
  if (!file.ok()) return 0;
  Result<llm::ModelConfig> config = llm::ModelConfig::from_gguf(*file);
  if (!config.ok()) {
    HXRT_FUZZ_ASSERT(!config.status().message().empty(), "an error without a message");
    return 0;
  }
  HXRT_FUZZ_ASSERT(config->layers.size() == static_cast<size_t>(config->n_layers), "%zu layer configs for %d layers",
                   config->layers.size(), config->n_layers);
  HXRT_FUZZ_ASSERT(!config->to_string().empty(), "an empty description");
  for (const int context : {0, 8}) {
    Result<graph::Graph> graph = llm::build_decoder_graph(*file, *config, {.block_size = 4, .context = context});
    if (graph.ok()) HXRT_FUZZ_ASSERT(graph->num_nodes() > 0, "an empty decoder graph");
  }
  return 0;
}
