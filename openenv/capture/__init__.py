"""The capture proxy: harness wire formats in, token-exact turns and training sequences out.

Glossary (one word per concept):
    dialect   a wire format a harness speaks (OpenAI Chat, OpenAI Responses, Anthropic, Gemini).
    backend   what generates tokens: a vLLM server, in-process transformers, or a policy's reply.
    session   one harness run's routing scope: its own base URL `/s/<token>` and its own turns.
    registry  the table of live sessions (`CaptureSessionRegistry`); it owns what they share: renderer,
              backend, parser and the `DialectState` (what the dialects remember between requests).
    gate      where a gated session's request waits until a controller decides who answers it
              (`PendingTurn`: sample, complete or fail).
    turn      one model request and its completion (prompt ids, completion ids, logprobs).
    aux turn  a turn answered but kept out of training (title generators, probes, count_tokens).
    sequence  consecutive turns joined token-exactly into one training row; a history rewrite
              starts a new one and counts as a break.
    gap       a turn whose backend call failed; the harness got a retryable error.
    logprob   of a sampled token: `log_softmax(logits / temperature)` of the distribution it was drawn
              from, as the trainer recomputes it; each turn and row says its `logprob_mode`
              (`processed`, `raw` or `unknown`) and whether it is `trainable` (`logprob_mode.py`).
"""
