"""A JSON parser that refuses bodies over AGENT_MAX_REQUEST_BYTES with 413 (W6).

DRF reads the body from the request stream, which Django's
DATA_UPLOAD_MAX_MEMORY_SIZE does not guard, so the limit is enforced here: by the
declared Content-Length first, then by what is actually read.

NUL characters anywhere in the body become U+FFFD (traces/storable.py), as in
everything else the service stores: PostgreSQL keeps no NUL in text or jsonb.
"""

from __future__ import annotations

import io
from typing import IO, Any

from django.conf import settings
from rest_framework.parsers import JSONParser

from traces.api.errors import RequestTooLarge
from traces.storable import without_nul


class BoundedJSONParser(JSONParser):
    limit_setting = "AGENT_MAX_REQUEST_BYTES"

    def parse(self, stream: IO[bytes], media_type: str | None = None, parser_context: Any = None) -> Any:
        limit = getattr(settings, self.limit_setting)
        request = (parser_context or {}).get("request")
        declared = request.META.get("CONTENT_LENGTH") if request is not None else None
        if declared and str(declared).isdigit() and int(declared) > limit:
            raise RequestTooLarge(self._too_large(int(declared), limit))
        body = stream.read(limit + 1) if stream is not None else b""
        if len(body) > limit:
            raise RequestTooLarge(self._too_large(None, limit))
        return without_nul(super().parse(io.BytesIO(body), media_type, parser_context))

    def _too_large(self, size: int | None, limit: int) -> str:
        got = f" ({size} bytes)" if size is not None else ""
        return f"request body too large{got}; the limit is {limit} bytes ({self.limit_setting})"


class MessagesJSONParser(BoundedJSONParser):
    """The bodies that post messages, which may carry images and PDFs as data URLs (L5)."""

    limit_setting = "AGENT_MAX_MESSAGES_REQUEST_BYTES"
