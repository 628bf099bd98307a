"""Export a trace with its sub-traces in seed 004's directory layout, and import one
(seed 004 「存储结构」; issue 26 item 8).

    {trace_id}/meta.json       the trace's row (owner by name, run lease fields left out)
    {trace_id}/goal.json       {"mission": task, "goals": [...]}
    {trace_id}/events.jsonl    the event log, one event a line
    {trace_id}/messages/{message_id}.json
    {trace_id}@explore-.../    each sub-trace beside its root, the same way

One archive is that directory as a .tar.gz. Rows are written field by field from the
models (`_row`) and read back through each field's `to_python`, so a field added
later travels without this module changing; unknown fields in a file are ignored.
Workspace files and stored media are not exported (README). An import is all or
nothing: a trace id that exists already is a 409, a malformed file a 400 naming it,
and traces that were queued or running arrive stopped.
"""

from __future__ import annotations

import datetime
import io
import json
import re
import tarfile
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models, transaction

from traces.models import ACTIVE_STATUSES, Goal, Message, Trace, TraceEvent, TraceStatus
from traces.runner import InvalidRun, RunConflict
from traces.selectors import trace_visible_or_404

FORMAT = "agentsite-trace/1"
LEASE = ("owner_id", "run_owner", "run_token", "heartbeat_at", "stop_requested", "run_request", "queued_at")
MAX_ARCHIVE_MEMBERS = 200_000
MAX_ARCHIVE_BYTES = 2 * 1024**3


def trace_export(*, user: Any, trace_id: str, directory: Path) -> list[str]:
    """Write the trace and its sub-traces under `directory`; the trace ids written."""
    root = trace_visible_or_404(user=user, trace_id=trace_id)
    written = []
    for trace in [root, *_descendants(root.trace_id)]:
        folder = directory / _dir_name(trace.trace_id)
        (folder / "messages").mkdir(parents=True, exist_ok=True)
        meta = {
            "format": FORMAT,
            **_row(trace, skip=LEASE),
            "owner": trace.owner.get_username() if trace.owner else None,
        }
        _write(folder / "meta.json", meta)
        goals = [
            _row(g, skip=("id", "trace_id")) for g in Goal.objects.filter(trace=trace).order_by("position")
        ]
        _write(folder / "goal.json", {"mission": trace.task, "goals": goals})
        with (folder / "events.jsonl").open("w", encoding="utf-8") as out:
            for event in TraceEvent.objects.filter(trace=trace).order_by("event_id").iterator():
                out.write(_dumps(_row(event, skip=("id", "trace_id"))) + "\n")
        for message in Message.objects.filter(trace=trace).order_by("sequence").iterator():
            _write(
                folder / "messages" / f"{_dir_name(message.message_id)}.json",
                _row(message, skip=("trace_id",)),
            )
        written.append(trace.trace_id)
    return written


def trace_export_archive(*, user: Any, trace_id: str) -> bytes:
    """The export as one .tar.gz."""
    with tempfile.TemporaryDirectory(prefix="agentsite-export-") as tmp:
        trace_export(user=user, trace_id=trace_id, directory=Path(tmp))
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
            for child in sorted(Path(tmp).iterdir()):
                archive.add(child, arcname=child.name)
        return buffer.getvalue()


def trace_import(*, user: Any, source: Path | bytes) -> Trace:
    """Import an export (a directory or .tar.gz bytes) as `user`'s; the root trace."""
    if isinstance(source, bytes):
        with tempfile.TemporaryDirectory(prefix="agentsite-import-") as tmp:
            _extract(source, Path(tmp))
            return _import_directory(user, Path(tmp))
    return _import_directory(user, source)


def _import_directory(user: Any, directory: Path) -> Trace:
    folders = sorted(p.parent for p in directory.glob("*/meta.json"))
    if not folders:
        raise InvalidRun("archive: no trace in it (no */meta.json)")
    metas = {folder: _read(folder / "meta.json") for folder in folders}
    for folder, meta in metas.items():
        if meta.get("format") != FORMAT:
            raise InvalidRun(f"{folder.name}/meta.json: not an agentsite trace export ({FORMAT})")
    ids = {str(meta.get("trace_id") or "") for meta in metas.values()}
    roots = [f for f, m in metas.items() if m.get("parent_trace_id") not in ids]
    if len(roots) != 1 or "" in ids:
        raise InvalidRun("archive: one root trace and its sub-traces, each with a trace_id, are expected")
    taken = sorted(Trace.objects.filter(pk__in=ids).values_list("pk", flat=True))
    if taken:
        raise RunConflict(f"trace {taken[0]!r} exists here already; delete it first to import this export")
    order = sorted(metas, key=lambda f: _depth(metas[f], metas))
    with transaction.atomic():
        for folder in order:
            _import_trace(user, folder, metas[folder])
    return Trace.objects.get(pk=metas[roots[0]]["trace_id"])


def _import_trace(user: Any, folder: Path, meta: dict[str, Any]) -> None:
    where = f"{folder.name}/meta.json"
    trace = Trace(**_fields(Trace, meta, where, skip=(*LEASE, "owner")), owner=user)
    if trace.status in ACTIVE_STATUSES:
        trace.status = TraceStatus.STOPPED
        trace.error_message = "imported while its run was in progress; continue it to run on"
    _save(trace, where)
    goals = _read(folder / "goal.json").get("goals") if (folder / "goal.json").exists() else []
    Goal.objects.bulk_create(
        [
            Goal(trace=trace, **_fields(Goal, g, f"{folder.name}/goal.json", skip=("id", "trace_id")))
            for g in goals or []
        ]
    )
    events = []
    if (folder / "events.jsonl").exists():
        for number, line in enumerate((folder / "events.jsonl").read_text("utf-8").splitlines(), start=1):
            if line.strip():
                where = f"{folder.name}/events.jsonl line {number}"
                events.append(
                    TraceEvent(trace=trace, **_fields(TraceEvent, _loads(line, where), where, skip=("id",)))
                )
    TraceEvent.objects.bulk_create(events, batch_size=1000)
    messages = [
        Message(
            **_fields(Message, _read(path), f"{folder.name}/messages/{path.name}", skip=("trace_id",)),
            trace=trace,
        )
        for path in sorted((folder / "messages").glob("*.json"))
    ]
    for message in messages:
        if not message.message_id.startswith(trace.trace_id):
            raise InvalidRun(f"{folder.name}/messages: message {message.message_id!r} is not of this trace")
    Message.objects.bulk_create(messages, batch_size=500)


def _descendants(trace_id: str) -> list[Trace]:
    found: list[Trace] = []
    level = [trace_id]
    while level:
        children = list(
            Trace.objects.filter(parent_trace_id__in=level).select_related("owner").order_by("created_at")
        )
        found += children
        level = [c.trace_id for c in children]
    return found


def _depth(meta: dict[str, Any], metas: dict[Path, dict[str, Any]]) -> int:
    by_id = {m["trace_id"]: m for m in metas.values()}
    depth, parent = 0, meta.get("parent_trace_id")
    while parent in by_id and depth <= len(by_id):
        depth, parent = depth + 1, by_id[parent].get("parent_trace_id")
    return depth


def _row(obj: models.Model, *, skip: Iterable[str] = ()) -> dict[str, Any]:
    skipped = set(skip)
    return {
        f.attname: f.value_from_object(obj) for f in obj._meta.concrete_fields if f.attname not in skipped
    }


def _fields(model: type[models.Model], data: Any, where: str, *, skip: Iterable[str] = ()) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise InvalidRun(f"{where}: a JSON object is expected")
    skipped = set(skip)
    values = {}
    for field in model._meta.concrete_fields:
        if field.attname in skipped or field.attname not in data or isinstance(field, models.AutoField):
            continue
        if field.attname == "trace_id" and model is not Trace:
            continue
        try:
            values[field.attname] = field.to_python(data[field.attname])
        except ValidationError as exc:
            raise InvalidRun(f"{where}: {field.attname}: {'; '.join(exc.messages)}") from None
    return values


def _save(trace: Trace, where: str) -> None:
    try:
        trace.full_clean(exclude=["owner", "parent_trace"], validate_unique=False, validate_constraints=False)
    except ValidationError as exc:
        field, errors = next(iter(exc.message_dict.items()))
        raise InvalidRun(f"{where}: {field}: {errors[0]}") from None
    trace.save(force_insert=True)


def _dir_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9@._-]", "_", name)[:200]


class _Encoder(DjangoJSONEncoder):
    """Django's encoder, but datetimes keep their microseconds (it cuts them to
    milliseconds), so a round trip gives back the very same timestamps."""

    def default(self, o: Any) -> Any:
        if isinstance(o, datetime.datetime):
            return o.isoformat()
        return super().default(o)


def _dumps(data: Any) -> str:
    return json.dumps(data, cls=_Encoder, ensure_ascii=False)


def _write(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, cls=_Encoder, ensure_ascii=False, indent=1), encoding="utf-8")


def _loads(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidRun(f"{where}: not JSON ({exc.msg}, line {exc.lineno})") from None


def _read(path: Path) -> Any:
    return _loads(path.read_text("utf-8"), path.parent.name + "/" + path.name)


def _extract(data: bytes, into: Path) -> None:
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as archive:
            members = archive.getmembers()
            if len(members) > MAX_ARCHIVE_MEMBERS or sum(m.size for m in members) > MAX_ARCHIVE_BYTES:
                raise InvalidRun("archive: too large to import")
            archive.extractall(into, filter="data")  # no links out, no absolute paths, no devices
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise InvalidRun(f"archive: not a readable .tar.gz ({exc})") from None
