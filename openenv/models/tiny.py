"""The deterministic tiny chat model that the tests and the embedded default (`HarnessEnvironment` with
no model given) run on, and its builder.

No model can be downloaded here, so the repo makes its own: a byte-level BPE tokenizer trained on
this Python's standard-library sources, the chat special tokens, a Qwen2.5-style chat template with
tool calls (`<tool_call>{json}</tool_call>`) and `<think>` reasoning, and a random-weight Qwen2 model
(hidden 64, 2 layers, head_dim 32, untied output head) with a long context so large harness prompts fit.

The build is deterministic: same inputs, same seed, same files. A finished build is reused, keyed by
a fingerprint of this module, so a second run costs nothing; concurrent builders of one folder take
turns on a lock file beside it, and the last step is one rename, so a reader never sees half a model.

Usage: python -m openenv.models.tiny [--out DIR] [--force]   (scripts/build_tiny_model.py: the repo's
.cache/tiny-model). Needs the `capture` extra (tokenizers, transformers, torch).
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import shutil
import sys
import sysconfig
import time
from pathlib import Path

from openenv.models.progress import quiet_progress
from openenv.resources import cache_dir

__all__ = [
    "build_model",
    "build_tiny_model",
    "build_tokenizer",
    "corpus_files",
    "default_path",
    "fingerprint",
    "main",
    "tiny_model_path",
]

MODEL_VAR = "OPENENV_TINY_MODEL"
VOCAB_SIZE = 4096
SEED = 1234
MAX_POSITIONS = 131072
STAMP = "openenv-build.json"

SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
]

# Qwen2.5-style: tools in the system turn, tool calls as <tool_call>{json}</tool_call>, tool results
# grouped into one user turn of <tool_response> blocks, reasoning as <think>...</think>.
CHAT_TEMPLATE = r"""{%- macro render_content(content) -%}
{%- if content is string -%}{{- content -}}
{%- elif content is iterable and content is not mapping -%}
{%- for part in content -%}{%- if part is mapping and part.text is defined -%}{{- part.text -}}{%- elif part is string -%}{{- part -}}{%- endif -%}{%- endfor -%}
{%- elif content is not none -%}{{- content -}}
{%- endif -%}
{%- endmacro -%}
{%- if tools %}
{{- '<|im_start|>system\n' }}
{%- if messages[0].role == 'system' %}{{- render_content(messages[0].content) + '\n\n' }}{%- else %}{{- 'You are a helpful assistant.\n\n' }}{%- endif %}
{{- "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
{%- for tool in tools %}{{- "\n" }}{{- tool | tojson }}{%- endfor %}
{{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- elif messages[0].role == 'system' %}
{{- '<|im_start|>system\n' + render_content(messages[0].content) + '<|im_end|>\n' }}
{%- endif %}
{%- for message in messages %}
{%- if message.role == 'system' %}
{%- if not loop.first %}{{- '<|im_start|>system\n' + render_content(message.content) + '<|im_end|>\n' }}{%- endif %}
{%- elif message.role == 'user' %}
{{- '<|im_start|>user\n' + render_content(message.content) + '<|im_end|>\n' }}
{%- elif message.role == 'assistant' %}
{{- '<|im_start|>assistant\n' }}
{%- if message.reasoning_content %}{{- '<think>\n' + message.reasoning_content + '\n</think>\n\n' }}{%- endif %}
{{- render_content(message.content) }}
{%- if message.tool_calls %}
{%- for tool_call in message.tool_calls %}
{%- if tool_call.function is defined %}{%- set tool_call = tool_call.function %}{%- endif %}
{%- if loop.first and message.content %}{{- '\n' }}{%- elif not loop.first %}{{- '\n' }}{%- endif %}
{{- '<tool_call>\n{"name": "' + tool_call.name + '", "arguments": ' }}
{%- if tool_call.arguments is string %}{{- tool_call.arguments }}{%- else %}{{- tool_call.arguments | tojson }}{%- endif %}
{{- '}\n</tool_call>' }}
{%- endfor %}
{%- endif %}
{{- '<|im_end|>\n' }}
{%- elif message.role == 'tool' %}
{%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}
{{- '\n<tool_response>\n' + render_content(message.content) + '\n</tool_response>' }}
{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\n' }}{%- endif %}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}
"""


# Builds stamped by scripts/build_tiny_model.py before the builder moved here: the same recipe, and
# byte-identical files (checked), so they are not rebuilt (a rebuild would remove a folder in use).
# 08b77cd07941efa6: the module before its build was kept quiet (`quiet_progress`); same files.
_SAME_RECIPE = frozenset({"b1f04c850e1a06d4", "08b77cd07941efa6"})


def fingerprint() -> str:
    """Identify a build by this module's bytes, so an edited recipe rebuilds."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]


def corpus_files() -> list[str]:
    """A fixed, sorted slice of the stdlib: deterministic text every Python install has."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    names = sorted(p for p in stdlib.glob("*.py") if p.is_file())
    return [str(p) for p in names[:400]]


def build_tokenizer(out: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train(corpus_files(), trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token=None,
        additional_special_tokens=[t for t in SPECIAL_TOKENS if t not in ("<|endoftext|>", "<|im_end|>")],
        model_max_length=MAX_POSITIONS,
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)


def build_model(out: Path) -> None:
    import torch
    from transformers import AutoTokenizer, GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    tok = AutoTokenizer.from_pretrained(out)
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    pad = tok.convert_tokens_to_ids("<|endoftext|>")
    config = Qwen2Config(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=32,
        max_position_embeddings=MAX_POSITIONS,
        rope_theta=1_000_000.0,
        tie_word_embeddings=False,
        bos_token_id=pad,
        eos_token_id=eos,
        pad_token_id=pad,
        torch_dtype="float32",
        use_sliding_window=False,
    )
    torch.manual_seed(SEED)
    model = Qwen2ForCausalLM(config)
    # Untied, modest output weights: sampled text varies (no token dominates) yet is not uniform.
    with torch.no_grad():
        model.lm_head.weight.normal_(0.0, 0.15)
    model.generation_config = GenerationConfig(bos_token_id=pad, eos_token_id=eos, pad_token_id=pad)
    model.save_pretrained(out, safe_serialization=True)


def default_path() -> Path:
    """`$OPENENV_TINY_MODEL`, else `tiny-model/` under openenv's cache folder (`~/.cache/openenv`)."""
    return Path(os.environ.get(MODEL_VAR) or cache_dir() / "tiny-model")


def _is_current(out: Path) -> bool:
    stamp = out / STAMP
    try:
        stamped = json.loads(stamp.read_text()).get("fingerprint")
    except (OSError, ValueError, AttributeError):
        return False
    return stamped == fingerprint() or stamped in _SAME_RECIPE


def build_tiny_model(out: Path, *, force: bool = False) -> Path:
    """Build into `out` unless a build with the same fingerprint is already there."""
    if not force and _is_current(out):
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent / f".{out.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building the same folder: wait for it
        if not force and _is_current(out):
            return out
        tmp = out.with_name(f"{out.name}.tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        build_tokenizer(tmp)
        with quiet_progress():  # transformers' `Writing model shards` bar, inside `openenv run`'s output
            build_model(tmp)
        (tmp / STAMP).write_text(json.dumps({"fingerprint": fingerprint(), "seed": SEED}, indent=2))
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)
    return out


def tiny_model_path(build: bool = True) -> Path:
    """The tiny model's folder (`default_path()`), built first if it is missing or out of date.

    Raises:
        FileNotFoundError: there is no model there and `build` is false.
    """
    path = default_path()
    if build:
        build_tiny_model(path)
    if not (path / "config.json").exists():
        raise FileNotFoundError(f"no tiny model at {path}; run: python -m openenv.models.tiny --out {path}")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output folder (default: $OPENENV_TINY_MODEL, else ~/.cache/openenv/tiny-model)",
    )
    parser.add_argument("--force", action="store_true", help="rebuild even if a matching build exists")
    args = parser.parse_args(argv)
    start = time.monotonic()
    path = build_tiny_model((args.out or default_path()).resolve(), force=args.force)
    print(f"tiny model ready at {path} ({time.monotonic() - start:.1f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
