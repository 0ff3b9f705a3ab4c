#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/). Run from anywhere; stdlib only.

The seeds are small valid inputs that reach the interesting parts of each reader quickly: libFuzzer mutates them.
Findings that were fixed are added beside them by hand (named finding-*), so every build replays them.
"""
import os
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def write(target, name, data):
    folder = os.path.join(HERE, "corpus", target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


# ---- .npy ----
def npy(descr, shape, payload, fortran=False, version=1):
    shape_text = "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"
    header = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, "True" if fortran else "False",
                                                                     shape_text)
    prefix = 10 if version == 1 else 12
    pad = (64 - (prefix + len(header) + 1) % 64) % 64
    header = header + " " * pad + "\n"
    size = struct.pack("<H", len(header)) if version == 1 else struct.pack("<I", len(header))
    return b"\x93NUMPY" + bytes([version, 0]) + size + header.encode() + payload


write("npy", "f32_2x3.npy", npy("<f4", (2, 3), struct.pack("<6f", 1, -2, 3.5, 0.25, 1e-3, 7)))
write("npy", "i64_vector.npy", npy("<i8", (4,), struct.pack("<4q", 1, -1, 2**40, 0)))
write("npy", "scalar_f16.npy", npy("<f2", (), struct.pack("<e", 1.5)))
write("npy", "bool_v2.npy", npy("|b1", (3,), b"\x01\x00\x01", version=2))
write("npy", "u8_empty.npy", npy("|u1", (0, 5), b""))
write("npy", "i32_fortran.npy", npy("<i4", (2, 2), struct.pack("<4i", 1, 2, 3, 4), fortran=True))


# ---- GGUF ----
def gguf_string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


GGUF_U32, GGUF_F32, GGUF_BOOL, GGUF_STRING, GGUF_ARRAY, GGUF_I64 = 4, 6, 7, 8, 9, 11


def kv(key, vtype, payload):
    return gguf_string(key) + struct.pack("<I", vtype) + payload


def gguf(kvs, tensors, alignment=32):
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)) + b"".join(kvs)
    data = b""
    infos = b""
    for name, ggml_type, dims, payload in tensors:
        offset = len(data)
        infos += gguf_string(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        infos += struct.pack("<IQ", ggml_type, offset)
        data += payload + b"\x00" * ((alignment - len(payload) % alignment) % alignment)
    out += infos
    out += b"\x00" * ((alignment - len(out) % alignment) % alignment)
    return out + data


q8_block = struct.pack("<e", 0.5) + bytes(range(32))               # q8_0: f16 scale + 32 int8
q4_1_block = struct.pack("<ee", 0.25, -1.0) + bytes(range(16))     # q4_1: f16 scale, f16 min + 16 nibble bytes
metadata = [
    kv("general.architecture", GGUF_STRING, gguf_string("llama")),
    kv("llama.block_count", GGUF_U32, struct.pack("<I", 2)),
    kv("llama.rope.freq_base", GGUF_F32, struct.pack("<f", 10000.0)),
    kv("tokenizer.ggml.add_bos_token", GGUF_BOOL, b"\x01"),
    kv("tokenizer.ggml.tokens", GGUF_ARRAY,
       struct.pack("<IQ", GGUF_STRING, 3) + gguf_string("a") + gguf_string("b") + gguf_string("<|im_end|>")),
    kv("tokenizer.ggml.scores", GGUF_ARRAY, struct.pack("<IQ", GGUF_F32, 3) + struct.pack("<3f", 0, -1, -2)),
    kv("some.int64", GGUF_I64, struct.pack("<q", -5)),
]
write("gguf", "tensors_f32_q8_q41.gguf", gguf(metadata, [
    ("norm.weight", 0, [4], struct.pack("<4f", 1, 2, 3, 4)),
    ("w.q8_0", 8, [32, 1], q8_block),
    ("w.q4_1", 3, [32], q4_1_block),
]))
# One block of every other computable block type (ggml type id, values per block, bytes per block: quant_blocks.h),
# random bytes with an f16 scale of 0.5 first where the layout starts with one.
block_types = [(6, 32, 22, "q5_0"), (7, 32, 24, "q5_1"), (20, 32, 18, "iq4_nl"), (10, 256, 84, "q2_K"),
               (11, 256, 110, "q3_K"), (12, 256, 144, "q4_K"), (13, 256, 176, "q5_K"), (14, 256, 210, "q6_K"),
               (23, 256, 136, "iq4_xs"), (2, 32, 18, "q4_0")]
write("gguf", "tensors_block_types.gguf", gguf(metadata[:1], [
    (f"w.{name}", type_id, [elements], struct.pack("<e", 0.5) + bytes((7 * i + type_id) % 256 for i in range(size - 2)))
    for type_id, elements, size, name in block_types]))
write("gguf", "metadata_only.gguf", gguf(metadata[:3], []))
write("gguf", "nested_array.gguf", gguf([kv("a.nested", GGUF_ARRAY, struct.pack("<IQ", GGUF_ARRAY, 1) +
                                          struct.pack("<IQ", GGUF_U32, 2) + struct.pack("<2I", 7, 8))], []))

# ---- model families: one tiny f32 decoder per family and variant (fuzz_model_family) ----
def f32_values(n):
    return struct.pack(f"<{n}f", *[((i * 5) % 7 - 3) * 0.125 for i in range(n)])


def family_seed(arch, name, layers=1, qkv_bias=False, qk_norm=False, post_norms=False, fused=False, tied=True,
                extra=(), factors=()):
    e, heads, kv_heads, d, ff, vocab = 8, 2, 1, 4, 8, 4
    q, kvd = heads * d, kv_heads * d
    u32 = lambda key, v: kv(f"{arch}.{key}", GGUF_U32, struct.pack("<I", v))  # noqa: E731
    kvs = [kv("general.architecture", GGUF_STRING, gguf_string(arch)), u32("block_count", layers),
           u32("embedding_length", e), u32("feed_forward_length", ff), u32("attention.head_count", heads),
           u32("attention.head_count_kv", kv_heads), u32("attention.key_length", d), u32("context_length", 64)]
    kvs += [kv(f"{arch}.{key}", vtype, payload) for key, vtype, payload in extra]
    tensors = []

    def t(tname, *shape):  # shape as hxrt's (rows, cols); GGUF lists dims innermost first
        n = 1
        for dim in shape:
            n *= dim
        tensors.append((tname, 0, list(reversed(shape)), f32_values(n)))

    t("token_embd.weight", vocab, e)
    t("output_norm.weight", e)
    if not tied:
        t("output.weight", vocab, e)
    for tname in factors:
        t(tname, d // 2)
    n_exp = dict((key, payload) for key, _, payload in extra).get("expert_count")
    n_exp = struct.unpack("<I", n_exp)[0] if n_exp else 0
    for layer in range(layers):
        b = f"blk.{layer}."
        t(b + "attn_norm.weight", e)
        if fused:
            t(b + "attn_qkv.weight", q + 2 * kvd, e)
        else:
            t(b + "attn_q.weight", q, e)
            t(b + "attn_k.weight", kvd, e)
            t(b + "attn_v.weight", kvd, e)
        if qkv_bias:
            t(b + "attn_q.bias", q)
            t(b + "attn_k.bias", kvd)
            t(b + "attn_v.bias", kvd)
        if qk_norm:
            t(b + "attn_q_norm.weight", d)
            t(b + "attn_k_norm.weight", d)
        t(b + "attn_output.weight", e, q)
        t(b + "ffn_norm.weight", e)
        if post_norms:
            t(b + "post_attention_norm.weight", e)
            t(b + "post_ffw_norm.weight", e)
        if n_exp:
            t(b + "ffn_gate_inp.weight", n_exp, e)
            t(b + "ffn_gate_exps.weight", n_exp, ff, e)
            t(b + "ffn_up_exps.weight", n_exp, ff, e)
            t(b + "ffn_down_exps.weight", n_exp, e, ff)
            continue
        if fused:
            t(b + "ffn_up.weight", 2 * ff, e)
        else:
            t(b + "ffn_gate.weight", ff, e)
            t(b + "ffn_up.weight", ff, e)
        t(b + "ffn_down.weight", e, ff)
    write("model_family", name + ".gguf", gguf(kvs, tensors))


yarn = [("rope.scaling.type", GGUF_STRING, gguf_string("yarn")), ("rope.scaling.factor", GGUF_F32, struct.pack("<f", 4)),
        ("rope.scaling.original_context_length", GGUF_U32, struct.pack("<I", 16))]
family_seed("llama", "llama", tied=False)
family_seed("llama", "llama_rope_freqs", factors=["rope_freqs.weight"])
family_seed("qwen2", "qwen2_yarn", qkv_bias=True, extra=yarn)
family_seed("qwen3", "qwen3", qk_norm=True)
family_seed("gemma2", "gemma2", layers=2, post_norms=True,
            extra=[("attention.sliding_window", GGUF_U32, struct.pack("<I", 4)),
                   ("attn_logit_softcapping", GGUF_F32, struct.pack("<f", 50.0))])
family_seed("gemma3", "gemma3", layers=6, qk_norm=True, post_norms=True,
            extra=[("attention.sliding_window", GGUF_U32, struct.pack("<I", 4)),
                   ("rope.scaling.type", GGUF_STRING, gguf_string("linear")),
                   ("rope.scaling.factor", GGUF_F32, struct.pack("<f", 8))])
experts = [("expert_count", GGUF_U32, struct.pack("<I", 4)), ("expert_used_count", GGUF_U32, struct.pack("<I", 2))]
family_seed("qwen3moe", "qwen3moe", qk_norm=True, extra=experts)
family_seed("llama", "llama_moe", tied=False, extra=experts)
family_seed("phi3", "phi3_longrope", fused=True, tied=False,
            factors=["rope_factors_short.weight", "rope_factors_long.weight"],
            extra=[("rope.scaling.original_context_length", GGUF_U32, struct.pack("<I", 16)),
                   ("rope.scaling.attn_factor", GGUF_F32, struct.pack("<f", 1.2))])

# ---- graph files: the small examples ----
for example in ("mlp.hxrt", "cnn_block.hxrt"):
    src = os.path.join(ROOT, "examples", example)
    if os.path.exists(src):
        folder = os.path.join(HERE, "corpus", "graph_file")
        os.makedirs(folder, exist_ok=True)
        shutil.copyfile(src, os.path.join(folder, example))

# ---- tokenizer: flags byte + text ----
texts = [
    "Hello world, the theory of everything.",
    "caf\u00e9 don\u2019t \u4f60\u597d \U0001F600 123 4567",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    "  leading spaces\tand\ttabs\n\nnewlines   ",
]
for i, text in enumerate(texts):
    for flags in (0, 1, 2, 7):
        write("tokenizer", f"text{i}_flags{flags}", bytes([flags]) + text.encode())
write("tokenizer", "invalid_utf8", b"\x00abc\xff\xfe\xc3(\xe2\x82")

# ---- chat templates: flag byte, template, then role/content pairs, NUL-separated ----
chatml = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
          "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
          "{% endif %}")
smollm_like = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
               "{{ '<|im_start|>system\\nYou are a helpful AI assistant named SmolLM.<|im_end|>\\n' }}{% endif %}"
               "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
               "{% endfor %}")
chat = ["system", "Be brief.", "user", "Hi there", "assistant", "Hello! How can I help?", "user", "Tell me a joke."]
for i, template in enumerate((chatml, smollm_like, "chatml", "{{ bos_token }}[INST] unsupported")):
    write("chat_template", f"template{i}", b"\x01" + b"\x00".join(p.encode() for p in [template] + chat[2:]))
# The family templates hxrt ships (src/llm/chat_templates/), by name and as source.
family_folder = os.path.join(ROOT, "src", "llm", "chat_templates")
for file in sorted(os.listdir(family_folder)):
    name = file.removesuffix(".jinja")
    with open(os.path.join(family_folder, file), encoding="utf-8") as f:
        source = f.read()
    write("chat_template", f"family_{name}", b"\x01" + b"\x00".join(p.encode() for p in [name] + chat))
    write("chat_template", f"family_{name}_source", b"\x00" + b"\x00".join(p.encode() for p in [source] + chat))

# ---- the server's request bodies: endpoint byte (odd: chat completions), then the JSON body ----
import json  # noqa: E402

requests = {
    "chat_stream": (1, {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8,
                        "temperature": 0, "stream": True, "stream_options": {"include_usage": True},
                        "stop": ["\n", "END"]}),
    "chat_parts": (1, {"messages": [{"role": "system", "content": [{"type": "text", "text": "a"}]},
                                    {"role": "user", "content": None}], "n": 1, "seed": 3}),
    "completion": (0, {"prompt": "Once upon a time", "max_tokens": 16, "top_p": 0.9, "top_k": 40, "seed": 7}),
    "completion_tokens": (0, {"prompt": [1, 2, 3, 999], "ignore_eos": True, "min_p": 0.05}),
    "bad_fields": (1, {"messages": [], "temperature": 5, "presence_penalty": 1}),
}
for name, (chat, body) in requests.items():
    write("serve_request", name, bytes([chat]) + json.dumps(body).encode())
write("serve_request", "broken_json", b"\x00[1,2")

# ---- ONNX models: tiny ModelProtos, encoded here field by field (onnx/onnx.proto's field numbers) ----
def pb_varint(n):
    n &= (1 << 64) - 1  # negative int64 values are ten-byte varints
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def pb_int(field, n):
    return pb_varint(field << 3) + pb_varint(n)


def pb_bytes(field, payload):
    payload = payload.encode() if isinstance(payload, str) else payload
    return pb_varint(field << 3 | 2) + pb_varint(len(payload)) + payload


ONNX_FLOAT, ONNX_INT64 = 1, 7
ATTR_INT, ATTR_INTS, ATTR_TENSOR = 2, 7, 4


def onnx_tensor(name, data_type, dims, values):
    # TensorProto: dims 1, data_type 2, name 8, raw_data 9.
    fmt = "<%d%s" % (len(values), "f" if data_type == ONNX_FLOAT else "q")
    return (b"".join(pb_int(1, d) for d in dims) + pb_int(2, data_type) + pb_bytes(8, name) +
            pb_bytes(9, struct.pack(fmt, *values)))


def onnx_value_info(name, elem_type, dims):
    # ValueInfoProto: name 1, type 2; TypeProto.tensor_type 1; Tensor: elem_type 1, shape 2; dim 1: value 1, param 2.
    shape = b"".join(pb_bytes(1, pb_bytes(2, d) if isinstance(d, str) else pb_int(1, d)) for d in dims)
    return pb_bytes(1, name) + pb_bytes(2, pb_bytes(1, pb_int(1, elem_type) + pb_bytes(2, shape)))


def onnx_attr(name, kind, value):
    # AttributeProto: name 1, i 3, t 5, ints 8, type 20.
    if kind == ATTR_INT:
        body = pb_int(3, value)
    elif kind == ATTR_INTS:
        body = b"".join(pb_int(8, v) for v in value)
    else:
        body = pb_bytes(5, value)
    return pb_bytes(1, name) + body + pb_int(20, kind)


def onnx_node(op, inputs, outputs, name, attrs=()):
    # NodeProto: input 1, output 2, name 3, op_type 4, attribute 5.
    return (b"".join(pb_bytes(1, i) for i in inputs) + b"".join(pb_bytes(2, o) for o in outputs) +
            pb_bytes(3, name) + pb_bytes(4, op) + b"".join(pb_bytes(5, a) for a in attrs))


def onnx_model(nodes, inputs, outputs, initializers=(), opset=17):
    # GraphProto: node 1, name 2, initializer 5, input 11, output 12. ModelProto: ir_version 1, producer_name 2,
    # graph 7, opset_import 8 (version 2).
    graph = (b"".join(pb_bytes(1, n) for n in nodes) + pb_bytes(2, "g") +
             b"".join(pb_bytes(5, t) for t in initializers) +
             b"".join(pb_bytes(11, v) for v in inputs) + b"".join(pb_bytes(12, v) for v in outputs))
    return pb_int(1, 8) + pb_bytes(2, "make_seeds") + pb_bytes(7, graph) + pb_bytes(8, pb_int(2, opset))


write("onnx_import", "add_relu.onnx", onnx_model(
    [onnx_node("Add", ["x", "w"], ["s"], "add"), onnx_node("Relu", ["s"], ["y"], "relu")],
    [onnx_value_info("x", ONNX_FLOAT, [2, 3])], [onnx_value_info("y", ONNX_FLOAT, [2, 3])],
    [onnx_tensor("w", ONNX_FLOAT, [2, 3], [0.5, -1, 2, 0, 1, -3])]))
# Constant shape into Reshape, then Transpose and Softmax, over a symbolic batch.
write("onnx_import", "reshape_softmax.onnx", onnx_model(
    [onnx_node("Constant", [], ["shape"], "shape",
               [onnx_attr("value", ATTR_TENSOR, onnx_tensor("c", ONNX_INT64, [3], [0, 3, 2]))]),
     onnx_node("Reshape", ["x", "shape"], ["r"], "reshape"),
     onnx_node("Transpose", ["r"], ["t"], "transpose", [onnx_attr("perm", ATTR_INTS, [0, 2, 1])]),
     onnx_node("Softmax", ["t"], ["y"], "softmax", [onnx_attr("axis", ATTR_INT, -1)])],
    [onnx_value_info("x", ONNX_FLOAT, ["batch", 6])], [onnx_value_info("y", ONNX_FLOAT, ["batch", 2, 3])]))
# Shape -> Gather -> Unsqueeze -> Concat -> Reshape: a shape computed in the graph (folded or bind-time).
write("onnx_import", "shape_chain.onnx", onnx_model(
    [onnx_node("Shape", ["x"], ["s"], "shape"),
     onnx_node("Gather", ["s", "zero"], ["b"], "gather", [onnx_attr("axis", ATTR_INT, 0)]),
     onnx_node("Unsqueeze", ["b", "axes"], ["b1"], "unsqueeze"),
     onnx_node("Concat", ["b1", "minus_one"], ["new_shape"], "concat", [onnx_attr("axis", ATTR_INT, 0)]),
     onnx_node("Reshape", ["x", "new_shape"], ["y"], "reshape")],
    [onnx_value_info("x", ONNX_FLOAT, ["batch", 2, 3])], [onnx_value_info("y", ONNX_FLOAT, ["batch", 6])],
    [onnx_tensor("zero", ONNX_INT64, [], [0]), onnx_tensor("axes", ONNX_INT64, [1], [0]),
     onnx_tensor("minus_one", ONNX_INT64, [1], [-1])]))
# Conv + MaxPool + GlobalAveragePool at opset 11.
write("onnx_import", "conv_pool.onnx", onnx_model(
    [onnx_node("Conv", ["x", "k", "kb"], ["c"], "conv", [onnx_attr("pads", ATTR_INTS, [1, 1, 1, 1])]),
     onnx_node("MaxPool", ["c"], ["p"], "pool", [onnx_attr("kernel_shape", ATTR_INTS, [2, 2]),
                                                 onnx_attr("strides", ATTR_INTS, [2, 2])]),
     onnx_node("GlobalAveragePool", ["p"], ["y"], "gap")],
    [onnx_value_info("x", ONNX_FLOAT, [1, 1, 4, 4])], [onnx_value_info("y", ONNX_FLOAT, [1, 2, 1, 1])],
    [onnx_tensor("k", ONNX_FLOAT, [2, 1, 3, 3], [0.1 * i for i in range(18)]),
     onnx_tensor("kb", ONNX_FLOAT, [2], [0.5, -0.5])], opset=11))


# ---- step messages of parallel engines (fuzz_step_message; llm/step_message.h) ----
STEP_MESSAGE = 0x5458535445500001
STEP_INPUTS = ["tokens", "positions", "token_seq", "block_tables", "logit_rows", "embed_rows", "block_tables_local"]


def step_message(decode_only, tensors):
    """tensors: name -> (shape, values). The header (kind, decode_only, then present/dim0/dim1 per input) and the
    int32 payload, as step::encode_step writes them."""
    header = [STEP_MESSAGE, 1 if decode_only else 0]
    payload = []
    for name in STEP_INPUTS:
        if name not in tensors:
            header += [0, 0, 0]
            continue
        shape, values = tensors[name]
        header += [1, shape[0], shape[1] if len(shape) == 2 else -1]
        payload += values
    return struct.pack("<%dq" % len(header), *header) + struct.pack("<%di" % len(payload), *payload)


# A decode step of three sequences (one token each), block tables of width 2.
write("step_message", "decode3.bin", step_message(True, {
    "tokens": ([3], [11, 12, 13]), "positions": ([3], [5, 9, 2]), "token_seq": ([3], [0, 1, 2]),
    "block_tables": ([3, 2], [0, 1, 2, -1, 3, -1]), "logit_rows": ([3], [0, 1, 2])}))
# A prefill of 4 tokens beside a decode token, every prompt row scored, with a window cache's tables.
write("step_message", "mixed.bin", step_message(False, {
    "tokens": ([5], [1, 2, 3, 4, 9]), "positions": ([5], [0, 1, 2, 3, 7]), "token_seq": ([5], [0, 0, 0, 0, 1]),
    "block_tables": ([2, 1], [0, 4]), "logit_rows": ([5], [0, 1, 2, 3, 4]),
    "block_tables_local": ([2, 1], [1, 5])}))
# The stop message.
write("step_message", "stop.bin", struct.pack("<%dq" % (2 + 3 * 7), *([0] * (2 + 3 * 7))))
