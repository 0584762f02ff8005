"""The small learnable model of `research/learning/learning.md`: random weights, the tiny model's tokenizer and chat
template, sized for training on a laptop CPU.

Why this size: a harness's system prompt dominates every training sequence (pi's, the shortest of the
installed harnesses, is ~1,940 tokens with this tokenizer; an episode of the `fileops` tasks adds ~50
sampled tokens), so the cost of a step is the forward/backward over ~2,000 positions. Measured on 2 CPU
threads, a batch of 4 such sequences takes ~1.6 s at hidden 64 / 2 layers, ~4.7 s at hidden 128 / 2 layers
and ~10 s at hidden 128 / 4 layers. Two layers is what copying a word from the instruction needs (one
layer to mark the token after a cue word, one to attend to it), so the learner is the cheapest of those.
It differs from the tiny test model in being trained, not in shape: the tiny model stays the fixed random
model of the tests.

Its chat template is the tiny model's with one change, the tools block (`COMPACT_TEMPLATE`): each tool is
one line, its name and parameter names (`bash(command, timeout)`), instead of the full JSON schema with
descriptions. Why: a model trained from scratch learns nothing from a schema's prose, and the prose is
where the positions go (pi's lean prompt is ~370 tokens with the schema, ~110 with the compact block).
Measured offline on the `fileops` rows (hidden 64, 2 layers, 400 rows, batch 8, lr 1e-2): with a 24-token
prompt the model learns to copy the file name and word of a held-out instruction within 500 steps; with
the 370-token prompt it had not started after 1,600 (every slot token still a guess among the
vocabulary): at random init attention spreads over every position, so the few that hold the slots get a
vanishing share of the gradient. Tool calls are still written and parsed in the usual `<tool_call>` form.
"""

from __future__ import annotations

import shutil
from pathlib import Path

__all__ = ["COMPACT_TEMPLATE", "LearnerShape", "build_learner"]

TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
)

_FULL_TOOLS = (
    '{{- "# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are '
    'provided with function signatures within <tools></tools> XML tags:\\n<tools>" }}\n'
    '{%- for tool in tools %}{{- "\\n" }}{{- tool | tojson }}{%- endfor %}\n'
    '{{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments '
    'within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, '
    '\\"arguments\\": <args-json-object>}\\n</tool_call><|im_end|>\\n" }}'
)
_COMPACT_TOOLS = (
    '{{- "Tools:" }}\n'
    "{%- for tool in tools %}{%- set f = tool.function if tool.function is defined else tool %}"
    '{{- " " + f.name + "(" + ((f.parameters or {}).properties or {}) | list | join(", ") + ")" }}'
    "{%- endfor %}\n"
    '{{- "\\nCall one as <tool_call>\\n{\\"name\\": ..., \\"arguments\\": {...}}\\n</tool_call>'
    '<|im_end|>\\n" }}'
)


def _compact_template() -> str:
    from openenv.models.tiny import CHAT_TEMPLATE

    if _FULL_TOOLS not in CHAT_TEMPLATE:
        raise RuntimeError("the tiny model's tools block changed; update openenv.models.learner._FULL_TOOLS")
    return CHAT_TEMPLATE.replace(_FULL_TOOLS, _COMPACT_TOOLS)


COMPACT_TEMPLATE = _compact_template()


class LearnerShape:
    """The learner's width and depth (defaults: the measured trade-off above)."""

    def __init__(self, hidden: int = 64, layers: int = 2, heads: int = 4, intermediate: int = 256) -> None:
        self.hidden, self.layers, self.heads, self.intermediate = hidden, layers, heads, intermediate


def build_learner(
    out: Path,
    *,
    seed: int = 0,
    shape: LearnerShape | None = None,
    tokenizer: Path | None = None,
    compact: bool = True,
) -> Path:
    """Write a random-weight Qwen2 model with the project's tokenizer into `out` (replaced).

    Args:
        seed: the weights' seed (each seed of a learning run starts from its own random model).
        tokenizer: a folder with the tokenizer and chat template (default: the tiny model's).
        compact: use `COMPACT_TEMPLATE` (one line per tool) instead of the tokenizer folder's template.
    """
    import torch
    from transformers import AutoTokenizer, GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    from openenv.models.tiny import MAX_POSITIONS, tiny_model_path

    shape = shape or LearnerShape()
    source = tokenizer or tiny_model_path()
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    for name in TOKENIZER_FILES:
        if (source / name).exists():
            shutil.copy2(source / name, out / name)
    if compact:
        (out / "chat_template.jinja").write_text(COMPACT_TEMPLATE)
    tok = AutoTokenizer.from_pretrained(out)
    eos, pad = tok.convert_tokens_to_ids("<|im_end|>"), tok.convert_tokens_to_ids("<|endoftext|>")
    config = Qwen2Config(
        vocab_size=len(tok),
        hidden_size=shape.hidden,
        intermediate_size=shape.intermediate,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.heads,
        head_dim=shape.hidden // shape.heads,
        max_position_embeddings=MAX_POSITIONS,
        rope_theta=1_000_000.0,
        tie_word_embeddings=True,
        bos_token_id=pad,
        eos_token_id=eos,
        pad_token_id=pad,
        torch_dtype="float32",
        use_sliding_window=False,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(bos_token_id=pad, eos_token_id=eos, pad_token_id=pad)
    model.save_pretrained(out, safe_serialization=True)
    return out
