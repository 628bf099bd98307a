"""`manage.py load_demo`: realistic demo traces and experiences, no model key needed.

Writes rows directly (no model call): a completed trace with a rewind branch,
goals with stats and a reflection side branch; a trace that delegated to a
sub-trace; one waiting for an expert's approval, one for an answer (ask_human);
one flagged by loop detection;
and experiences in draft, approved and retired. Demo traces carry uid "demo";
`--reset` replaces them.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from django.utils import timezone

from memory.models import Experience, ExperienceSource, ExperienceStatus
from memory.services import experience_create
from traces.models import Approval, Goal, Message, Trace, TraceEvent, TraceStatus

DEMO_UID = "demo"
MODEL = "openai/gpt-4o-mini"
PRICE_IN, PRICE_OUT = 0.15e-6, 0.6e-6
SYSTEM = "You are a careful agent. Plan with the goal tool, use tools, and answer in Markdown."


class DemoTrace:
    """Builds one trace's rows in order: messages with a proper tree, goals, events, totals."""

    def __init__(self, owner: Any, start: datetime, **fields: Any) -> None:
        self.now = start
        self.trace = Trace.objects.create(
            trace_id=fields.pop("trace_id", None) or str(uuid.uuid4()),
            owner=owner,
            uid=DEMO_UID,
            model=MODEL,
            created_at=start,
            updated_at=start,
            **fields,
        )
        self.messages: dict[int, Message] = {}
        self.goals: dict[str, Goal] = {}
        self.event("run_started", {"mode": "new", "model": MODEL, "agent_type": self.trace.agent_type})

    def tick(self, seconds: float = 2.0) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now

    def event(self, type_: str, payload: dict[str, Any]) -> None:
        self.trace.last_event_id += 1
        TraceEvent.objects.create(
            trace=self.trace,
            event_id=self.trace.last_event_id,
            type=type_,
            payload=payload,
            created_at=self.now,
        )

    def goal(self, goal_id: str, description: str, *, parent: str | None = None, **fields: Any) -> Goal:
        goal = Goal.objects.create(
            trace=self.trace,
            goal_id=goal_id,
            description=description,
            parent_id=parent,
            position=float(len(self.goals) + 1),
            created_at=self.tick(0.5),
            **fields,
        )
        self.goals[goal_id] = goal
        self.event("goal_added", {"goal_id": goal_id, "description": description, "parent_id": parent})
        return goal

    def add(
        self,
        role: str,
        content: Any = None,
        *,
        parent: int | None = -1,
        goal: str | None = None,
        tool_calls: list[dict[str, Any]] | None = None,
        tool_call_id: str | None = None,
        name: str | None = None,
        kind: str = "",
        description: str = "",
        move_head: bool = True,
        tokens: tuple[int, int] = (0, 0),
        seconds: float = 1.5,
    ) -> int:
        trace = self.trace
        sequence = trace.last_sequence + 1
        if parent == -1:
            parent = trace.head_sequence or None
        start = sequence
        if parent is not None and parent == sequence - 1:
            start = self.messages[parent].segment_start or parent
        prompt, completion = tokens
        cost = round(prompt * PRICE_IN + completion * PRICE_OUT, 8) if role == "assistant" else None
        duration = int(seconds * 1000) if role == "assistant" else None
        message = Message.objects.create(
            message_id=Message.make_id(trace.trace_id, sequence),
            trace=trace,
            role=role,
            sequence=sequence,
            parent_sequence=parent,
            segment_start=start,
            goal_id=goal,
            content=content,
            tool_calls=tool_calls,
            tool_call_id=tool_call_id,
            name=name,
            kind=kind,
            description=description,
            prompt_tokens=prompt or None,
            completion_tokens=completion or None,
            cost=cost,
            duration_ms=duration,
            finish_reason=("tool_calls" if tool_calls else "stop") if role == "assistant" else None,
            created_at=self.tick(seconds),
        )
        self.messages[sequence] = message
        trace.last_sequence = sequence
        if move_head:
            trace.head_sequence = sequence
        trace.total_messages += 1
        trace.total_prompt_tokens += prompt
        trace.total_completion_tokens += completion
        trace.total_tokens += prompt + completion
        trace.total_cost = round(trace.total_cost + (cost or 0), 8)
        trace.total_duration_ms += duration or 0
        if goal and goal in self.goals:
            self._stats(self.goals[goal], prompt, completion, cost or 0, duration or 0)
        self.event("message", {"sequence": sequence, "role": role, "parent_sequence": parent, "kind": kind})
        return sequence

    def _stats(self, goal: Goal, prompt: int, completion: int, cost: float, duration: int) -> None:
        delta = {
            "message_count": 1,
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "total_cost": cost,
            "duration_ms": duration,
        }
        goal.self_stats = _add(goal.self_stats, delta)
        node: Goal | None = goal
        while node is not None:
            node.cumulative_stats = _add(node.cumulative_stats, delta)
            node = self.goals.get(node.parent_id or "")

    def call(
        self, name: str, arguments: dict[str, Any], *, goal: str | None, text: str = "", **kw: Any
    ) -> str:
        call_id = f"call_{uuid.uuid4().hex[:12]}"
        calls = [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
        ]
        self.add("assistant", text or None, goal=goal, tool_calls=calls, **kw)
        self.event("tool_call", {"tool_call_id": call_id, "name": name, "arguments": json.dumps(arguments)})
        return call_id

    def result(self, call_id: str, name: str, output: str, *, goal: str | None, kind: str = "") -> int:
        self.event("tool_result", {"tool_call_id": call_id, "name": name})
        return self.add("tool", output, goal=goal, tool_call_id=call_id, name=name, kind=kind, seconds=0.3)

    def finish(self, status: str, *, result: str | None = None, error: str | None = None) -> Trace:
        trace = self.trace
        for goal in self.goals.values():
            goal.save()
        trace.status = status
        trace.result_summary = result
        trace.error_message = error
        trace.updated_at = self.now
        if status in (TraceStatus.COMPLETED, TraceStatus.FAILED, TraceStatus.STOPPED):
            trace.completed_at = self.now
            self.event(
                "final"
                if status == TraceStatus.COMPLETED
                else "error"
                if status == TraceStatus.FAILED
                else "stopped",
                {"status": status, "result": result, "error": error, "head_sequence": trace.head_sequence},
            )
        trace.save()
        return trace


def _add(stats: dict[str, Any] | None, delta: dict[str, Any]) -> dict[str, Any]:
    merged = dict(stats or {})
    for key, value in delta.items():
        merged[key] = round(merged.get(key, 0) + value, 10)
    return merged


def _tool_call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


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
    d.goals["1"].cumulative_stats = _add(
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
        tool_calls=[_tool_call(call_id, "bash", arguments)],
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
    from traces.collaboration.humans import human_request_create

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
    human_request_create(
        parent=trace,
        trace_id=f"{trace.trace_id}@human-001",
        goal_id="1",
        tool_call_id=call_id,
        question=question,
        to="expert",
    )
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


def experiences(sales: Trace, refs: dict[str, int], loop: Trace) -> list[Experience]:
    def evidence(trace: Trace, *sequences: int) -> dict[str, Any]:
        return {
            "trace_id": trace.trace_id,
            "messages": [
                {"sequence": s, "message_id": Message.make_id(trace.trace_id, s)} for s in sequences
            ],
        }

    rows: list[dict[str, Any]] = [
        dict(
            rule="Compute totals with a script (`bash`) instead of adding numbers in your head; quote the script.",
            condition="a task asks for sums or averages over a table",
            category="tool_usage",
            tags={"intent": ["data_analysis"], "state": ["csv_input"]},
            status=ExperienceStatus.DRAFT,
            source=ExperienceSource.EXECUTION,
            evidence=evidence(sales, refs["bash"]),
            trace=sales,
            confidence=0.8,
        ),
        dict(
            rule="Break totals down by the main dimension (region, product) and **flag decreases** unprompted.",
            condition="summarising business data for executives",
            category="logic_flow",
            tags={"intent": ["reporting"], "state": ["csv_input"]},
            status=ExperienceStatus.DRAFT,
            source=ExperienceSource.EXECUTION,
            evidence=evidence(sales, refs["read"], refs["answer"]),
            trace=sales,
            confidence=0.7,
        ),
        dict(
            rule="After two identical reads, stop re-reading: run the test with `-p no:randomly --count 20` "
            "to reproduce instead.",
            condition="a flaky test needs reproducing",
            category="tool_usage",
            tags={"intent": ["debugging"], "state": ["flaky_test"]},
            status=ExperienceStatus.APPROVED,
            source=ExperienceSource.FEEDBACK,
            evidence=evidence(loop, 3, 5),
            trace=loop,
            helpful=3,
            confidence=0.9,
        ),
        dict(
            rule="List what a destructive git command will touch and ask before running it.",
            condition="deleting branches, tags or history",
            category="environment",
            tags={"intent": ["git_cleanup"], "state": ["remote_repository"]},
            status=ExperienceStatus.APPROVED,
            source=ExperienceSource.MANUAL,
            evidence={},
            trace=None,
            helpful=5,
            usage_count=7,
            confidence=0.95,
        ),
        dict(
            rule="Always answer in English.",
            condition="any task",
            category="communication",
            tags={"intent": ["writing"], "state": []},
            status=ExperienceStatus.RETIRED,
            source=ExperienceSource.MANUAL,
            evidence={},
            trace=None,
            harmful=2,
            confidence=0.3,
        ),
    ]
    return [experience_create(**row) for row in rows]


class Command(BaseCommand):
    help = "Fill the database with demo traces and experiences (no model key needed)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--owner", default="expert", help="username owning the demo traces (default: expert)"
        )
        parser.add_argument("--reset", action="store_true", help="replace demo data loaded before")

    def handle(self, *args: Any, owner: str, reset: bool, **options: Any) -> None:
        demo = Trace.objects.filter(uid=DEMO_UID)
        if demo.exists() and not reset:
            raise CommandError("demo data is already loaded; use --reset to replace it")
        user = get_user_model().objects.filter(username=owner).first()
        if user is None:
            if owner != "expert":
                raise CommandError(f"no user {owner!r}")
            call_command("ensure_expert", stdout=self.stdout)
            user = get_user_model().objects.get(username=owner)
        with transaction.atomic():
            Experience.objects.filter(trace__uid=DEMO_UID).delete()
            Experience.objects.filter(
                condition__in=["deleting branches, tags or history", "any task"],
                trace__isnull=True,
                source=ExperienceSource.MANUAL,
            ).delete()
            demo.delete()
            base = timezone.now() - timedelta(hours=6)
            sales, refs = sales_report(user, base)
            competitor_research(user, base + timedelta(hours=1))
            flaky = flaky_test(user, base + timedelta(hours=2))
            stopped_run(user, base + timedelta(hours=3))
            migration_window(user, base + timedelta(hours=4))
            branch_cleanup(user, base + timedelta(hours=5))
            created = experiences(sales, refs, flaky)
        self.stdout.write(
            f"Loaded {Trace.objects.filter(uid=DEMO_UID).count()} demo traces and {len(created)} experiences "
            f"owned by {owner!r}; open http://127.0.0.1:8000/ and log in."
        )
