"""The learner model of research/learning/learning.md: a random-init model whose chat template lists each tool on one
line, so a harness's tool schemas do not bury the instruction (see `openenv.models.learner`)."""

from __future__ import annotations

from pathlib import Path

from transformers import AutoTokenizer

from openenv.models.learner import COMPACT_TEMPLATE, build_learner

BASH = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Execute a bash command in the current working directory. " * 4,
        "parameters": {
            "type": "object",
            "required": ["command"],
            "properties": {
                "command": {"type": "string", "description": "Bash command to execute"},
                "timeout": {"type": "number", "description": "Timeout in seconds"},
            },
        },
    },
}
READ = {
    "type": "function",
    "function": {
        "name": "read",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
    },
}
CONVERSATION = [
    {"role": "system", "content": "Use the bash tool to do the task, then say done."},
    {"role": "user", "content": "Create a file named data.md containing the word green."},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "type": "function",
                "function": {"name": "bash", "arguments": {"command": "echo green > data.md"}},
            }
        ],
    },
    {"role": "tool", "content": "(no output)"},
]


def _render(folder: Path) -> tuple[str, int]:
    tok = AutoTokenizer.from_pretrained(folder)
    text = tok.apply_chat_template(
        CONVERSATION, tools=[BASH, READ], tokenize=False, add_generation_prompt=True
    )
    return text, len(tok(text, add_special_tokens=False)["input_ids"])


def test_the_compact_template_lists_tools_by_name_and_parameters_only(
    tmp_path: Path, tiny_model: Path
) -> None:
    learner = build_learner(tmp_path / "learner")
    text, length = _render(learner)
    assert "Tools: bash(command, timeout) read(path)\n" in text
    assert "Execute a bash command" not in text and "description" not in text
    # Everything after the tools block is rendered as the tiny model's template renders it.
    full_text, full_length = _render(tiny_model)
    tail = text[text.index("<|im_start|>user") :]
    assert full_text.endswith(tail)
    assert (
        '<tool_call>\n{"name": "bash", "arguments": {"command": "echo green > data.md"}}\n</tool_call>'
        in tail
    )
    assert length < full_length / 2


def test_build_learner_can_keep_the_tokenizer_folders_template(tmp_path: Path, tiny_model: Path) -> None:
    learner = build_learner(tmp_path / "learner", compact=False)
    assert (learner / "chat_template.jinja").read_text() != COMPACT_TEMPLATE
    assert _render(learner) == _render(tiny_model)
