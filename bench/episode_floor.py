"""The floor of `bench_episode.py`: the harness CLI on its own, against a stand-in model that answers as
the oracle policy would, and (`grade=True`) the task's hidden tests run plainly afterwards.

Two floors, because an episode is more than its harness: openenv grades every episode, and a user of the
bare CLI who wants to know whether the task was solved runs the same tests. `cpu_s`/`wall_s` of the
grading step are measured per episode (the test process's own rusage, from `wait4`), so the report
gives openenv's cost against the CLI alone and against the CLI plus its tests, from one batch.

`model_s` stands in for the model's own time per policy turn (the floor's server sleeps it before each
answer that carries tools; `bench_episode.py` sleeps the same before openenv answers a non-aux turn):
with an instant model every fixed cost of an episode is magnified; with a model at realistic speed the
ratio is the one a training run sees.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

# ---- the stand-in model server -------------------------------------------------------------------------


def _plan(harness: str, task_id: str) -> tuple[Any, list[str]]:
    from openenv.harness.catalog import get_spec
    from openenv.harness.oracle import solution_command
    from openenv.harness.tasks import find_task

    spec = get_spec(harness)
    # The floor runs the CLI on the host, with no /solution and no /app: the inline (unstaged) form.
    plan = [
        solution_command(find_task(task_id), staged=False),
        *([spec.finish_command] if spec.finish_command else []),
    ]
    return spec, plan


def _sse(events: list[tuple[str | None, dict[str, Any] | str]]) -> bytes:
    out = []
    for name, data in events:
        payload = data if isinstance(data, str) else json.dumps(data)
        out.append((f"event: {name}\n" if name else "") + f"data: {payload}\n\n")
    return "".join(out).encode()


def _openai_reply(call: dict[str, Any] | None, text: str, stream: bool) -> tuple[bytes, str]:
    """An OpenAI Chat reply (a chunk stream when `stream`) carrying one tool call or a text answer."""
    base = {"id": "chatcmpl-floor", "created": 0, "model": "tiny"}
    usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    tool_calls = (
        [
            {
                "index": 0,
                "id": "call_floor",
                "type": "function",
                "function": {"name": call["name"], "arguments": json.dumps(call["arguments"])},
            }
        ]
        if call
        else None
    )
    finish = "tool_calls" if call else "stop"
    if not stream:
        message = {"role": "assistant", "content": None if call else text}
        if tool_calls:
            message["tool_calls"] = [{k: v for k, v in c.items() if k != "index"} for c in tool_calls]
        body = {
            **base,
            "object": "chat.completion",
            "usage": usage,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        }
        return json.dumps(body).encode(), "application/json"
    delta: dict[str, Any] = {"role": "assistant", "content": None if call else text}
    if tool_calls:
        delta["tool_calls"] = tool_calls
    chunk = {**base, "object": "chat.completion.chunk"}
    return _sse(
        [
            (None, {**chunk, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}),
            (None, {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}),
            (None, {**chunk, "choices": [], "usage": usage}),
            (None, "[DONE]"),
        ]
    ), "text/event-stream"


def _anthropic_reply(call: dict[str, Any] | None, text: str, stream: bool) -> tuple[bytes, str]:
    """An Anthropic Messages reply (an event stream when `stream`) with one tool_use or a text block."""
    block = (
        {"type": "tool_use", "id": "toolu_floor", "name": call["name"], "input": call["arguments"]}
        if call
        else {"type": "text", "text": text}
    )
    stop = "tool_use" if call else "end_turn"
    usage = {"input_tokens": 1, "output_tokens": 1}
    message = {
        "id": "msg_floor",
        "type": "message",
        "role": "assistant",
        "model": "tiny",
        "stop_sequence": None,
    }
    if not stream:
        return json.dumps(
            {**message, "content": [block], "stop_reason": stop, "usage": usage}
        ).encode(), "application/json"
    start = {**block, "input": {}} if call else {"type": "text", "text": ""}
    delta = (
        {"type": "input_json_delta", "partial_json": json.dumps(call["arguments"])}
        if call
        else {"type": "text_delta", "text": text}
    )
    return _sse(
        [
            (
                "message_start",
                {
                    "type": "message_start",
                    "message": {**message, "content": [], "stop_reason": None, "usage": usage},
                },
            ),
            ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": start}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": 1},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
    ), "text/event-stream"


def _responses_reply(call: dict[str, Any] | None, text: str, stream: bool) -> tuple[bytes, str]:
    """An OpenAI Responses reply (an event stream when `stream`, as Codex asks) with one function call or
    a text message: the events Codex reads (created, output item added/done, completed)."""
    if call:
        item = {
            "type": "function_call",
            "id": "fc_floor",
            "call_id": "call_floor",
            "name": call["name"],
            "arguments": json.dumps(call["arguments"]),
            "status": "completed",
        }
    else:
        item = {
            "type": "message",
            "id": "msg_floor",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }
    usage = {
        "input_tokens": 1,
        "output_tokens": 1,
        "total_tokens": 2,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens_details": {"reasoning_tokens": 0},
    }
    response = {
        "id": "resp_floor",
        "object": "response",
        "created_at": 0,
        "model": "tiny",
        "status": "completed",
        "output": [item],
        "usage": usage,
    }
    if not stream:
        return json.dumps(response).encode(), "application/json"
    start = {**response, "status": "in_progress", "output": [], "usage": None}
    return _sse(
        [
            ("response.created", {"type": "response.created", "response": start, "sequence_number": 0}),
            (
                "response.output_item.added",
                {"type": "response.output_item.added", "output_index": 0, "item": item, "sequence_number": 1},
            ),
            (
                "response.output_item.done",
                {"type": "response.output_item.done", "output_index": 0, "item": item, "sequence_number": 2},
            ),
            (
                "response.completed",
                {"type": "response.completed", "response": response, "sequence_number": 3},
            ),
        ]
    ), "text/event-stream"


def _tool_results(body: dict[str, Any], anthropic: bool) -> int:
    if isinstance(body.get("input"), list):  # OpenAI Responses: results are input items
        return sum(
            1
            for item in body["input"]
            if isinstance(item, dict)
            and item.get("type") in ("function_call_output", "custom_tool_call_output")
        )
    if not anthropic:
        return sum(1 for m in body.get("messages", []) if m.get("role") == "tool")
    return sum(
        1
        for m in body.get("messages", [])
        if isinstance(m.get("content"), list)
        for block in m["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    )


def oracle_app(model_s: float = 0.0) -> Any:
    """The floor's model: `/<harness>/<task>/v1/...` answers as the oracle policy would, instantly and
    statelessly (the plan's next call is read off the number of tool results in the conversation); a
    policy turn waits `model_s` first."""
    from engines import hold
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    from openenv.harness.oracle import FINAL_TEXT

    plans: dict[tuple[str, str], tuple[Any, list[str]]] = {}

    async def answer(request: Request) -> Response:
        key = (request.path_params["harness"], request.path_params["task"])
        if key not in plans:
            plans[key] = _plan(*key)
        spec, plan = plans[key]
        body = await request.json()
        if model_s and body.get("tools"):  # a policy turn: the model's own time, as on openenv's side
            await hold(model_s)
        anthropic = request.url.path.endswith("/messages")
        if not body.get("tools"):  # an aux request (a title, a summary): a short text
            call = None
        else:
            done = _tool_results(body, anthropic)
            call = (
                {"name": spec.shell_tool.name, "arguments": spec.shell_tool.call_arguments(plan[done])}
                if done < len(plan)
                else None
            )
        responses = request.url.path.endswith("/responses")
        encode = _responses_reply if responses else _anthropic_reply if anthropic else _openai_reply
        data, media = encode(call, FINAL_TEXT, bool(body.get("stream")))
        return Response(data, media_type=media)

    async def count_tokens(request: Request) -> JSONResponse:
        return JSONResponse({"input_tokens": 1})

    async def models(request: Request) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [{"id": "tiny", "object": "model"}]})

    prefix = "/{harness}/{task}/v1"
    return Starlette(
        routes=[
            Route(f"{prefix}/chat/completions", answer, methods=["POST"]),
            Route(f"{prefix}/messages", answer, methods=["POST"]),
            Route(f"{prefix}/responses", answer, methods=["POST"]),
            Route(f"{prefix}/messages/count_tokens", count_tokens, methods=["POST"]),
            Route(f"{prefix}/models", models),
            Route("/health", models),
        ]
    )


# ---- the bare CLI, and its tests ---------------------------------------------------------------------


def floor_network(url: str) -> Any:
    """A loopback-only network namespace for the floor's CLIs, where the stand-in model's port reaches the
    stand-in (`LoopbackNamespace`, the way openenv carries the proxy's port into its sandboxes), or None
    where none can be made (not root): the CLI then runs on the host's network.

    On the host's network a bare CLI sends traffic of its own (codex syncs its plugins with `git
    ls-remote https://github.com/...`: DNS queries to the machine's resolver), which these machines must
    not send, and which openenv's sandbox never lets out either."""
    from urllib.parse import urlsplit

    from openenv.harness.sandbox.netns import LoopbackNamespace

    port = urlsplit(url).port
    assert port is not None
    try:
        return LoopbackNamespace((port,))
    except OSError as exc:
        print(f"the floor runs on the host's network ({exc})", flush=True)
        return None


def floor_env(spec: Any, ctx: Any, task_env: dict[str, str], *, tmp: Path) -> dict[str, str]:
    """The CLI's environment: what openenv's sandbox gives it (`LocalSandbox.environment`), so the harness
    does the same work on both sides: the variables it passes through from this process's environment
    (`passed_through`), the harness's PATH, its own HOME, TMPDIR and USER, the task's and the harness's
    variables. They change what a CLI does: with `SSL_CERT_DIR` set (as on this machine), codex reads and
    parses every certificate in that folder each time it sets up an HTTP client, ~870 files an episode; a
    floor that dropped it ran a cheaper codex than the one openenv runs."""
    from openenv.harness.launch import harness_path
    from openenv.harness.sandbox.identity import SANDBOX_USER
    from openenv.harness.sandbox.local import passed_through

    env = passed_through()
    env.setdefault("LANG", "C.UTF-8")
    env.update(PATH=harness_path(spec), HOME=str(ctx.home), TMPDIR=str(tmp), USER=SANDBOX_USER)
    return {**env, **task_env, **spec.environment(ctx)}


def floor_episode(
    harness: str, task_id: str, url: str, *, grade: bool = False, enter: list[str] | None = None
) -> dict[str, Any]:
    """The harness CLI on its own: task files in a temp folder, its config, the stand-in model; with
    `grade`, then the task's tests as a user would run them (no sandbox), timed apart. `enter` prefixes
    the CLI's commands (`floor_network`'s `enter_argv()`: the CLI reaches only the stand-in)."""
    from openenv.harness.catalog import get_spec
    from openenv.harness.sandbox.files import write_tree
    from openenv.harness.spec import SessionContext
    from openenv.harness.tasks import find_task

    spec, task = get_spec(harness), find_task(task_id)
    start = time.perf_counter()
    root = Path(tempfile.mkdtemp(prefix="openenv-floor-"))
    try:
        workspace, home = root / "workspace", root / "home"
        write_tree(workspace, task.workspace)
        home.mkdir()
        ctx = SessionContext(
            base_url=f"{url}/{harness}/{task_id}",
            api_key="floor",
            model=spec.model,
            workspace=workspace,
            home=home,
            instruction=task.instruction,
        )
        spec.write_config(ctx)
        env = floor_env(spec, ctx, task.env, tmp=root)
        prefix = list(enter or [])
        for argv in spec.setup_argvs(ctx):
            subprocess.run(prefix + argv, env=env, cwd=workspace, check=True, capture_output=True, timeout=60)
        # A session of its own, as the sandbox gives the harness: with the kernel's autogroup scheduling
        # a session is a scheduling group, and sharing ours would starve it on a loaded machine.
        done = subprocess.run(
            prefix + spec.argv(ctx),
            env=env,
            cwd=workspace,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=300,
            check=False,
            start_new_session=True,
        )
        changed = any(
            (workspace / rel).read_bytes() != (data if isinstance(data, bytes) else data.encode())
            for rel, data in task.workspace.items()
        )
        error = (
            None
            if done.returncode == 0 and changed
            else (
                f"exit {done.returncode}, workspace {'changed' if changed else 'unchanged'}: "
                f"{(done.stdout + done.stderr).decode(errors='replace')[-400:]}"
            )
        )
        graded = run_tests(task, root, workspace) if grade and error is None else {}
        if graded and not graded["solved"]:
            error = f"the tests failed: {graded['output'][-400:]}"
        return {
            "ok": error is None,
            "error": error,
            "wall_s": time.perf_counter() - start,
            "grading_wall_s": graded.get("wall_s", 0.0),
            "grading_cpu_s": graded.get("cpu_s", 0.0),
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run_tests(task: Any, root: Path, workspace: Path) -> dict[str, Any]:
    """The task's test command from the workspace, with its tests and a reward folder beside it: solved,
    wall seconds, and the CPU seconds of the test process and all it waited for (`wait4`'s rusage)."""
    from openenv.harness.sandbox.base import CommandResult
    from openenv.harness.sandbox.files import write_tree
    from openenv.harness.sandbox.local import IMAGE_PATH
    from openenv.harness.verifier import score

    tests, rewards = root / "tests", root / "rewards"
    write_tree(tests, task.tests)
    rewards.mkdir()
    env = {
        # The system's programs only, as the sandbox resolves them (it mounts no user folder such as
        # ~/.pyenv: a pyenv shim first on PATH made python3 cost 0.1 CPU-s more here than there)
        "PATH": IMAGE_PATH,
        "HOME": str(root / "home"),
        "LANG": "C.UTF-8",
        "TESTS_DIR": str(tests),
        "REWARD_DIR": str(rewards),
        "WORKSPACE": str(workspace),
        **task.env,
        **task.verifier_env,
    }
    # Harbor's tests live at /tests; here, beside the workspace (test.sh reads $TESTS_DIR first)
    argv = ["sh", "-c", task.test_command.replace("/tests/", f"{tests}/")]
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv,
        cwd=workspace,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    assert proc.stdout is not None
    output = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    text = output.decode(errors="replace")
    # Scored by the verifier's own rules (reward.json, else reward.txt; no file is no reward)
    result = CommandResult(argv=argv, exit_code=os.waitstatus_to_exitcode(status), output=text)
    return {
        "solved": score(result, rewards).solved,
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "output": text,
    }
