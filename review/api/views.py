"""Score endpoints (X6). Thin: parse, call one selector or service, serialize.

Who may read and write a trace's scores is who may see the trace (W4): its owner
and staff; anyone else gets the trace's 404, an anonymous caller a 401.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from review.api import requests as r
from review.api.serializers import ScoreDefinitionSerializer, ScoreSerializer
from review.selectors import score_definitions, trace_scores
from review.services import score_set
from traces.api.views import ERRORS, TRACE_ID, TraceAPIView


class ScoreDefinitionListView(TraceAPIView):
    @extend_schema(responses={200: ScoreDefinitionSerializer(many=True), **ERRORS})
    def get(self, request: Request) -> Response:
        """The score definitions experts score with (managed in the admin), active ones only."""
        return Response(ScoreDefinitionSerializer(score_definitions(), many=True).data)


class TraceScoresView(TraceAPIView):
    @extend_schema(
        parameters=[TRACE_ID, r.ScoresQuerySerializer], responses={200: ScoreSerializer(many=True), **ERRORS}
    )
    def get(self, request: Request, trace_id: str) -> Response:
        """Every expert's scores of the trace and of its messages, oldest first."""
        query = r.ScoresQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        trace = self.visible_trace(request, trace_id)
        scores = trace_scores(trace=trace, message_sequence=query.validated_data.get("message_sequence"))
        return Response(ScoreSerializer(scores, many=True).data)

    @extend_schema(
        parameters=[TRACE_ID],
        request=r.ScoreCreateSerializer,
        responses={200: ScoreSerializer, 201: ScoreSerializer, **ERRORS},
    )
    def post(self, request: Request, trace_id: str) -> Response:
        """Score the trace (or one message with `message_sequence`); your earlier score of the
        same target with the same definition is replaced (200), a first one is created (201)."""
        body = r.ScoreCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        score, created = score_set(
            user=request.user,
            trace_id=trace_id,
            definition=data["definition"],
            value=data["value"],
            comment=data["comment"],
            message_sequence=data["message_sequence"],
        )
        code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
        return Response(ScoreSerializer(score).data, status=code)
