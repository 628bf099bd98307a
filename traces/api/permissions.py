"""Who sees and steers which trace (W4).

Views read through `visible_traces`, so someone else's trace is simply not found
(404, its existence is not leaked); anonymous requests are refused by
IsAuthenticated (401 with a Token challenge).
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from rest_framework.permissions import BasePermission

from traces.models import Trace
from traces.selectors import traces_visible_to


def visible_traces(request: Any) -> QuerySet[Trace]:
    return traces_visible_to(request.user)


class IsExpert(BasePermission):
    """Experts' tools (curating experiences, review queues, corrections, suites): staff only;
    others get a 403, anonymous callers IsAuthenticated's 401."""

    message = "only experts (staff) may do this"

    def has_permission(self, request: Any, view: Any) -> bool:
        user = request.user
        return bool(user and user.is_authenticated and user.is_staff)
