#include "llm/step_message.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "hxrt/llm/decoder.h"

namespace hxrt::llm::step {
namespace {

constexpr int64_t kStop = 0;
constexpr int64_t kStepMessage = 0x5458535445500001;  // "TXSTEP", version 1
// The inputs a step carries, in message order; absent ones (the embedding rows, the window cache's tables) are
// marked so.
constexpr std::array<const char*, 7> kInputs = {decoder::kTokens,    decoder::kPositions, decoder::kTokenSeq,
                                                decoder::kBlockTables, decoder::kLogitRows, decoder::kEmbedRows,
                                                decoder::kBlockTablesLocal};
static_assert(kHeaderWords == 2 + 3 * kInputs.size());
constexpr int64_t kMaxDim = int64_t{1} << 24;

const HostTensor* find(const Inputs& inputs, const char* name) {
  auto it = inputs.find(name);
  return it == inputs.end() ? nullptr : &it->second;
}

std::vector<int32_t> values(const HostTensor& t) {
  std::vector<int32_t> out(t.bytes.size() / sizeof(int32_t));
  if (!out.empty()) std::memcpy(out.data(), t.bytes.data(), out.size() * sizeof(int32_t));
  return out;
}

// Sequence s's tokens are [begin[s], begin[s + 1]): token_seq must be a non-decreasing map onto [0, n_seqs).
Result<std::vector<int64_t>> sequence_starts(const std::vector<int32_t>& seq, int64_t n_seqs) {
  const int64_t n_tokens = static_cast<int64_t>(seq.size());
  std::vector<int64_t> begin(static_cast<size_t>(n_seqs) + 1, n_tokens);
  for (int64_t t = n_tokens - 1; t >= 0; --t) {
    const int32_t s = seq[static_cast<size_t>(t)];
    if (s < 0 || s >= n_seqs || (t + 1 < n_tokens && seq[static_cast<size_t>(t + 1)] < s)) {
      return data_loss("token_seq[{}] = {} is not a non-decreasing map onto the {} block-table rows", t, s, n_seqs);
    }
    begin[static_cast<size_t>(s)] = t;
  }
  for (int64_t s = n_seqs - 1; s >= 0; --s) {
    begin[static_cast<size_t>(s)] = std::min(begin[static_cast<size_t>(s)], begin[static_cast<size_t>(s) + 1]);
  }
  return begin;
}

}  // namespace

Status encode_step(const Inputs& inputs, bool decode_only, Header* header, std::vector<int32_t>* payload) {
  header->fill(0);
  (*header)[0] = kStepMessage;
  (*header)[1] = decode_only ? 1 : 0;
  payload->clear();
  for (size_t i = 0; i < kInputs.size(); ++i) {
    const HostTensor* t = find(inputs, kInputs[i]);
    if (t == nullptr) continue;
    if (t->dtype != DType::kI32 || t->shape.rank() < 1 || t->shape.rank() > 2) {
      return internal_error("step message: input '{}' is {} {}, not i32 of rank 1 or 2", kInputs[i],
                            dtype_name(t->dtype), t->shape);
    }
    int64_t* entry = &(*header)[2 + 3 * i];
    entry[0] = 1;
    entry[1] = t->shape.dim(0);
    entry[2] = t->shape.rank() == 2 ? t->shape.dim(1) : -1;
    const std::vector<int32_t> v = values(*t);
    payload->insert(payload->end(), v.begin(), v.end());
  }
  for (const auto& entry : inputs) {
    const std::string& name = entry.first;
    if (std::find_if(kInputs.begin(), kInputs.end(), [&](const char* known) { return name == known; }) ==
        kInputs.end()) {
      return internal_error("step message: input '{}' has no place in it", name);
    }
  }
  return ok_status();
}

Header stop_header() {
  Header header{};
  header[0] = kStop;
  return header;
}

Result<std::optional<size_t>> payload_words(const Header& header) {
  if (header[0] == kStop) return std::optional<size_t>();
  if (header[0] != kStepMessage) {
    return data_loss("step message: the leader's message starts with {:#x}, neither a step nor a stop",
                     static_cast<uint64_t>(header[0]));
  }
  size_t total = 0;
  for (size_t i = 0; i < kInputs.size(); ++i) {
    const int64_t* entry = &header[2 + 3 * i];
    if (entry[0] == 0) continue;
    if (entry[0] != 1 || entry[1] < 0 || entry[1] > kMaxDim || entry[2] < -1 || entry[2] > kMaxDim) {
      return data_loss("step message: input '{}' has the entry ({}, {}, {})", kInputs[i], entry[0], entry[1], entry[2]);
    }
    const int64_t count = entry[1] * (entry[2] < 0 ? 1 : entry[2]);
    if (count > kMaxDim) return data_loss("step message: input '{}' has {} values", kInputs[i], count);
    total += static_cast<size_t>(count);
  }
  return std::optional<size_t>(total);
}

Result<Step> decode_step(const Header& header, std::span<const int32_t> payload) {
  HXRT_ASSIGN_OR_RETURN(const std::optional<size_t> words, payload_words(header));
  if (!words.has_value()) return data_loss("step message: a stop has no step");
  if (*words != payload.size()) {
    return data_loss("step message: the header describes {} values, the payload has {}", *words, payload.size());
  }
  Step step;
  step.decode_only = header[1] != 0;
  size_t offset = 0;
  for (size_t i = 0; i < kInputs.size(); ++i) {
    const int64_t* entry = &header[2 + 3 * i];
    if (entry[0] == 0) continue;
    const Shape shape = entry[2] < 0 ? Shape{entry[1]} : Shape{entry[1], entry[2]};
    const size_t count = static_cast<size_t>(shape.num_elements());
    step.inputs.emplace(kInputs[i], HostTensor::i32(shape, std::vector<int32_t>(payload.begin() + static_cast<std::ptrdiff_t>(offset),
                                                                                payload.begin() + static_cast<std::ptrdiff_t>(offset + count))));
    offset += count;
  }
  // What the followers' forward relies on, checked here so that a corrupt message fails as one.
  for (const char* required : {decoder::kTokens, decoder::kPositions, decoder::kTokenSeq, decoder::kBlockTables,
                               decoder::kLogitRows}) {
    if (find(step.inputs, required) == nullptr) return data_loss("step message: no '{}'", required);
  }
  const HostTensor& tables = step.inputs.at(decoder::kBlockTables);
  const HostTensor& rows = step.inputs.at(decoder::kLogitRows);
  const int64_t n_tokens = step.inputs.at(decoder::kTokens).shape.dim(0);
  for (const char* per_token : {decoder::kTokens, decoder::kPositions, decoder::kTokenSeq}) {
    const Shape& shape = step.inputs.at(per_token).shape;
    if (shape.rank() != 1 || shape.dim(0) != n_tokens) {
      return data_loss("step message: '{}' is {}, not [{}]", per_token, shape, n_tokens);
    }
  }
  if (tables.shape.rank() != 2 || rows.shape.rank() != 1) {
    return data_loss("step message: block_tables {} and logit_rows {} have the wrong ranks", tables.shape, rows.shape);
  }
  if (auto local = step.inputs.find(decoder::kBlockTablesLocal);
      local != step.inputs.end() && local->second.shape != tables.shape) {
    return data_loss("step message: block_tables_local {} differs from block_tables {}", local->second.shape,
                     tables.shape);
  }
  HXRT_RETURN_IF_ERROR(sequence_starts(values(step.inputs.at(decoder::kTokenSeq)), tables.shape.dim(0)).status());
  for (int32_t r : values(rows)) {
    if (r < 0 || r >= n_tokens) return data_loss("step message: logit row {} is not one of {} tokens", r, n_tokens);
  }
  return step;
}

Result<std::vector<MicroBatch>> split_micro_batches(const Inputs& inputs, int parts) {
  const HostTensor* tokens = find(inputs, decoder::kTokens);
  const HostTensor* positions = find(inputs, decoder::kPositions);
  const HostTensor* token_seq = find(inputs, decoder::kTokenSeq);
  const HostTensor* tables = find(inputs, decoder::kBlockTables);
  const HostTensor* logit_rows = find(inputs, decoder::kLogitRows);
  const HostTensor* local_tables = find(inputs, decoder::kBlockTablesLocal);
  if (tokens == nullptr || positions == nullptr || token_seq == nullptr || tables == nullptr || logit_rows == nullptr ||
      tables->shape.rank() != 2) {
    return invalid_argument("a pipeline step needs tokens, positions, token_seq, block_tables and logit_rows");
  }
  if (find(inputs, decoder::kEmbedRows) != nullptr) {
    return unimplemented("pooled embeddings under pipeline parallelism (the last stage would have to send them back)");
  }
  const std::vector<int32_t> tok = values(*tokens), pos = values(*positions), seq = values(*token_seq);
  const std::vector<int32_t> table = values(*tables), rows = values(*logit_rows);
  const std::vector<int32_t> local = local_tables != nullptr ? values(*local_tables) : std::vector<int32_t>();
  const int64_t n_tokens = static_cast<int64_t>(tok.size());
  const int64_t n_seqs = tables->shape.dim(0);
  const int64_t width = tables->shape.dim(1);
  if (static_cast<int64_t>(pos.size()) != n_tokens || static_cast<int64_t>(seq.size()) != n_tokens ||
      (local_tables != nullptr && local.size() != table.size())) {
    return invalid_argument("a pipeline step's per-token inputs differ in length");
  }
  HXRT_ASSIGN_OR_RETURN(const std::vector<int64_t> seq_begin, sequence_starts(seq, n_seqs));
  const int64_t m = std::max<int64_t>(1, std::min<int64_t>(parts, n_seqs));
  std::vector<MicroBatch> out;
  int64_t s0 = 0;
  for (int64_t part = 0; part < m; ++part) {
    // This run ends where its tokens reach its share of what is left, leaving a sequence for each later run.
    const int64_t left_parts = m - part;
    const int64_t t_start = seq_begin[static_cast<size_t>(s0)];
    const int64_t target = t_start + (n_tokens - t_start + left_parts - 1) / left_parts;
    int64_t s1 = s0 + 1;
    while (s1 < n_seqs - (left_parts - 1) && seq_begin[static_cast<size_t>(s1)] < target) ++s1;
    if (part == m - 1) s1 = n_seqs;
    const int64_t t0 = seq_begin[static_cast<size_t>(s0)], t1 = seq_begin[static_cast<size_t>(s1)];
    MicroBatch mb;
    mb.n_tokens = t1 - t0;
    const auto slice = [](const std::vector<int32_t>& v, int64_t begin, int64_t end, int32_t minus) {
      std::vector<int32_t> r(v.begin() + begin, v.begin() + end);
      for (int32_t& x : r) x -= minus;
      return r;
    };
    mb.inputs.emplace(decoder::kTokens, HostTensor::i32(Shape{mb.n_tokens}, slice(tok, t0, t1, 0)));
    mb.inputs.emplace(decoder::kPositions, HostTensor::i32(Shape{mb.n_tokens}, slice(pos, t0, t1, 0)));
    mb.inputs.emplace(decoder::kTokenSeq,
                      HostTensor::i32(Shape{mb.n_tokens}, slice(seq, t0, t1, static_cast<int32_t>(s0))));
    const Shape table_shape{s1 - s0, width};
    mb.inputs.emplace(decoder::kBlockTables, HostTensor::i32(table_shape, slice(table, s0 * width, s1 * width, 0)));
    if (local_tables != nullptr) {
      mb.inputs.emplace(decoder::kBlockTablesLocal,
                        HostTensor::i32(table_shape, slice(local, s0 * width, s1 * width, 0)));
    }
    std::vector<int32_t> mb_rows;
    for (int32_t r : rows) {
      if (r >= t0 && r < t1) mb_rows.push_back(r - static_cast<int32_t>(t0));
    }
    mb.n_outputs = static_cast<int64_t>(mb_rows.size());
    mb.inputs.emplace(decoder::kLogitRows, HostTensor::i32(Shape{mb.n_outputs}, mb_rows));
    out.push_back(std::move(mb));
    s0 = s1;
  }
  return out;
}

}  // namespace hxrt::llm::step
