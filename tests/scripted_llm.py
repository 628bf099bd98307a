"""A scripted model server speaking the providers' wire formats (Q1).

Tests drive the real litellm client over HTTP against this server instead of a
paid model. It answers

- OpenAI chat completions, `POST /v1/chat/completions`: JSON, or SSE when the
  request says `stream: true` (content and tool calls in pieces, the way OpenAI
  streams them, a usage chunk when `stream_options.include_usage` is set);
- Anthropic messages, `POST /v1/messages`: JSON or SSE events.

Replies are queued per model name, as the request's `model` field spells it
("openai/scripted" arrives as "scripted"); each request pops the next one, and an
empty queue answers with the default reply so runs always finish.

    llm.script("scripted", [Reply(tool_calls=[ToolCall("read", {"path": "a.txt"})]), Reply(text="ok")])

Token usage is a deterministic estimate (characters / 4, at least 1) so tests can
check roll-ups: every recorded request carries the tokens it was charged.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import string
import threading
import time
import uuid
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_ID_ALPHABET = string.ascii_letters + string.digits


def _random_id(prefix: str, length: int = 24) -> str:
    return prefix + "".join(secrets.choice(_ID_ALPHABET) for _ in range(length))


@dataclass
class ToolCall:
    """One tool call in a scripted reply; `id` is generated like the provider's when None."""

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    id: str | None = None

    def arguments_json(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments  # verbatim, so tests can send malformed JSON
        return json.dumps(self.arguments)

    def arguments_dict(self) -> dict[str, Any]:
        if isinstance(self.arguments, dict):
            return self.arguments
        try:
            value = json.loads(self.arguments)
        except json.JSONDecodeError:
            return {}
        return value if isinstance(value, dict) else {}


@dataclass
class Reply:
    """What the server answers to one request.

    - `text` / `tool_calls`: the assistant message; `finish_reason` defaults to
      "tool_calls" when there are calls, else "stop" (mapped to Anthropic's
      stop_reason on /v1/messages).
    - `chunks`: exact content deltas to stream (default: `text` split into words).
    - `delay`: seconds to wait before answering (other requests are not blocked).
    - `chunk_delay`: seconds to wait between streamed events (a slow or stalling stream).
    - `status` / `error`: answer with an HTTP error and a provider-style error body
      (`error` is the message, or a dict used as the whole body).
    - `headers`: extra response headers (e.g. {"retry-after": "1"}).
    - `raw`: answer with exactly this body (malformed-reply tests).
    - `prompt_tokens` / `completion_tokens`: override the estimated usage.
    - `stream_usage`: False to leave the usage chunk out of a stream even when
      `stream_options.include_usage` asks for it (servers that ignore the option).
    - `reasoning`: a reasoning model's thinking, sent as DeepSeek sends it on
      /v1/chat/completions (`reasoning_content` on the message, or streamed in
      `reasoning_content` deltas before the text) and as Anthropic thinking blocks
      on /v1/messages; counted in the completion tokens and reported as
      `completion_tokens_details.reasoning_tokens`.
    """

    text: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    chunks: list[str] | None = None
    delay: float = 0.0
    chunk_delay: float = 0.0
    status: int = 200
    error: str | dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    raw: str | bytes | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    stream_usage: bool = True
    reasoning: str | None = None

    @property
    def is_error(self) -> bool:
        return self.status >= 400 or self.error is not None

    def content_chunks(self) -> list[str]:
        if self.chunks is not None:
            return list(self.chunks)
        return _words(self.text or "")


def _words(text: str) -> list[str]:
    """`text` in streamed pieces, a word (with its spaces) each."""
    if not text:
        return []
    return re.findall(r"\s*\S+\s*|\s+", text) or [text]


ReplyScript = Reply | str | Callable[[dict[str, Any]], "Reply | str"]


@dataclass
class RecordedRequest:
    """One request the server received; `body` is the parsed JSON.

    Dict-style access (`request["messages"]`, `request.get("tools")`) reads the body.
    `prompt_tokens` / `completion_tokens` are the usage the server reported (0 for
    error replies).
    """

    path: str
    model: str
    body: dict[str, Any]
    headers: dict[str, str]
    stream: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0
    status: int = 200
    received_at: float = field(default_factory=time.monotonic)

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.body.get("messages") or []

    def __getitem__(self, key: str) -> Any:
        return self.body[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.body.get(key, default)


# --- token estimates ----------------------------------------------------------


def estimate_tokens(text: str) -> int:
    """The server's deterministic token count: characters / 4, at least 1."""
    return max(1, len(text) // 4)


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(_content_text(part) for part in content)
    if isinstance(content, dict):
        if "text" in content:
            return str(content["text"] or "")
        if content.get("type") == "tool_use":
            return json.dumps(content.get("input") or {})
        if "content" in content:
            return _content_text(content["content"])
    return ""


def prompt_tokens_for(body: dict[str, Any]) -> int:
    """Estimated prompt tokens of a request: the text of its messages (and system)."""
    text = _content_text(body.get("system"))
    for message in body.get("messages") or []:
        text += _content_text(message.get("content"))
        for call in message.get("tool_calls") or ():
            text += str((call.get("function") or {}).get("arguments") or "")
    return estimate_tokens(text)


def completion_tokens_for(reply: Reply) -> int:
    """Estimated completion tokens of a reply: its text plus tool names and arguments."""
    text = (reply.text or "") + (reply.reasoning or "")
    for call in reply.tool_calls:
        text += call.name + call.arguments_json()
    return estimate_tokens(text)


# --- wire formats ---------------------------------------------------------------


def _finish_reason(reply: Reply) -> str:
    return reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")


_ANTHROPIC_STOP = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}


def _openai_error(reply: Reply) -> dict[str, Any]:
    if isinstance(reply.error, dict):
        return reply.error
    kind = {
        400: "invalid_request_error",
        401: "invalid_request_error",
        404: "invalid_request_error",
        429: "rate_limit_exceeded",
    }.get(reply.status, "server_error")
    code = {401: "invalid_api_key", 429: "rate_limit_exceeded"}.get(reply.status)
    return {
        "error": {
            "message": reply.error or f"scripted error {reply.status}",
            "type": kind,
            "param": None,
            "code": code,
        }
    }


def _anthropic_error(reply: Reply) -> dict[str, Any]:
    if isinstance(reply.error, dict):
        return reply.error
    kind = {
        400: "invalid_request_error",
        401: "authentication_error",
        404: "not_found_error",
        429: "rate_limit_error",
        529: "overloaded_error",
    }.get(reply.status, "api_error")
    return {
        "type": "error",
        "error": {"type": kind, "message": reply.error or f"scripted error {reply.status}"},
    }


class _OpenAIFormat:
    """Chat completions as api.openai.com sends them."""

    def __init__(self, model: str, reply: Reply, calls: list[tuple[str, ToolCall]], usage: dict[str, int]):
        self.model, self.reply, self.calls, self.usage = model, reply, calls, usage
        self.id = _random_id("chatcmpl-", 29)
        self.created = int(time.time())

    def _usage(self) -> dict[str, int]:
        prompt, completion = self.usage["prompt_tokens"], self.usage["completion_tokens"]
        usage: dict[str, Any] = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }
        if self.reply.reasoning:
            usage["completion_tokens_details"] = {"reasoning_tokens": estimate_tokens(self.reply.reasoning)}
        return usage

    def _tool_call(self, call_id: str, call: ToolCall) -> dict[str, Any]:
        return {
            "id": call_id,
            "type": "function",
            "function": {"name": call.name, "arguments": call.arguments_json()},
        }

    def body(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": self.reply.text, "refusal": None}
        if self.reply.reasoning:
            message["reasoning_content"] = self.reply.reasoning
        if self.calls:
            message["tool_calls"] = [self._tool_call(call_id, call) for call_id, call in self.calls]
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": _finish_reason(self.reply),
                }
            ],
            "usage": self._usage(),
            "system_fingerprint": None,
        }

    def _chunk(self, delta: dict[str, Any], finish_reason: str | None, with_usage: bool) -> dict[str, Any]:
        chunk: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": None,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
        }
        if with_usage:
            chunk["usage"] = None
        return chunk

    def events(self, include_usage: bool) -> Iterator[str]:
        def data(payload: dict[str, Any]) -> str:
            return f"data: {json.dumps(payload)}\n\n"

        yield data(self._chunk({"role": "assistant", "content": "", "refusal": None}, None, include_usage))
        for piece in _words(self.reply.reasoning or ""):
            yield data(self._chunk({"reasoning_content": piece}, None, include_usage))
        for piece in self.reply.content_chunks():
            yield data(self._chunk({"content": piece}, None, include_usage))
        for index, (call_id, call) in enumerate(self.calls):
            head = {
                "index": index,
                "id": call_id,
                "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }
            yield data(self._chunk({"tool_calls": [head]}, None, include_usage))
            for fragment in _fragments(call.arguments_json()):
                piece = {"index": index, "function": {"arguments": fragment}}
                yield data(self._chunk({"tool_calls": [piece]}, None, include_usage))
        yield data(self._chunk({}, _finish_reason(self.reply), include_usage))
        if include_usage:
            yield data(
                {
                    "id": self.id,
                    "object": "chat.completion.chunk",
                    "created": self.created,
                    "model": self.model,
                    "system_fingerprint": None,
                    "choices": [],
                    "usage": self._usage(),
                }
            )
        yield "data: [DONE]\n\n"


class _AnthropicFormat:
    """Messages as api.anthropic.com sends them."""

    def __init__(self, model: str, reply: Reply, calls: list[tuple[str, ToolCall]], usage: dict[str, int]):
        self.model, self.reply, self.calls, self.usage = model, reply, calls, usage
        self.id = _random_id("msg_01", 22)
        self.signature = _random_id("sig_", 32)

    def _stop_reason(self) -> str:
        reason = _finish_reason(self.reply)
        return _ANTHROPIC_STOP.get(reason, reason)

    def body(self) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        if self.reply.reasoning:
            content.append(
                {"type": "thinking", "thinking": self.reply.reasoning, "signature": self.signature}
            )
        if self.reply.text:
            content.append({"type": "text", "text": self.reply.text})
        for call_id, call in self.calls:
            content.append(
                {"type": "tool_use", "id": call_id, "name": call.name, "input": call.arguments_dict()}
            )
        return {
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": content,
            "stop_reason": self._stop_reason(),
            "stop_sequence": None,
            "usage": {
                "input_tokens": self.usage["prompt_tokens"],
                "output_tokens": self.usage["completion_tokens"],
            },
        }

    def events(self) -> Iterator[str]:
        def event(name: str, payload: dict[str, Any]) -> str:
            return f"event: {name}\ndata: {json.dumps({'type': name, **payload})}\n\n"

        start = {**self.body(), "content": [], "stop_reason": None}
        start["usage"] = {"input_tokens": self.usage["prompt_tokens"], "output_tokens": 1}
        yield event("message_start", {"message": start})
        index = 0
        if self.reply.reasoning:
            block = {"type": "thinking", "thinking": "", "signature": ""}
            yield event("content_block_start", {"index": index, "content_block": block})
            for piece in _words(self.reply.reasoning):
                delta = {"type": "thinking_delta", "thinking": piece}
                yield event("content_block_delta", {"index": index, "delta": delta})
            delta = {"type": "signature_delta", "signature": self.signature}
            yield event("content_block_delta", {"index": index, "delta": delta})
            yield event("content_block_stop", {"index": index})
            index += 1
        if self.reply.text:
            yield event(
                "content_block_start", {"index": index, "content_block": {"type": "text", "text": ""}}
            )
            for piece in self.reply.content_chunks():
                yield event(
                    "content_block_delta", {"index": index, "delta": {"type": "text_delta", "text": piece}}
                )
            yield event("content_block_stop", {"index": index})
            index += 1
        for call_id, call in self.calls:
            block = {"type": "tool_use", "id": call_id, "name": call.name, "input": {}}
            yield event("content_block_start", {"index": index, "content_block": block})
            for fragment in _fragments(json.dumps(call.arguments_dict())):
                delta = {"type": "input_json_delta", "partial_json": fragment}
                yield event("content_block_delta", {"index": index, "delta": delta})
            yield event("content_block_stop", {"index": index})
            index += 1
        delta = {"stop_reason": self._stop_reason(), "stop_sequence": None}
        yield event(
            "message_delta", {"delta": delta, "usage": {"output_tokens": self.usage["completion_tokens"]}}
        )
        yield event("message_stop", {})


EMBEDDING_DIMENSIONS = 512
_EMBEDDING_STOPWORDS = frozenset(
    """a an and are as at be by for from has have in is it its of on or that the this to was were
    will with when what which while you your i we our not no do does did can should would""".split()
)
_SUFFIXES = ("ations", "ation", "ings", "ing", "ies", "ied", "es", "ed", "ly", "s")


def _stem(word: str) -> str:
    """A crude suffix-stripping stemmer: "builds"/"building"/"built" are not all one, but
    "caches"/"caching"/"cached" are."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def embedding_of(text: str, dimensions: int = EMBEDDING_DIMENSIONS) -> list[float]:
    """A deterministic local bag-of-words vector: content words, lowercased and stemmed,
    hashed into `dimensions` buckets with a hashed sign (so colliding words cancel rather
    than add up); texts sharing words point the same way, others are near orthogonal."""
    vector = [0.0] * dimensions
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        if word in _EMBEDDING_STOPWORDS:
            continue
        digest = int.from_bytes(hashlib.blake2b(_stem(word).encode(), digest_size=8).digest(), "big")
        vector[digest % dimensions] += 1.0 if (digest >> 32) & 1 else -1.0
    return vector


def embeddings_body(body: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI `/v1/embeddings` answer for the request's `input` (a string or a list)."""
    inputs = body.get("input")
    texts = [inputs] if isinstance(inputs, str) else list(inputs or [])
    return {
        "object": "list",
        "model": body.get("model", ""),
        "data": [
            {"object": "embedding", "index": i, "embedding": embedding_of(str(t))}
            for i, t in enumerate(texts)
        ],
        "usage": {"prompt_tokens": sum(estimate_tokens(str(t)) for t in texts), "total_tokens": 0},
    }


def _fragments(text: str, size: int = 8) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


# --- the server -----------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    """A thread per connection, and a listen backlog for bursts: socketserver's
    default of 5 drops the SYNs of hundreds of runs calling at once (the client
    retries after 1-3 s, which a latency benchmark would count as the model's)."""

    daemon_threads = True
    request_queue_size = 1024


class ScriptedLLM:
    """A local model endpoint answering from per-model queues of scripted replies.

    `url` is the OpenAI-style api_base (".../v1"); `root` is the bare origin, which
    litellm's anthropic provider wants (it appends "/v1/messages" itself).
    """

    def __init__(self, default: Reply | str = "done") -> None:
        self._initial_default = _as_reply(default)
        self.default: Reply = self._initial_default
        # Refuse, as OpenAI does (400), a chat request whose tool messages and calls do not pair.
        self.check_pairing = False
        self.requests: list[RecordedRequest] = []
        self._queues: dict[str, deque[ReplyScript]] = defaultdict(deque)
        self._lock = threading.Condition()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # lifecycle

    def start(self) -> ScriptedLLM:
        if self._server is not None:
            return self
        server = _Server(("127.0.0.1", 0), _make_handler(self))
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="scripted-llm", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        self._server = None
        self._thread = None

    def __enter__(self) -> ScriptedLLM:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("ScriptedLLM is not started")
        return int(self._server.server_address[1])

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.root}/v1"

    # scripting

    def script(self, model: str, replies: ReplyScript | Iterable[ReplyScript]) -> None:
        """Queue replies for `model` (the request's model field, e.g. "scripted").

        A reply is a `Reply`, a str (shorthand for `Reply(text=...)`), or a callable
        `f(request_json) -> Reply` evaluated when the request arrives. Calls append.
        """
        if isinstance(replies, Reply | str) or callable(replies):
            replies = [replies]  # type: ignore[list-item]
        with self._lock:
            self._queues[model].extend(replies)  # type: ignore[arg-type]

    def pending(self, model: str | None = None) -> int:
        """Scripted replies not consumed yet (for `model`, or all models)."""
        with self._lock:
            if model is not None:
                return len(self._queues.get(model, ()))
            return sum(len(queue) for queue in self._queues.values())

    def reset(self) -> None:
        """Forget scripts and recorded requests, and restore the default reply."""
        with self._lock:
            self._queues.clear()
            self.requests.clear()
            self.default = self._initial_default
            self.check_pairing = False

    def requests_for(self, model: str) -> list[RecordedRequest]:
        with self._lock:
            return [request for request in self.requests if request.model == model]

    def wait_for_requests(self, count: int, timeout: float = 5.0) -> list[RecordedRequest]:
        """Block until `count` requests have arrived (they are recorded before any delay)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while len(self.requests) < count:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"{len(self.requests)} of {count} requests arrived in {timeout}s")
                self._lock.wait(remaining)
            return list(self.requests)

    # request handling (server threads)

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)
            self._lock.notify_all()

    def _next_reply(self, model: str, body: dict[str, Any]) -> Reply:
        with self._lock:
            queue = self._queues.get(model)
            scripted = queue.popleft() if queue else self.default
        if callable(scripted) and not isinstance(scripted, Reply):
            scripted = scripted(body)
        return _as_reply(scripted)


def pairing_error(messages: list[dict[str, Any]]) -> str | None:
    """What OpenAI's chat API says of messages whose tool calls and results do not pair, or None."""
    open_ids: set[Any] = set()
    for index, message in enumerate(messages):
        if message.get("role") == "tool":
            if message.get("tool_call_id") not in open_ids:
                return (
                    f"Invalid parameter: messages[{index}] with role 'tool' must be a response "
                    "to a preceeding message with 'tool_calls'."
                )
            open_ids.discard(message.get("tool_call_id"))
            continue
        if open_ids:
            break
        open_ids = {call.get("id") for call in message.get("tool_calls") or ()}
    if open_ids:
        return (
            "An assistant message with 'tool_calls' must be followed by tool messages responding "
            f"to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
            f"{', '.join(sorted(map(str, open_ids)))}"
        )
    return None


def _override(value: int | None, estimate: int) -> int:
    return estimate if value is None else value


def _as_reply(value: Reply | str) -> Reply:
    return Reply(text=value) if isinstance(value, str) else value


def _make_handler(llm: ScriptedLLM) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "ScriptedLLM/1.0"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw or b"{}")
            except json.JSONDecodeError:
                body = {"_unparsed": raw.decode(errors="replace")}
            path = self.path.split("?", 1)[0].rstrip("/")
            model = str(body.get("model", ""))
            request = RecordedRequest(
                path=path,
                model=model,
                body=body,
                headers={key.lower(): value for key, value in self.headers.items()},
                stream=bool(body.get("stream")),
            )
            llm._record(request)
            try:
                self._answer(request)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (stop or timeout tests)

        def _answer(self, request: RecordedRequest) -> None:
            anthropic = request.path.endswith("/messages")
            if request.path.endswith("/embeddings"):
                self._embeddings(request)
                return
            if not (anthropic or request.path.endswith("/chat/completions")):
                request.status = 404
                self._json(404, _openai_error(Reply(status=404, error=f"no route {request.path}")), {})
                return
            unpaired = pairing_error(request.body.get("messages") or []) if llm.check_pairing else None
            if unpaired and not anthropic:
                request.status = 400
                self._json(400, _openai_error(Reply(status=400, error=unpaired)), {})
                return
            reply = llm._next_reply(request.model, request.body)
            if reply.delay:
                time.sleep(reply.delay)
            if reply.raw is not None:
                request.status = reply.status
                data = reply.raw.encode() if isinstance(reply.raw, str) else reply.raw
                self._send(reply.status, data, "application/json", reply.headers)
                return
            if reply.is_error:
                status = reply.status if reply.status >= 400 else 500
                request.status = status
                error_reply = Reply(status=status, error=reply.error)
                payload = _anthropic_error(error_reply) if anthropic else _openai_error(error_reply)
                self._json(status, payload, reply.headers)
                return
            request.prompt_tokens = _override(reply.prompt_tokens, prompt_tokens_for(request.body))
            request.completion_tokens = _override(reply.completion_tokens, completion_tokens_for(reply))
            usage = {"prompt_tokens": request.prompt_tokens, "completion_tokens": request.completion_tokens}
            prefix = "toolu_01" if anthropic else "call_"
            calls = [(call.id or _random_id(prefix), call) for call in reply.tool_calls]
            if anthropic:
                self._anthropic(request, reply, calls, usage)
            else:
                self._openai(request, reply, calls, usage)

        def _embeddings(self, request: RecordedRequest) -> None:
            """Vectors from `embedding_of`, unless an error `Reply` is scripted for the model
            (a transient 503 or 429 that the client should retry)."""
            reply = llm._next_reply(request.model, request.body)
            if reply.is_error:
                request.status = reply.status if reply.status >= 400 else 500
                self._json(
                    request.status,
                    _openai_error(Reply(status=request.status, error=reply.error)),
                    reply.headers,
                )
                return
            self._json(200, embeddings_body(request.body), {})

        def _openai(
            self,
            request: RecordedRequest,
            reply: Reply,
            calls: list[tuple[str, ToolCall]],
            usage: dict[str, int],
        ) -> None:
            wire = _OpenAIFormat(request.model, reply, calls, usage)
            if not request.stream:
                self._json(200, wire.body(), reply.headers)
                return
            include_usage = bool((request.body.get("stream_options") or {}).get("include_usage"))
            include_usage = include_usage and reply.stream_usage
            self._sse(wire.events(include_usage), reply.headers, reply.chunk_delay)

        def _anthropic(
            self,
            request: RecordedRequest,
            reply: Reply,
            calls: list[tuple[str, ToolCall]],
            usage: dict[str, int],
        ) -> None:
            wire = _AnthropicFormat(request.model, reply, calls, usage)
            if not request.stream:
                self._json(200, wire.body(), reply.headers)
                return
            self._sse(wire.events(), reply.headers, reply.chunk_delay)

        def _json(self, status: int, payload: dict[str, Any], headers: dict[str, str]) -> None:
            self._send(status, json.dumps(payload).encode(), "application/json", headers)

        def _send(self, status: int, data: bytes, content_type: str, headers: dict[str, str]) -> None:
            self.send_response(status)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(data)))
            self.send_header("x-request-id", f"req_{uuid.uuid4().hex}")
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        def _sse(self, events: Iterable[str], headers: dict[str, str], chunk_delay: float = 0.0) -> None:
            # HTTP/1.0 without content-length: the closed connection ends the stream.
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            for index, event in enumerate(events):
                if index and chunk_delay:
                    time.sleep(chunk_delay)
                self.wfile.write(event.encode())
                self.wfile.flush()

    return Handler
