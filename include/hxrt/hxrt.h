/* hxrt's C API: a stable C ABI over the C++ runtime, for programs in C and for every language that binds to C.
 *
 * Conventions (docs/c_api.md has the long form and an example):
 *  - Every object is an opaque handle made by hxrt_<object>_create / _load / _allocate and released by the matching
 *    _destroy / _free (NULL is accepted and ignored). A handle is owned by the caller unless its getter says
 *    "borrowed": then it lives as long as the object it came from.
 *  - Every function that can fail returns an hxrt_status: HXRT_OK (0) or an error code. The message of the last
 *    error on the calling thread, with its context chain, is hxrt_last_error_message(); it stays valid until the
 *    thread's next failing hxrt call. Bad arguments (NULL where a handle is needed, a wrong size) are
 *    HXRT_INVALID_ARGUMENT, never a crash. Nothing throws across this boundary.
 *  - Timeouts are in nanoseconds; HXRT_INFINITE waits without bound. One timeout bounds the whole call.
 *  - Strings the library returns through out-parameters are freed with hxrt_string_free; strings it returns
 *    directly are borrowed.
 *  - Only hxrt_* symbols are exported from libhxrt.so. hxrt_abi_version() is HXRT_ABI_VERSION of the library
 *    actually loaded: compare it with the header's to detect a mismatch.
 *
 * Thread-safety: functions on different handles may be called from different threads at once. One handle is
 * thread-compatible (one call at a time), except hxrt_llm_cancel, which any thread may call at any time.
 */
#ifndef HXRT_HXRT_H_
#define HXRT_HXRT_H_

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define HXRT_API __declspec(dllexport)
#else
#define HXRT_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Incremented when a function's signature or a struct's layout changes; additions keep it. */
#define HXRT_ABI_VERSION 4
#define HXRT_INFINITE INT64_MAX
#define HXRT_MAX_RANK 8

/* The codes of hxrt::StatusCode, with the same numbers. */
typedef enum hxrt_status {
  HXRT_OK = 0,
  HXRT_INVALID_ARGUMENT = 1,
  HXRT_NOT_FOUND = 2,
  HXRT_ALREADY_EXISTS = 3,
  HXRT_OUT_OF_MEMORY = 4,
  HXRT_OUT_OF_RANGE = 5,
  HXRT_UNAVAILABLE = 6,
  HXRT_UNIMPLEMENTED = 7,
  HXRT_DEADLINE_EXCEEDED = 8,
  HXRT_ABORTED = 9,
  HXRT_FAILED_PRECONDITION = 10,
  HXRT_DATA_LOSS = 11,
  HXRT_INTERNAL = 12
} hxrt_status;

/* The element types of tensors crossing the API (hxrt::DType's plain types, same order). */
typedef enum hxrt_dtype {
  HXRT_F32 = 0,
  HXRT_F16 = 1,
  HXRT_BF16 = 2,
  HXRT_I8 = 3,
  HXRT_I32 = 4,
  HXRT_I64 = 5,
  HXRT_U8 = 6,
  HXRT_BOOL = 7
} hxrt_dtype;

typedef struct hxrt_session hxrt_session;
typedef struct hxrt_stream hxrt_stream;
typedef struct hxrt_event hxrt_event;
typedef struct hxrt_buffer hxrt_buffer;
typedef struct hxrt_model hxrt_model;
typedef struct hxrt_tensors hxrt_tensors;
typedef struct hxrt_llm hxrt_llm;

/* ---- Library ---- */
HXRT_API uint32_t hxrt_abi_version(void);
HXRT_API const char* hxrt_version_string(void);
/* "INVALID_ARGUMENT" and so on (borrowed); "UNKNOWN" for a value outside the enum. */
HXRT_API const char* hxrt_status_name(hxrt_status status);
/* The last error of this thread (borrowed); "" when the thread has had none. */
HXRT_API const char* hxrt_last_error_message(void);
HXRT_API void hxrt_string_free(char* string);

/* ---- Devices ---- */
typedef struct hxrt_device_info {
  char name[128];        /* "cpu:0", "opencl:0" (the spec hxrt_session_create takes) */
  char description[256]; /* the device's own name ("AMD EPYC ...", "pthread-..." for PoCL) */
  char kind[16];         /* "cpu", "opencl", "cuda" */
  uint64_t memory_bytes;
  int32_t compute_units;
  int32_t host_addressable; /* kernels read host memory in place (zero-copy weights) */
} hxrt_device_info;

/* The devices of every available driver; a driver whose library is absent contributes none. */
HXRT_API hxrt_status hxrt_device_count(size_t* count);
HXRT_API hxrt_status hxrt_device_get(size_t index, hxrt_device_info* info);

/* ---- Sessions: one device, its memory pool, its streams ---- */
/* `device`: "cpu", "opencl", "opencl:1" ... */
HXRT_API hxrt_status hxrt_session_create(const char* device, hxrt_session** session);
/* Waits for every stream of the session, within one timeout. */
HXRT_API hxrt_status hxrt_session_synchronize(hxrt_session* session, int64_t timeout_ns);
/* Closes the session: drains and closes streams, destroys events, returns pool memory. *clean (may be NULL) is 1
 * when nothing leaked or hung; *report (may be NULL; free with hxrt_string_free) describes the teardown. The
 * session is destroyed whether or not the close succeeds. */
HXRT_API hxrt_status hxrt_session_close(hxrt_session* session, int* clean, char** report);
/* Destroys without a report (as close). */
HXRT_API void hxrt_session_destroy(hxrt_session* session);

/* ---- Streams and events ---- */
/* The session's stream of that name, made on first use ("" or NULL: the default stream). Borrowed. */
HXRT_API hxrt_status hxrt_session_stream(hxrt_session* session, const char* name, hxrt_stream** stream);
HXRT_API hxrt_status hxrt_stream_synchronize(hxrt_stream* stream, int64_t timeout_ns);
HXRT_API hxrt_status hxrt_event_create(hxrt_session* session, hxrt_event** event);
HXRT_API void hxrt_event_destroy(hxrt_event* event);
/* The event completes when the work enqueued on `stream` so far has run. */
HXRT_API hxrt_status hxrt_stream_record(hxrt_stream* stream, hxrt_event* event);
/* Work enqueued on `stream` after this waits for `event` (which may be of another stream); the stream fails with
 * DEADLINE_EXCEEDED when the event has not completed within the timeout. */
HXRT_API hxrt_status hxrt_stream_wait(hxrt_stream* stream, hxrt_event* event, int64_t timeout_ns);
HXRT_API hxrt_status hxrt_event_synchronize(hxrt_event* event, int64_t timeout_ns);
/* *ns = the device time from `start` to `end` (both complete). */
HXRT_API hxrt_status hxrt_event_elapsed_ns(hxrt_event* start, hxrt_event* end, int64_t* ns);

/* ---- Buffers ---- */
/* `bytes` of the session's device memory from its pool, usable on `stream` (stream-ordered reuse). */
HXRT_API hxrt_status hxrt_buffer_allocate(hxrt_session* session, hxrt_stream* stream, size_t bytes,
                                          hxrt_buffer** buffer);
/* Host memory registered with the device, zero-copy where the device addresses host memory. `host` must stay valid
 * until the buffer is freed. */
HXRT_API hxrt_status hxrt_buffer_register_host(hxrt_session* session, void* host, size_t bytes, hxrt_buffer** buffer);
HXRT_API size_t hxrt_buffer_size(const hxrt_buffer* buffer);
/* Asynchronous copies in stream order: the host memory must stay valid until the stream has run them. */
HXRT_API hxrt_status hxrt_buffer_copy_from_host(hxrt_stream* stream, hxrt_buffer* buffer, size_t offset,
                                                const void* host, size_t bytes);
HXRT_API hxrt_status hxrt_buffer_copy_to_host(hxrt_stream* stream, const hxrt_buffer* buffer, size_t offset, void* host,
                                              size_t bytes);
HXRT_API hxrt_status hxrt_buffer_fill(hxrt_stream* stream, hxrt_buffer* buffer, size_t offset, size_t bytes,
                                      uint8_t value);
/* Returns the memory to the pool in stream order (safe while work using it is still queued), or unregisters. */
HXRT_API hxrt_status hxrt_buffer_free(hxrt_buffer* buffer);

/* ---- Tensors: named host tensors in and out of a model ---- */
typedef struct hxrt_tensor {
  const char* name;
  hxrt_dtype dtype;
  int32_t rank;
  int64_t dims[HXRT_MAX_RANK];
  const void* data; /* dense, row-major; the library copies it */
  size_t bytes;
} hxrt_tensor;

HXRT_API size_t hxrt_tensors_count(const hxrt_tensors* tensors);
/* Tensor `index` of the set; its name and data are borrowed from the set. */
HXRT_API hxrt_status hxrt_tensors_get(const hxrt_tensors* tensors, size_t index, hxrt_tensor* tensor);
/* The tensor called `name`; NOT_FOUND names the ones there are. */
HXRT_API hxrt_status hxrt_tensors_find(const hxrt_tensors* tensors, const char* name, hxrt_tensor* tensor);
HXRT_API void hxrt_tensors_free(hxrt_tensors* tensors);

/* ---- Models: a graph file or ONNX model loaded for a device and run with named tensors ---- */
typedef struct hxrt_model_options {
  const char* device;          /* NULL: "cpu" */
  const char* fallback_device; /* NULL or "": no heterogeneous split; "cpu": what `device` lacks runs on the CPU */
  int32_t fuse;                /* 0: no fusion; otherwise the fusion patterns apply (hxrt_model_options_init: 1) */
  int32_t profile;             /* 1: every run is profiled (hxrt_model_write_trace) */
} hxrt_model_options;

HXRT_API void hxrt_model_options_init(hxrt_model_options* options);
/* Loads an hxrt graph file (.hxrt) or an ONNX model (.onnx: inputs and outputs by their ONNX names; a model whose
 * graph depends on input values is planned when it runs, docs/onnx.md); `options` may be NULL for the defaults. */
HXRT_API hxrt_status hxrt_model_load(const char* path, const hxrt_model_options* options, hxrt_model** model);
HXRT_API void hxrt_model_destroy(hxrt_model* model);
HXRT_API size_t hxrt_model_input_count(const hxrt_model* model);
HXRT_API const char* hxrt_model_input_name(const hxrt_model* model, size_t index); /* borrowed; NULL past the end */
HXRT_API size_t hxrt_model_output_count(const hxrt_model* model);
HXRT_API const char* hxrt_model_output_name(const hxrt_model* model, size_t index); /* borrowed; NULL past the end */
/* The plan: kernels chosen and why, fusion, streams, memory (free with hxrt_string_free). */
HXRT_API hxrt_status hxrt_model_describe(const hxrt_model* model, char** text);
/* Runs with `inputs` (by name); *outputs holds every graph output (free with hxrt_tensors_free). Errors name the
 * input, or the failing op with its attributes and inputs. timeout_ns bounds the run. */
HXRT_API hxrt_status hxrt_model_run(hxrt_model* model, const hxrt_tensor* inputs, size_t input_count,
                                    int64_t timeout_ns, hxrt_tensors** outputs);
/* Writes the profiled runs as a Chrome trace (Perfetto opens it). */
HXRT_API hxrt_status hxrt_model_write_trace(const hxrt_model* model, const char* path);

/* ---- LLMs: a GGUF model, its tokenizer and the engine ---- */
typedef struct hxrt_llm_options {
  const char* model;  /* GGUF file; NULL or "": the default model from the model cache, fetched on first use */
  const char* device; /* NULL: "cpu" */
  int32_t threads;    /* CPU threads; 0: every core */
  int64_t kv_tokens;  /* KV cache budget in tokens (hxrt_llm_options_init: 4096) */
  /* The chat template instead of the model file's own (or its family's default): Jinja source, or a built-in
   * name ("chatml", "llama3", "qwen", "gemma", "phi3", "mistral", "llama2"); NULL or "": the model's. A template
   * that does not parse fails hxrt_llm_load with HXRT_INVALID_ARGUMENT naming its line and column. (ABI 2.) */
  const char* chat_template;
  /* Speculative decoding by prompt lookup: up to this many tokens drafted a step from the context and verified in
   * one forward; the output is the same as without. 0 (hxrt_llm_options_init): off; at most 64. (ABI 3.) */
  int32_t draft_max;
  /* Tensor parallelism (ABI 4; docs/scale-out.md): > 1 runs the model across that many processes, which mpirun
   * starts (`mpirun -np N program`), each loading it with the same options. Rank 0 generates (hxrt_llm_is_leader);
   * the others call hxrt_llm_follow. 0 or 1 (hxrt_llm_options_init: 1): one process. */
  int32_t tensor_parallel;
  /* Pipeline parallelism (ABI 4): > 1 splits the layers among that many processes started by mpirun, likewise
   * (any head count; not with tensor_parallel > 1). 0 or 1 (hxrt_llm_options_init: 1): one process. */
  int32_t pipeline_parallel;
} hxrt_llm_options;

typedef enum hxrt_finish_reason {
  HXRT_FINISH_LENGTH = 0,   /* max_tokens reached */
  HXRT_FINISH_EOS = 1,      /* the model ended its turn */
  HXRT_FINISH_STOP = 2,     /* a stop string */
  HXRT_FINISH_CALLBACK = 3, /* the token callback returned 0 */
  HXRT_FINISH_CANCELLED = 4 /* hxrt_llm_cancel */
} hxrt_finish_reason;

/* Called with each piece of text as it becomes final (UTF-8, `bytes` long, not NUL-terminated); return 0 to stop. */
typedef int (*hxrt_text_callback)(void* user_data, const char* piece, size_t bytes);

typedef struct hxrt_generate_options {
  int32_t max_tokens;       /* hxrt_generate_options_init: 128 */
  float temperature;        /* 0: greedy */
  int32_t top_k;            /* 0: off */
  float top_p;              /* 1: off */
  float min_p;              /* 0: off */
  float repetition_penalty; /* 1: off */
  uint64_t seed;
  const char* const* stop; /* stop strings (the text ends before the first one found) */
  size_t stop_count;
  int64_t timeout_ns;         /* bounds the call */
  hxrt_text_callback on_text; /* may be NULL */
  void* user_data;
  /* Constrained output (ABI 3): a GBNF grammar (llama.cpp's syntax) or a JSON Schema (JSON text) the text must
   * follow; NULL: free text. At most one; one that does not parse is HXRT_INVALID_ARGUMENT naming where. */
  const char* grammar;
  const char* json_schema;
} hxrt_generate_options;

typedef struct hxrt_generation {
  char* text; /* free with hxrt_string_free */
  hxrt_finish_reason finish;
  int32_t prompt_tokens;
  int32_t completion_tokens;
} hxrt_generation;

HXRT_API void hxrt_llm_options_init(hxrt_llm_options* options);
HXRT_API void hxrt_generate_options_init(hxrt_generate_options* options);
HXRT_API hxrt_status hxrt_llm_load(const hxrt_llm_options* options, hxrt_llm** llm);
HXRT_API void hxrt_llm_destroy(hxrt_llm* llm);
/* Continues `prompt`. `options` may be NULL for the defaults. *generation is zeroed on every path (its text is
 * NULL unless the call succeeds), so hxrt_string_free(generation->text) is always safe. */
HXRT_API hxrt_status hxrt_llm_generate(hxrt_llm* llm, const char* prompt, const hxrt_generate_options* options,
                                       hxrt_generation* generation);
/* Replies to a conversation through the model's chat template: roles[i] ("system", "user", "assistant") said
 * contents[i]. */
HXRT_API hxrt_status hxrt_llm_chat(hxrt_llm* llm, const char* const* roles, const char* const* contents,
                                   size_t message_count, const hxrt_generate_options* options,
                                   hxrt_generation* generation);
/* The conversation as hxrt_llm_chat feeds it to the model: rendered by the chat template, with the assistant's
 * turn opened when add_generation_prompt is non-zero (free *text with hxrt_string_free). HXRT_INVALID_ARGUMENT
 * with the template's own message when it refuses the conversation (raise_exception). */
HXRT_API hxrt_status hxrt_llm_apply_chat_template(hxrt_llm* llm, const char* const* roles, const char* const* contents,
                                                  size_t message_count, int add_generation_prompt, char** text);
/* Stops the generation running on `llm` (from any thread) with HXRT_FINISH_CANCELLED at its next token; a
 * cancel that arrives when none runs applies to none. */
HXRT_API void hxrt_llm_cancel(hxrt_llm* llm);
/* Tokens of `text` in the model's vocabulary (with BOS when the model adds one): *count receives the number; up to
 * `capacity` are written to `tokens` (may be NULL with capacity 0 to ask for the count). */
HXRT_API hxrt_status hxrt_llm_tokenize(hxrt_llm* llm, const char* text, int32_t* tokens, size_t capacity,
                                       size_t* count);
/* Tensor or pipeline parallelism (hxrt_llm_options, ABI 4): 1 on the rank that generates (and without
 * parallelism), 0 on the others; those call hxrt_llm_follow, which runs the leader's forwards and returns when the
 * leader destroys its hxrt_llm (HXRT_OK), or with the error of the rank that failed. */
HXRT_API int hxrt_llm_is_leader(const hxrt_llm* llm);
HXRT_API hxrt_status hxrt_llm_follow(hxrt_llm* llm);
/* Writes the profiled forwards as a Chrome trace; hxrt_llm_set_profiling(llm, 1) starts recording them. */
HXRT_API hxrt_status hxrt_llm_set_profiling(hxrt_llm* llm, int enabled);
HXRT_API hxrt_status hxrt_llm_write_trace(const hxrt_llm* llm, const char* path);

#ifdef __cplusplus
}
#endif

#endif /* HXRT_HXRT_H_ */
