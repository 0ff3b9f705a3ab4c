#include "hxrt/llm/llm.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "hxrt/comm/communicator.h"
#include "hxrt/hal/driver.h"
#include "hxrt/llm/text_stream.h"

namespace hxrt::llm {
Result<std::string> default_model_path(bool fetch) { return cached_model_path(default_model(), fetch); }

Llm::~Llm() = default;

Result<std::unique_ptr<Llm>> Llm::load(const LlmOptions& options) {
  std::unique_ptr<Llm> llm(new Llm());
  HXRT_ASSIGN_OR_RETURN(llm->path_, resolve_model(options.model, options.fetch_default_model));
  // One process maps every page of the file at once (its weights are all about to be read). A rank of a parallel
  // group reads its share only: its pages come in as they are first read, so its memory holds that share.
  const bool whole_model = options.tensor_parallel <= 1 && options.pipeline_parallel <= 1;
  HXRT_ASSIGN_OR_RETURN(formats::GgufFile file, formats::GgufFile::open(llm->path_, /*prefetch=*/whole_model));
  llm->file_ = std::make_unique<formats::GgufFile>(std::move(file));
  HXRT_ASSIGN_OR_RETURN(TokenizerSpec spec, tokenizer_spec_from_gguf(*llm->file_));
  if (!options.chat_template.empty()) spec.chat_template = options.chat_template;
  HXRT_ASSIGN_OR_RETURN(llm->tokenizer_, Tokenizer::create(std::move(spec)));
  if (!options.chat_template.empty()) {
    HXRT_RETURN_IF_ERROR(llm->tokenizer_->chat_template_status().with_context("parsing LlmOptions::chat_template (--chat-template)"));
  }
  HXRT_RETURN_IF_ERROR(hal::register_builtin_drivers(llm->drivers_, options.threads));
  HXRT_ASSIGN_OR_RETURN(
      llm->session_, runtime::Session::create(llm->drivers_, options.device, runtime::SessionOptions{.name = "llm"}));
  EngineOptions engine_options = options.engine;
  // Tensor or pipeline parallelism: the MPI world, which must have exactly the ranks asked for.
  const auto join_world = [](const char* kind, int ranks) -> Result<std::shared_ptr<comm::Communicator>> {
    if (ranks < 1) return invalid_argument("{}_parallel {} must be at least 1", kind, ranks);
    if (ranks == 1) return std::shared_ptr<comm::Communicator>();
    if (!comm::launched_by_mpi()) {
      return failed_precondition("{} parallelism over {} ranks runs as {} processes: start them with `mpirun -np {}`",
                                 kind, ranks, ranks, ranks);
    }
    HXRT_ASSIGN_OR_RETURN(std::shared_ptr<comm::Communicator> world, comm::world({.backend = "mpi"}));
    if (world->size() != ranks) {
      return invalid_argument("{} parallelism over {} ranks, but mpirun started {}: they must be equal", kind, ranks,
                              world->size());
    }
    return world;
  };
  if (options.tensor_parallel > 1 && options.pipeline_parallel > 1) {
    return unimplemented("tensor and pipeline parallelism together (each alone works)");
  }
  HXRT_ASSIGN_OR_RETURN(std::shared_ptr<comm::Communicator> tp, join_world("tensor", options.tensor_parallel));
  HXRT_ASSIGN_OR_RETURN(std::shared_ptr<comm::Communicator> pp, join_world("pipeline", options.pipeline_parallel));
  if (tp != nullptr) engine_options.tensor_parallel = std::move(tp);
  if (pp != nullptr) engine_options.pipeline_parallel = std::move(pp);
  if (engine_options.eos_tokens.empty()) {
    for (int32_t id = 0; id < llm->tokenizer_->vocab_size(); ++id) {
      if (llm->tokenizer_->is_eog(id)) engine_options.eos_tokens.push_back(id);
    }
  }
  HXRT_ASSIGN_OR_RETURN(llm->engine_, Engine::create(*llm->session_, *llm->file_, engine_options));
  return llm;
}

Result<Generation> Llm::generate(std::string_view prompt, const GenerateOptions& options) {
  HXRT_ASSIGN_OR_RETURN(std::vector<int32_t> tokens,
                        tokenizer_->encode(prompt, EncodeOptions{.add_special = true, .parse_special = false}));
  return generate_tokens(std::move(tokens), options);
}

Result<Generation> Llm::chat(std::span<const ChatMessage> messages, const GenerateOptions& options) {
  HXRT_ASSIGN_OR_RETURN(std::string prompt, tokenizer_->apply_chat_template(
                                                std::vector<ChatMessage>(messages.begin(), messages.end()), true));
  HXRT_ASSIGN_OR_RETURN(std::vector<int32_t> tokens,
                        tokenizer_->encode_chat(prompt));
  return generate_tokens(std::move(tokens), options);
}

Status Llm::enable_grammars() {
  if (engine_->has_vocabulary()) return ok_status();
  std::vector<std::string> pieces(static_cast<size_t>(tokenizer_->vocab_size()));
  for (int32_t id = 0; id < tokenizer_->vocab_size(); ++id) {
    Result<std::string_view> piece = tokenizer_->token_to_piece(id, /*special=*/false);
    if (piece.ok()) pieces[static_cast<size_t>(id)] = std::string(*piece);
  }
  engine_->set_vocabulary(std::make_shared<const TokenTrie>(pieces));
  return ok_status();
}

Result<Generation> Llm::generate_tokens(std::vector<int32_t> prompt, const GenerateOptions& options) {
  for (const std::string& stop : options.stop) {
    if (stop.empty()) return invalid_argument("generate: a stop string is empty");
  }
  TextStream stream(*tokenizer_, options.stop);
  Status failure;
  bool stopped_by_caller = false, cancelled = false;
  Request request;
  request.prompt = std::move(prompt);
  request.max_new_tokens = options.max_tokens;
  request.sampling = options.sampling;
  if (options.grammar) {
    HXRT_RETURN_IF_ERROR(enable_grammars());
    request.grammar = options.grammar;
  }
  request.ignore_eos = options.ignore_eos;
  request.on_token = [&](RequestId, int32_t token) {
    if (options.cancel != nullptr && options.cancel->load(std::memory_order_relaxed)) {
      cancelled = true;
      return false;
    }
    if (tokenizer_->is_eog(token) && !options.ignore_eos) return true;  // the engine ends the request
    Result<std::string> piece = stream.push(token);
    if (!piece.ok()) {
      failure = piece.status();
      return false;
    }
    if (!piece->empty() && options.on_text && !options.on_text(*piece)) {
      stopped_by_caller = true;
      return false;
    }
    return !stream.stopped();
  };
  HXRT_ASSIGN_OR_RETURN(RequestResult result, engine_->generate(std::move(request), options.timeout));
  HXRT_RETURN_IF_ERROR(failure);
  Generation generation;
  generation.finish = result.finish;
  if (result.finish == FinishReason::kCallback) {
    generation.finish = cancelled                                ? FinishReason::kCancelled
                        : stream.stopped() && !stopped_by_caller ? FinishReason::kStopToken
                                                                 : FinishReason::kCallback;
  }
  if (!stream.stopped() && !stopped_by_caller && !cancelled) {
    // What the decoder still buffers (an incomplete character at the end) and any held-back stop prefix.
    const std::string rest = stream.finish();
    if (!rest.empty() && options.on_text) options.on_text(rest);
  }
  // The text ends where the caller's view of it ended.
  generation.text = std::string(stream.emitted());
  generation.prompt_tokens = result.prompt_tokens;
  generation.completion_tokens = static_cast<int>(result.tokens.size());
  generation.cached_prompt_tokens = result.cached_prompt_tokens;
  return generation;
}

Result<Perplexity> Llm::perplexity(std::string_view text, const PerplexityOptions& options) {
  const int n_ctx = options.context;
  if (n_ctx < 4 || n_ctx > engine_->config().context_length) {
    return invalid_argument("perplexity: context {} must be in [4, {}] (the model's context)", n_ctx,
                            engine_->config().context_length);
  }
  if (options.max_chunks < 0) return invalid_argument("perplexity: max_chunks {} must be >= 0", options.max_chunks);
  HXRT_ASSIGN_OR_RETURN(std::vector<int32_t> tokens, tokenizer_->encode(text, EncodeOptions{.add_special = false}));
  Perplexity out;
  out.context = n_ctx;
  out.text_tokens = static_cast<int64_t>(tokens.size());
  int chunks = static_cast<int>(out.text_tokens / n_ctx);
  if (options.max_chunks > 0) chunks = std::min(chunks, options.max_chunks);
  if (chunks == 0) {
    return invalid_argument("perplexity: the text has {} tokens, fewer than one chunk of {}", tokens.size(), n_ctx);
  }
  const int first = n_ctx / 2;
  const auto start = std::chrono::steady_clock::now();
  double nll = 0.0, nll2 = 0.0;
  for (int c = 0; c < chunks; ++c) {
    Request request;
    request.prompt.assign(tokens.begin() + static_cast<std::ptrdiff_t>(c) * n_ctx,
                          tokens.begin() + static_cast<std::ptrdiff_t>(c + 1) * n_ctx);
    if (tokenizer_->add_bos() && tokenizer_->bos() != kNoToken) request.prompt[0] = tokenizer_->bos();
    request.max_new_tokens = 0;
    request.prompt_logprobs = true;
    HXRT_ASSIGN_OR_RETURN(RequestResult result, engine_->generate(std::move(request)));
    double chunk_nll = 0.0;
    for (int i = first; i < n_ctx - 1; ++i) {
      const double logprob = result.prompt_logprobs[static_cast<size_t>(i)];
      if (std::isnan(logprob)) {
        return internal_error("perplexity: chunk {} position {} was served from the prefix cache, not scored", c, i);
      }
      chunk_nll -= logprob;
      nll2 += logprob * logprob;
    }
    nll += chunk_nll;
    out.scored_tokens += n_ctx - 1 - first;
    out.chunk_ppl.push_back(std::exp(chunk_nll / (n_ctx - 1 - first)));
    ++out.chunks;
    if (options.on_chunk) options.on_chunk(c, std::exp(nll / static_cast<double>(out.scored_tokens)));
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto n = static_cast<double>(out.scored_tokens);
  out.mean_nll = nll / n;
  out.ppl = std::exp(out.mean_nll);
  const double variance = nll2 / n - out.mean_nll * out.mean_nll;
  out.ppl_error = variance > 0.0 && n > 1.0 ? out.ppl * std::sqrt(variance / (n - 1.0)) : 0.0;
  return out;
}

}  // namespace hxrt::llm
