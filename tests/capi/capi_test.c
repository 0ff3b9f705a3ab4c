/* The C API from C (compiled as C99, -pedantic): devices, sessions, streams and events, buffers, a graph model
 * against the same model on another device and unfused, and an LLM on the default model, with every error path a
 * C caller meets. Each check prints what failed and the library's last error; the exit status is the count of
 * failed checks. Argument: the repository root (for examples/). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hxrt/hxrt.h"

static int failures = 0;

#define CHECK(cond)                                                                           \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      fprintf(stderr, "%s:%d: CHECK(%s) failed; last error: %s\n", __FILE__, __LINE__, #cond, \
              hxrt_last_error_message());                                                     \
      ++failures;                                                                             \
    }                                                                                         \
  } while (0)

#define CHECK_OK(call) CHECK((call) == HXRT_OK)

static int contains(const char* text, const char* part) {
  return text != NULL && strstr(text, part) != NULL;
}

static void test_library_and_devices(void) {
  size_t count = 0;
  size_t i;
  hxrt_device_info info;
  int cpu_found = 0;
  CHECK(hxrt_abi_version() == HXRT_ABI_VERSION);
  CHECK(strlen(hxrt_version_string()) > 0);
  CHECK(strcmp(hxrt_status_name(HXRT_DEADLINE_EXCEEDED), "DEADLINE_EXCEEDED") == 0);
  CHECK(strcmp(hxrt_status_name((hxrt_status)99), "UNKNOWN") == 0);

  CHECK_OK(hxrt_device_count(&count));
  CHECK(count >= 1);
  for (i = 0; i < count; ++i) {
    CHECK_OK(hxrt_device_get(i, &info));
    if (strcmp(info.kind, "cpu") == 0) {
      cpu_found = 1;
      CHECK(strcmp(info.name, "cpu:0") == 0);
      CHECK(info.host_addressable == 1);
      CHECK(info.memory_bytes > 0);
      CHECK(info.compute_units >= 1);
    }
  }
  CHECK(cpu_found);
  CHECK(hxrt_device_get(count, &info) == HXRT_OUT_OF_RANGE);
  CHECK(contains(hxrt_last_error_message(), "hxrt_device_get"));
  CHECK(hxrt_device_count(NULL) == HXRT_INVALID_ARGUMENT);
  CHECK(contains(hxrt_last_error_message(), "'count' is NULL"));
}

static void test_session_streams_events_buffers(const char* device) {
  hxrt_session* session = NULL;
  hxrt_stream* main_stream = NULL;
  hxrt_stream* side = NULL;
  hxrt_stream* again = NULL;
  hxrt_buffer* buffer = NULL;
  hxrt_buffer* registered = NULL;
  hxrt_event* start = NULL;
  hxrt_event* done = NULL;
  unsigned char host[4096];
  unsigned char back[4096];
  float pinned[256];
  int64_t elapsed = -1;
  int clean = 0;
  char* report = NULL;
  size_t i;

  CHECK(hxrt_session_create("tpu", &session) == HXRT_NOT_FOUND);
  CHECK(contains(hxrt_last_error_message(), "tpu"));
  CHECK(session == NULL);
  if (hxrt_session_create(device, &session) != HXRT_OK) {
    fprintf(stderr, "no %s device: %s\n", device, hxrt_last_error_message());
    ++failures;
    return;
  }
  CHECK_OK(hxrt_session_stream(session, NULL, &main_stream));
  CHECK_OK(hxrt_session_stream(session, "side", &side));
  CHECK_OK(hxrt_session_stream(session, "side", &again));
  CHECK(side == again);
  CHECK(side != main_stream);

  /* Pool memory: fill, overwrite part from the host, read back, all in stream order. */
  CHECK_OK(hxrt_buffer_allocate(session, main_stream, sizeof(host), &buffer));
  CHECK(hxrt_buffer_size(buffer) == sizeof(host));
  for (i = 0; i < sizeof(host); ++i) host[i] = (unsigned char)(i * 7 + 3);
  CHECK_OK(hxrt_buffer_fill(main_stream, buffer, 0, sizeof(host), 0xAB));
  CHECK_OK(hxrt_buffer_copy_from_host(main_stream, buffer, 1024, host, 2048));
  CHECK_OK(hxrt_event_create(session, &start));
  CHECK_OK(hxrt_event_create(session, &done));
  CHECK_OK(hxrt_stream_record(main_stream, start));
  CHECK_OK(hxrt_stream_record(main_stream, done));
  /* The side stream reads only after the main stream's work (a cross-stream wait). */
  CHECK_OK(hxrt_stream_wait(side, done, HXRT_INFINITE));
  memset(back, 0, sizeof(back));
  CHECK_OK(hxrt_buffer_copy_to_host(side, buffer, 0, back, sizeof(back)));
  CHECK_OK(hxrt_stream_synchronize(side, 10000000000LL));
  for (i = 0; i < sizeof(back); ++i) {
    const unsigned char expected = (i >= 1024 && i < 3072) ? host[i - 1024] : 0xAB;
    if (back[i] != expected) {
      fprintf(stderr, "byte %u: %u, expected %u\n", (unsigned)i, back[i], expected);
      ++failures;
      break;
    }
  }
  CHECK_OK(hxrt_event_synchronize(done, HXRT_INFINITE));
  CHECK_OK(hxrt_event_elapsed_ns(start, done, &elapsed));
  CHECK(elapsed >= 0);

  /* Bad ranges and arguments are errors, not crashes. */
  CHECK(hxrt_buffer_copy_to_host(main_stream, buffer, 4000, back, 200) == HXRT_OUT_OF_RANGE);
  CHECK(contains(hxrt_last_error_message(), "outside the 4096-byte buffer"));
  CHECK(hxrt_buffer_copy_from_host(NULL, buffer, 0, host, 1) == HXRT_INVALID_ARGUMENT);
  CHECK(hxrt_buffer_allocate(session, NULL, 1, NULL) == HXRT_INVALID_ARGUMENT);

  /* Registered host memory: the device reads and writes it where it lies on host-addressable devices. */
  for (i = 0; i < 256; ++i) pinned[i] = (float)i;
  CHECK_OK(hxrt_buffer_register_host(session, pinned, sizeof(pinned), &registered));
  CHECK_OK(hxrt_buffer_fill(main_stream, registered, 0, 16, 0));
  CHECK_OK(hxrt_session_synchronize(session, HXRT_INFINITE));
  memset(back, 0xFF, 64);
  CHECK_OK(hxrt_buffer_copy_to_host(main_stream, registered, 0, back, 64));
  CHECK_OK(hxrt_stream_synchronize(main_stream, HXRT_INFINITE));
  CHECK(back[0] == 0 && back[15] == 0);
  CHECK(memcmp(back + 16, (const unsigned char*)pinned + 16, 48) == 0);

  CHECK_OK(hxrt_buffer_free(registered));
  CHECK_OK(hxrt_buffer_free(buffer));
  hxrt_event_destroy(start);
  hxrt_event_destroy(done);
  CHECK_OK(hxrt_session_close(session, &clean, &report));
  CHECK(clean == 1);
  if (!clean) fprintf(stderr, "teardown: %s\n", report);
  hxrt_string_free(report);
}

/* A buffer still allocated at close: the report says so, and the orphaned handle is still freed safely. */
static void test_leak_report_and_orphans(void) {
  hxrt_session* session = NULL;
  hxrt_buffer* leaked = NULL;
  hxrt_buffer* registered = NULL;
  hxrt_event* event = NULL;
  hxrt_stream* stream = NULL;
  char host[64];
  int clean = 1;
  char* report = NULL;
  CHECK_OK(hxrt_session_create("cpu", &session));
  CHECK_OK(hxrt_buffer_allocate(session, NULL, 1 << 20, &leaked));
  CHECK_OK(hxrt_buffer_register_host(session, host, sizeof(host), &registered));
  CHECK_OK(hxrt_event_create(session, &event));
  CHECK_OK(hxrt_session_stream(session, NULL, &stream));
  CHECK_OK(hxrt_session_close(session, &clean, &report));
  CHECK(clean == 0);
  CHECK(contains(report, "leak") || contains(report, "registered"));
  hxrt_string_free(report);
  CHECK(hxrt_buffer_size(leaked) == 0);
  CHECK(hxrt_event_synchronize(event, 0) == HXRT_FAILED_PRECONDITION);
  CHECK(contains(hxrt_last_error_message(), "closed"));
  CHECK_OK(hxrt_buffer_free(leaked));
  CHECK_OK(hxrt_buffer_free(registered));
  hxrt_event_destroy(event);
  CHECK_OK(hxrt_buffer_free(NULL));
  hxrt_session_destroy(NULL);
}

/* Runs examples/mlp.hxrt on `x` (batch rows of 64); returns the outputs (probs: batch rows of 10). */
static hxrt_tensors* run_mlp(const char* path, const char* device, int fuse, const float* x, int64_t batch) {
  hxrt_model_options options;
  hxrt_model* model = NULL;
  hxrt_tensors* outputs = NULL;
  hxrt_tensor input;
  hxrt_model_options_init(&options);
  options.device = device;
  options.fallback_device = "cpu";
  options.fuse = fuse;
  if (hxrt_model_load(path, &options, &model) != HXRT_OK) {
    fprintf(stderr, "loading %s on %s: %s\n", path, device, hxrt_last_error_message());
    ++failures;
    return NULL;
  }
  CHECK(hxrt_model_input_count(model) == 1);
  CHECK(strcmp(hxrt_model_input_name(model, 0), "x") == 0);
  CHECK(hxrt_model_input_name(model, 1) == NULL);
  CHECK(hxrt_model_output_count(model) == 1);
  memset(&input, 0, sizeof(input));
  input.name = "x";
  input.dtype = HXRT_F32;
  input.rank = 2;
  input.dims[0] = batch;
  input.dims[1] = 64;
  input.data = x;
  input.bytes = (size_t)batch * 64 * sizeof(float);
  CHECK_OK(hxrt_model_run(model, &input, 1, HXRT_INFINITE, &outputs));
  hxrt_model_destroy(model);
  return outputs;
}

static void test_model(const char* root) {
  char path[4096];
  char trace[4096];
  float x[5 * 64];
  const float* probs[3] = {NULL, NULL, NULL};
  hxrt_tensors* outputs[3];
  hxrt_tensor out;
  hxrt_model* model = NULL;
  hxrt_model_options options;
  hxrt_tensor bad;
  hxrt_tensors* none = NULL;
  char* text = NULL;
  FILE* f;
  int i, j, k;
  size_t size;
  snprintf(path, sizeof(path), "%s/examples/mlp.hxrt", root);
  for (i = 0; i < 5 * 64; ++i) x[i] = (float)sin(0.37 * i + 0.1) * 2.0f;

  outputs[0] = run_mlp(path, "cpu", 1, x, 5);
  outputs[1] = run_mlp(path, "cpu", 0, x, 5);
  outputs[2] = run_mlp(path, "opencl", 1, x, 5);
  for (k = 0; k < 3; ++k) {
    if (outputs[k] == NULL) continue;
    CHECK(hxrt_tensors_count(outputs[k]) == 1);
    CHECK_OK(hxrt_tensors_find(outputs[k], "probs", &out));
    CHECK(out.dtype == HXRT_F32 && out.rank == 2 && out.dims[0] == 5 && out.dims[1] == 10);
    CHECK(out.bytes == 5 * 10 * sizeof(float));
    probs[k] = (const float*)out.data;
    CHECK(hxrt_tensors_find(outputs[k], "logits", &out) == HXRT_NOT_FOUND);
    CHECK(contains(hxrt_last_error_message(), "probs"));
  }
  /* Softmax rows sum to 1; fused = unfused = OpenCL within float rounding. */
  for (i = 0; probs[0] != NULL && i < 5; ++i) {
    double sum = 0.0;
    for (j = 0; j < 10; ++j) sum += probs[0][i * 10 + j];
    CHECK(fabs(sum - 1.0) < 1e-5);
  }
  for (k = 1; k < 3; ++k) {
    if (probs[0] == NULL || probs[k] == NULL) continue;
    for (i = 0; i < 50; ++i) {
      if (fabs(probs[0][i] - probs[k][i]) > 1e-5) {
        fprintf(stderr, "probs[%d] variant %d: %g vs %g\n", i, k, probs[k][i], probs[0][i]);
        ++failures;
        break;
      }
    }
  }
  for (k = 0; k < 3; ++k) hxrt_tensors_free(outputs[k]);

  /* Errors name what is wrong. */
  CHECK(hxrt_model_load("/nonexistent/model.hxrt", NULL, &model) != HXRT_OK);
  CHECK(contains(hxrt_last_error_message(), "/nonexistent/model.hxrt"));
  hxrt_model_options_init(&options);
  options.profile = 1;
  CHECK_OK(hxrt_model_load(path, &options, &model));
  memset(&bad, 0, sizeof(bad));
  bad.name = "x";
  bad.dtype = HXRT_F32;
  bad.rank = 2;
  bad.dims[0] = 2;
  bad.dims[1] = 63;
  bad.data = x;
  bad.bytes = 2 * 63 * sizeof(float);
  CHECK(hxrt_model_run(model, &bad, 1, HXRT_INFINITE, &none) == HXRT_INVALID_ARGUMENT);
  CHECK(contains(hxrt_last_error_message(), "'x'"));
  CHECK(none == NULL);
  bad.dims[1] = 64; /* byte count no longer matches the shape */
  CHECK(hxrt_model_run(model, &bad, 1, HXRT_INFINITE, &none) == HXRT_INVALID_ARGUMENT);
  bad.name = "y";
  bad.bytes = 2 * 64 * sizeof(float);
  CHECK(hxrt_model_run(model, &bad, 1, HXRT_INFINITE, &none) != HXRT_OK);
  CHECK(contains(hxrt_last_error_message(), "'y'"));
  bad.name = "x";
  CHECK_OK(hxrt_model_run(model, &bad, 1, HXRT_INFINITE, &none));
  hxrt_tensors_free(none);
  CHECK_OK(hxrt_model_describe(model, &text));
  CHECK(contains(text, "MatMulBias"));
  hxrt_string_free(text);
  snprintf(trace, sizeof(trace), "capi_mlp_trace_%d.json", (int)sizeof(void*));
  CHECK_OK(hxrt_model_write_trace(model, trace));
  f = fopen(trace, "rb");
  CHECK(f != NULL);
  if (f != NULL) {
    char head[4096];
    size = fread(head, 1, sizeof(head) - 1, f);
    head[size] = '\0';
    fclose(f);
    CHECK(contains(head, "traceEvents"));
    CHECK(contains(head, "fc1"));
    remove(trace);
  }
  hxrt_model_destroy(model);
}

/* An ONNX model through the same calls (docs/onnx.md): TopK-10 whose K is a graph input, so the model is planned at
 * bind time, once per K. */
static void test_onnx_model(const char* root) {
  char path[4096];
  float x[3 * 5];
  int64_t k = 3;
  hxrt_tensor inputs[2];
  hxrt_tensors* outputs = NULL;
  hxrt_tensor values;
  hxrt_tensor indices;
  hxrt_model* model = NULL;
  char* text = NULL;
  int i, j, run;
  snprintf(path, sizeof(path), "%s/tests/onnx/opset_cases/topk_10_k_graph_input/model.onnx", root);
  for (i = 0; i < 15; ++i) x[i] = (float)sin(0.9 * i + 0.3);
  CHECK_OK(hxrt_model_load(path, NULL, &model));
  if (model == NULL) return;
  CHECK(hxrt_model_input_count(model) == 2);
  CHECK(strcmp(hxrt_model_input_name(model, 0), "x") == 0 && strcmp(hxrt_model_input_name(model, 1), "k") == 0);
  CHECK(hxrt_model_output_count(model) == 2);
  CHECK_OK(hxrt_model_describe(model, &text));
  CHECK(contains(text, "bind time"));
  hxrt_string_free(text);
  memset(inputs, 0, sizeof(inputs));
  inputs[0].name = "x";
  inputs[0].dtype = HXRT_F32;
  inputs[0].rank = 2;
  inputs[0].dims[0] = 3;
  inputs[0].dims[1] = 5;
  inputs[0].data = x;
  inputs[0].bytes = sizeof(x);
  inputs[1].name = "k";
  inputs[1].dtype = HXRT_I64;
  inputs[1].rank = 1;
  inputs[1].dims[0] = 1;
  inputs[1].data = &k;
  inputs[1].bytes = sizeof(k);
  for (run = 0; run < 2; ++run, k = 2) {
    CHECK_OK(hxrt_model_run(model, inputs, 2, HXRT_INFINITE, &outputs));
    if (outputs == NULL) continue;
    CHECK_OK(hxrt_tensors_find(outputs, "values", &values));
    CHECK_OK(hxrt_tensors_find(outputs, "indices", &indices));
    CHECK(values.rank == 2 && values.dims[0] == 3 && values.dims[1] == k && indices.dtype == HXRT_I64);
    /* Each row's K largest, in descending order, at the indices given. */
    for (i = 0; i < 3 && values.dims[1] == k; ++i) {
      const float* v = (const float*)values.data + i * k;
      const int64_t* at = (const int64_t*)indices.data + i * k;
      for (j = 0; j < k; ++j) {
        int larger = 0, m;
        CHECK(v[j] == x[i * 5 + at[j]]);
        for (m = 0; m < 5; ++m) larger += x[i * 5 + m] > v[j];
        CHECK(larger == j);
      }
    }
    hxrt_tensors_free(outputs);
    outputs = NULL;
  }
  hxrt_model_destroy(model);
}

struct collected {
  char text[8192];
  size_t bytes;
  int calls;
  int stop_after;   /* return 0 at this call (0: never) */
  hxrt_llm* cancel; /* cancel from inside the callback at stop_after instead */
};

static int collect(void* user, const char* piece, size_t bytes) {
  struct collected* c = (struct collected*)user;
  if (c->bytes + bytes < sizeof(c->text)) {
    memcpy(c->text + c->bytes, piece, bytes);
    c->bytes += bytes;
    c->text[c->bytes] = '\0';
  }
  ++c->calls;
  if (c->stop_after > 0 && c->calls >= c->stop_after) {
    if (c->cancel != NULL) {
      hxrt_llm_cancel(c->cancel);
      return 1;
    }
    return 0;
  }
  return 1;
}

static void test_llm(void) {
  hxrt_llm_options options;
  hxrt_llm* llm = NULL;
  hxrt_generate_options generate;
  hxrt_generation generation;
  struct collected streamed;
  const char* stops[1];
  char stop[16];
  const char* roles[2] = {"system", "user"};
  const char* contents[2] = {"You are a helpful assistant.", "Why is the sky blue?"};
  const char* model = getenv("HXRT_TEST_MODEL");
  int32_t tokens[64];
  size_t count = 0;
  char full[8192];
  char* rendered = NULL;

  hxrt_llm_options_init(&options);
  options.model = model;
  options.kv_tokens = 1024;
  if (hxrt_llm_load(&options, &llm) != HXRT_OK) {
    fprintf(stderr, "loading the default model: %s\n", hxrt_last_error_message());
    ++failures;
    return;
  }
  CHECK_OK(hxrt_llm_tokenize(llm, "The capital of France is", NULL, 0, &count));
  CHECK(count >= 4 && count < 64);
  CHECK_OK(hxrt_llm_tokenize(llm, "The capital of France is", tokens, 64, &count));

  /* Greedy continuation, streamed: the pieces are the text. */
  hxrt_generate_options_init(&generate);
  generate.max_tokens = 16;
  memset(&streamed, 0, sizeof(streamed));
  generate.on_text = collect;
  generate.user_data = &streamed;
  CHECK_OK(hxrt_llm_generate(llm, "The capital of France is", &generate, &generation));
  CHECK(contains(generation.text, "Paris"));
  CHECK(strcmp(generation.text, streamed.text) == 0);
  CHECK(generation.finish == HXRT_FINISH_LENGTH || generation.finish == HXRT_FINISH_EOS);
  CHECK(generation.prompt_tokens == (int32_t)count);
  CHECK(generation.completion_tokens >= 1 && generation.completion_tokens <= 16);
  snprintf(full, sizeof(full), "%s", generation.text);
  hxrt_string_free(generation.text);

  /* A grammar or a JSON Schema constrains the text; a bad one is HXRT_INVALID_ARGUMENT naming what is wrong. */
  {
    hxrt_generate_options constrained;
    hxrt_generate_options_init(&constrained);
    constrained.max_tokens = 8;
    constrained.grammar = "root ::= \" Paris\" | \" Lyon\"";
    CHECK_OK(hxrt_llm_generate(llm, "The capital of France is", &constrained, &generation));
    CHECK(strcmp(generation.text, " Paris") == 0 || strcmp(generation.text, " Lyon") == 0);
    hxrt_string_free(generation.text);
    constrained.grammar = NULL;
    constrained.json_schema = "{\"type\": \"integer\"}";
    constrained.max_tokens = 6;
    CHECK_OK(hxrt_llm_generate(llm, "The year the Eiffel Tower was built: ", &constrained, &generation));
    CHECK(generation.text[0] == '-' || (generation.text[0] >= '0' && generation.text[0] <= '9'));
    hxrt_string_free(generation.text);
    constrained.json_schema = "{\"type\": \"string\", \"pattern\": \"x\"}";
    CHECK(hxrt_llm_generate(llm, "x", &constrained, &generation) == HXRT_INVALID_ARGUMENT);
    CHECK(contains(hxrt_last_error_message(), "pattern"));
  }

  /* Speculative decoding (draft_max) gives the same greedy text; out of range is HXRT_INVALID_ARGUMENT. */
  {
    hxrt_llm* drafting = NULL;
    options.draft_max = 8;
    CHECK_OK(hxrt_llm_load(&options, &drafting));
    if (drafting != NULL) {
      memset(&streamed, 0, sizeof(streamed));
      CHECK_OK(hxrt_llm_generate(drafting, "The capital of France is", &generate, &generation));
      CHECK(strcmp(generation.text, full) == 0);
      hxrt_string_free(generation.text);
      hxrt_llm_destroy(drafting);
    }
    options.draft_max = 65;
    CHECK(hxrt_llm_load(&options, &drafting) == HXRT_INVALID_ARGUMENT);
    CHECK(contains(hxrt_last_error_message(), "draft_max"));
    options.draft_max = 0;
  }

  /* Without tensor parallelism every hxrt_llm leads; asking for 3 ranks outside mpirun is an error that says how
   * to start them (the 3-rank run itself: tests/llm/tensor_parallel_test.cc). */
  {
    hxrt_llm* parallel = NULL;
    CHECK(hxrt_llm_is_leader(llm) == 1);
    CHECK(hxrt_llm_follow(llm) == HXRT_FAILED_PRECONDITION);
    CHECK(hxrt_llm_is_leader(NULL) == 0);
    if (getenv("OMPI_COMM_WORLD_SIZE") == NULL) {
      options.tensor_parallel = 3;
      CHECK(hxrt_llm_load(&options, &parallel) == HXRT_FAILED_PRECONDITION);
      CHECK(contains(hxrt_last_error_message(), "mpirun -np 3"));
      options.tensor_parallel = 1;
      options.pipeline_parallel = 2;
      CHECK(hxrt_llm_load(&options, &parallel) == HXRT_FAILED_PRECONDITION);
      CHECK(contains(hxrt_last_error_message(), "mpirun -np 2"));
      options.pipeline_parallel = 1;
    }
  }

  /* A stop string taken from the middle of that text: the text ends before it, and nothing of it was streamed. */
  if (strlen(full) > 12) {
    memcpy(stop, full + 8, 3);
    stop[3] = '\0';
    stops[0] = stop;
    generate.stop = stops;
    generate.stop_count = 1;
    memset(&streamed, 0, sizeof(streamed));
    CHECK_OK(hxrt_llm_generate(llm, "The capital of France is", &generate, &generation));
    CHECK(generation.finish == HXRT_FINISH_STOP);
    CHECK(strncmp(generation.text, full, strlen(generation.text)) == 0);
    CHECK(strstr(full, stop) == full + strlen(generation.text));
    CHECK(strcmp(generation.text, streamed.text) == 0);
    hxrt_string_free(generation.text);
    generate.stop = NULL;
    generate.stop_count = 0;
  }

  /* The callback stops it; hxrt_llm_cancel stops it. */
  memset(&streamed, 0, sizeof(streamed));
  streamed.stop_after = 2;
  CHECK_OK(hxrt_llm_generate(llm, "The capital of France is", &generate, &generation));
  CHECK(generation.finish == HXRT_FINISH_CALLBACK);
  CHECK(strcmp(generation.text, streamed.text) == 0);
  hxrt_string_free(generation.text);
  memset(&streamed, 0, sizeof(streamed));
  streamed.stop_after = 2;
  streamed.cancel = llm;
  CHECK_OK(hxrt_llm_generate(llm, "The capital of France is", &generate, &generation));
  CHECK(generation.finish == HXRT_FINISH_CANCELLED);
  CHECK(strcmp(generation.text, streamed.text) == 0);
  hxrt_string_free(generation.text);

  /* A timeout bounds the call. */
  memset(&streamed, 0, sizeof(streamed));
  generate.timeout_ns = 0;
  CHECK(hxrt_llm_generate(llm, "The capital of France is", &generate, &generation) == HXRT_DEADLINE_EXCEEDED);
  CHECK(generation.text == NULL);
  generate.timeout_ns = HXRT_INFINITE;

  /* Chat, profiled. */
  CHECK_OK(hxrt_llm_set_profiling(llm, 1));
  generate.on_text = NULL;
  generate.max_tokens = 24;
  CHECK_OK(hxrt_llm_chat(llm, roles, contents, 2, &generate, &generation));
  CHECK(contains(generation.text, "light"));
  CHECK(!contains(generation.text, "<|im_"));
  hxrt_string_free(generation.text);
  CHECK_OK(hxrt_llm_write_trace(llm, "capi_llm_trace.json"));
  remove("capi_llm_trace.json");
  CHECK(hxrt_llm_chat(llm, roles, contents, 0, &generate, &generation) == HXRT_INVALID_ARGUMENT);
  CHECK(hxrt_llm_generate(llm, NULL, &generate, &generation) == HXRT_INVALID_ARGUMENT);
  /* The file's own template (SmolLM2's), then a built-in one and Jinja source instead; one that cannot parse. */
  CHECK_OK(hxrt_llm_apply_chat_template(llm, roles, contents, 2, 1, &rendered));
  CHECK(rendered != NULL && strcmp(rendered,
                                   "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
                                   "<|im_start|>user\nWhy is the sky blue?<|im_end|>\n<|im_start|>assistant\n") == 0);
  hxrt_string_free(rendered);
  CHECK(hxrt_llm_apply_chat_template(llm, roles, contents, 0, 1, &rendered) == HXRT_INVALID_ARGUMENT);
  CHECK(rendered == NULL);
  hxrt_llm_destroy(llm);
  options.chat_template = "{% for m in messages %}[{{ m.role | upper }}] {{ m.content }}\n{% endfor %}";
  CHECK_OK(hxrt_llm_load(&options, &llm));
  CHECK_OK(hxrt_llm_apply_chat_template(llm, roles, contents, 2, 0, &rendered));
  CHECK(rendered != NULL &&
        strcmp(rendered, "[SYSTEM] You are a helpful assistant.\n[USER] Why is the sky blue?\n") == 0);
  hxrt_string_free(rendered);
  hxrt_llm_destroy(llm);
  options.chat_template = "{{ messages | shout }}";
  CHECK(hxrt_llm_load(&options, &llm) == HXRT_INVALID_ARGUMENT);
  CHECK(contains(hxrt_last_error_message(), "line 1, column 15: unknown filter 'shout'"));
  options.chat_template = NULL;

  options.model = "/nonexistent/model.gguf";
  CHECK(hxrt_llm_load(&options, &llm) != HXRT_OK);
  CHECK(contains(hxrt_last_error_message(), "/nonexistent/model.gguf"));
}

int main(int argc, char** argv) {
  const char* root = argc > 1 ? argv[1] : ".";
  test_library_and_devices();
  test_session_streams_events_buffers("cpu");
  test_session_streams_events_buffers("opencl");
  test_leak_report_and_orphans();
  test_model(root);
  test_onnx_model(root);
  test_llm();
  if (failures == 0) printf("capi_test: all checks passed\n");
  return failures == 0 ? 0 : 1;
}
