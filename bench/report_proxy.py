"""The proxy's sections of docs/benchmarks.md's report: latency over vLLM direct, the logprobs mode, the
streamed first byte, turn throughput and the fidelity of the recorded tokens.

Pure, like `report_format`: each section takes what `bench/report.py` collected and returns markdown
(and, where it has targets, one met / not-met line per target).
"""

from __future__ import annotations

import statistics
from typing import Any

from report_cells import (
    FLAT_TARGET,
    LATENCY_TARGET,
    RATE_TARGET,
    REFERENCE_TARGET,
    TTFB_TARGET,
    markdown_table,
    met_or_not,
    ratio,
)

__all__ = [
    "fidelity_section",
    "latency_section",
    "logprobs_mode_section",
    "throughput_section",
    "throughput_targets",
    "ttft_section",
]


def latency_section(rows: list[dict[str, Any]]) -> tuple[str, list[str]]:
    table = markdown_table(
        [
            "target",
            "streamed",
            "median ms",
            "p90 ms",
            "vs vLLM direct",
            "vs vLLM + logprobs, ids",
            "added ms",
            "proxy CPU-ms/turn",
        ],
        [
            [
                r["target"],
                "yes" if r["stream"] else "no",
                f"{r['median_ms']:.1f}",
                f"{r['p90_ms']:.1f}",
                ratio(r["ratio"], 3),
                ratio(r["ratio_capturing"], 3),
                f"{r['added_ms']:+.1f}",
                "-" if r["proxy_cpu_ms"] is None else f"{r['proxy_cpu_ms']:.2f}",
            ]
            for r in rows
        ],
    )
    targets = []
    for stream in (False, True):
        ours = next(r for r in rows if r["target"] == "openenv proxy" and r["stream"] == stream)
        ref = next((r for r in rows if r["target"].startswith("reference") and r["stream"] == stream), None)
        kind = "streamed" if stream else "non-streamed"
        targets.append(
            f"Proxy latency, {kind}: ours {ratio(ours['ratio_capturing'], 3)} vLLM direct asked for the "
            f"same logprobs and token ids (target <= {LATENCY_TARGET}x), {ratio(ours['ratio'], 3)} plain "
            "vLLM direct"
            + (f"; reference {ratio(ref['ratio_capturing'], 3)} / {ratio(ref['ratio'], 3)}" if ref else "")
            + f": {met_or_not(ours['ratio_capturing'] <= LATENCY_TARGET)}"
        )
    n = rows[0].get("n", "the")
    text = f"""## 1. Proxy latency added per turn

The same chat request (a 20-sentence system prompt, 8 tools, greedy, `max_tokens=32`) sent straight
to vLLM's `/v1/chat/completions`, through our proxy (which renders the prompt itself and calls vLLM's
`/v1/completions` by token ids) and through the reference `CaptureServer` (which forwards chat to vLLM
with `logprobs` and `return_token_ids` added), on the same vLLM CPU server and tiny model. Two direct
baselines: the plain request, and the same request asking vLLM for the sampled tokens' ids and
logprobs (`logprobs: true, return_token_ids: true`). The second is what any capture must ask the
engine for, so "vs vLLM + logprobs, ids" is the latency the proxy itself adds; the gap between the two
direct rows is vLLM's own cost of computing and returning logprobs, which both proxies pay. The order
of the targets alternates every round (ABCD, DCBA, ...); {n} requests per target and mode after two
warm-up rounds. Streamed requests are timed to the last SSE byte.

{table}
"""
    return text, targets


def logprobs_mode_section(data: dict[str, Any] | None) -> str:
    """Section 1c: what `--logprobs-mode processed_logprobs` costs against vLLM's default raw mode."""
    if not data:
        return (
            "## 1c. Processed vs raw logprobs\n\nNot measured in this run (bench_logprobs_mode.py failed).\n"
        )
    table = markdown_table(
        ["vLLM --logprobs-mode", "n", "median ms", "p90 ms", "vs raw"],
        [
            [
                f"{r['mode']}_logprobs",
                str(r["n"]),
                f"{r['median_ms']:.1f}",
                f"{r['p90_ms']:.1f}",
                ratio(r["ratio"], 3),
            ]
            for r in data["rows"]
        ],
    )
    return f"""## 1c. Processed vs raw logprobs

`bench/bench_logprobs_mode.py`: every vLLM the project starts runs `--logprobs-mode processed_logprobs`, so a
recorded logprob is `log_softmax(logits / T)`, the one the token was sampled with and the one the trainer
recomputes (docs/training.md). Two servers of the same build, model and flags but the mode, both up in this
run, asked the proxy's own request (`/v1/completions` by token ids, {data["prompt_tokens"]}-token prompt,
`logprobs: 0`, `return_token_ids`, T={data["temperature"]}, {data["max_tokens"]} tokens forced), alternating
every round. Paired median of each round's processed/raw ratio: **{ratio(data["paired_ratio"], 3)}** (load
{data["load"][0]:.1f}).

{table}
"""


def ttft_section(data: dict[str, Any]) -> tuple[str, list[str]]:
    """Streamed time to first byte (bench/bench_ttft.py): several runs, each with its load average."""
    runs = data["runs"]
    keepalive = runs[0]["keepalive_s"] if runs else 10.0

    def row(run: dict[str, Any], name: str) -> dict[str, Any] | None:
        return next((r for r in run["rows"] if r["target"] == name or r["target"].startswith(name)), None)

    cells = []
    for i, run in enumerate(runs, 1):
        for r in run["rows"]:
            cells.append(
                [
                    str(i),
                    f"{run['load'][0]:.1f} -> {run['load'][1]:.1f}",
                    r["target"],
                    str(r["n"]),
                    f"{r['ttfb_ms']:.1f}",
                    ratio(r["ttfb_ratio"]),
                    ratio(r["ttfb_paired"]),
                    f"{r['ttft_ms']:.1f}",
                    ratio(r["ttft_ratio"]),
                    f"{r['total_ms']:.1f}",
                    ratio(r["total_ratio"]),
                ]
            )
    ours = [row(run, "openenv proxy") for run in runs]
    ratios = [r["ttfb_ratio"] for r in ours if r]
    met = sum(x <= TTFB_TARGET for x in ratios)
    refs = [r["ttfb_ratio"] for run in runs if (r := row(run, "reference"))]
    loads = [x for run in runs for x in run["load"]]
    line = (
        f"Streamed TTFB through the proxy: {', '.join(ratio(x) for x in ratios)} vLLM direct in {len(ratios)} runs "
        f"(load average {min(loads):.0f} to {max(loads):.0f}; target <= {TTFB_TARGET}x in every run)"
        + (f"; reference {', '.join(ratio(x) for x in refs)}" if refs else "")
        + f": {met_or_not(bool(ratios) and met == len(ratios))} ({met} of {len(ratios)})"
    )
    table = markdown_table(
        [
            "run",
            "load avg",
            "target",
            "n",
            "TTFB ms",
            "x direct",
            "paired",
            "first text ms",
            "x direct",
            "whole reply ms",
            "x direct",
        ],
        cells,
    )
    n = runs[0]["rows"][0]["n"] if runs else 0
    text = f"""## 1b. Streamed time to first byte (real streaming)

`bench/bench_ttft.py` (`bench/report.py --only ttft` re-measures just this section): one streamed chat
request (greedy, `max_tokens=64`, no tools, so the reply is text) straight to vLLM's
`/v1/chat/completions`; straight to vLLM's `/v1/completions` asked exactly what the proxy asks it (the
prompt's token ids, `logprobs: 0`, `return_token_ids`), vLLM's own cost of capturing; through `openenv
proxy`, which streams vLLM's chunks on as they arrive (`capture/streaming.py`: the dialect's head at the
first sampled token, then text and reasoning deltas as they become certain); and through the reference,
which replays one chunk when the reply is done. One run = {n} requests per target after two warm-up
rounds, targets alternating order every round. TTFB = first body byte, first text = first event
carrying reply text. "x direct" is a ratio of medians; "paired" is the median of each round's own ratio
(the request against vLLM direct's sent just before or after it), which cancels load drifting between
rounds. The machine is shared with other work (the load average column), so read the ratios, not the ms.
Under such load the TTFB is bimodal for every target: when vLLM's API server process gets no CPU while
the engine samples, the reply reaches its client whole (TTFB = whole reply), so a pair can straddle the
two modes and the paired ratios scatter widely; the target is stated on the ratio of medians.

Keep-alive: while no event is due (a slow engine, or a gated turn waiting on its controller) the stream
sends an SSE comment (`: keep-alive`) every **{keepalive:g} s** (`OPENENV_SSE_KEEPALIVE_S`; the reference
also waits 10 s), and Anthropic's `ping` event once `message_start` has gone out.

{table}
"""
    return text, [line]


def throughput_section(rows: list[dict[str, Any]]) -> tuple[str, list[str]]:
    parts = [
        """## 2. Proxy throughput as conversations grow

Concurrent tool-loop conversations (system prompt, a task quoting a ~1,400-character test report, then
per turn an assistant tool call and a ~1,400-character tool result: 1 to 60 turns, up to ~31k prompt
tokens) against an instant engine
(`bench/engines.py`), so only the proxy is measured. **ours** and the **reference** both call the same
instant engine over HTTP, the way they call vLLM (ours: token ids to `/v1/completions`; the
reference: messages to `/v1/chat/completions`, the engine returning `prompt_token_ids`); **ours
(in-process engine)** has no engine round trip at all. Sessions are opened before and closed after the
measured span. "same": every session plays the same conversation (a GRPO group sending the same tool
results); "distinct": every conversation sends text no other conversation of the run sent (fresh
slices of the stdlib's sources), so no cache shared across sessions or rows can help. Every turn, the
first included, brings one new block of text to tokenize, so "vs 1 turn" measures what the length of
the conversation adds. CPU-ms/turn is the proxy process's user+system time per turn; "vs reference" is
the reference's CPU-ms/turn over the target's, at the same length. "engine CPU-ms/turn" is the instant
engine's, standing in for vLLM's front end: the reference sends chat messages, which vLLM renders with
the chat template and tokenizes in full every request (the engine does exactly that, on top of
answering); ours sends token ids, which it only parses. "proxy + engine vs reference" compares the
two sums: what a deployment spends per turn outside the model.
"""
    ]
    for distinct in (False, True):
        mode = [r for r in rows if r["distinct"] == distinct]
        parts.append(
            f"\n**{'distinct' if distinct else 'same'} conversations**\n\n"
            + markdown_table(
                [
                    "target",
                    "turns",
                    "last prompt tokens",
                    "turns/s (wall)",
                    "CPU-ms/turn",
                    "vs 1 turn",
                    "turns/s per core",
                    "vs reference",
                    "engine CPU-ms/turn",
                    "proxy + engine vs reference",
                    "RSS MB",
                ],
                [_throughput_cells(r) for r in mode],
            )
        )
    return "\n".join(parts) + "\n", throughput_targets(rows)


def _throughput_cells(r: dict[str, Any]) -> list[str]:
    if "error" in r:
        return [r["target"], str(r["turns"]), f"failed: {r['error']}", *["-"] * 8]
    engine = "-" if r["engine_cpu_ms"] is None else f"{r['engine_cpu_ms']:.2f}"
    return [
        r["target"],
        str(r["turns"]),
        f"{r['tokens']:,}",
        f"{r['turns_per_s']:.0f}",
        f"{r['cpu_ms']:.2f}",
        ratio(r["cpu_ratio"]),
        f"{r['per_core']:.0f}",
        ratio(r["cpu_vs_ref"]),
        engine,
        ratio(r["system_vs_ref"]),
        f"{r['rss_mb']:.0f}",
    ]


def throughput_targets(rows: list[dict[str, Any]]) -> list[str]:
    out = []
    for name in ("ours", "ours (in-process engine)"):
        mine = [r for r in rows if r["target"] == name and "error" not in r]
        if not mine:
            continue
        per_core = min(r["per_core"] for r in mine)
        wall = min(r["turns_per_s"] for r in mine)
        worst = max(mine, key=lambda r: r["cpu_ratio"])
        flat = worst["cpu_ratio"]
        out.append(
            f"Throughput, {name}: at least {per_core:.0f} turns/s per core at every length and in both "
            f"modes (wall: {wall:.0f} turns/s on this machine; target >= {RATE_TARGET:.0f}): "
            f"{met_or_not(per_core >= RATE_TARGET)}"
        )
        mode = "distinct" if worst["distinct"] else "same"
        out.append(
            f"Per-turn cost flat, {name}: at most {ratio(flat)} the 1-turn cost (at {worst['turns']} turns, "
            f"{mode}; target <= {FLAT_TARGET}x at every length): {met_or_not(flat <= FLAT_TARGET)}"
        )
        vs_ref = [r["cpu_vs_ref"] for r in mine if r["cpu_vs_ref"] is not None]
        if vs_ref:
            out.append(
                f"Versus the reference, {name}: {ratio(min(vs_ref))} to {ratio(max(vs_ref))} less CPU per turn "
                f"(target >= {REFERENCE_TARGET}x at every length): {met_or_not(min(vs_ref) >= REFERENCE_TARGET)}"
            )
        system = [r["system_vs_ref"] for r in mine if r["system_vs_ref"] is not None]
        if system:
            out.append(
                f"For context, {name}, counting the engine's front end too (vLLM renders and tokenizes the "
                f"reference's chat requests; ours arrive as token ids): {ratio(min(system))} to "
                f"{ratio(max(system))} less CPU per turn than the reference"
            )
    return out


def fidelity_section(rows: list[dict[str, Any]]) -> tuple[str, list[str]]:
    table = markdown_table(
        [
            "session",
            "dialect",
            "tokens",
            "proxy",
            "model turns",
            "sequences",
            "turns trained",
            "exact tokens",
            "history exact",
        ],
        [
            [
                r["session"],
                r["dialect"],
                r["variant"],
                r["proxy"],
                str(r["turns"]),
                str(r["sequences"]),
                f"{r['turns_trained']:.0%}",
                f"{r['exact_tokens']:.1%}",
                f"{r['history_exact']:.0%}",
            ]
            for r in rows
        ],
    )
    summary_rows, targets = [], []
    for variant in sorted({r["variant"] for r in rows}):
        for proxy in sorted({r["proxy"] for r in rows}):
            mine = [r for r in rows if r["variant"] == variant and r["proxy"] == proxy]
            seqs = statistics.mean(r["sequences"] for r in mine)
            trained = sum(r["turns_trained"] * r["turns"] for r in mine) / sum(r["turns"] for r in mine)
            ours = [r for r in rows if r["variant"] == variant and r["proxy"] == "ours"]
            volume = sum(r["row_tokens"] for r in mine) / max(sum(r["row_tokens"] for r in ours), 1)
            summary_rows.append(
                [
                    variant,
                    proxy,
                    f"{seqs:.2f}",
                    f"{trained:.0%}",
                    f"{min(r['exact_tokens'] for r in mine):.1%}",
                    f"{statistics.mean(r['history_exact'] for r in mine):.0%}",
                    ratio(volume),
                ]
            )
            if proxy == "ours":
                ok = seqs == 1 and trained == 1
                targets.append(
                    f"Fidelity ({variant} tokens): ours {seqs:.2f} sequences per session, {trained:.0%} of "
                    f"turns trained (ideal 1 and 100%): {met_or_not(ok)}"
                )
    summary = markdown_table(
        [
            "tokens",
            "proxy",
            "sequences / session",
            "turns trained",
            "exact tokens (min)",
            "history exact",
            "row tokens vs ours",
        ],
        summary_rows,
    )
    text = f"""## 3. Trajectory fidelity on recorded harness sessions

`bench/sessions/*.jsonl` are real sessions of five harness CLIs (one or more per wire format),
recorded through our proxy by `bench/record_sessions.py` with the oracle policy: every request body the
harness sent and the exact completion ids it got back. Both proxies receive the same bodies in order,
and the replay engine (`bench/engines.py replay`) answers each request with that turn's recorded
completion; it renders the reference's chat prompts the way vLLM does (vLLM's own `/tokenize` on the
same messages and tools). **canonical**: the completions as recorded, tokenized canonically (the
reference's best case: re-tokenizing the echoed history gives the sampled ids back). **non-canonical**:
the same text as a sampling model can emit it (each space-separated piece its own tokens; it decodes
to the same text), where re-tokenizing the history does not give back the sampled ids. Auxiliary
requests (opencode's title generator) are left out on both sides.

Judged from the engine's log: *sequences* = training rows exported (the reference: its `agent`
rows); *turns trained* = turns whose sampled ids appear with mask 1, after exactly the prompt the engine
saw; *exact tokens* = share of the exported rows' tokens that lie in a span equal to one request's
prompt + sampled ids; *history exact* = turns whose prompt begins with the previous turn's prompt +
sampled ids, token for token; *row tokens vs ours* = tokens a trainer must process for the same
sessions (a sequence that breaks repeats the whole history as a new prompt).

{summary}

Per session:

{table}
"""
    return text, targets
