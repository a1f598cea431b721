"""One raw chat completion with transport retries and no re-ask: the evaluator's call.

The evaluation protocol forbids asking again when the *model* answers badly, so this returns
whatever text came back. Only failures where no answer came back (connection, timeout, 429,
5xx) are retried; if they persist, the outcome says so and carries the error.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Literal

from openai import AsyncOpenAI

from arcticqa.config import ModelConfig
from arcticqa.llm.providers.openai import transport_retrying
from arcticqa.llm.providers.openai_errors import describe_error, is_safeguard_refusal

__all__ = ["ChatOutcome", "complete_chat"]

FailureKind = Literal["infrastructure", "refusal"]


@dataclass
class ChatOutcome:
    text: str | None
    finish_reason: str | None
    usage: dict[str, int] = field(default_factory=dict)
    latency_s: float = 0.0
    attempts: int = 0
    failure: FailureKind | None = None
    error: str | None = None
    raw: dict[str, Any] | None = None

    def cost_usd(self, cfg: ModelConfig) -> float:
        return (self.usage.get("prompt_tokens", 0) * cfg.price_in_per_mtok
                + self.usage.get("completion_tokens", 0) * cfg.price_out_per_mtok) / 1e6


async def complete_chat(client: AsyncOpenAI, cfg: ModelConfig, messages: list[dict[str, str]], *,
                        role: str | None = None, seed: int | None = None) -> ChatOutcome:
    """Ask once (retrying only transport failures) and return the raw outcome."""
    started = time.perf_counter()
    attempts = 0
    headers = {"X-Arcticqa-Role": role} if role else None
    kwargs: dict[str, Any] = {"model": cfg.model, "messages": messages,
                              "max_tokens": cfg.max_tokens, "temperature": cfg.temperature}
    if seed is not None:
        kwargs["seed"] = seed
    if cfg.extra_body:
        kwargs["extra_body"] = cfg.extra_body
    try:
        async for attempt in transport_retrying(cfg):
            with attempt:
                attempts += 1
                completion = await client.chat.completions.create(extra_headers=headers, **kwargs)
    except Exception as exc:  # noqa: BLE001 - every failure becomes a recorded outcome
        # A provider safeguard answers with a 400/403 that names its policy; anything else
        # (including exhausted transport retries) means no answer came back at all.
        kind: FailureKind = "refusal" if is_safeguard_refusal(exc) else "infrastructure"
        return ChatOutcome(text=None, finish_reason=None, latency_s=time.perf_counter() - started,
                           attempts=attempts, failure=kind, error=describe_error(exc))
    choice = completion.choices[0] if completion.choices else None
    usage = completion.usage.model_dump(include={"prompt_tokens", "completion_tokens", "total_tokens"}) \
        if completion.usage else {}
    message = choice.message if choice else None
    refusal = getattr(message, "refusal", None) if message else None
    finish = choice.finish_reason if choice else None
    failure: FailureKind | None = None
    if refusal or finish == "content_filter":
        failure = "refusal"
    elif message is None:
        failure = "infrastructure"
    return ChatOutcome(
        text=message.content if message else None,
        finish_reason=finish,
        usage={k: int(v) for k, v in usage.items() if v is not None},
        latency_s=time.perf_counter() - started,
        attempts=attempts,
        failure=failure,
        error=refusal,
        raw=completion.model_dump(mode="json"),
    )
