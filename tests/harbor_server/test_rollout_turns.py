"""Our training rows cut into the reference's per-turn rows: each turn's prompt is everything before its
sampled span, its completion and logprobs the span, its mask 0 on the prompt; a turn shared by a fork is
emitted once; an eval rollout trains nothing."""

from __future__ import annotations

import pytest

from openenv.capture.canonical import Completion, SamplingParams
from openenv.capture.trajectory import SequenceRow, TurnRecord
from openenv.harbor_server.rollout import harbor_turns


def _record(turn_id: str, prompt_len: int, ids: list[int], *, sequence: int = 0) -> TurnRecord:
    done = Completion(
        id=turn_id,
        model="m",
        created=0,
        text=f"t{turn_id}",
        token_ids=tuple(ids),
        logprobs=tuple(-0.1 * (i + 1) for i in range(len(ids))),
    )
    return TurnRecord(
        id=turn_id,
        index=0,
        dialect="openai",
        aux=False,
        source="sample",
        gap=None,
        sequence=sequence,
        parent=None,
        kind="new",
        prompt_len=prompt_len,
        completion=done,
        max_tokens=32,
    )


# Row 0: prompt [1, 2, 3]; turn a samples [10, 11]; tool result [4, 5] comes back; turn b samples [12].
ROW = SequenceRow(
    prompt_ids=[1, 2, 3],
    completion_ids=[10, 11, 4, 5, 12],
    logprobs=[-0.1, -0.2, 0.0, 0.0, -0.1],
    env_mask=[1, 1, 0, 0, 1],
    turn_ids=["a", "b"],
)
# Row 1 forks from turn a: the same prefix, then its own turn c.
FORK = SequenceRow(
    prompt_ids=[1, 2, 3, 10, 11, 6],
    completion_ids=[13, 14],
    logprobs=[-0.1, -0.2],
    env_mask=[1, 1],
    turn_ids=["c"],
    origin="fork",
    parent=0,
)
RECORDS = [_record("a", 3, [10, 11]), _record("b", 7, [12]), _record("c", 6, [13, 14], sequence=1)]


def test_each_turn_is_its_span_of_the_row() -> None:
    turns = harbor_turns([ROW, FORK], RECORDS, trainable=True, sampling=SamplingParams(temperature=0.7))
    assert [t.node_id for t in turns] == ["a", "b", "c"]
    a, b, c = turns
    assert (a.prompt_token_ids, a.completion_token_ids, a.per_token_logps) == (
        [1, 2, 3],
        [10, 11],
        [-0.1, -0.2],
    )
    assert (b.prompt_token_ids, b.completion_token_ids, b.per_token_logps) == (
        [1, 2, 3, 10, 11, 4, 5],
        [12],
        [-0.1],
    )
    assert c.prompt_token_ids == [1, 2, 3, 10, 11, 6] and c.completion_token_ids == [13, 14]
    assert b.loss_mask == [0] * 7 + [1] and all(t.trainable for t in turns)
    assert a.sampling_params == {"temperature": 0.7, "max_tokens": 32}


def test_an_eval_rollout_carries_the_tokens_but_trains_none() -> None:
    turns = harbor_turns([ROW], RECORDS, trainable=False)
    assert [t.trainable for t in turns] == [False, False] and not any(sum(t.loss_mask or []) for t in turns)
    assert turns[1].completion_token_ids == [12]


def test_a_row_that_disagrees_with_its_records_is_an_error_not_a_silent_row() -> None:
    bad = SequenceRow(
        prompt_ids=[1, 2, 3], completion_ids=[10, 99], logprobs=[-0.1, -0.2], env_mask=[1, 1], turn_ids=["a"]
    )
    with pytest.raises(ValueError, match="turn a"):
        harbor_turns([bad], RECORDS, trainable=True)
