"""A request whose client timed out keeps generating long enough for the SDK's retry to join it.

The official SDKs resend a timed-out request after a backoff; if the proxy cancelled the first
generation before the resend arrived, the retry would sample the turn again (a wasted generation and
a gap in the record). The delays are read from the SDKs themselves, so an SDK upgrade that waits
longer fails here rather than in production.
"""

from __future__ import annotations

import anthropic._constants
import openai._constants
from google.genai import _api_client as genai_client

from openenv.capture.routes import model as model_routes


def _longest_first_retry_delays() -> dict[str, float]:
    return {
        "openai": openai._constants.INITIAL_RETRY_DELAY,
        "anthropic": anthropic._constants.INITIAL_RETRY_DELAY,
        # tenacity's wait_exponential_jitter: initial + uniform(0, jitter) before the first retry
        "google-genai": genai_client._RETRY_INITIAL_DELAY + genai_client._RETRY_JITTER,
    }


def test_the_rejoin_grace_outlasts_every_official_sdks_first_retry_with_room_to_spare() -> None:
    for sdk, delay in _longest_first_retry_delays().items():
        assert model_routes.REJOIN_GRACE_S >= 1.5 * delay, (sdk, delay, model_routes.REJOIN_GRACE_S)
