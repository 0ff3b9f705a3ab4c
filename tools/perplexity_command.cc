// `hxrt perplexity FILE`: the model's perplexity on a text file, as llama.cpp's llama-perplexity measures it
// (llm::Llm::perplexity says how; docs/llm.md, "Quality guard").
#include <algorithm>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "commands.h"
#include "hxrt/llm/llm.h"
#include "hxrt/llm/model_cache.h"
#include "parallel_flags.h"

namespace hxrt::tools {
namespace {

struct PerplexityFlags {
  std::string file;
  std::string model;
  std::string device = "cpu";
  int threads = 0;
  int context = 512;
  int chunks = 0;
  int batch = 512;
  bool json = false;
  int tp = 1;  // --tp: tensor-parallel ranks (docs/scale-out.md)
  int pp = 1;  // --pp: pipeline-parallel ranks
};

Status run_perplexity(const PerplexityFlags& flags) {
  std::ifstream in(flags.file, std::ios::binary);
  if (!in) return not_found("cannot open text file '{}'", flags.file);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  llm::LlmOptions options;
  options.model = flags.model;
  options.device = flags.device;
  options.threads = flags.threads;
  // One chunk at a time, every row's logits: the budget holds a chunk, the batch bounds the logits held at once.
  options.engine.kv_budget_tokens = std::max(flags.context, 512);
  options.engine.max_batch_tokens = flags.batch;
  options.tensor_parallel = flags.tp;
  options.pipeline_parallel = flags.pp;
  HXRT_ASSIGN_OR_RETURN(std::unique_ptr<llm::Llm> loaded, llm::Llm::load(options));
  HXRT_ASSIGN_OR_RETURN(const bool followed, follow_if_follower(*loaded));
  if (followed) return ok_status();
  llm::PerplexityOptions ppl_options;
  ppl_options.context = flags.context;
  ppl_options.max_chunks = flags.chunks;
  if (!flags.json) {
    ppl_options.on_chunk = [](int chunk, double ppl) {
      fmt::print(stderr, "[{}]{:.4f},", chunk + 1, ppl);
      std::fflush(stderr);
    };
  }
  HXRT_ASSIGN_OR_RETURN(llm::Perplexity result, loaded->perplexity(text, ppl_options));
  if (flags.json) {
    fmt::print(
        "{{\"ppl\": {:.6f}, \"ppl_error\": {:.6f}, \"mean_nll\": {:.6f}, \"chunks\": {}, \"context\": {}, "
        "\"text_tokens\": {}, \"scored_tokens\": {}, \"seconds\": {:.3f}, \"device\": \"{}\"}}\n",
        result.ppl, result.ppl_error, result.mean_nll, result.chunks, result.context, result.text_tokens,
        result.scored_tokens, result.seconds, flags.device);
    return ok_status();
  }
  fmt::print(stderr, "\n");
  fmt::print("Final estimate: PPL = {:.4f} +/- {:.5f}\n", result.ppl, result.ppl_error);
  fmt::print("{} chunks of {} tokens ({} of the text's {} tokens scored) in {:.2f} s on {}\n", result.chunks,
             result.context, result.scored_tokens, result.text_tokens, result.seconds, flags.device);
  return ok_status();
}

}  // namespace

void add_perplexity_command(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<PerplexityFlags>();
  CLI::App* cmd = app.add_subcommand("perplexity", "perplexity of a GGUF model on a text file (as llama-perplexity)");
  cmd->add_option("file", flags->file, "text file (UTF-8)")->required();
  cmd->add_option("--model,-m", flags->model, "GGUF model file, or a model cache name fetched on first use: " + llm::named_model_list());
  cmd->add_option("--device", flags->device, "device: cpu, opencl, cuda, cpu:0, cuda:1 ...");
  cmd->add_option("--threads,-t", flags->threads, "CPU threads (0 = all cores)")->check(CLI::NonNegativeNumber);
  add_parallel_flags(cmd, &flags->tp, &flags->pp);
  cmd->add_option("-c,--ctx-size", flags->context, "tokens per chunk; the second half of each is scored")
      ->check(CLI::Range(4, 1 << 20));
  cmd->add_option("--chunks", flags->chunks, "chunks to evaluate at most (0 = all)")->check(CLI::NonNegativeNumber);
  cmd->add_option("-b,--batch-size", flags->batch, "tokens per forward (bounds the logits held at once)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--json", flags->json, "print one JSON line of results on stdout");
  cmd->callback([flags, exit_code]() {
    if (Status s = run_perplexity(*flags); !s.ok()) {
      fmt::print(stderr, "hxrt perplexity: {}\n", s.to_string());
      *exit_code = 1;
    }
  });
}

}  // namespace hxrt::tools
