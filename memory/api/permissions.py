"""Who reads and who curates experiences (M5): experts (staff) edit everything,
other users read approved experiences only."""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import SAFE_METHODS, BasePermission

from traces.api.permissions import IsExpert

__all__ = ["IsExpert", "IsExpertOrReadOnly"]


class IsExpertOrReadOnly(BasePermission):
    message = "only experts (staff) may change experiences"

    def has_permission(self, request: Any, view: Any) -> bool:
        user = request.user
        if not (user and user.is_authenticated):
            return False
        return request.method in SAFE_METHODS or bool(user.is_staff)
