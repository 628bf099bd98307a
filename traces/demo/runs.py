"""The demo traces, one function each: finished runs, runs waiting for people, a flagged one."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from traces.collaboration.humans import human_request_create
from traces.demo.builder import SYSTEM, DemoTrace, stats_add, tool_call
from traces.models import Approval, Message, Trace, TraceEvent, TraceStatus

SALES_CSV = """| region | q1 | q2 | q3 |
|---|---|---|---|
| north | 120,400 | 131,900 | 142,300 |
| south | 98,100 | 91,700 | 104,800 |
| west | 143,000 | 150,250 | 149,900 |"""


def sales_report(owner: Any, start: datetime) -> tuple[Trace, dict[str, int]]:
    """Completed; a rewind at #6 with new text left the first answer on a side branch; reflected."""
    d = DemoTrace(
        owner,
        start,
        name="Quarterly sales summary",
        task="Summarise data/sales_q3.csv for the board: totals per quarter and the trend.",
        agent_type="analyst",
    )
    d.add("system", SYSTEM)
    d.add("user", d.trace.task, kind="input")
    d.goal("1", "Read the sales data", status="completed", summary="3 regions, 3 quarters; no gaps.")
    d.goal(
        "2",
        "Compute totals and trend",
        status="completed",
        summary="Q1 361.5k, Q2 373.9k, Q3 397.0k (+9.8%).",
    )
    d.goal("2.1", "Per-region breakdown", parent="2", status="completed", summary="South dipped in Q2.")
    d.goal("3", "Write the summary", status="completed", summary="Board summary with table.")
    c = d.call(
        "goal",
        {"action": "add", "goals": ["Read the sales data", "Compute totals and trend", "Write the summary"]},
        goal="1",
        text="I'll plan this first.",
        tokens=(812, 64),
    )
    d.result(c, "goal", "Added goals 1-3; focus on 1.", goal="1")
    c = d.call("read", {"path": "data/sales_q3.csv"}, goal="1", tokens=(901, 31))
    read_seq = d.trace.last_sequence
    six = d.result(c, "read", f"```\n{SALES_CSV}\n```", goal="1")
    first = d.add(
        "assistant",
        "**Summary**: revenue grew every quarter, from 361.5k to 397.0k (+9.8%).",
        goal="3",
        tokens=(1104, 58),
    )
    d.event("final", {"status": "completed", "head_sequence": first})
    d.event("rewind", {"after_sequence": six, "goal_tree_snapshot": {"goals": ["1", "2", "3"]}})
    d.add("user", "Break the totals down by region too, and flag any region that went down.", parent=six)
    c = d.call(
        "bash",
        {"command": "python3 scripts/totals.py data/sales_q3.csv --by region"},
        goal="2",
        tokens=(1260, 44),
    )
    bash_seq = d.trace.last_sequence
    d.result(
        c, "bash", "north  394,600\nsouth  294,600  (Q2 -6.5%)\nwest   443,150\ntotal  1,132,350", goal="2.1"
    )
    answer = d.add(
        "assistant",
        "## Q3 sales summary\n\nRevenue grew each quarter: **361.5k → 373.9k → 397.0k** (+9.8% over the period).\n\n"
        f"{SALES_CSV}\n\n- **South dipped in Q2** (-6.5%) and recovered in Q3.\n- West is the largest region "
        "(39% of the total).\n\n*Source: `data/sales_q3.csv`, totals from `scripts/totals.py`.*",
        goal="3",
        tokens=(1422, 188),
        seconds=4.2,
    )
    ask = d.add(
        "user",
        "Reflect on this run: what should future runs repeat or avoid?",
        kind="reflect",
        parent=answer,
        move_head=False,
    )
    d.add(
        "assistant",
        '```json\n[{"category": "tool_usage", "rule": "Compute totals with a script"}]\n```',
        kind="reflect",
        parent=ask,
        move_head=False,
        tokens=(1800, 120),
    )
    d.event("experiences_extracted", {"codes": []})
    return d.finish(TraceStatus.COMPLETED, result="Q3 sales summary with per-region breakdown."), {
        "read": read_seq,
        "bash": bash_seq,
        "answer": answer,
    }


def competitor_research(owner: Any, start: datetime) -> Trace:
    """Completed; delegated a pricing scan to a sub-trace (agent_call goal with cumulative stats)."""
    d = DemoTrace(
        owner,
        start,
        name="Competitor pricing scan",
        task="Compare our Pro plan price with three competitors and recommend a price.",
        agent_type="default",
    )
    d.add("system", SYSTEM)
    d.add("user", d.trace.task, kind="input")
    d.goal(
        "1",
        "Collect competitor prices",
        type="agent_call",
        status="completed",
        agent_call_mode="delegate",
        summary="Three prices collected by a sub-agent.",
    )
    d.goal("2", "Recommend a price", status="completed", summary="Keep $29, add annual plan at $290.")
    sub_id = f"{d.trace.trace_id}@delegate-{uuid.uuid4().hex[:8]}"
    d.goals["1"].sub_trace_ids = [sub_id]
    c = d.call(
        "agent",
        {"task": "Find the monthly price of the Pro/Team plan of Acme, Globex and Initech."},
        goal="1",
        tokens=(960, 52),
    )
    sub = DemoTrace(
        owner,
        d.now,
        trace_id=sub_id,
        name="Find competitor prices",
        agent_type="explore",
        task="Find the monthly price of the Pro/Team plan of Acme, Globex and Initech.",
        parent_trace=d.trace,
        parent_goal_id="1",
    )
    sub.add("system", SYSTEM)
    sub.add("user", sub.trace.task, kind="input")
    sub.goal("1", "Look up each vendor", status="completed")
    for vendor, price in (("acme", 25), ("globex", 32), ("initech", 29)):
        sc = sub.call(
            "webfetch", {"url": f"https://{vendor}.example.com/pricing"}, goal="1", tokens=(700, 30)
        )
        sub.result(sc, "webfetch", f"{vendor.title()} Team: **${price}** per user / month", goal="1")
    sub.add(
        "assistant", "Acme $25, Globex $32, Initech $29 (per user per month).", goal="1", tokens=(1100, 40)
    )
    sub_trace = sub.finish(TraceStatus.COMPLETED, result="Acme $25, Globex $32, Initech $29")
    d.tick(sub_trace.total_duration_ms / 1000)
    d.event("sub_trace_completed", {"sub_trace_id": sub_id, "status": "completed"})
    # A sub-trace's cost counts in its agent_call goal's cumulative stats (R8), not in its own.
    d.goals["1"].cumulative_stats = stats_add(
        d.goals["1"].cumulative_stats,
        {
            "message_count": sub_trace.total_messages,
            "prompt_tokens": sub_trace.total_prompt_tokens,
            "completion_tokens": sub_trace.total_completion_tokens,
            "total_tokens": sub_trace.total_tokens,
            "total_cost": sub_trace.total_cost,
            "duration_ms": sub_trace.total_duration_ms,
        },
    )
    d.result(c, "agent", f"Sub-trace {sub_id} completed: Acme $25, Globex $32, Initech $29.", goal="1")
    d.add(
        "assistant",
        "Our $29 sits at the median. **Recommendation**: keep $29 and add an annual plan at $290 "
        "(two months free) to compete with Acme on price.",
        goal="2",
        tokens=(1300, 70),
    )
    return d.finish(TraceStatus.COMPLETED, result="Keep $29; add an annual plan.")


def branch_cleanup(owner: Any, start: datetime) -> Trace:
    """Waiting: a risky bash call needs an expert's approval."""
    d = DemoTrace(
        owner,
        start,
        name="Delete merged deployment branches",
        task="Delete remote branches deploy/* that were merged into main more than 90 days ago.",
    )
    d.add("system", SYSTEM)
    d.add("user", d.trace.task, kind="input")
    d.goal("1", "List merged deploy branches", status="completed", summary="2 branches qualify.")
    d.goal("2", "Delete them", status="in_progress")
    c = d.call(
        "bash", {"command": "git branch -r --merged origin/main | grep deploy/"}, goal="1", tokens=(880, 40)
    )
    d.result(c, "bash", "origin/deploy/2026-05-rc1\norigin/deploy/2026-06-hotfix", goal="1")
    call_id = f"call_{uuid.uuid4().hex[:12]}"
    arguments = {"command": "git push origin --delete deploy/2026-05-rc1 deploy/2026-06-hotfix"}
    seq = d.add(
        "assistant",
        "Both branches are merged and older than 90 days; deleting them.",
        goal="2",
        tool_calls=[tool_call(call_id, "bash", arguments)],
        tokens=(990, 48),
    )
    approval = Approval.objects.create(
        trace=d.trace,
        tool_call_id=call_id,
        message_sequence=seq,
        tool_name="bash",
        arguments=arguments,
        risk="risky",
        requested_at=d.tick(0.2),
    )
    d.event(
        "confirm_required",
        {
            "approval_id": approval.pk,
            "tool": "bash",
            "arguments": arguments,
            "tool_call_id": call_id,
            "message_sequence": seq,
            "risk": "risky",
        },
    )
    d.event("waiting", {"reason": "approval", "approval_ids": [approval.pk]})
    d.trace.current_goal_id = "2"
    return d.finish(TraceStatus.WAITING)


def migration_window(owner: Any, start: datetime) -> Trace:
    """Waiting: the agent asked a human (ask_human) and waits for the answer."""
    d = DemoTrace(
        owner,
        start,
        name="Schedule the database migration",
        task="Plan the PostgreSQL 15 to 16 migration and pick a maintenance window.",
    )
    d.add("system", SYSTEM)
    d.add("user", d.trace.task, kind="input")
    d.goal("1", "Pick a maintenance window", status="in_progress")
    question = "Which window suits the team: **Saturday 02:00-04:00 UTC** or **Sunday 22:00-24:00 UTC**?"
    call_id = d.call("ask_human", {"question": question, "to": "expert"}, goal="1", tokens=(1020, 45))
    d.event("sub_trace_started", {"sub_trace_id": f"{d.trace.trace_id}@human-001", "mode": "human"})
    d.event("waiting", {"reason": "ask_human"})
    d.trace.current_goal_id = "1"
    d.trace.context = {
        "collaborators": [
            {
                "name": "expert",
                "type": "human",
                "trace_id": f"{d.trace.trace_id}@human-001",
                "status": "waiting",
                "summary": "asked: which maintenance window",
            }
        ]
    }
    trace = d.finish(TraceStatus.WAITING)
    child = human_request_create(
        parent=trace,
        trace_id=f"{trace.trace_id}@human-001",
        goal_id="1",
        tool_call_id=call_id,
        question=question,
        to="expert",
    )
    # The question was asked when the run began to wait, not when the demo was loaded.
    Trace.objects.filter(pk=child.pk).update(created_at=trace.updated_at, updated_at=trace.updated_at)
    Message.objects.filter(trace=child).update(created_at=trace.updated_at)
    TraceEvent.objects.filter(trace=child).update(created_at=trace.updated_at)
    return trace


def flaky_test(owner: Any, start: datetime) -> Trace:
    """Failed: loop detection saw the same read three times and flagged the trace."""
    d = DemoTrace(
        owner,
        start,
        name="Fix the flaky login test",
        task="tests/test_login.py::test_remember_me fails one run in ten. Find out why and fix it.",
    )
    d.add("system", SYSTEM)
    d.add("user", d.trace.task, kind="input")
    d.goal("1", "Reproduce the failure", status="in_progress")
    for attempt in range(3):
        c = d.call("read", {"path": "tests/test_login.py"}, goal="1", tokens=(1500 + attempt * 300, 28))
        d.result(
            c,
            "read",
            "def test_remember_me(client):\n    ...\n    assert cookie.expires > time.time()",
            goal="1",
        )
        if attempt == 1:
            d.event(
                "loop_detected",
                {
                    "level": "warning",
                    "kind": "generic_repeat",
                    "count": 2,
                    "detail": "read(tests/test_login.py) repeated with the same result",
                },
            )
            d.add(
                "system",
                "You are repeating the same call with the same result. Change approach.",
                kind="loop_warning",
                description="loop warning: generic_repeat",
                goal="1",
            )
    detail = "read(tests/test_login.py) repeated 3 times with the same result"
    d.event("loop_detected", {"level": "critical", "kind": "generic_repeat", "count": 3, "detail": detail})
    d.trace.needs_attention = True
    d.trace.attention_reason = f"loop detected (generic_repeat): {detail}"
    return d.finish(TraceStatus.FAILED, error=d.trace.attention_reason)


def stopped_run(owner: Any, start: datetime) -> Trace:
    d = DemoTrace(
        owner,
        start,
        name="Translate the docs to German",
        task="Translate docs/*.md to German.",
        agent_type="default",
    )
    d.add("system", SYSTEM)
    d.add("user", d.trace.task, kind="input")
    c = d.call("glob", {"pattern": "docs/*.md"}, goal=None, tokens=(640, 20))
    d.result(c, "glob", "docs/API.md\ndocs/ARCHITECTURE.md", goal=None)
    return d.finish(TraceStatus.STOPPED)
