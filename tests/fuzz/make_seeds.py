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
write("gguf", "metadata_only.gguf", gguf(metadata[:3], []))
write("gguf", "nested_array.gguf", gguf([kv("a.nested", GGUF_ARRAY, struct.pack("<IQ", GGUF_ARRAY, 1) +
                                          struct.pack("<IQ", GGUF_U32, 2) + struct.pack("<2I", 7, 8))], []))

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
for i, template in enumerate((chatml, smollm_like, "chatml", "{{ bos_token }}[INST] unsupported")):
    parts = [template, "user", "Hi there", "assistant", "Hello! How can I help?", "user", "Tell me a joke."]
    write("chat_template", f"template{i}", b"\x01" + b"\x00".join(p.encode() for p in parts))

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
