"""Honest figures: a cost with unpriced model calls is unknown or a lower bound, never
$0, and a trace's totals with its sub-traces take one query however many there are."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from portal.templatetags.portal import stats_cost, trace_cost
from tests.scripted_llm import Reply, ToolCall
from traces.llm import register_model_prices
from traces.models import CostState, Goal, Trace
from traces.runner import RunConfig
from traces.totals import Totals, cost_text, trace_totals

pytestmark = pytest.mark.django_db


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


@pytest.fixture
def priced(settings: Any) -> str:
    """The scripted server's "priced" model, with a price litellm knows."""
    price = '{"input_cost_per_token": 0.001, "output_cost_per_token": 0.002, "litellm_provider": "openai", "mode": "chat"}'
    settings.AGENT_MODEL_PRICES = f'{{"openai/priced": {price}, "priced": {price}}}'
    register_model_prices()
    return "openai/priced"


def test_an_unpriced_model_leaves_the_cost_unknown_not_zero(runner, llm, api_client, expert):
    llm.script("scripted", [Reply(tool_calls=[ToolCall("list_files", {})]), Reply(text="two files")])

    result = runner.run_result(user("count the files"), RunConfig())

    trace = Trace.objects.get(pk=result.trace_id)
    assert (trace.total_cost, trace.unpriced_calls, trace.cost_state) == (0.0, 2, CostState.UNKNOWN)
    (goal,) = Goal.objects.filter(trace=trace)
    assert goal.self_stats["unpriced_calls"] == goal.cumulative_stats["unpriced_calls"] == 2
    assert stats_cost(goal.self_stats).endswith(">unknown</span>")
    assert trace_cost(trace) == (
        '<span class="cost-unknown" title="2 model calls had no known price '
        '(litellm&#x27;s tables, AGENT_MODEL_PRICES)">unknown</span>'
    )
    (listed,) = api_client(expert).get("/api/traces").json()["results"]
    assert (listed["total_cost"], listed["unpriced_calls"], listed["cost_state"]) == (0.0, 2, "unknown")
    final = trace.events.get(type="final")
    assert final.payload["cost_state"] == "unknown"


def test_a_priced_run_continued_on_an_unpriced_model_costs_at_least_its_priced_calls(runner, llm, priced):
    llm.script("priced", ["cheap answer"])
    first = runner.run_result(user("price me"), RunConfig(model=priced))
    trace = Trace.objects.get(pk=first.trace_id)
    assert trace.cost_state == CostState.KNOWN and trace.total_cost > 0
    assert trace_cost(trace) == cost_text(trace.total_cost, 0) == f"${trace.total_cost:.4f}"

    llm.script("scripted", ["free answer"])
    runner.run_result(user("again"), RunConfig(trace_id=trace.trace_id, model="openai/scripted"))

    trace.refresh_from_db()
    assert (trace.unpriced_calls, trace.cost_state) == (1, CostState.PARTIAL)
    assert trace_cost(trace) == (
        f'<span class="cost-partial" title="1 model call had no known price (litellm&#x27;s tables, '
        f'AGENT_MODEL_PRICES): the cost is at least this">≥ ${trace.total_cost:.4f}</span>'
    )


def test_a_parent_with_an_unpriced_sub_trace_has_a_known_own_cost_and_a_partial_total(
    runner, llm, priced, api_client, expert
):
    llm.script(
        "priced",
        [Reply(tool_calls=[ToolCall("agent", {"task": "count the files"})]), "3 files", "Done: 3 files."],
    )
    parent = runner.run_result(user("how many files?"), RunConfig(model=priced))
    child = Trace.objects.get(parent_trace_id=parent.trace_id)
    llm.script("scripted", ["still 3"])
    runner.run_result(user("check again"), RunConfig(trace_id=child.trace_id, model="openai/scripted"))

    totals = trace_totals(Trace.objects.get(pk=parent.trace_id))

    assert totals.own.cost_state == CostState.KNOWN and totals.sub_traces == 1
    assert totals.with_sub_traces.cost_state == CostState.PARTIAL
    assert totals.with_sub_traces.unpriced_calls == 1
    detail = api_client(expert).get(f"/api/traces/{parent.trace_id}").json()
    assert detail["cost_state"] == "known"
    assert detail["totals"]["with_sub_traces"]["cost_state"] == "partial"
    assert (
        detail["totals"]["with_sub_traces"]["tokens"]
        == detail["total_tokens"] + Trace.objects.get(pk=child.trace_id).total_tokens
    )


def make_tree(children: int, *, root_id: str | None = None) -> Trace:
    """A root with `children` sub-traces, each with one sub-trace of its own; the last is unpriced."""
    figures = {
        "total_messages": 2,
        "total_tokens": 30,
        "total_prompt_tokens": 20,
        "total_completion_tokens": 10,
        "total_cost": 0.5,
        "total_duration_ms": 100,
    }
    root = Trace.objects.create(trace_id=root_id or str(uuid.uuid4()), **figures)
    for n in range(children):
        child = Trace.objects.create(trace_id=f"{root.trace_id}@{n}", parent_trace=root, **figures)
        unpriced = {"total_cost": 0.0, "unpriced_calls": 1} if n == children - 1 else {}
        Trace.objects.create(trace_id=f"{child.trace_id}@0", parent_trace=child, **{**figures, **unpriced})
    Trace.objects.create(trace_id=f"unrelated-{root.trace_id}", **figures)
    return root


@pytest.mark.parametrize("children", [1, 25])
def test_trace_totals_add_every_level_of_sub_traces_in_one_query(children, django_assert_num_queries):
    root = make_tree(children)

    with django_assert_num_queries(1):
        totals = trace_totals(root)

    descendants = 2 * children
    assert totals.sub_traces == descendants
    assert totals.own == Totals(2, 30, 20, 10, 0.5, 0, 100)
    assert totals.with_sub_traces == Totals(
        messages=2 * (1 + descendants),
        tokens=30 * (1 + descendants),
        prompt_tokens=20 * (1 + descendants),
        completion_tokens=10 * (1 + descendants),
        cost=pytest.approx(0.5 * descendants),
        unpriced_calls=1,
        duration_ms=100 * (1 + descendants),
    )
    assert totals.with_sub_traces.cost_state == CostState.PARTIAL
    assert trace_cost(totals.with_sub_traces).endswith(f"≥ ${0.5 * descendants:.2f}</span>")


def test_a_trace_without_sub_traces_totals_its_own_figures():
    root = make_tree(0)
    totals = trace_totals(root)
    assert totals.sub_traces == 0 and totals.with_sub_traces == totals.own
    assert totals.as_dict()["own"]["cost_state"] == "known"
