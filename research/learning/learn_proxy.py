"""A harness-free proxy of the recipe's GRPO, for choosing settings in seconds instead of pi-hours.

    .venv/bin/python research/learning/learn_proxy.py --start .cache/learn/sft-round1 --rows .cache/learn/oracle/dataset/tokens
    .venv/bin/python research/learning/learn_proxy.py --start .cache/learn/transfer-mini-swe-agent/sft \\
        --rows .cache/learn/oracle-mini-swe-agent/dataset/tokens
    .venv/bin/python research/learning/learn_proxy.py --start .cache/learn/teacher/sft/sft-round1 \\
        --rows .cache/learn/oracle/dataset/tokens --steps 24 --every 12

(`--rows` gives the harness's prompt and the reference reply; take the oracle's, not the imperfect teacher's.)

It is not the recipe: no harness runs and only the first turn (the tool call that does the work) is sampled,
with `generate`, and scored by exact match of its command. What it keeps is what decides whether GRPO helps:
the model, the harness's prompt (taken from one recorded oracle row of `--rows`, with each task's instruction
put in its place), the training and held-out tasks of `LearnConfig`, and the loss (group-normalized
advantages times the sampled tokens' log-probabilities, Adam, warmup, clipping). A step of 16 episodes takes
~1 s instead of ~17 s through pi (~40 s through mini-swe-agent).

It prints, every `--every` steps, the held-out sampled solve rate (overall and by task kind), the mean
probability of the reference reply on the held-out tasks (no sampling noise: the number to compare settings
by), and the sampled solve rate on the training tasks. research/learning/learning.md reports what it measured.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import statistics
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "2")

import torch
from datasets import load_from_disk
from learn import LearnConfig, grpo_ids, heldout_ids
from transformers import AutoModelForCausalLM, AutoTokenizer

from openenv.harness.tasks.fileops import kind_of

COMMAND = re.compile(r'"command": "([^"]*)"')
Row = tuple[list[int], list[int], str]  # prompt ids, reference first-turn ids, expected command


def command(tok: AutoTokenizer, ids: list[int]) -> str | None:
    found = COMMAND.search(tok.decode(ids))
    return found.group(1) if found else None


def prompts(tok: AutoTokenizer, rows: Path, tasks: Path, split: str, ids: list[str]) -> list[Row]:
    """Each task's first turn under the harness prompt of the first recorded row of `rows`."""
    row = load_from_disk(str(rows))[0]
    mask = row["env_mask"]
    end = mask.index(0) if 0 in mask else len(mask)  # the first turn: up to the first tool result, if any
    prompt, first = tok.decode(row["prompt_ids"]), tok.decode(row["completion_ids"][:end])
    if tok.encode(prompt, add_special_tokens=False) != row["prompt_ids"]:
        raise SystemExit(
            f"{rows}: the recorded prompt does not re-encode to its own ids; the proxy needs it to"
        )
    own = row["task"].split("/")[-1]
    instruction = (tasks / "train" / own / "instruction.md").read_text().strip()
    solution = (tasks / "train" / own / "solution" / "solve.sh").read_text().strip().splitlines()[-1]
    out = []
    for task in ids:
        folder = tasks / split / task
        wanted = (folder / "solution" / "solve.sh").read_text().strip().splitlines()[-1]
        text = prompt.replace(instruction, (folder / "instruction.md").read_text().strip())
        out.append(
            (
                tok.encode(text, add_special_tokens=False),
                tok.encode(first.replace(solution, wanted), add_special_tokens=False),
                wanted + "\\n",
            )
        )
    return out


class Proxy:
    def __init__(self, model: Path, seed: int) -> None:
        random.seed(seed)
        torch.manual_seed(seed)
        self.tok = AutoTokenizer.from_pretrained(model)
        self.model = AutoModelForCausalLM.from_pretrained(model)
        self.end = self.tok.encode("</tool_call>", add_special_tokens=False)

    def sample(self, prompts: list[list[int]], n: int) -> tuple[list[list[int]], list[list[int]]]:
        """`n` first turns per prompt at temperature 1, each cut after its `</tool_call>`."""
        self.model.eval()
        batch = [p for p in prompts for _ in range(n)]
        width = max(len(p) for p in batch)
        pad = self.tok.pad_token_id or 0
        ids = torch.tensor([[pad] * (width - len(p)) + p for p in batch])
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in batch])
        with torch.no_grad():
            out = self.model.generate(
                input_ids=ids,
                attention_mask=mask,
                do_sample=True,
                temperature=1.0,
                top_k=0,
                top_p=1.0,
                max_new_tokens=40,
                pad_token_id=pad,
                eos_token_id=None,
            )
        replies = []  # each cut after its `</tool_call>` or its end-of-turn token (no padding is trained on)
        for reply in out[:, width:].tolist():
            cut = next(
                (i + len(self.end) for i in range(len(reply)) if reply[i : i + len(self.end)] == self.end),
                len(reply),
            )
            stop = next((i + 1 for i, t in enumerate(reply) if t == self.tok.eos_token_id), len(reply))
            replies.append(reply[: min(cut, stop)])
        return batch, replies

    def logprob(self, prompt: list[int], reply: list[int]) -> torch.Tensor:
        ids = torch.tensor([prompt + reply])
        logp = torch.log_softmax(self.model(ids).logits[0, len(prompt) - 1 : -1].float(), -1)
        return logp[torch.arange(len(reply)), torch.tensor(reply)].sum()

    def solved(self, rows: list[Row], n: int) -> list[float]:
        """Each row's sampled solve rate over `n` samples."""
        _, replies = self.sample([r[0] for r in rows], n)
        hits = [float(command(self.tok, c) == rows[i // n][2]) for i, c in enumerate(replies)]
        return [sum(hits[i * n : (i + 1) * n]) / n for i in range(len(rows))]

    def solve_rate(self, rows: list[Row], n: int) -> float:
        return sum(self.solved(rows, n)) / len(rows)

    def reference(self, rows: list[Row]) -> float:
        self.model.eval()
        with torch.no_grad():
            return sum(math.exp(float(self.logprob(p, c))) for p, c, _ in rows) / len(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--start", type=Path, required=True, help="the model GRPO starts from")
    parser.add_argument(
        "--rows", type=Path, required=True, help="an oracle token export of the harness to mimic"
    )
    parser.add_argument(
        "--out", type=Path, default=Path(".cache/learn"), help="the recipe's run folder (tasks)"
    )
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument("--warmup", type=int, default=4)
    parser.add_argument("--groups", type=int, default=4, help="tasks per step")
    parser.add_argument("--gens", type=int, default=4, help="episodes per task")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--every", type=int, default=5, help="measure every N steps")
    parser.add_argument("--samples", type=int, default=8, help="samples per held-out task when measuring")
    parser.add_argument(
        "--train-tasks", type=int, default=None, help="GRPO on only the first N training tasks"
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    cfg = LearnConfig(out=args.out)
    proxy = Proxy(args.start, args.seed)
    train = prompts(proxy.tok, args.rows, cfg.tasks_dir, "train", grpo_ids(cfg)[: args.train_tasks])
    held = prompts(proxy.tok, args.rows, cfg.tasks_dir, "heldout", heldout_ids(cfg))
    params = [p for p in proxy.model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=args.lr, betas=(0.9, 0.99), weight_decay=0.0)

    kinds = [kind_of(task) for task in heldout_ids(cfg)]

    def measure(step: int, episodes: int, began: float) -> None:
        rates = proxy.solved(held, args.samples)
        by_kind = {
            kind: round(statistics.mean(r for r, k in zip(rates, kinds, strict=True) if k == kind), 3)
            for kind in sorted(set(kinds))
        }
        print(
            json.dumps(
                {
                    "step": step,
                    "episodes": episodes,
                    "heldout_sampled": round(statistics.mean(rates), 3),
                    "heldout_by_kind": by_kind,
                    "heldout_reference": round(proxy.reference(held), 3),
                    "train_sampled": round(proxy.solve_rate(train, 4), 3),
                    "wall_s": round(time.monotonic() - began, 1),
                }
            ),
            flush=True,
        )

    began = time.monotonic()
    measure(0, 0, began)
    for step in range(1, args.steps + 1):
        group = random.sample(train, min(args.groups, len(train)))
        batch, replies = proxy.sample([g[0] for g in group], args.gens)
        rewards = torch.tensor(
            [float(command(proxy.tok, c) == group[i // args.gens][2]) for i, c in enumerate(replies)]
        )
        grid = rewards.view(len(group), args.gens)
        advantages = ((grid - grid.mean(1, keepdim=True)) / (grid.std(1, keepdim=True) + 1e-4)).view(-1)
        proxy.model.train()
        optimizer.zero_grad()
        tokens = sum(len(c) for c in replies)
        for prompt, reply, advantage in zip(batch, replies, advantages, strict=True):
            if advantage != 0:
                (-advantage * proxy.logprob(prompt, reply) / tokens).backward()
        for settings in optimizer.param_groups:
            settings["lr"] = args.lr * (min(1.0, step / args.warmup) if args.warmup else 1.0)
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        if step % args.every == 0 or step == args.steps:
            measure(step, step * len(replies), began)


if __name__ == "__main__":
    main()
