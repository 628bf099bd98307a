"""Suite endpoints (issue 23, item 5). Thin: parse, call one selector or service, serialize.

Suites are the experts' tool, as review queues are: staff only (others get a 403,
an anonymous caller a 401), in the API's one error shape.
"""

from __future__ import annotations

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import permissions, status
from rest_framework.request import Request
from rest_framework.response import Response

from suites.api import serializers as s
from suites.models import Suite, SuiteRun
from suites.selectors import suite_run_table
from suites.services import (
    SuiteNotFound,
    case_from_trace,
    suite_create,
    suite_run_refresh,
    suite_run_start,
)
from traces.api.permissions import IsExpert
from traces.api.views import ERRORS, TraceAPIView
from traces.runner import InvalidRun

SUITE_ID = OpenApiParameter("suite_id", int, OpenApiParameter.PATH)
RUN_ID = OpenApiParameter("run_id", int, OpenApiParameter.PATH)


class SuiteAPIView(TraceAPIView):
    permission_classes = [permissions.IsAuthenticated, IsExpert]

    def suite(self, suite_id: int) -> Suite:
        found = Suite.objects.filter(pk=suite_id).first()
        if found is None:
            raise SuiteNotFound(f"suite {suite_id} does not exist")
        return found


def _suites() -> QuerySet[Suite]:
    return Suite.objects.prefetch_related("cases")


class SuiteListView(SuiteAPIView):
    @extend_schema(responses={200: s.SuiteSerializer(many=True), **ERRORS})
    def get(self, request: Request) -> Response:
        """Every suite with its cases, by name."""
        return Response(s.SuiteSerializer(_suites(), many=True).data)

    @extend_schema(request=s.SuiteCreateSerializer, responses={201: s.SuiteSerializer, **ERRORS})
    def post(self, request: Request) -> Response:
        """Create an empty suite (add cases from traces next)."""
        body = s.SuiteCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        suite = suite_create(user=request.user, **body.validated_data)
        return Response(s.SuiteSerializer(suite).data, status=status.HTTP_201_CREATED)


class SuiteDetailView(SuiteAPIView):
    @extend_schema(parameters=[SUITE_ID], responses={200: s.SuiteSerializer, **ERRORS})
    def get(self, request: Request, suite_id: int) -> Response:
        return Response(s.SuiteSerializer(self.suite(suite_id)).data)


class SuiteCasesView(SuiteAPIView):
    @extend_schema(
        parameters=[SUITE_ID], request=s.CaseCreateSerializer, responses={201: s.CaseSerializer, **ERRORS}
    )
    def post(self, request: Request, suite_id: int) -> Response:
        """Make a case of a trace's branch (its task: the user messages before the first reply),
        with the checks a replay must pass."""
        body = s.CaseCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        case = case_from_trace(user=request.user, suite=self.suite(suite_id), **body.validated_data)
        return Response(s.CaseSerializer(case).data, status=status.HTTP_201_CREATED)


class SuiteRunsView(SuiteAPIView):
    @extend_schema(
        parameters=[SUITE_ID],
        request=s.SuiteRunCreateSerializer,
        responses={201: s.SuiteRunSerializer, **ERRORS},
    )
    def post(self, request: Request, suite_id: int) -> Response:
        """Replay every case as a trace with `model` / `preset` (default: each case's own),
        compared with `baseline` (an earlier run of the suite) once scored."""
        suite = self.suite(suite_id)
        body = s.SuiteRunCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        baseline = None
        if data["baseline"] is not None:
            baseline = SuiteRun.objects.filter(pk=data["baseline"], suite=suite).first()
            if baseline is None:
                raise InvalidRun(f"baseline: suite {suite.name!r} has no run {data['baseline']}")
        run = suite_run_start(
            user=request.user,
            suite=suite,
            model=data["model"],
            preset=data["preset"],
            baseline=baseline,
            settings=data["settings"],
        )
        table = suite_run_table(run)
        return Response(
            s.SuiteRunSerializer(run, context={"table": table}).data, status=status.HTTP_201_CREATED
        )


class SuiteRunDetailView(SuiteAPIView):
    @extend_schema(parameters=[RUN_ID], responses={200: s.SuiteRunSerializer, **ERRORS})
    def get(self, request: Request, run_id: int) -> Response:
        """A suite run: each case's outcome, check results, tokens, cost and duration beside the
        baseline's, with regressions and fixes named (cases are scored as their traces end)."""
        run = SuiteRun.objects.select_related("suite").filter(pk=run_id).first()
        if run is None:
            raise SuiteNotFound(f"suite run {run_id} does not exist")
        run = suite_run_refresh(run)
        return Response(s.SuiteRunSerializer(run, context={"table": suite_run_table(run)}).data)
