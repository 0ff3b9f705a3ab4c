"""What the serve soaks share: the default model's path and starting `hxrt serve` on a free port."""
from __future__ import annotations

import os
import re
import subprocess


def default_model() -> str:
    cache = os.environ.get("HXRT_MODEL_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "hxrt", "models")
    return os.environ.get("HXRT_TEST_MODEL") or os.path.join(cache, "SmolLM2-135M-Instruct.Q4_1.gguf")


def start_server(hxrt: str, model: str, *flags: str) -> tuple[subprocess.Popen, str | None]:
    """`hxrt serve --model MODEL --port 0 FLAGS...` and its URL from the line it prints (None: it did not start)."""
    proc = subprocess.Popen([hxrt, "serve", "--model", model, "--port", "0", *flags],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    match = re.search(r"listening on (http://[\d.]+:\d+)", proc.stdout.readline())
    return proc, match.group(1) if match else None
