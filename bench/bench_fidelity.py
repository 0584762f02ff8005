"""Trajectory fidelity: recorded harness sessions replayed through our proxy and the reference.

    .venv/bin/python bench/bench_fidelity.py [--vllm-url URL] [--sessions bench/sessions] [--json PATH]

Each file in bench/sessions/ (written by record_sessions.py) is a real multi-turn session of one
harness CLI: every model request body it sent and the exact completion ids it got back. Both proxies
receive the same bodies on the same routes, in order, and call the replay engine (bench/engines.py),
which answers every request with that turn's recorded completion, so each next recorded request is
consistent with what the engine "sampled". The reference's chat prompts are rendered the way vLLM
renders them: by a real vLLM's `/tokenize` on the messages and tools it sends.

Two variants of the same sessions:
- **canonical**: the completions as recorded (the oracle's text, tokenized canonically): the
  reference's best case, since re-tokenizing the echoed history gives the same ids back;
- **non-canonical**: the same text as a sampling model may emit it, word by word (each
  whitespace-separated piece tokenized on its own; it decodes to the same text). Re-tokenizing the
  history then gives different ids than were sampled.

Judged from the engine's side (its log of prompt ids and sampled ids per request), per proxy:
- sequences: training rows exported for the session (ideal 1);
- turns trained: turns whose sampled ids appear in a row with mask 1, preceded by exactly the prompt
  the engine saw;
- exact tokens: of all tokens in the exported rows, the share that lie in a span equal to an engine
  request's prompt + sampled ids (what the model really saw and produced);
- history exact: turns whose prompt starts with the previous turn's prompt + sampled ids, token for token.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO))

import servers
from servers import REF_PYTHON, REF_VERSION, Spawned

SESSIONS = REPO / "bench" / "sessions"
VARIANTS = ("canonical", "non-canonical")


# ---- the servers ---------------------------------------------------------------------------------


def start_servers(vllm_url: str | None) -> dict[str, Spawned]:
    """The replay engine, our proxy and (when installed) the reference, both in front of the engine."""
    started = {"engine": servers.engine("replay", *(["--vllm-url", vllm_url] if vllm_url else []))}
    try:
        started["ours"] = servers.ours(started["engine"].base)
        if REF_PYTHON.exists():
            started[f"reference {REF_VERSION}"] = servers.reference(
                started["engine"].base, capture_level="tokens"
            )
    except BaseException:
        for server in started.values():
            server.stop()
        raise
    return started


# ---- replay --------------------------------------------------------------------------------------


def load(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def non_canonical(ids: list[int], tokenizer: Any) -> list[int]:
    """The same text, tokenized piece by piece (split before every space and newline), as a model may
    sample it; special tokens (the end of turn) are kept as they are."""
    special = set(tokenizer.all_special_ids)
    out: list[int] = []
    run: list[int] = []
    for token in [*ids, None]:
        if token is None or token in special:
            text = tokenizer.decode(run)
            out += [
                t
                for piece in re.split(r"(?=[ \n])", text)
                if piece
                for t in tokenizer.encode(piece, add_special_tokens=False)
            ]
            run = []
            if token is not None:
                out.append(token)
        else:
            run.append(token)
    return out


def replay(
    lines: list[dict[str, Any]], proxy: str, base: str, engine: str, variant: str, tokenizer: Any
) -> dict[str, Any]:
    """Send one session's requests through `proxy`; returns the engine log and the exported rows."""
    with httpx.Client(timeout=120) as http:
        http.post(f"{engine}/replay/log")  # clears the log and the queue
        reference = proxy.startswith("reference")
        opened = http.post(f"{base}/sessions", json={}).raise_for_status().json()
        token = opened["session_id"] if reference else opened["token"]
        prefix = base if reference else f"{base}/s/{token}"
        headers = {"authorization": f"Bearer {token}"}
        aux: list[bool] = []
        for line in lines:
            for turn in line["turns"]:
                if turn["completion_ids"]:
                    ids = turn["completion_ids"]
                    ids = non_canonical(ids, tokenizer) if variant == "non-canonical" else ids
                    http.post(f"{engine}/replay/next", json={"ids": ids})
                    aux.append(turn["aux"])
            url = prefix + line["route"] + (f"?{line['query']}" if line["query"] else "")
            extra = {k: v for k, v in line["headers"].items() if k.startswith("anthropic-")}
            r = http.post(url, json=line["body"], headers={**headers, **extra})
            r.read()
        log = http.post(f"{engine}/replay/log").json()["log"]
        if reference:
            doc = http.get(f"{base}/sessions/{token}/rollout").json()
            rows = [(s["input_ids"], s["loss_mask"]) for s in doc["sequences"] if s["role"] == "agent"]
            http.delete(f"{base}/sessions/{token}")
        else:
            out = http.get(f"{base}/sessions/{token}/sequences").json()
            rows = [
                (s["prompt_ids"] + s["completion_ids"], [0] * len(s["prompt_ids"]) + s["env_mask"])
                for s in out["sequences"]
            ]
            http.delete(f"{base}/sessions/{token}")
    for entry, is_aux in zip(log, aux):
        entry["aux"] = is_aux
    return {"log": log, "rows": rows}


# ---- scoring (pure) ------------------------------------------------------------------------------


def score(log: list[dict[str, Any]], rows: list[tuple[list[int], list[int]]]) -> dict[str, Any]:
    """The fidelity figures for one replayed session, from the engine's log and the exported rows.
    Auxiliary requests (a title generator) and the rows they alone explain are left out on both sides."""
    aux_rows = {r for r, (tokens, _) in enumerate(rows) if _best_entry(log, tokens).get("aux")}
    rows = [row for r, row in enumerate(rows) if r not in aux_rows]
    log = [e for e in log if not e.get("aux")]
    trained = 0
    trained_tokens = 0
    covered = [0] * len(rows)
    for entry in log:
        seen = entry["prompt_ids"] + entry["completion_ids"]
        start, n = len(entry["prompt_ids"]), len(entry["completion_ids"])
        hit = False
        for r, (tokens, mask) in enumerate(rows):
            if tokens[: len(seen)] == seen:
                covered[r] = max(covered[r], len(seen))
                if all(mask[start : start + n]):
                    hit = True
        trained += hit
        trained_tokens += n if hit else 0
    history = [_extends(prev, cur) for prev, cur in itertools.pairwise(log)]
    total = sum(len(t) for t, _ in rows)
    return {
        "turns": len(log),
        "sequences": len(rows),
        "turns_trained": trained / len(log) if log else 0.0,
        "sampled_tokens": sum(len(e["completion_ids"]) for e in log),
        "trained_tokens": trained_tokens,
        "exact_tokens": sum(covered) / total if total else 0.0,
        "row_tokens": total,
        "history_exact": sum(history) / len(history) if history else 1.0,
    }


def _best_entry(log: list[dict[str, Any]], tokens: list[int]) -> dict[str, Any]:
    """The logged request whose prompt + sampled ids are the longest prefix of `tokens`."""
    best: dict[str, Any] = {}
    for entry in log:
        seen = entry["prompt_ids"] + entry["completion_ids"]
        if (
            len(seen) > len(best.get("prompt_ids", [])) + len(best.get("completion_ids", []))
            and tokens[: len(seen)] == seen
        ):
            best = entry
    return best


def _extends(prev: dict[str, Any], cur: dict[str, Any]) -> bool:
    before = prev["prompt_ids"] + prev["completion_ids"]
    return bool(cur["prompt_ids"][: len(before)] == before)


# ---- the benchmark -------------------------------------------------------------------------------


def run(
    vllm_url: str | None, folder: Path = SESSIONS, on_session: Any = None, limit: int | None = None
) -> list[dict[str, Any]]:
    """Every session (the first `limit` by name, if given) x variant x proxy; one row each."""
    from transformers import AutoTokenizer

    from openenv.models import tiny_model_path

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_path()))
    started = start_servers(vllm_url)
    engine = started["engine"].base
    results = []
    try:
        for path in sorted(folder.glob("*.jsonl"))[:limit]:
            lines = load(path)
            for variant in VARIANTS:
                for proxy, server in started.items():
                    if proxy == "engine":
                        continue
                    got = replay(lines, proxy, server.base, engine, variant, tokenizer)
                    results.append(
                        {
                            "session": path.stem,
                            "dialect": _dialect(lines),
                            "variant": variant,
                            "proxy": proxy,
                            **score(got["log"], got["rows"]),
                        }
                    )
                    if on_session is not None:
                        on_session(results[-1])
    finally:
        for server in started.values():
            server.stop()
    return results


def _dialect(lines: list[dict[str, Any]]) -> str:
    route = lines[0]["route"]
    for needle, name in (
        ("messages", "anthropic"),
        ("responses", "openai responses"),
        ("chat", "openai chat"),
        ("enerateContent", "gemini"),
    ):
        if needle in route:
            return name
    return route


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--vllm-url",
        help="a vLLM whose /tokenize renders the reference's prompts "
        "(default: start one; 'none' uses transformers' chat template)",
    )
    parser.add_argument("--sessions", type=Path, default=SESSIONS)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    server = None
    url = args.vllm_url
    if url is None:
        from openenv.models import tiny_model_path
        from openenv.soak.vllm_server import VLLMServer

        server = VLLMServer(tiny_model_path()).start()
        url = server.base_url
    t0 = time.perf_counter()
    try:
        rows = run(
            None if url == "none" else url.rstrip("/"),
            args.sessions,
            on_session=lambda r: print(json.dumps(r), file=sys.stderr),
        )
    finally:
        if server is not None:
            server.stop()
    print(
        f"{'session':12} {'variant':14} {'proxy':18} {'turns':>5} {'seqs':>4} {'trained':>7} {'exact':>6} {'history':>7}"
    )
    for r in rows:
        print(
            f"{r['session']:12} {r['variant']:14} {r['proxy']:18} {r['turns']:5d} {r['sequences']:4d} "
            f"{r['turns_trained']:7.2f} {r['exact_tokens']:6.3f} {r['history_exact']:7.2f}"
        )
    print(f"({time.perf_counter() - t0:.0f}s)")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
