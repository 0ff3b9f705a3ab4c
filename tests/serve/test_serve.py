"""`hxrt serve` through the real `openai` client: plain and streaming chat and completions, stop strings, 16
concurrent clients whose temperature-0 outputs equal solo runs, a client that disconnects mid-stream, bad requests,
the API key, over capacity, /metrics, and SIGTERM draining. The server runs on 127.0.0.1 with a free port on the
default model (HXRT_TEST_MODEL, else the model cache)."""
import concurrent.futures
import json
import os
import re
import signal
import subprocess
import threading
import time

import httpx
import openai
import pytest

HXRT = os.environ.get("HXRT_BIN", "hxrt")
PROMPTS = [
    "The capital of France is",
    "Water boils at a temperature of",
    "The three primary colors are",
    "A haiku about the sea:",
]


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


class Server:
    def __init__(self, *args):
        self.proc = subprocess.Popen([HXRT, "serve", "--model", default_model(), "--port", "0", "--threads", "2", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        match = re.search(r"listening on (http://[\d.]+:\d+)", line)
        if not match:
            self.proc.kill()
            raise RuntimeError(f"hxrt serve did not start: {line!r} {self.proc.stderr.read()}")
        self.url = match.group(1)
        self.stderr = []
        threading.Thread(target=lambda: self.stderr.extend(self.proc.stderr), daemon=True).start()

    def client(self, api_key="none", **kwargs):
        return openai.OpenAI(base_url=self.url + "/v1", api_key=api_key, max_retries=0, timeout=300, **kwargs)

    def metrics(self):
        text = httpx.get(self.url + "/metrics").text
        values = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                values[name] = float(value)
        return values

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


@pytest.fixture(scope="module")
def server():
    s = Server("--parallel", "8", "--kv-tokens", "8192", "--embeddings")
    yield s
    assert s.stop() == 0, "".join(s.stderr)


def chat(client, prompt, **kwargs):
    return client.chat.completions.create(model="smollm2", messages=[{"role": "user", "content": prompt}],
                                          temperature=0, **kwargs)


def complete(client, prompt, **kwargs):
    return client.completions.create(model="smollm2", prompt=prompt, temperature=0, **kwargs)


def test_models_health_and_metrics(server):
    models = server.client().models.list()
    assert [m.id for m in models.data] == ["SmolLM2-135M-Instruct.Q4_1"]
    assert httpx.get(server.url + "/health").json() == {"status": "ok"}
    metrics = server.metrics()
    assert "hxrt_sequences_running" in metrics and 'hxrt_kv_blocks{state="free"}' in metrics
    assert httpx.get(server.url + "/nope").status_code == 404


def test_chat_plain_and_streaming_agree(server):
    client = server.client()
    plain = chat(client, "What is the capital of France?", max_tokens=24)
    assert plain.object == "chat.completion"
    message = plain.choices[0].message
    assert message.role == "assistant" and message.content
    assert plain.choices[0].finish_reason in ("stop", "length")
    assert plain.usage.completion_tokens >= 1 and plain.usage.prompt_tokens > 5
    assert plain.usage.total_tokens == plain.usage.prompt_tokens + plain.usage.completion_tokens

    chunks = list(chat(client, "What is the capital of France?", max_tokens=24, stream=True,
                       stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == message.content
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == [plain.choices[0].finish_reason]
    assert chunks[-1].usage.completion_tokens == plain.usage.completion_tokens


def test_n_choices_share_one_prefill_and_stream_by_index(server):
    """n > 1 (Note [Forked choices] in llm/engine.cc): greedy choices are equal; sampled choice c is the request
    alone with seed + c; streamed chunks carry each choice's index; usage counts the prompt once."""
    client = server.client()
    greedy = chat(client, "What is the capital of France?", max_tokens=12, n=3)
    assert [c.index for c in greedy.choices] == [0, 1, 2]
    assert len({c.message.content for c in greedy.choices}) == 1
    one = chat(client, "What is the capital of France?", max_tokens=12)
    assert greedy.usage.prompt_tokens == one.usage.prompt_tokens
    assert greedy.usage.completion_tokens == 3 * one.usage.completion_tokens

    sampled = client.completions.create(model="m", prompt=PROMPTS[1], max_tokens=16, n=2, temperature=1.0, seed=7)
    for c in range(2):
        alone = client.completions.create(model="m", prompt=PROMPTS[1], max_tokens=16, temperature=1.0, seed=7 + c)
        assert sampled.choices[c].text == alone.choices[0].text, c

    chunks = list(client.completions.create(model="m", prompt=PROMPTS[1], max_tokens=16, n=2, temperature=1.0, seed=7,
                                            stream=True))
    for c in range(2):
        text = "".join(ch.choices[0].text for ch in chunks if ch.choices and ch.choices[0].index == c)
        assert text == sampled.choices[c].text, c
    finished = [ch.choices[0].index for ch in chunks if ch.choices and ch.choices[0].finish_reason]
    assert sorted(finished) == [0, 1]


def test_presence_and_frequency_penalties_are_served(server):
    """OpenAI's penalties reach the sampler (their arithmetic: SamplerTest.FrequencyAndPresencePenalties...): a
    strong frequency penalty changes a greedy answer that repeats itself; out of [-2, 2] is a 400."""
    client = server.client()
    prompt = "one one one one one one one one one one"
    plain = complete(client, prompt, max_tokens=12).choices[0].text
    penalized = complete(client, prompt, max_tokens=12, frequency_penalty=2.0, presence_penalty=1.0).choices[0].text
    assert penalized != plain
    for key in ("presence_penalty", "frequency_penalty"):
        with pytest.raises(openai.BadRequestError) as caught:
            complete(client, prompt, max_tokens=4, **{key: 2.5})
        assert caught.value.body["param"] == key


def test_embeddings_in_float_and_base64(server):
    """POST /v1/embeddings (--embeddings, mean pooling): one L2-normalized vector of the model's width per input,
    in input order; the openai client's default base64 encoding decodes to the float answer bit for bit; a text
    and the same text among others get the same vector; bad inputs are 400s naming the field."""
    client = server.client()
    inputs = ["The capital of France is Paris.", "I like turtles.", "The capital of France is Paris."]
    as_base64 = client.embeddings.create(model="m", input=inputs)  # the client asks for base64 and decodes it
    as_float = client.embeddings.create(model="m", input=inputs, encoding_format="float")
    assert [d.index for d in as_float.data] == [0, 1, 2]
    for a, b in zip(as_base64.data, as_float.data):
        assert len(b.embedding) == 576
        assert list(a.embedding) == list(b.embedding)
        assert abs(sum(x * x for x in b.embedding) - 1.0) < 1e-4
    assert as_float.data[0].embedding == as_float.data[2].embedding
    alone = client.embeddings.create(model="m", input=inputs[1], encoding_format="float").data[0].embedding
    assert max(abs(x - y) for x, y in zip(alone, as_float.data[1].embedding)) < 1e-6
    assert as_float.usage.prompt_tokens > 10
    for kwargs, param in [({"input": ""}, "input"), ({"input": [], }, "input"),
                          ({"input": "x", "dimensions": 8}, "dimensions")]:
        with pytest.raises(openai.BadRequestError) as caught:
            client.embeddings.create(model="m", **kwargs)
        assert caught.value.body["param"] == param


def test_json_mode_and_gbnf_grammars_constrain_the_output(server):
    """response_format json_object: the answer parses as a JSON object whenever it ends by itself (finish_reason
    "stop"), streamed or not; llama-server's "grammar" (GBNF) holds exactly; a grammar that does not parse is a 400
    naming it (Note [Grammar-constrained sampling] in llm/engine.cc)."""
    client = server.client()
    for prompt in ["Describe the Eiffel Tower as a JSON object with its city and height.",
                   "Give me a JSON object listing three colors."]:
        reply = chat(client, prompt, max_tokens=96, response_format={"type": "json_object"})
        assert reply.choices[0].finish_reason == "stop", reply.choices[0].message.content
        assert isinstance(json.loads(reply.choices[0].message.content), dict)
        streamed = "".join(c.choices[0].delta.content or "" for c in
                           chat(client, prompt, max_tokens=96, response_format={"type": "json_object"}, stream=True)
                           if c.choices)
        assert streamed == reply.choices[0].message.content
    sampled = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "A JSON object, please."}],
                                             max_tokens=96, temperature=1.0, seed=3,
                                             response_format={"type": "json_object"})
    if sampled.choices[0].finish_reason == "stop":
        assert isinstance(json.loads(sampled.choices[0].message.content), dict)
    grammar = 'root ::= "The answer is " ("yes" | "no") "."'
    text = complete(client, PROMPTS[0], max_tokens=16, extra_body={"grammar": grammar}).choices[0].text
    assert text in ("The answer is yes.", "The answer is no."), text
    with pytest.raises(openai.BadRequestError) as caught:
        complete(client, PROMPTS[0], max_tokens=4, extra_body={"grammar": "root ::= missing"})
    assert caught.value.body["param"] == "grammar" and "missing" in caught.value.body["message"]


SCHEMAS = [
    {"type": "object", "properties": {"city": {"type": "string"}, "country": {"type": "string"},
                                      "population": {"type": "integer"}},
     "required": ["city", "country", "population"], "additionalProperties": False},
    {"type": "object", "properties": {"colors": {"type": "array", "items": {"enum": ["red", "green", "blue"]},
                                                 "minItems": 1, "maxItems": 3}},
     "required": ["colors"]},
    {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20}, "tall": {"type": "boolean"},
                                      "height_m": {"type": "number"}, "nickname": {"type": ["string", "null"]},
                                      "address": {"type": "object", "properties": {"street": {"type": "string"},
                                                                                   "zip": {"type": "string"}},
                                                  "required": ["street"]}},
     "required": ["name", "tall", "height_m", "address"]},
    {"type": "array", "items": {"type": "object", "properties": {"q": {"type": "string"}, "a": {"type": "integer"}},
                                "required": ["q", "a"]}, "minItems": 2, "maxItems": 2},
]


def test_json_schema_outputs_validate(server):
    """response_format json_schema (and llama-server's json_schema): every answer that ends by itself validates
    against its schema with the jsonschema package, greedy and sampled; an unsupported keyword is a 400 naming
    the field."""
    jsonschema = pytest.importorskip("jsonschema")
    client = server.client()
    ended = 0
    for i, schema in enumerate(SCHEMAS):
        for temperature in (0.0, 0.8):
            reply = client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "Answer in JSON: describe Paris."}], max_tokens=160,
                temperature=temperature, seed=i,
                response_format={"type": "json_schema", "json_schema": {"name": f"s{i}", "strict": True,
                                                                        "schema": schema}})
            if reply.choices[0].finish_reason != "stop":
                continue
            ended += 1
            jsonschema.validate(json.loads(reply.choices[0].message.content), schema)
    assert ended >= len(SCHEMAS), "most answers end by themselves within 160 tokens"
    plain = complete(client, "Paris is a", max_tokens=96, extra_body={"json_schema": SCHEMAS[0]}).choices[0]
    assert plain.finish_reason == "stop", plain.text
    jsonschema.validate(json.loads(plain.text), SCHEMAS[0])
    with pytest.raises(openai.BadRequestError) as caught:
        chat(client, "hi", max_tokens=4,
             response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "string",
                                                                                             "pattern": "^a"}}})
    assert caught.value.body["param"] == "response_format" and "pattern" in caught.value.body["message"]


def test_echo_returns_the_prompt_and_its_logprobs(server):
    """Completions' echo (lm-evaluation-harness's loglikelihood requests: echo, max_tokens 0, logprobs): the prompt's
    text in front, its tokens' logprobs with the first one null, then the answer's; streamed echo sends the prompt
    first; echo is refused in chat and with logprobs when streamed."""
    client = server.client()
    prompt = PROMPTS[0]
    scored = complete(client, prompt, max_tokens=0, echo=True, logprobs=1).choices[0]
    assert scored.text == prompt
    lp = scored.logprobs
    assert "".join(lp.tokens) == prompt
    assert lp.token_logprobs[0] is None and lp.top_logprobs[0] is None
    assert all(x <= 0.0 for x in lp.token_logprobs[1:]) and len(lp.token_logprobs) == len(lp.tokens)
    assert all(len(t) >= 1 for t in lp.top_logprobs[1:])
    assert lp.text_offset == [sum(len(t.encode()) for t in lp.tokens[:i]) for i in range(len(lp.tokens))]
    plain = complete(client, prompt, max_tokens=6, logprobs=1).choices[0]
    echoed = complete(client, prompt, max_tokens=6, echo=True, logprobs=1).choices[0]
    assert echoed.text == prompt + plain.text
    assert echoed.logprobs.tokens == lp.tokens + plain.logprobs.tokens
    assert echoed.logprobs.token_logprobs[len(lp.tokens):] == plain.logprobs.token_logprobs
    assert echoed.logprobs.text_offset[len(lp.tokens)] == len(prompt.encode())
    streamed = "".join(c.choices[0].text for c in complete(client, prompt, max_tokens=6, echo=True, stream=True))
    assert streamed == echoed.text
    for call in (lambda: complete(client, prompt, max_tokens=2, echo=True, logprobs=1, stream=True),
                 lambda: chat(client, "hi", max_tokens=2, extra_body={"echo": True})):
        with pytest.raises(openai.BadRequestError) as caught:
            call()
        assert caught.value.body["param"] == "echo"


def test_completions_plain_and_streaming_agree(server):
    client = server.client()
    plain = complete(client, PROMPTS[0], max_tokens=12)
    assert plain.object == "text_completion"
    assert "Paris" in plain.choices[0].text
    assert plain.choices[0].finish_reason == "length"
    streamed = "".join(c.choices[0].text for c in complete(client, PROMPTS[0], max_tokens=12, stream=True))
    assert streamed == plain.choices[0].text
    # A prompt given as a list of one string is that string.
    assert complete(client, [PROMPTS[0]], max_tokens=12).choices[0].text == plain.choices[0].text


def test_stop_strings_end_the_text_and_are_never_streamed(server):
    client = server.client()
    full = complete(client, PROMPTS[1], max_tokens=24).choices[0].text
    assert len(full) > 12
    for stop in (full[6:9], full[10:11], [full[3:5], "\u0001never"]):
        first = min(full.find(s) for s in ([stop] if isinstance(stop, str) else stop) if s in full)
        plain = complete(client, PROMPTS[1], max_tokens=24, stop=stop)
        assert plain.choices[0].text == full[:first]
        assert plain.choices[0].finish_reason == "stop"
        pieces = [c.choices[0].text for c in complete(client, PROMPTS[1], max_tokens=24, stop=stop, stream=True)]
        assert "".join(pieces) == full[:first]


def test_sixteen_concurrent_clients_get_their_solo_outputs(server):
    client = server.client()
    solo = {p: complete(client, p, max_tokens=16).choices[0].text for p in PROMPTS}
    solo_chat = chat(client, PROMPTS[2], max_tokens=16).choices[0].message.content

    def one(i):
        prompt = PROMPTS[i % len(PROMPTS)]
        if i % 5 == 4:
            return "chat", chat(server.client(), PROMPTS[2], max_tokens=16).choices[0].message.content
        if i % 2:
            return prompt, "".join(c.choices[0].text for c in complete(server.client(), prompt, max_tokens=16, stream=True))
        return prompt, complete(server.client(), prompt, max_tokens=16).choices[0].text

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        results = list(pool.map(one, range(16)))
    for prompt, text in results:
        assert text == (solo_chat if prompt == "chat" else solo[prompt]), prompt


def test_a_client_that_disconnects_cancels_its_sequence(server):
    before = server.metrics()["hxrt_generation_tokens_total"]
    with httpx.stream("POST", server.url + "/v1/completions",
                      json={"prompt": PROMPTS[3], "max_tokens": 400, "temperature": 0, "ignore_eos": True,
                            "stream": True}, timeout=60) as response:  # ignore_eos: llama-server's extension
        assert response.status_code == 200
        lines = 0
        for line in response.iter_lines():
            if line.startswith("data: "):
                lines += 1
            if lines == 3:
                break
    deadline = time.time() + 30
    while time.time() < deadline and server.metrics()["hxrt_sequences_running"] > 0:
        time.sleep(0.1)
    assert server.metrics()["hxrt_sequences_running"] == 0
    time.sleep(0.5)
    generated = server.metrics()["hxrt_generation_tokens_total"] - before
    assert generated < 200, f"{generated} tokens generated for a client that left after 3"


def test_logprobs_plain_and_streamed(server):
    """logprobs / top_logprobs: one entry per generated token, the greedy token the most likely alternative, the
    alternatives sorted; streamed chunks carry the same entries; completions' legacy form agrees with chat's."""
    import math
    client = server.client()
    plain = chat(client, "What is the capital of France?", max_tokens=16, logprobs=True, top_logprobs=3)
    content = plain.choices[0].logprobs.content
    assert len(content) == plain.usage.completion_tokens
    assert "".join(t.token for t in content) == plain.choices[0].message.content
    for t in content:
        assert t.logprob <= 0 and len(t.top_logprobs) == 3
        assert t.top_logprobs[0].token == t.token and math.isclose(t.top_logprobs[0].logprob, t.logprob)
        lps = [a.logprob for a in t.top_logprobs]
        assert lps == sorted(lps, reverse=True) and sum(math.exp(x) for x in lps) <= 1 + 1e-5
        assert bytes(t.bytes).decode("utf-8", "replace") == t.token or "\ufffd" in t.token
    streamed = [c for c in chat(client, "What is the capital of France?", max_tokens=16, logprobs=True,
                                top_logprobs=3, stream=True) if c.choices and c.choices[0].logprobs]
    entries = [t for c in streamed for t in c.choices[0].logprobs.content]
    assert [(t.token, round(t.logprob, 4)) for t in entries] == [(t.token, round(t.logprob, 4)) for t in content]
    assert chat(client, "hi", max_tokens=4).choices[0].logprobs is None

    done = complete(client, PROMPTS[0], max_tokens=8, logprobs=2)
    lp = done.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset) == 8
    assert "".join(lp.tokens) == done.choices[0].text
    assert lp.text_offset[0] == 0 and lp.text_offset == sorted(lp.text_offset)
    for token, value, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs):
        assert len(top) == 2 and math.isclose(max(top.values()), value) and top[token] == max(top.values())
    streamed = [c.choices[0].logprobs for c in complete(client, PROMPTS[0], max_tokens=8, logprobs=2, stream=True)
                if c.choices and c.choices[0].logprobs]
    assert [t for s in streamed for t in s.tokens] == lp.tokens
    assert [o for s in streamed for o in s.text_offset] == lp.text_offset


def test_logit_bias_forces_a_token(server):
    """logit_bias +100 on one id makes every generated token that id (banning is in EngineTest.LogitBiasForcesAndBansTokens)."""
    client = server.client()
    forced = complete(client, PROMPTS[0], max_tokens=4, logit_bias={"28": 100}, logprobs=0)
    tokens = forced.choices[0].logprobs.tokens
    assert len(tokens) == 4 and len(set(tokens)) == 1 and "".join(tokens) == forced.choices[0].text


def test_speculative_decoding_per_request_gives_the_same_text(server):
    """llama-server's "speculative.n_max" (sent by the openai client through extra_body): prompt-lookup drafts on a
    prompt the model copies from, the same greedy text as without; out of range is a 400 naming it."""
    client = server.client()
    prompt = ("Original: the quick brown fox jumps over the lazy dog by the river bank.\n"
              "Copy: the quick brown fox")
    plain = complete(client, prompt, max_tokens=24).choices[0].text
    drafted = complete(client, prompt, max_tokens=24, extra_body={"speculative.n_max": 8}).choices[0].text
    assert drafted == plain
    with pytest.raises(openai.BadRequestError) as caught:
        complete(client, prompt, max_tokens=4, extra_body={"speculative.n_max": 65})
    assert caught.value.body["param"] == "speculative.n_max"


WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "The current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 40}}, "required": ["city"]}}}
TIME_TOOL = {"type": "function", "function": {
    "name": "get_time", "description": "The time now in a time zone",
    "parameters": {"type": "object", "properties": {"zone": {"enum": ["UTC", "CET", "PST"]}}, "required": ["zone"]}}}


def streamed_tool_calls(stream):
    """The tool calls and finish reason of a streamed chat answer, accumulated from the deltas as clients do."""
    calls, finish, content = {}, None, ""
    for chunk in stream:
        for choice in chunk.choices:
            content += choice.delta.content or ""
            for delta in choice.delta.tool_calls or []:
                entry = calls.setdefault(delta.index, {"id": None, "name": "", "arguments": ""})
                entry["id"] = delta.id or entry["id"]
                entry["name"] += delta.function.name or ""
                entry["arguments"] += delta.function.arguments or ""
            finish = choice.finish_reason or finish
    return [calls[i] for i in sorted(calls)], finish, content


def test_tool_calls_agent_loop(server):
    """The default model's template (ChatML) renders no tools: hxrt lists them in a system turn and reads calls in the
    Hermes format. tool_choice "required" and a named function are forced by the grammar, parsed into tool_calls
    (plain and streamed alike); the call and the tool's result go back in and the model answers in text."""
    client = server.client()
    messages = [{"role": "user", "content": "What is the weather in Paris?"}]
    request = dict(model="m", messages=messages, tools=[WEATHER_TOOL, TIME_TOOL], temperature=0, max_tokens=64)
    reply = client.chat.completions.create(**request, tool_choice="required", parallel_tool_calls=False)
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls", choice
    assert choice.message.content is None and len(choice.message.tool_calls) == 1
    call = choice.message.tool_calls[0]
    assert call.type == "function" and call.id and call.function.name in ("get_weather", "get_time")
    arguments = json.loads(call.function.arguments)
    if call.function.name == "get_weather":
        assert isinstance(arguments["city"], str) and len(arguments["city"]) <= 40
    else:
        assert arguments["zone"] in ("UTC", "CET", "PST")

    calls, finish, content = streamed_tool_calls(client.chat.completions.create(
        **request, tool_choice="required", parallel_tool_calls=False, stream=True))
    assert finish == "tool_calls" and content == ""
    assert [(c["name"], c["arguments"]) for c in calls] == [(call.function.name, call.function.arguments)]
    assert calls[0]["id"]

    named = client.chat.completions.create(**request, tool_choice={"type": "function", "function": {"name": "get_time"}})
    # Parallel calls allowed: this small model repeats its call until max_tokens; each complete one is parsed.
    assert named.choices[0].finish_reason in ("tool_calls", "length") and named.choices[0].message.tool_calls
    for c in named.choices[0].message.tool_calls:
        assert c.function.name == "get_time" and json.loads(c.function.arguments)["zone"] in ("UTC", "CET", "PST")

    # "auto": text or calls, each call of a listed function with arguments that parse.
    auto = client.chat.completions.create(**request).choices[0]
    for c in auto.message.tool_calls or []:
        assert c.function.name in ("get_weather", "get_time") and isinstance(json.loads(c.function.arguments), dict)
    assert auto.finish_reason in ("stop", "length", "tool_calls") and (auto.message.content or auto.message.tool_calls)

    # The agent loop: the call and the tool's result go back in; the answer is text (tool_choice "none").
    alone = client.chat.completions.create(model="m", messages=messages, tools=[WEATHER_TOOL, TIME_TOOL],
                                           tool_choice="none", max_tokens=1).usage.prompt_tokens
    messages += [choice.message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"temperature_c": 18, "sky": "sunny"})}]
    answer = client.chat.completions.create(model="m", messages=messages, tools=[WEATHER_TOOL, TIME_TOOL],
                                            tool_choice="none", temperature=0, max_tokens=48)
    assert answer.choices[0].message.content and not answer.choices[0].message.tool_calls
    assert answer.choices[0].finish_reason in ("stop", "length")
    # The rendered history holds the call and the result (as <tool_call> and <tool_response> text).
    assert answer.usage.prompt_tokens >= alone + 20


def test_unserved_parameters_are_refused_by_name(server):
    client = server.client()
    cases = [
        (lambda: chat(client, "hi", max_tokens=5, response_format={"type": "json_schema", "json_schema": {"name": "x"}}),
         "response_format"),  # no "schema"
        (lambda: chat(client, "hi", max_tokens=5, logit_bias={"5": 101}), "logit_bias"),
        (lambda: chat(client, "hi", max_tokens=5, logit_bias={"999999": 1}), "logit_bias"),
        (lambda: chat(client, "hi", max_tokens=5, top_logprobs=2), "top_logprobs"),
        (lambda: chat(client, "hi", max_tokens=5, tools=[WEATHER_TOOL],
                      tool_choice={"type": "function", "function": {"name": "fly"}}), "tool_choice"),
        (lambda: chat(client, "hi", max_tokens=5, tool_choice="required"), "tool_choice"),  # no tools
        (lambda: chat(client, "hi", max_tokens=5, tools=[{"type": "function", "function": {"name": "a b"}}]), "tools"),
        (lambda: chat(client, "hi", max_tokens=5, tool_choice="required",
                      tools=[{"type": "function", "function": {"name": "f", "parameters": {
                          "type": "object", "properties": {"id": {"type": "string", "pattern": "^[0-9]+$"}}}}}]),
         "tools"),  # a keyword the forcing grammar cannot follow
        (lambda: complete(client, "hi", max_tokens=5, suffix="end"), "suffix"),
        (lambda: complete(client, "hi", max_tokens=5, best_of=2), "best_of"),
    ]
    for call, param in cases:
        with pytest.raises(openai.BadRequestError) as caught:
            call()
        assert caught.value.body["param"] == param, caught.value.body


def test_bad_requests_get_openai_errors(server):
    client = server.client()
    response = httpx.post(server.url + "/v1/chat/completions", content=b"{not json", timeout=30)
    assert response.status_code == 400
    error = response.json()["error"]
    assert "not valid JSON" in error["message"] and error["type"] == "invalid_request_error"
    cases = [
        (lambda: client.chat.completions.create(model="m", messages=[]), "messages"),
        (lambda: chat(client, "hi", max_tokens=5, n=17), "n"),
        (lambda: client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}],
                                                temperature=5), "temperature"),
        (lambda: complete(client, "hi", max_tokens=100000), "max_tokens"),
        (lambda: client.completions.create(model="m", prompt=[[1, 2], [3]]), "prompt"),
    ]
    for call, param in cases:
        with pytest.raises(openai.BadRequestError) as caught:
            call()
        assert caught.value.status_code == 400
        assert caught.value.body["param"] == param, caught.value.body
    # The server is unharmed.
    assert complete(client, PROMPTS[0], max_tokens=2).choices[0].text


def test_api_key_and_capacity():
    s = Server("--api-key", "sekret", "--parallel", "1", "--max-queue", "0")
    try:
        with pytest.raises(openai.AuthenticationError):
            complete(s.client(api_key="wrong"), PROMPTS[0], max_tokens=2)
        good = s.client(api_key="sekret")
        assert complete(good, PROMPTS[0], max_tokens=2).choices[0].text
        # One long request takes the only slot; the next is refused with 503 instead of queueing.
        long = good.completions.create(model="m", prompt=PROMPTS[3], max_tokens=300, temperature=0, stream=True)
        next(iter(long))
        with pytest.raises(openai.InternalServerError) as caught:
            complete(good, PROMPTS[0], max_tokens=2)
        assert caught.value.status_code == 503
        long.close()
    finally:
        assert s.stop() == 0


def test_sigterm_drains_requests_in_flight():
    s = Server("--parallel", "2")
    results = {}
    # Without --embeddings the endpoint says how to get one.
    response = httpx.post(s.url + "/v1/embeddings", json={"input": "x"}, timeout=30)
    assert response.status_code == 501 and "--embeddings" in response.json()["error"]["message"]

    def request():
        results["text"] = complete(s.client(), PROMPTS[0], max_tokens=48, extra_body={"ignore_eos": True}).choices[0].text

    worker = threading.Thread(target=request)
    worker.start()
    deadline = time.time() + 60
    while time.time() < deadline and s.metrics().get("hxrt_sequences_running", 0) < 1:
        time.sleep(0.02)  # SIGTERM once the request is in the batch, not before it arrived
    s.proc.send_signal(signal.SIGTERM)
    worker.join(timeout=120)
    assert s.proc.wait(timeout=60) == 0
    assert "Paris" in results.get("text", ""), "".join(s.stderr)
    assert any("draining" in line for line in s.stderr)
