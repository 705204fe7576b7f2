"""A fast OpenAI-compatible chat server for the benchmarks, run in a process of its own.

``python benchmarks/_chat_server.py --delay D [--answer letter|text]`` listens on a free loopback
port, prints its base URL and answers every ``POST /v1/chat/completions`` after ``D`` seconds
(``--answer letter``: the letter of the first ``X. option`` line of the prompt; ``text``: ``Output:
No``) until its stdin closes. ``GET /stats`` gives ``{"requests", "max_in_flight", "cpu_seconds"}``:
its own CPU time, so a benchmark can show the server was not the ceiling. It is built on aiohttp's
server (one event loop): on 2 cores it answers about 2,000 requests/s, well above what the
benchmarks ask of it.

:class:`ServerProcess` starts one and reads its statistics.
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import subprocess
import sys
import urllib.request
from typing import Any

_OPTION = re.compile(r"^([A-Z])\. ", re.M)


def serve(delay: float, answer: str) -> None:
    import asyncio

    from aiohttp import web

    state = {"requests": 0, "in_flight": 0, "max_in_flight": 0}

    def text_of(body: dict[str, Any]) -> str:
        for message in reversed(body.get("messages", [])):
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
        return ""

    async def chat(request: web.Request) -> web.Response:
        state["requests"] += 1
        state["in_flight"] += 1
        state["max_in_flight"] = max(state["max_in_flight"], state["in_flight"])
        try:
            body = json.loads(await request.read())
            if answer == "letter":
                found = _OPTION.search(text_of(body))
                content = found.group(1) if found else "A"
            else:
                content = "Output: No"
            await asyncio.sleep(delay)
        finally:
            state["in_flight"] -= 1
        return web.json_response(
            {
                "id": "bench",
                "object": "chat.completion",
                "model": body.get("model", "bench"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": 1},
            }
        )

    async def stats(request: web.Request) -> web.Response:
        use = resource.getrusage(resource.RUSAGE_SELF)
        return web.json_response({**state, "cpu_seconds": use.ru_utime + use.ru_stime})

    async def main() -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", chat)
        app.router.add_get("/stats", stats)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, backlog=4096)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        print(f"http://127.0.0.1:{port}/v1", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
        await runner.cleanup()

    asyncio.run(main())


class ServerProcess:
    """``with ServerProcess(delay) as srv``: ``srv.base_url``, ``srv.stats()``."""

    def __init__(self, delay: float, answer: str = "text") -> None:
        self.delay, self.answer = delay, answer

    def __enter__(self) -> ServerProcess:
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--delay", str(self.delay), "--answer", self.answer],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.base_url = self.proc.stdout.readline().strip()
        if not self.base_url:
            raise RuntimeError("the benchmark chat server did not start (is aiohttp installed?)")
        return self

    def stats(self) -> dict[str, Any]:
        root = self.base_url.removesuffix("/v1")
        with urllib.request.urlopen(f"{root}/stats", timeout=10) as resp:  # loopback only
            return json.loads(resp.read())

    def __exit__(self, *exc: object) -> None:
        self.proc.kill()
        self.proc.wait()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--delay", type=float, required=True)
    ap.add_argument("--answer", choices=("letter", "text"), default="text")
    args = ap.parse_args()
    serve(args.delay, args.answer)
