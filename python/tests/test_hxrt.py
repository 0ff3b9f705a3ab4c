"""The hxrt Python package: devices, sessions, graph models with numpy arrays (the fused plan, a batch split row by
row and OpenCL against the unfused CPU plan), LLM generation streamed as it decodes (against the engine's own tokens),
stop strings, cancellation, timeouts, chat, the GIL released while the device works, profiling, and errors raised
as hxrt.Error subclasses with the message chain."""
import json
import os
import pathlib
import threading
import time

import numpy as np
import pytest

import hxrt

ROOT = pathlib.Path(os.environ.get("HXRT_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
MLP = ROOT / "examples" / "mlp.hxrt"
PROMPT = "The capital of France is"


def default_model():
    path = os.environ.get("HXRT_TEST_MODEL")
    if path and os.path.isfile(path):
        return path
    cache = os.environ.get("HXRT_MODEL_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "hxrt", "models")
    path = os.path.join(cache, "SmolLM2-135M-Instruct.Q4_1.gguf")
    if not os.path.isfile(path):
        pytest.skip("the default model is not in the model cache (scripts/fetch_model.sh)")
    return path


@pytest.fixture(scope="module")
def llm():
    return hxrt.LLM(default_model(), kv_tokens=2048)


def test_devices_and_sessions():
    devices = hxrt.devices()
    cpu = [d for d in devices if d["kind"] == "cpu"]
    assert cpu and cpu[0]["name"] == "cpu:0" and cpu[0]["host_addressable"] and cpu[0]["memory_bytes"] > 0
    with hxrt.Session("cpu") as session:
        session.synchronize(timeout=5.0)
        assert session.device
    clean, report = hxrt.Session("cpu").close()
    assert clean, report
    with pytest.raises(hxrt.NotFoundError) as caught:
        hxrt.Session("tpu")
    assert "tpu" in str(caught.value) and isinstance(caught.value, hxrt.Error)


def mlp_reference(x):
    """The unfused plan on the CPU: the reference for the fused, row-by-row and OpenCL runs (the C++ tests hold the
    kernels against double precision)."""
    model = hxrt.Model.load(MLP, device="cpu", fuse=False)
    return model.run({"x": x})["probs"].astype(np.float64)


def test_model_runs_numpy_arrays_on_every_device():
    rng = np.random.default_rng(7)
    x = rng.uniform(-2, 2, size=(5, 64)).astype(np.float32)
    reference = mlp_reference(x)
    assert reference.shape == (5, 10)
    np.testing.assert_allclose(reference.sum(axis=1), 1.0, rtol=1e-5)
    model = hxrt.Model.load(MLP)
    assert model.inputs == ["x"] and model.outputs == ["probs"]
    assert "MatMulBias" in model.describe()
    out = model.run({"x": x})
    assert set(out) == {"probs"} and out["probs"].dtype == np.float32 and out["probs"].shape == (5, 10)
    np.testing.assert_allclose(out["probs"], reference, rtol=1e-5, atol=1e-6)
    # Row by row (a dynamic batch of 1) gives the same rows; a non-contiguous input is accepted.
    for i in range(5):
        np.testing.assert_allclose(model.run({"x": x[i:i + 1]})["probs"][0], reference[i], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(model.run({"x": np.asfortranarray(x)})["probs"], reference, rtol=1e-5, atol=1e-6)
    if any(d["kind"] == "opencl" for d in hxrt.devices()):
        opencl = hxrt.Model.load(MLP, device="opencl", fallback_device="cpu")
        np.testing.assert_allclose(opencl.run({"x": x})["probs"], reference, rtol=1e-5, atol=1e-6)


def test_model_errors_name_what_is_wrong(tmp_path):
    with pytest.raises(hxrt.Error) as caught:
        hxrt.Model.load(tmp_path / "missing.hxrt")
    assert "missing.hxrt" in str(caught.value)
    model = hxrt.Model.load(MLP)
    with pytest.raises(hxrt.InvalidArgumentError) as caught:
        model.run({"x": np.zeros((2, 63), np.float32)})
    assert "'x'" in str(caught.value)
    with pytest.raises(hxrt.InvalidArgumentError):
        model.run({"x": np.zeros((2, 64), np.complex64)})
    with pytest.raises(hxrt.Error) as caught:
        model.run({"y": np.zeros((2, 64), np.float32)})
    assert "'y'" in str(caught.value)
    assert model.run({"x": np.zeros((2, 64), np.float32)})["probs"].shape == (2, 10), "the model is unharmed"


def test_profile_writes_a_trace(tmp_path):
    model = hxrt.Model.load(MLP)
    trace = tmp_path / "trace.json"
    with hxrt.profile(model, trace):
        model.run({"x": np.ones((3, 64), np.float32)})
    events = json.loads(trace.read_text())["traceEvents"]
    assert any("fc1" in json.dumps(e) for e in events)


def test_generate_streams_the_engines_greedy_tokens(llm):
    stream = llm.generate(PROMPT, max_tokens=16)
    pieces = list(stream)
    assert len(pieces) > 1, "text comes in pieces as it is decoded"
    text = "".join(pieces)
    assert "Paris" in text and stream.text == text
    assert stream.finish_reason in ("length", "stop")
    assert stream.prompt_tokens == len(llm.tokenize(PROMPT))
    assert 1 <= stream.completion_tokens <= 16
    # The same continuation from token ids, and detokenized from the engine's tokens.
    assert "".join(llm.generate(llm.tokenize(PROMPT), max_tokens=16)) == text
    assert llm.detokenize(llm.tokenize(PROMPT, add_special=False)) == PROMPT


def test_speculative_decoding_gives_the_same_text(llm):
    # A prompt the model copies from: prompt-lookup drafts are accepted, and greedy text is unchanged.
    prompt = "Repeat exactly: the quick brown fox jumps over the lazy dog. the quick brown fox"
    plain = "".join(llm.generate(prompt, max_tokens=24))
    drafting = hxrt.LLM(default_model(), kv_tokens=512, draft_max=8)
    assert "".join(drafting.generate(prompt, max_tokens=24)) == plain
    with pytest.raises(hxrt.Error, match="draft_max"):
        hxrt.LLM(default_model(), kv_tokens=256, draft_max=100)


def test_tensor_parallel_outside_mpirun_says_how_to_start_it(llm):
    # One process leads; follow() is for the other ranks. The 3-rank run is tests/llm/tensor_parallel_test.cc.
    assert llm.is_leader
    with pytest.raises(hxrt.Error, match="not a follower"):
        llm.follow()
    if "OMPI_COMM_WORLD_SIZE" not in os.environ:
        with pytest.raises(hxrt.Error, match="mpirun -np 3"):
            hxrt.LLM(default_model(), kv_tokens=256, tensor_parallel=3)
        with pytest.raises(hxrt.Error, match="mpirun -np 2"):
            hxrt.LLM(default_model(), kv_tokens=256, pipeline_parallel=2)


def test_grammars_and_json_schemas_constrain_the_text(llm):
    text = "".join(llm.generate(PROMPT, max_tokens=12, grammar='root ::= " " ("Paris" | "Lyon") "."'))
    assert text in (" Paris.", " Lyon.")
    schema = {"type": "object", "properties": {"capital": {"type": "string"}, "country": {"type": "string"}},
              "required": ["capital", "country"]}
    reply = llm.chat([{"role": "user", "content": "The capital of France, as JSON."}], max_tokens=64,
                     json_schema=schema)
    assert set(json.loads(reply)) == {"capital", "country"}
    with pytest.raises(hxrt.InvalidArgumentError, match="pattern"):
        llm.generate(PROMPT, json_schema={"type": "string", "pattern": "x"})
    with pytest.raises(hxrt.InvalidArgumentError, match="undefined rule"):
        llm.generate(PROMPT, grammar="root ::= nowhere")
    assert "".join(llm.generate(PROMPT, max_tokens=4))  # the LLM is free again after the refusals


def test_stop_strings_cancellation_and_timeouts(llm):
    full = "".join(llm.generate(PROMPT, max_tokens=24))
    stop = full[6:9]
    stream = llm.generate(PROMPT, max_tokens=24, stop=stop)
    assert "".join(stream) == full[:full.find(stop)] and stream.finish_reason == "stop"
    # Leaving a stream early cancels the rest; the LLM is free for the next generation.
    stream = llm.generate(PROMPT, max_tokens=400, ignore_eos=True)
    next(stream)
    stream.close()
    assert stream.finish_reason == "cancelled"
    with pytest.raises(hxrt.DeadlineExceededError):
        "".join(llm.generate(PROMPT, max_tokens=16, timeout=0.0))
    # One generation at a time per LLM.
    first = llm.generate(PROMPT, max_tokens=8)
    with pytest.raises(hxrt.FailedPreconditionError):
        llm.generate(PROMPT, max_tokens=8)
    first.close()
    with pytest.raises(hxrt.InvalidArgumentError):
        llm.generate(PROMPT, top_p=0.0)


def test_chat_and_sampling(llm):
    messages = [{"role": "system", "content": "You are a helpful assistant."},
                {"role": "user", "content": "Why is the sky blue?"}]
    reply = llm.chat(messages, max_tokens=24)
    assert "light" in reply and "<|im_" not in reply
    assert "".join(llm.chat(messages, max_tokens=24, stream=True)) == reply
    a = "".join(llm.generate(PROMPT, max_tokens=12, temperature=1.5, seed=3))
    b = "".join(llm.generate(PROMPT, max_tokens=12, temperature=1.5, seed=3))
    assert a == b, "seeded sampling repeats"
    with pytest.raises(TypeError):
        llm.chat(messages, max_tokenz=3)


def test_chat_templates(llm):
    # The file's own template (SmolLM2's adds its system prompt), a built-in one instead, and one that cannot parse.
    chat = [{"role": "user", "content": "Hi!"}]
    assert "named SmolLM" in llm.chat_template
    assert llm.apply_chat_template(chat).startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM")
    assert llm.apply_chat_template(chat).endswith("<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n")
    assert not llm.apply_chat_template(chat, add_generation_prompt=False).endswith("assistant\n")
    chatml = hxrt.LLM(default_model(), kv_tokens=256, chat_template="chatml")
    assert chatml.apply_chat_template(chat) == "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n"
    upper = hxrt.LLM(default_model(), kv_tokens=256, chat_template="{{ messages[0].content | upper }}")
    assert upper.apply_chat_template(chat) == "HI!"
    with pytest.raises(hxrt.InvalidArgumentError, match="line 1, column 15: unknown filter 'shout'"):
        hxrt.LLM(default_model(), kv_tokens=256, chat_template="{{ messages | shout }}")
    refusing = hxrt.LLM(default_model(), kv_tokens=256,
                        chat_template="{{ raise_exception('roles must alternate user/assistant') }}")
    with pytest.raises(hxrt.InvalidArgumentError, match="roles must alternate user/assistant"):
        refusing.chat(chat, max_tokens=2)


def test_the_gil_is_released_while_generating(llm):
    ticks = []
    done = threading.Event()

    def ticker():
        while not done.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.001)

    thread = threading.Thread(target=ticker)
    thread.start()
    try:
        start = time.perf_counter()
        "".join(llm.generate(PROMPT, max_tokens=32, ignore_eos=True))
        elapsed = time.perf_counter() - start
    finally:
        done.set()
        thread.join()
    # A ticker that had to wait for the GIL through the generation would tick a handful of times.
    assert len(ticks) > 0.25 * elapsed / 0.002, (len(ticks), elapsed)


def test_a_bad_model_file_raises(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 60)
    with pytest.raises(hxrt.Error) as caught:
        hxrt.LLM(str(bad))
    assert "bad.gguf" in str(caught.value)
