from __future__ import annotations

from django.apps import AppConfig


class ReviewConfig(AppConfig):
    name = "review"
    verbose_name = "Review"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from review.services import reviews_forget_traces
        from traces.services.delete import trace_deleting

        # A deleted trace's scores and queue items go with it, before its messages.
        trace_deleting.connect(reviews_forget_traces, dispatch_uid="review-forget-traces")
