"""What each model call was sent, stored compactly ("what the model saw", issue 22).

A request is a list of message dicts, most of them the same objects as the previous
call's. Storing each request whole would be O(n²) on a long trace, so:

- `RequestPart` holds each distinct message dict (and each tools list) once per
  trace, under the digest of its canonical JSON (content-addressed);
- `ModelRequest` holds, per assistant message, its request as `parts`: a list whose
  items are either a digest (a part) or `[start, length]` (that slice of the
  `base_sequence` request's list). A step adds one row and its new parts: O(new).

Written by `traces/runner/request_log.py` inside the step's fenced commit; read by
`traces/observability/requests.py:model_request`.
"""

from __future__ import annotations

from django.db import models


class RequestPart(models.Model):
    """One message dict (or tools list) a model call of this trace was sent, stored once."""

    trace = models.ForeignKey("traces.Trace", on_delete=models.CASCADE, related_name="request_parts")
    digest = models.CharField(max_length=32)
    body = models.JSONField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["trace", "digest"], name="request_part_unique")]

    def __str__(self) -> str:
        return f"{self.trace_id} part {self.digest}"


class ModelRequest(models.Model):
    """The request the model call that produced assistant message `sequence` was sent."""

    trace = models.ForeignKey("traces.Trace", on_delete=models.CASCADE, related_name="model_requests")
    sequence = models.IntegerField()
    # The request `parts`' [start, length] slices copy from (same trace); null: none do.
    base_sequence = models.IntegerField(null=True, blank=True)
    parts = models.JSONField(default=list)
    tools = models.CharField(max_length=32, blank=True, default="")  # a part's digest; "": none offered
    model = models.CharField(max_length=200)
    parameters = models.JSONField(default=dict)  # temperature, stream, ... (never a key or a base URL)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["trace", "sequence"], name="model_request_unique")]

    def __str__(self) -> str:
        return f"{self.trace_id} request of #{self.sequence}"
