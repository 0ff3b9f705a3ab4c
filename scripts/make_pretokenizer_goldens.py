#!/usr/bin/env python3
"""Writes tests/llm/goldens/pretokenizers.json: llama.cpp's token ids for the tokenizer corpus under each
byte-level BPE pre-tokenizer llama.cpp selects by `tokenizer.ggml.pre` (default, smollm, llama-bpe (Llama 3),
qwen2, gpt-4o, gpt-2), all on SmolLM2-135M-Instruct's vocabulary and merges: the file's metadata is copied into a
vocabulary-only GGUF with only `tokenizer.ggml.pre` changed, loaded by llama.cpp with vocab_only. Read by
src/llm/tokenizer_gguf_test.cc, which gives hxrt's tokenizer the same vocabulary and pre-tokenizer name.

    PY=$(scripts/setup_llama_cpp_peer.sh | tail -1)
    $PY scripts/make_pretokenizer_goldens.py --model "$(scripts/fetch_model.sh)"

The corpus is make_llm_goldens.py's (Unicode, code, numbers, whitespace runs, special tokens) plus cases that tell
the pre-tokenizers apart (digit runs, contractions in any case, CamelCase, newline runs after punctuation).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import sys
import tempfile
from pathlib import Path

import gguf
import llama_cpp as L

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_llm_goldens import TOKENIZER_TEXTS  # noqa: E402

OUT = Path(__file__).resolve().parent.parent / "tests" / "llm" / "goldens" / "pretokenizers.json"
PRE_TOKENIZERS = ["default", "smollm", "llama-bpe", "qwen2", "gpt-4o", "gpt-2"]
EXTRA_TEXTS = [
    ("digit_runs", "1 12 123 1234 12345 123456 1234567 3.14159 10,000"),
    ("contractions_mixed_case", "I'M you'Re WE'vE they'LL it'S don'T she'D"),
    ("camel_case", "getHTTPResponseCode parseJSONString XMLHttpRequest iPhone McDonald"),
    ("punctuation_newlines", "end.\n\nnext!\n\n\nthen?\r\n(ok)\n"),
    ("slashes_and_paths", "/usr/local/bin a/b/c\n// comment\n/* block */"),
]


def write_vocab_file(src: str, dst: str, pre: str) -> None:
    reader = gguf.GGUFReader(src)
    arch = str(bytes(reader.fields["general.architecture"].parts[-1]), "utf-8")
    writer = gguf.GGUFWriter(dst, arch)
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        vtype = field.types[0]
        if name == "tokenizer.ggml.pre":
            writer.add_string(name, pre)
            continue
        if vtype == gguf.GGUFValueType.ARRAY:
            sub = field.types[1]
            if sub == gguf.GGUFValueType.STRING:
                value = [str(bytes(field.parts[i]), "utf-8") for i in field.data]
            else:
                value = [field.parts[i].tolist()[0] for i in field.data]
            writer.add_array(name, value)
        elif vtype == gguf.GGUFValueType.STRING:
            writer.add_string(name, str(bytes(field.parts[-1]), "utf-8"))
        else:
            writer.add_key_value(name, field.parts[-1].tolist()[0], vtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def tokenize(vocab, text: str) -> list[int]:
    data = text.encode("utf-8")
    cap = len(data) + 16
    arr = (L.llama_token * cap)()
    n = L.llama_tokenize(vocab, data, len(data), arr, cap, False, True)
    assert n >= 0
    return list(arr[:n])


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    args = parser.parse_args()
    texts = TOKENIZER_TEXTS + EXTRA_TEXTS
    golden = {"vocabulary": Path(args.model).name, "llama_cpp_python": L.__version__,
              "texts": [{"name": n, "text": t} for n, t in texts], "ids": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for pre in PRE_TOKENIZERS:
            path = f"{tmp}/{pre}.gguf"
            write_vocab_file(args.model, path, pre)
            mp = L.llama_model_default_params()
            mp.vocab_only = True
            model = L.llama_model_load_from_file(path.encode(), mp)
            if not model:
                raise RuntimeError(f"llama.cpp could not load the vocabulary with pre '{pre}'")
            vocab = L.llama_model_get_vocab(model)
            golden["ids"][pre] = [tokenize(vocab, t) for _, t in texts]
            L.llama_model_free(model)
    differ = {pre: sum(a != b for a, b in zip(golden["ids"][pre], golden["ids"]["default"])) for pre in PRE_TOKENIZERS}
    print(f"texts tokenized differently from 'default': {differ}", file=sys.stderr)
    OUT.write_text(json.dumps(golden, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
