"""Reads of suite runs: the comparison table of a run against its baseline."""

from __future__ import annotations

from dataclasses import dataclass

from suites.models import CaseRun, Outcome, SuiteRun


@dataclass(frozen=True)
class Row:
    """One case of a suite run beside the same case in the baseline run (if any)."""

    case_id: int
    case: str
    now: CaseRun
    before: CaseRun | None

    @property
    def change(self) -> str:
        """ "regression" (passed before, fails now), "fixed" (the reverse), else ""."""
        if self.before is None or Outcome.RUNNING in (self.now.outcome, self.before.outcome):
            return ""
        if self.before.outcome == Outcome.PASSED and self.now.outcome == Outcome.FAILED:
            return "regression"
        if self.before.outcome == Outcome.FAILED and self.now.outcome == Outcome.PASSED:
            return "fixed"
        return ""


@dataclass(frozen=True)
class Table:
    run: SuiteRun
    rows: list[Row]

    @property
    def passed(self) -> int:
        return sum(r.now.outcome == Outcome.PASSED for r in self.rows)

    @property
    def finished(self) -> int:
        return sum(r.now.outcome != Outcome.RUNNING for r in self.rows)

    @property
    def pass_rate(self) -> float:
        return self.passed / len(self.rows) if self.rows else 0.0

    @property
    def regressions(self) -> list[str]:
        return [r.case for r in self.rows if r.change == "regression"]

    @property
    def fixed(self) -> list[str]:
        return [r.case for r in self.rows if r.change == "fixed"]


def suite_run_table(run: SuiteRun) -> Table:
    now = list(run.case_runs.select_related("case").order_by("case_id"))
    before: dict[int, CaseRun] = {}
    if run.baseline_id is not None:
        before = {cr.case_id: cr for cr in CaseRun.objects.filter(suite_run_id=run.baseline_id)}
    rows = [Row(cr.case_id, cr.case.name, cr, before.get(cr.case_id)) for cr in now]
    return Table(run, rows)


def format_table(table: Table) -> str:
    """The table as plain text (the run_suite command, the closing notes)."""
    head = ["case", "outcome", "baseline", "change", "tokens", "cost $", "seconds"]
    lines = [head]
    for row in table.rows:
        before = row.before
        lines.append(
            [
                row.case,
                row.now.outcome,
                before.outcome if before else "-",
                row.change or "-",
                _versus(row.now.tokens, before.tokens if before else None, "{:d}"),
                _versus(row.now.cost, before.cost if before else None, "{:.4f}"),
                _versus(row.now.duration_ms / 1000, before.duration_ms / 1000 if before else None, "{:.1f}"),
            ]
        )
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(head))]
    text = ["  ".join(str(v).ljust(w) for v, w in zip(line, widths, strict=True)).rstrip() for line in lines]
    summary = f"{table.passed}/{len(table.rows)} passed ({table.pass_rate:.0%})"
    if table.regressions:
        summary += f"; regressions: {', '.join(table.regressions)}"
    if table.fixed:
        summary += f"; fixed: {', '.join(table.fixed)}"
    return "\n".join([*text, summary])


def _versus(now: float, before: float | None, fmt: str) -> str:
    return fmt.format(now) if before is None else f"{fmt.format(now)} (was {fmt.format(before)})"
