"""The one wrapper around litellm (L1-L4). Everything that calls a model goes here.

The model string chooses the provider (`openai/…`, `anthropic/…`, `deepseek/…`,
`ollama/…`, any OpenAI-compatible `api_base`). Messages stay in the internal
OpenAI format; litellm translates them for other providers. Tests point
`api_base` at a scripted server; they never patch this module or litellm.
"""

from __future__ import annotations

import json
import logging
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.conf import settings

from traces.llm_request import normalize_tool_call_ids as normalize_tool_call_ids
from traces.llm_request import request_messages
from traces.llm_stream import StreamedReply, forget_prices, price

if TYPE_CHECKING:
    from tenacity import RetryCallState

logger = logging.getLogger(__name__)


class ModelNotConfigured(RuntimeError):
    """No model was named: neither AGENT_MODEL nor a per-run model."""


class LLMError(RuntimeError):
    """The provider failed after retries (bad key, unreachable, malformed reply)."""


@dataclass(frozen=True)
class ModelSettings:
    model: str
    api_base: str | None = None
    api_key: str | None = None


def agent_model(model: str | None = None) -> ModelSettings:
    """The main model: `model` if given, else AGENT_MODEL; fails fast when neither."""
    name = (model or settings.AGENT_MODEL or "").strip()
    if not name:
        raise ModelNotConfigured(
            "No model configured: set AGENT_MODEL (e.g. openai/gpt-4o-mini or "
            "deepseek/deepseek-chat) or pass a model for this run."
        )
    return ModelSettings(name, settings.AGENT_API_BASE or None, settings.AGENT_API_KEY or None)


def utility_model() -> ModelSettings:
    """The cheap model for names, tags and summaries (L4); AGENT_MODEL by default."""
    name = settings.AGENT_UTILITY_MODEL or settings.AGENT_MODEL
    if not name:
        raise ModelNotConfigured("No utility model configured: set AGENT_UTILITY_MODEL or AGENT_MODEL.")
    return ModelSettings(
        name, settings.AGENT_UTILITY_API_BASE or None, settings.AGENT_UTILITY_API_KEY or None
    )


@dataclass
class LLMResponse:
    content: str | None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None
    duration_ms: int = 0
    model: str | None = None
    streamed: bool = False
    # A reasoning model's thinking (litellm's `reasoning_content`: DeepSeek's field,
    # Anthropic's thinking blocks): stored on the message, never sent back.
    reasoning: str | None = None
    reasoning_tokens: int | None = None

    def message_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            data["tool_calls"] = self.tool_calls
        return data


def register_model_prices() -> None:
    """Register AGENT_MODEL_PRICES with litellm so unknown models get a cost."""
    raw = getattr(settings, "AGENT_MODEL_PRICES", "")
    if not raw:
        return
    import litellm

    try:
        prices = json.loads(raw)
    except json.JSONDecodeError as exc:
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured(f"AGENT_MODEL_PRICES is not JSON: {exc}") from exc
    litellm.register_model(prices)
    forget_prices()


# --- the call -----------------------------------------------------------------


def _known(value: Any) -> float | None:
    """A cost as stored: None when unknown, zero or not a finite number."""
    try:
        cost = float(value) if value else None
    except (TypeError, ValueError):
        return None
    return cost if cost is not None and math.isfinite(cost) else None


def _cost(response: Any) -> float | None:
    hidden = getattr(response, "_hidden_params", None) or {}
    if "response_cost" in hidden:  # litellm priced the call already (None: no price known)
        value = hidden["response_cost"]
        return _known(value)
    import litellm

    litellm.suppress_debug_info = True  # no "Provider List" banner for unpriced models
    try:
        value = litellm.completion_cost(completion_response=response)
    except Exception:
        return None  # no price known for this model (local endpoints): unknown, not zero
    return _known(value)


def _tool_calls(message: Any) -> list[dict[str, Any]]:
    calls = []
    for index, call in enumerate(getattr(message, "tool_calls", None) or []):
        function = call.function if hasattr(call, "function") else call["function"]
        name = getattr(function, "name", None) if not isinstance(function, dict) else function.get("name")
        arguments = (
            getattr(function, "arguments", None)
            if not isinstance(function, dict)
            else function.get("arguments")
        )
        call_id = getattr(call, "id", None) if not isinstance(call, dict) else call.get("id")
        calls.append(
            {
                "id": call_id or f"call_{index}",
                "type": "function",
                "function": {"name": name or "", "arguments": arguments or "{}"},
            }
        )
    return calls


def _reasoning(message: Any) -> str | None:
    text = getattr(message, "reasoning_content", None)
    return text if isinstance(text, str) and text else None


def _reasoning_tokens(response: Any) -> int | None:
    """The provider's count of reasoning tokens (part of the completion tokens), if it gave one."""
    details = getattr(getattr(response, "usage", None), "completion_tokens_details", None)
    value = getattr(details, "reasoning_tokens", None)
    return int(value) if isinstance(value, int) and value > 0 else None


def _usage(response: Any) -> tuple[int, int]:
    usage = getattr(response, "usage", None)
    if usage is None:
        return 0, 0
    return int(getattr(usage, "prompt_tokens", 0) or 0), int(getattr(usage, "completion_tokens", 0) or 0)


class LLMClient:
    """Calls a model through litellm and returns an `LLMResponse`.

    `on_token(text)` receives streamed content deltas as they arrive, and "" for
    chunks that carry only tool-call pieces (the stream is alive).
    """

    def __init__(self, *, retries: int | None = None, timeout: float | None = None) -> None:
        self.retries = settings.AGENT_LLM_RETRIES if retries is None else retries
        self.timeout = settings.AGENT_LLM_TIMEOUT if timeout is None else timeout

    def __call__(
        self,
        messages: list[dict[str, Any]],
        *,
        model: ModelSettings,
        tools: list[dict[str, Any]] | None = None,
        params: dict[str, Any] | None = None,
        stream: bool = False,
        on_token: Callable[[str], None] | None = None,
    ) -> LLMResponse:
        import litellm

        # litellm hands every streamed chunk to its logging thread (an event loop
        # per chunk) for success callbacks; we register none, and the end of the
        # stream is still logged once. ~10 ms of CPU per streamed call (issue 18).
        litellm.disable_streaming_logging = True
        kwargs: dict[str, Any] = {
            "model": model.model,
            "messages": request_messages(messages, model.model),
            "timeout": self.timeout,
            # Retries are ours (`_with_retries`): litellm's would retry a 400 as eagerly
            # as a 429, and could not honour our timeout budget.
            "num_retries": 0,
            "max_retries": 0,
            **(params or {}),
        }
        if tools:
            kwargs["tools"] = tools
        if model.api_base:
            kwargs["api_base"] = model.api_base
        if model.api_key:
            kwargs["api_key"] = model.api_key
        started = time.perf_counter()
        try:
            if stream:
                response, streamed = self._stream(litellm, kwargs, on_token)
            else:
                response, streamed = self._with_retries(litellm.completion, kwargs), False
        except Exception as exc:
            raise LLMError(f"{model.model}: {_describe(exc)}") from exc
        duration_ms = int((time.perf_counter() - started) * 1000)
        if isinstance(response, StreamedReply):  # folded as it streamed: it is its own message
            message, finish_reason = response, response.finish_reason
            cost = _known(price(model.model, response.usage))
        else:
            message, finish_reason = response.choices[0].message, response.choices[0].finish_reason
            cost = _cost(response)
        prompt_tokens, completion_tokens = _usage(response)
        return LLMResponse(
            content=message.content,
            tool_calls=_tool_calls(message),
            finish_reason=finish_reason,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost=cost,
            duration_ms=duration_ms,
            model=getattr(response, "model", None) or model.model,
            streamed=streamed,
            reasoning=_reasoning(message),
            reasoning_tokens=_reasoning_tokens(response),
        )

    def _with_retries(self, call: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
        """`call(**kwargs)`, retried with backoff on rate limits and transient errors (L3)."""
        import tenacity

        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(self.retries + 1),
            retry=tenacity.retry_if_exception(_retryable),
            wait=lambda state: _retry_delay(_attempt_error(state), state.attempt_number - 1),
            before_sleep=lambda state: logger.warning(
                "%s; retry %d of %d in %.1fs",
                _describe(_attempt_error(state)),
                state.attempt_number,
                self.retries,
                state.next_action.sleep if state.next_action else 0.0,
            ),
            reraise=True,
        )
        return retrying(call, **kwargs)

    def _stream(
        self, litellm: Any, kwargs: dict[str, Any], on_token: Callable[[str], None] | None
    ) -> tuple[Any, bool]:
        """The reply folded as it streams (traces/llm_stream.py), or a plain call's
        response after G3's fallback; and whether it really was streamed."""
        reply = StreamedReply()
        stream_kwargs = {**kwargs, "stream": True, "stream_options": {"include_usage": True}}
        try:
            for chunk in self._with_retries(litellm.completion, stream_kwargs):
                text, alive = reply.add(chunk)
                if on_token is not None and (text or alive):
                    on_token(text or "")  # "" = a tool-call or reasoning chunk: the stream is alive
        except Exception as exc:
            if reply.chunks or _retryable(exc):
                raise  # a busy provider was already retried; a plain call would not fare better
            # G3: a stream that fails before its first chunk falls back to a plain call.
            logger.warning("streaming failed (%s); falling back to a plain call", _describe(exc))
            return self._with_retries(litellm.completion, kwargs), False
        return reply, True


def _attempt_error(state: RetryCallState) -> BaseException:
    """What the attempt just made raised: tenacity waits and sleeps only after an attempt
    that raised (`retry_if_exception` retries nothing else)."""
    error = state.outcome.exception() if state.outcome else None
    if error is None:
        raise RuntimeError("tenacity retried an attempt that raised nothing")
    return error


def _retryable(exc: BaseException) -> bool:
    """Rate limits, dropped connections and server errors; not timeouts (G3's invoke budget)."""
    import openai

    if isinstance(exc, openai.APITimeoutError):
        return False
    if isinstance(exc, openai.APIConnectionError):
        return True
    status = getattr(exc, "status_code", None)
    return isinstance(status, int) and (status in (409, 429) or status >= 500)


def _retry_delay(exc: BaseException, attempt: int) -> float:
    """The provider's Retry-After when it gives a sane one, else jittered exponential backoff."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or getattr(exc, "litellm_response_headers", None) or {}
    try:
        retry_after = float(headers.get("retry-after", ""))
    except (TypeError, ValueError):
        retry_after = -1.0
    if 0 <= retry_after <= 60:
        return retry_after
    return min(0.5 * 2**attempt, 8.0) * random.uniform(0.75, 1.25)


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return f"{type(exc).__name__}: {text[:500]}"


def embedding_model() -> ModelSettings | None:
    """The embedding model for experience retrieval (M4), or None when not configured."""
    name = (settings.AGENT_EMBEDDING_MODEL or "").strip()
    if not name:
        return None
    return ModelSettings(
        name, settings.AGENT_EMBEDDING_API_BASE or None, settings.AGENT_EMBEDDING_API_KEY or None
    )


def embed(
    texts: list[str], *, model: ModelSettings, timeout: float = 30.0, retries: int | None = None
) -> list[list[float]]:
    """Embedding vectors of `texts` in ONE provider call (the caller batches), retried like a
    completion on rate limits and transient errors (AGENT_LLM_RETRIES); LLMError when it fails."""
    import litellm

    kwargs: dict[str, Any] = {
        "model": model.model,
        "input": texts,
        "timeout": timeout,
        "num_retries": 0,  # retries are ours, as for completions
        "max_retries": 0,
    }
    if model.api_base:
        kwargs["api_base"] = model.api_base
    if model.api_key:
        kwargs["api_key"] = model.api_key
    # litellm's OpenAI embedding path reads `max_retries or DEFAULT_MAX_RETRIES` (and sets it
    # on the SDK client), so max_retries=0 would become 2 retries inside ours
    litellm.DEFAULT_MAX_RETRIES = 0  # type: ignore[misc]
    try:
        response = LLMClient(retries=retries)._with_retries(litellm.embedding, kwargs)
    except Exception as exc:
        raise LLMError(f"{model.model}: {_describe(exc)}") from exc
    rows = sorted(response.data, key=lambda row: row["index"])
    if len(rows) != len(texts):
        raise LLMError(f"{model.model}: {len(rows)} embeddings for {len(texts)} texts")
    return [list(map(float, row["embedding"])) for row in rows]
