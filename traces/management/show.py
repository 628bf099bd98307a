"""`run_agent --show ID`: a trace's main path at a terminal, a page at a time.

One line per message (sequence, role, kind, a one-line gist, the tools an
assistant called), branch points marked with where their side branches start,
and the sequences to page on. It costs two queries whatever the trace's length:
the main path (traces.selectors.trace_main_path_for_run, the columns a run
reads) and every message's (sequence, parent) pair, so a 10,000-message trace
prints as fast as a short one.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

from django.core.management.base import CommandError

from traces.models import Message, Trace
from traces.runner.tool_call import ToolCall
from traces.selectors import PathMessage, trace_main_path_for_run

GIST_CHARS = 110
BRANCHES_LISTED = 20

Styler = Callable[[str], str]


def main_path_lines(
    trace: Trace, *, last: int, start: int | None = None, heading: Styler = str, mark: Styler = str
) -> Iterator[str]:
    """The lines `run_agent --show` prints above the trace's status: the last `last`
    main-path messages, or `last` of them from sequence `start` on."""
    path = trace_main_path_for_run(trace_id=trace.trace_id, head_sequence=trace.head_sequence)
    show = f"run_agent --show {trace.trace_id}"
    yield heading(f"trace {trace.trace_id}  {trace.name}".rstrip())
    if not path:
        yield "no messages yet"
        return
    first = _first_index(path, trace, start, last)
    page = path[first : first + last]
    children = _children(trace.trace_id)
    on_path = {m.sequence for m in path}
    yield (
        f"main path: {len(path)} messages, #{path[0].sequence} to #{path[-1].sequence} (head); "
        f"showing #{page[0].sequence} to #{page[-1].sequence}"
    )
    if first:
        yield f"... {first} earlier: {show} --from {path[max(first - last, 0)].sequence} --last {last}"
    for message in page:
        yield _line(message)
        side = [s for s in children.get(message.sequence, ()) if s not in on_path]
        if side:
            # A branch point has more than one child; the head may have a side branch alone.
            point = "branch point, " if len(children[message.sequence]) > 1 else ""
            starts = ", ".join(f"#{s}" for s in side)
            yield mark(f"       {point}side branch{'es' if len(side) > 1 else ''} from here: {starts}")
    rest = len(path) - first - len(page)
    if rest:
        yield f"... {rest} later: {show} --from {path[first + len(page)].sequence} --last {last}"
    yield from _branch_summary(path, children, on_path)


def _first_index(path: list[PathMessage], trace: Trace, start: int | None, last: int) -> int:
    if start is None:
        return max(len(path) - last, 0)
    for index, message in enumerate(path):
        if message.sequence >= start:
            return index
    raise CommandError(
        f"--from {start} is past the main path of trace {trace.trace_id} (head #{path[-1].sequence}); "
        f"see run_agent --show {trace.trace_id}",
        returncode=2,
    )


def _children(trace_id: str) -> dict[int, list[int]]:
    """Every message's children by parent sequence (two integer columns per message)."""
    children: dict[int, list[int]] = defaultdict(list)
    pairs = Message.objects.filter(trace_id=trace_id).order_by("sequence")
    for sequence, parent in pairs.values_list("sequence", "parent_sequence"):
        if parent is not None:
            children[parent].append(sequence)
    return children


def _branch_summary(
    path: list[PathMessage], children: dict[int, list[int]], on_path: set[int]
) -> Iterator[str]:
    """Where side branches leave the whole main path (not only the page shown)."""
    points = [(m.sequence, [s for s in children.get(m.sequence, ()) if s not in on_path]) for m in path]
    points = [(at, side) for at, side in points if side]
    if not points:
        yield "no side branches"
        return
    listed = "; ".join(
        f"#{at} -> {', '.join(f'#{s}' for s in side)}" for at, side in points[:BRANCHES_LISTED]
    )
    more = f"; and {len(points) - BRANCHES_LISTED} more" if len(points) > BRANCHES_LISTED else ""
    yield f"side branches leave the main path at: {listed}{more}"


def _line(message: PathMessage) -> str:
    kind = f" ({message.kind})" if message.kind else ""
    label = f"[{message.sequence:>4}] {message.role:<9}{kind}"
    text = _text(message.content)
    if message.role == "tool":
        text = f"{message.name or '?'}: {text}"
    gist = _gist(text or message.description)
    calls = ", ".join(ToolCall.name_of(call) or "?" for call in message.tool_calls or ())
    if calls:
        gist = f"{gist}  -> {calls}" if gist else f"-> {calls}"
    return f"{label} {gist}".rstrip()


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # multimodal: the text parts, other parts by their type
        parts = (
            str(p.get("text", "")) if p.get("type") == "text" else f"[{p.get('type', 'part')}]"
            for p in content
            if isinstance(p, dict)
        )
        return " ".join(parts)
    return str(content)


def _gist(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= GIST_CHARS else text[: GIST_CHARS - 3] + "..."
