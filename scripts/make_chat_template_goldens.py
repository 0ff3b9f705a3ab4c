#!/usr/bin/env python3
"""Writes tests/llm/goldens/chat_templates/goldens.json: every chat template hxrt ships (src/llm/chat_templates/),
the test-only templates beside the goldens, and SmolLM2's own template (read from its GGUF) rendered by Python's
jinja2 on the conversations of tests/llm/goldens/chat_templates/conversations.json. hxrt's Jinja engine is checked
against these outputs byte for byte.

    python3 -m venv /tmp/jvenv && /tmp/jvenv/bin/pip install jinja2 gguf numpy
    /tmp/jvenv/bin/python scripts/make_chat_template_goldens.py --model "$(scripts/fetch_model.sh)"

The environment mirrors Hugging Face transformers' apply_chat_template (_compile_jinja_template): jinja2's
ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and the loopcontrols extension; `tojson` is
json.dumps(x, ensure_ascii=False, indent=, separators=, sort_keys=); the globals raise_exception (raises
TemplateError with its message) and strftime_now, here at a fixed time (2026-01-15 09:05:07) so the goldens are
deterministic. A case renders `messages`, `add_generation_prompt`, `bos_token`, `eos_token` and every other key of
its conversation (`tools` only where the conversation has tools; transformers passes tools=None otherwise).

Each case is {"template", "conversation", "add_generation_prompt", "bos_token", "eos_token", "output"} or, for a
conversation the template refuses through raise_exception, "error" (the message) instead of "output". "template"
is a path relative to the repository root, or "@model:smollm2" with "template_sha256" (of the template's UTF-8
text) so a test can tell that the model file changed. The script fails when a template does not render a
conversation it should, raises on one it should render, or fails in any other way than raise_exception.
Rerunning it writes a byte-identical file.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import sys
from pathlib import Path

import jinja2
import jinja2.ext
import jinja2.sandbox

ROOT = Path(__file__).resolve().parent.parent
GOLDENS = ROOT / "tests" / "llm" / "goldens" / "chat_templates"
DEFAULTS = "src/llm/chat_templates"
TESTS = "tests/llm/goldens/chat_templates"
FIXED_NOW = datetime.datetime(2026, 1, 15, 9, 5, 7)

ALL = None  # every conversation
TOOLS = {"tools_call", "tools_prompt", "tools_in_system", "parallel_tool_calls"}
# Where a template refuses a conversation (raise_exception) or cannot represent it (skipped): template -> sets.
# Every other conversation must render.
TEMPLATES = {
    f"{DEFAULTS}/chatml.jinja": dict(bos="", eos="<|im_end|>", skip={"multipart"}),
    f"{DEFAULTS}/qwen.jinja": dict(bos="", eos="<|im_end|>"),
    f"{DEFAULTS}/llama3.jinja": dict(
        bos="<|begin_of_text|>", eos="<|eot_id|>", skip={"multipart"}, errors={"parallel_tool_calls"}
    ),
    f"{DEFAULTS}/llama2.jinja": dict(
        bos="<s>",
        eos="</s>",
        skip={"multipart"},
        errors={"tools_call", "parallel_tool_calls", "non_alternating", "assistant_first"},
    ),
    f"{DEFAULTS}/mistral.jinja": dict(
        bos="<s>", eos="</s>", skip={"multipart"}, errors={"non_alternating", "assistant_first"}
    ),
    f"{DEFAULTS}/gemma.jinja": dict(
        bos="<bos>",
        eos="<eos>",
        errors={"tools_call", "parallel_tool_calls", "non_alternating", "assistant_first"},
    ),
    f"{DEFAULTS}/phi3.jinja": dict(
        bos="<s>", eos="<|endoftext|>", skip={"multipart"}, errors={"tools_call", "parallel_tool_calls"}
    ),
    f"{TESTS}/constructs.jinja": dict(bos="<s>", eos="</s>"),
    f"{TESTS}/values.jinja": dict(bos="<s>", eos="</s>", only={"single_user", "tools_call", "empty"}),
    f"{TESTS}/whitespace.jinja": dict(bos="<s>", eos="</s>", only={"single_user", "system_multi_turn", "empty"}),
    # SmolLM2's template concatenates message['content'], so content that is not a string fails (TypeError).
    "@model:smollm2": dict(bos="<|im_start|>", eos="<|im_end|>", skip={"tools_call", "multipart"}),
}


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def make_env() -> jinja2.Environment:
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: FIXED_NOW.strftime(fmt)
    return env


def model_template(path: Path) -> str:
    import gguf

    field = gguf.GGUFReader(str(path)).fields.get("tokenizer.chat_template")
    if field is None:
        sys.exit(f"{path}: no tokenizer.chat_template")
    return bytes(field.parts[field.data[0]]).decode("utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, type=Path, help="SmolLM2-135M-Instruct GGUF (scripts/fetch_model.sh)")
    args = parser.parse_args()

    conversations = json.loads((GOLDENS / "conversations.json").read_text(encoding="utf-8"))
    env = make_env()
    cases = []
    failures = []
    for name, spec in sorted(TEMPLATES.items()):
        if name == "@model:smollm2":
            source = model_template(args.model)
        else:
            source = (ROOT / name).read_text(encoding="utf-8")
        template = env.from_string(source)
        errors, skip, only = spec.get("errors", set()), spec.get("skip", set()), spec.get("only")
        unknown = (errors | skip | (only or set())) - conversations.keys()
        if unknown:
            failures.append(f"{name}: unknown conversations {sorted(unknown)}")
        for conv_name in sorted(conversations):
            if conv_name in skip or (only is not None and conv_name not in only):
                continue
            conversation = conversations[conv_name]
            for add_generation_prompt in (False, True):
                case = {
                    "template": name,
                    "conversation": conv_name,
                    "add_generation_prompt": add_generation_prompt,
                    "bos_token": spec["bos"],
                    "eos_token": spec["eos"],
                }
                if name.startswith("@model:"):
                    case["template_sha256"] = hashlib.sha256(source.encode("utf-8")).hexdigest()
                variables = dict(conversation)
                variables.update(
                    add_generation_prompt=add_generation_prompt, bos_token=spec["bos"], eos_token=spec["eos"]
                )
                where = f"{name} x {conv_name} (add_generation_prompt={add_generation_prompt})"
                try:
                    case["output"] = template.render(**variables)
                except jinja2.exceptions.TemplateError as e:
                    # UndefinedError and the syntax errors are TemplateErrors too; only raise_exception's own
                    # class counts as a refusal.
                    if type(e) is not jinja2.exceptions.TemplateError:
                        failures.append(f"{where}: {type(e).__name__}: {e}")
                        continue
                    if conv_name not in errors:
                        failures.append(f"{where}: raised {e}")
                        continue
                    case["error"] = str(e)
                except Exception as e:  # noqa: BLE001 - any other failure is a broken template or conversation
                    failures.append(f"{where}: {type(e).__name__}: {e}")
                    continue
                else:
                    if conv_name in errors:
                        failures.append(f"{where}: rendered, but should raise")
                        continue
                    if "<list_reverseiterator" in case["output"] or " object at 0x" in case["output"]:
                        failures.append(f"{where}: prints a Python object's address")
                cases.append(case)
    if failures:
        sys.exit("chat template goldens not written:\n  " + "\n  ".join(failures))

    out = GOLDENS / "goldens.json"
    out.write_text(json.dumps(cases, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"{out.relative_to(ROOT)}: {len(cases)} cases ({sum('error' in c for c in cases)} errors)")


if __name__ == "__main__":
    main()
