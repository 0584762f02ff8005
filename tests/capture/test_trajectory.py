"""Trajectory bookkeeping, pure: linking by message prefix, merging, forks, breaks, lineage, export, stats."""

from __future__ import annotations

import random

import msgspec

from openenv.capture.canonical import Completion, Message, TextPart, Tool, ToolCallPart
from openenv.capture.trajectory import Trajectory, Turn


def msg(role: str, text: str) -> Message:
    return Message(role=role, parts=(TextPart(text=text),))  # type: ignore[arg-type]


def answer(
    traj: Trajectory,
    messages: tuple[Message, ...],
    completion: list[int],
    *,
    tools: tuple[Tool, ...] = (),
    env: list[int] | None = None,
    calls: tuple[str, ...] = (),
) -> Turn:
    """Record a turn the way the session does: link, splice, record."""
    link = traj.find_parent(messages, tools)
    env_ids = env if env is not None else [90, 91]
    prompt = traj.prefix_ids(link) + env_ids if link else [1, 2, 3]
    turn = traj.add(
        Turn(
            id=f"t{len(traj.turns)}",
            index=0,
            dialect="openai_chat",
            n_messages=len(messages),
            prompt_len=len(prompt),
        )
    )
    turn.completion = Completion(
        id=turn.id,
        model="m",
        created=0,
        token_ids=tuple(completion),
        logprobs=tuple(-0.5 for _ in completion),
        tool_calls=tuple(ToolCallPart(id=f"c{i}", name=n) for i, n in enumerate(calls)),
    )
    traj.record(
        turn,
        link=link,
        prompt_ids=prompt,
        env_ids=env_ids if link else [],
        messages=messages,
        tools=tools,
        rewritten=link is None and len(traj.turns) > 1,
    )
    return turn


SYS, USER = msg("system", "s"), msg("user", "u")
A1, TOOL1, A2, TOOL2 = msg("assistant", "a1"), msg("tool", "r1"), msg("assistant", "a2"), msg("tool", "r2")


def test_linear_turns_merge_into_one_row_with_env_mask_on_inserted_tokens() -> None:
    traj = Trajectory()
    answer(traj, (SYS, USER), [10, 11])
    answer(traj, (SYS, USER, A1, TOOL1), [12], env=[90, 91])
    answer(traj, (SYS, USER, A1, TOOL1, A2, TOOL2), [13, 14], env=[92])
    (row,) = traj.rows()
    assert row.prompt_ids == [1, 2, 3]
    assert row.completion_ids == [10, 11, 90, 91, 12, 92, 13, 14]
    assert row.env_mask == [1, 1, 0, 0, 1, 0, 1, 1]
    assert row.logprobs == [-0.5, -0.5, 0.0, 0.0, -0.5, 0.0, -0.5, -0.5]
    assert row.turn_ids == ["t0", "t1", "t2"]
    stats = traj.stats()
    assert (stats.turns, stats.sequences, stats.merged, stats.breaks, stats.merge_ratio) == (3, 1, 2, 0, 1.0)


def test_prefix_ids_are_prompt_plus_exact_completion() -> None:
    traj = Trajectory()
    answer(traj, (SYS, USER), [10, 11])
    answer(traj, (SYS, USER, A1, TOOL1), [12])
    _, second = traj.sequences[0].turns
    link = traj.find_parent((SYS, USER, A1, TOOL1, A2, TOOL2), ())
    assert link is not None and link.turn is second
    assert traj.prefix_ids(link) == [1, 2, 3, 10, 11, 90, 91, 12]


def test_prefix_ids_of_an_older_turn_stop_at_its_completion_and_take_the_new_ids_after() -> None:
    traj = Trajectory()
    answer(traj, (SYS, USER), [10, 11])
    answer(traj, (SYS, USER, A1, TOOL1), [12])
    first, second = traj.sequences[0].turns
    head = traj.find_parent((SYS, USER, A1, TOOL1, A2, TOOL2), ())
    older = traj.find_parent((SYS, USER, A1, msg("tool", "other result")), ())
    assert head is not None and head.turn is second and older is not None and older.turn is first
    assert traj.prefix_ids(head, then=[7, 8]) == [1, 2, 3, 10, 11, 90, 91, 12, 7, 8]
    assert traj.prefix_ids(older, then=[7]) == [1, 2, 3, 10, 11, 7]
    spliced = traj.prefix_ids(head).tolist()
    spliced.append(99)  # the caller owns the list: the sequence is untouched
    assert traj.rows()[0].completion_ids == [10, 11, 90, 91, 12]


def test_an_equal_but_rebuilt_history_still_links() -> None:
    """Dialects hand back the same message objects for a resent history; a harness whose history
    is rebuilt (equal values, new objects) must link all the same."""
    traj = Trajectory()
    answer(traj, (SYS, USER), [10])
    rebuilt = tuple(Message(role=m.role, parts=m.parts) for m in (SYS, USER))
    link = traj.find_parent((*rebuilt, A1, TOOL1), ())
    assert link is not None and link.turn is traj.turns[0]


def test_a_changed_earlier_message_is_a_break() -> None:
    traj = Trajectory()
    answer(traj, (SYS, USER), [10])
    answer(traj, (SYS, msg("user", "compacted"), A1, TOOL1), [11])
    stats = traj.stats()
    assert (stats.sequences, stats.breaks, stats.merge_ratio) == (2, 1, 0.0)


def test_changed_tools_do_not_link() -> None:
    traj = Trajectory()
    answer(traj, (SYS, USER), [10])
    assert traj.find_parent((SYS, USER, A1, TOOL1), (Tool(name="new"),)) is None


def test_a_second_reply_to_an_older_turn_forks_a_new_sequence() -> None:
    traj = Trajectory()
    answer(traj, (SYS, USER), [10])
    answer(traj, (SYS, USER, A1, TOOL1), [11])
    fork = answer(traj, (SYS, USER, A1, msg("user", "other branch")), [12])
    assert fork.kind == "fork" and fork.parent == "t0"
    assert traj.rows()[1].prompt_ids == [1, 2, 3, 10, 90, 91]
    stats = traj.stats()
    assert (stats.sequences, stats.forks, stats.breaks, stats.merged) == (2, 1, 0, 1)


def test_requests_without_an_assistant_reply_after_the_prefix_do_not_link() -> None:
    traj = Trajectory()
    answer(traj, (SYS, USER), [10])
    assert traj.find_parent((SYS, USER, msg("user", "again")), ()) is None


def test_empty_trajectory_has_merge_ratio_one() -> None:
    assert Trajectory().stats().merge_ratio == 1.0


def test_a_prompt_extending_the_newest_turn_brings_the_json_text_of_its_ids() -> None:
    """What a remote engine is sent is the sequence's growing JSON text; it must be the ids, exactly."""
    rng = random.Random(7)
    traj = Trajectory()
    sent = {answer(traj, (SYS, USER), [10, 11]).id: (SYS, USER)}  # turn id -> its request's messages
    forks = heads = 0
    for step in range(120):
        fork = step % 7 == 6  # a second reply to an older turn: no JSON, and a new sequence
        turns = [t for s in traj.sequences for t in s.turns]
        base = rng.choice(turns[:-1]) if fork else traj.sequences[-1].head
        messages = sent[base.id] + (msg("assistant", f"a{step}"), msg("tool", f"r{step}"))
        link = traj.find_parent(messages, ())
        assert link is not None and link.turn is base
        then = [rng.randrange(5000) for _ in range(rng.randrange(0, 4))]
        ids = traj.prefix_ids(link, then=then)
        if traj.is_head(link):
            heads += 1
            assert ids.json() == msgspec.json.encode(list(ids))
        else:
            forks += 1
            assert ids.json() is None
        completion = [rng.randrange(5000) for _ in range(rng.randrange(1, 5))]
        sent[answer(traj, messages, completion, env=then).id] = messages
    assert heads > 60 and forks > 5


def test_a_prompt_is_read_only_and_its_copies_are_the_callers() -> None:
    traj = Trajectory()
    answer(traj, (SYS, USER), [10, 11])
    link = traj.find_parent((SYS, USER, A1, TOOL1), ())
    assert link is not None
    ids = traj.prefix_ids(link, then=[4])
    assert not hasattr(ids, "append") and not hasattr(ids, "__setitem__")
    copy = ids.tolist()
    copy[0] = 9
    assert ids == [1, 2, 3, 10, 11, 4] == ids.tolist() and ids.json() == b"[1,2,3,10,11,4]"
    assert ids + [7] == [1, 2, 3, 10, 11, 4, 7] and [0] + ids == [0, 1, 2, 3, 10, 11, 4]
    assert (len(ids), ids[-1], ids[1:3], list(ids)) == (6, 4, [2, 3], [1, 2, 3, 10, 11, 4])


def test_a_prompt_taken_before_its_sequence_grows_keeps_its_ids_and_json() -> None:
    """Two requests of one session can extend the same turn at once (parallel subagents); the second
    to finish must still send and see the ids it was planned with, not the first one's additions."""
    traj = Trajectory()
    answer(traj, (SYS, USER), [10, 11])
    messages = (SYS, USER, A1, TOOL1)
    link = traj.find_parent(messages, ())
    assert link is not None
    early = traj.prefix_ids(link, then=[4])
    answer(traj, messages, [12, 13], env=[4])  # the sequence grows under the early view
    assert traj.rows()[0].completion_ids == [10, 11, 4, 12, 13]
    assert early.tolist() == [1, 2, 3, 10, 11, 4] and early.json() == b"[1,2,3,10,11,4]"
    assert len(early) == 6


# ---- lineage: why each sequence began, and where it came from ----------------------------------------

MAIN_TOOLS = (Tool(name="Bash"), Tool(name="Task"))
SUB_SYS, SUB_TOOLS = msg("system", "you are a sub-agent"), (Tool(name="Bash"),)
SUMMARIZER = msg("system", "summarize the conversation")


def lineage(traj: Trajectory) -> list[tuple[str, int | None]]:
    return [(row.origin, row.parent) for row in traj.rows()]


def test_a_linear_episode_is_one_new_sequence_without_parent() -> None:
    traj = Trajectory()
    answer(traj, (SYS, USER), [10], tools=MAIN_TOOLS, calls=("Bash",))
    answer(traj, (SYS, USER, A1, TOOL1), [11], tools=MAIN_TOOLS)
    assert lineage(traj) == [("new", None)]


def test_a_rewritten_history_with_the_same_tools_and_system_is_a_compaction_of_it() -> None:
    traj = Trajectory()
    answer(traj, (SYS, USER), [10], tools=MAIN_TOOLS, calls=("Bash",))
    answer(traj, (SYS, USER, A1, TOOL1), [11], tools=MAIN_TOOLS, calls=("Bash",))
    answer(traj, (SYS, msg("user", "summary: fixed the bug, tests left")), [12], tools=MAIN_TOOLS)
    assert lineage(traj) == [("new", None), ("compaction", 0)]


def test_a_task_call_starts_sub_agents_whose_parent_is_the_caller() -> None:
    traj = Trajectory()
    answer(traj, (SYS, USER), [10], tools=MAIN_TOOLS, calls=("Task",))
    answer(traj, (SUB_SYS, msg("user", "find the bug")), [20], tools=SUB_TOOLS, calls=("Bash",))
    answer(traj, (SUB_SYS, msg("user", "find the bug"), A1, TOOL1), [21], tools=SUB_TOOLS)  # merges
    answer(traj, (SYS, USER, A1, TOOL1), [11], tools=MAIN_TOOLS, calls=("Task",))  # main goes on
    answer(traj, (SUB_SYS, msg("user", "run the tests")), [30], tools=SUB_TOOLS)  # a second sub-agent
    assert lineage(traj) == [("new", None), ("sub-agent", 0), ("sub-agent", 0)]
    assert [len(row.turn_ids) for row in traj.rows()] == [2, 2, 1]


def test_a_summarizer_conversation_then_the_compacted_main_history() -> None:
    """OpenCode and Codex compact with a summary request of their own (another system prompt or the
    history plus an instruction, and no tools), then resume the main conversation from the summary:
    the summary request and the resumed history are both compactions of the main sequence."""
    traj = Trajectory()
    answer(traj, (SYS, USER), [10], tools=MAIN_TOOLS, calls=("Bash",))
    answer(traj, (SUMMARIZER, msg("user", "the whole history")), [40])
    assert lineage(traj) == [("new", None), ("sub-agent", 0)]  # not yet known to be a summary
    answer(traj, (SYS, msg("user", "summary")), [12], tools=MAIN_TOOLS)
    assert lineage(traj) == [("new", None), ("compaction", 0), ("compaction", 0)]


def test_a_summary_request_that_forks_the_history_then_the_compacted_history() -> None:
    """Claude Code asks for the summary by re-sending its history up to an earlier turn plus "summarize"
    (a fork of the main sequence, same tools), then resumes from the summary: both are compactions of
    the main sequence, not of the summary fork."""
    traj = Trajectory()
    answer(traj, (SYS, USER), [10], tools=MAIN_TOOLS, calls=("Bash",))
    answer(traj, (SYS, USER, A1, TOOL1), [11], tools=MAIN_TOOLS, calls=("Bash",))
    answer(traj, (SYS, USER, A1, msg("user", "summarize, text only")), [40], tools=MAIN_TOOLS)
    assert lineage(traj) == [("new", None), ("fork", 0)]
    answer(traj, (SYS, msg("user", "summary"), A2, TOOL2), [12], tools=MAIN_TOOLS)
    assert lineage(traj) == [("new", None), ("compaction", 0), ("compaction", 0)]


def test_a_sub_agent_that_answered_at_once_stays_a_sub_agent_after_a_compaction() -> None:
    """A one-turn text-only sub-agent (it has tools) is not a summary request, though it came just
    before the main conversation was compacted."""
    traj = Trajectory()
    answer(traj, (SYS, USER), [10], tools=MAIN_TOOLS, calls=("Task",))
    answer(traj, (SUB_SYS, msg("user", "look")), [20], tools=SUB_TOOLS)
    answer(traj, (SYS, USER, A1, TOOL1), [11], tools=MAIN_TOOLS, calls=("Bash",))
    answer(traj, (SUMMARIZER, msg("user", "the whole history")), [40])
    answer(traj, (SYS, msg("user", "summary")), [12], tools=MAIN_TOOLS)
    assert lineage(traj) == [("new", None), ("sub-agent", 0), ("compaction", 0), ("compaction", 0)]


def test_a_request_asked_again_is_a_retry_of_its_sequence() -> None:
    traj = Trajectory()
    answer(traj, (SYS, USER), [10], tools=MAIN_TOOLS, calls=("Bash",))
    answer(traj, (SYS, USER, A1, TOOL1), [11], tools=MAIN_TOOLS)
    answer(traj, (SYS, USER), [12], tools=MAIN_TOOLS)
    assert lineage(traj) == [("new", None), ("retry", 0)]


def test_a_fork_names_the_sequence_it_branched_from() -> None:
    traj = Trajectory()
    answer(traj, (SYS, USER), [10])
    answer(traj, (SYS, USER, A1, TOOL1), [11])
    answer(traj, (SYS, USER, A1, msg("user", "other branch")), [12])
    assert lineage(traj) == [("new", None), ("fork", 0)]


def test_a_sequences_token_columns_are_invisible_to_the_garbage_collector() -> None:
    """A session's bulk is its ids and logprobs (30k of each in a long episode). Held in lists, every
    item was walked by each full collection: with 1,000 sessions open, 0.1-0.4 s pauses of the proxy.
    Typed arrays hold the same values with nothing for the collector to walk; the rows are lists."""
    import gc

    traj = Trajectory()
    answer(traj, (SYS, USER), list(range(1000, 3000)))
    answer(traj, (SYS, USER, A1, TOOL1), [12], env=list(range(500)))
    seq = traj.sequences[0]
    columns = (seq.prompt_ids, seq.completion_ids, seq.logprobs, seq.env_mask)
    walked = [r for column in columns for r in gc.get_referents(column)]
    assert not [r for r in walked if isinstance(r, (int, float))]
    (row,) = traj.rows()
    assert row.completion_ids == [*range(1000, 3000), *range(500), 12]
    assert row.env_mask == [1] * 2000 + [0] * 500 + [1]
    assert row.logprobs == [-0.5] * 2000 + [0.0] * 500 + [-0.5]
    assert all(type(v) is list for v in (row.prompt_ids, row.completion_ids, row.logprobs, row.env_mask))
