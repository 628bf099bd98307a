"""`manage.py run_agent "task"`: run an agent in the terminal with live progress (O4)."""

from __future__ import annotations

import argparse
import json
import re
import signal
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory.reflect import reflect_on_trace
from traces.management.show import main_path_lines
from traces.media.intake import InvalidMedia, local_file_part, media_intake
from traces.models import ApprovalStatus, Message, Trace, TraceStatus
from traces.runner import AgentRunner, RunConfig, RunError, run_settings
from traces.runner.run_settings import STRATEGIES
from traces.runner.tool_call import ToolCall
from traces.services.approvals import approval_decide, approvals_for
from traces.totals import cost_text
from traces.waiting import traces_waiting_for

EXIT_CODES: dict[str, int] = {
    TraceStatus.COMPLETED: 0,
    TraceStatus.FAILED: 1,
    TraceStatus.STOPPED: 3,
    TraceStatus.WAITING: 4,
}
# The answers to an approval prompt at the terminal: (decision, scope).
TERMINAL_DECISIONS = {"a": ("approve", "call"), "r": ("approve", "run"), "d": ("deny", "call")}


class Command(BaseCommand):
    help = (
        "Run an agent on a task (or continue / rewind an existing trace) and print each "
        "message as it is persisted. Exit code 0 only when the trace completes."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("task", nargs="?", default="", help="the task, or the new message for --trace")
        parser.add_argument(
            "--image",
            action="append",
            default=[],
            metavar="PATH",
            help="attach an image (png, jpeg, webp, gif) or a PDF to the message (repeatable)",
        )
        parser.add_argument("--model", help="litellm model string (default: AGENT_MODEL)")
        parser.add_argument(
            "--preset", default="default", help="agent preset (default, explore, analyst, ...)"
        )
        parser.add_argument("--trace", dest="trace_id", help="continue this trace instead of starting one")
        parser.add_argument(
            "--after", type=int, dest="after_sequence", help="rewind: run after this message sequence"
        )
        parser.add_argument("--max-iterations", type=int, help="step limit (kept by later runs of the trace)")
        parser.add_argument("--temperature", type=float, help="sampling temperature")
        parser.add_argument("--tools", help="comma-separated tool names the run may use")
        parser.add_argument("--skills", help="comma-separated skills for the system prompt")
        parser.add_argument("--system-prompt", help="the system prompt of a new run")
        parser.add_argument(
            "--llm-param",
            action="append",
            default=[],
            metavar="KEY=JSON",
            help="a model parameter, e.g. top_p=0.9 (repeatable)",
        )
        parser.add_argument(
            "--confirm-policy", choices=["auto", "ask-risky", "ask-all"], help="which calls wait"
        )
        parser.add_argument("--no-memory", action="store_true", help="retrieve no experiences for a new run")
        parser.add_argument(
            "--network",
            action=argparse.BooleanOptionalAction,
            default=None,
            help="give (or take) the run's sandboxed tools the network",
        )
        parser.add_argument(
            "--project",
            help='work in this project of AGENT_PROJECTS ("name" or "name/dir"; kept by later runs)',
        )
        parser.add_argument(
            "--strategy",
            choices=list(STRATEGIES),
            help="react (the loop), routed (router: direct, loop or plan) or plan_execute; kept by later runs",
        )
        parser.add_argument(
            "--reflexion",
            action=argparse.BooleanOptionalAction,
            default=None,
            help="a self-critique and a retry after a failed tool call (default: on for plan_execute)",
        )
        parser.add_argument("--name", help="display name of a new trace")
        parser.add_argument("--no-stream", action="store_true", help="plain model calls instead of streaming")
        parser.add_argument(
            "--as",
            dest="approver",
            default="expert",
            help="staff user recorded as the decider of approvals answered in the terminal (default: expert)",
        )
        parser.add_argument(
            "--show",
            metavar="ID",
            help="print the trace's main path (sequences to rewind at, branch points) and its status",
        )
        parser.add_argument(
            "--last", type=int, default=50, metavar="N", help="with --show: how many messages (default 50)"
        )
        parser.add_argument(
            "--from",
            type=int,
            dest="from_sequence",
            metavar="SEQ",
            help="with --show: start at this sequence",
        )
        parser.add_argument(
            "--reflect",
            nargs="?",
            const="",
            metavar="FOCUS",
            help="reflect on the trace (after the run, or alone with --trace) to extract draft experiences",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["show"]:
            return self._show(options["show"], options["last"], options["from_sequence"])
        task = options["task"]
        if not task and not options["trace_id"]:
            raise CommandError("give a task, or --trace ID to continue a trace")
        if options["reflect"] is not None and not task:
            return self._reflect(options["trace_id"], options["reflect"])
        messages = self._messages(task, options["image"])
        config = RunConfig(
            **self._run_settings(options),
            model=options["model"],
            agent_type=options["preset"],
            trace_id=options["trace_id"],
            after_sequence=options["after_sequence"],
            name=options["name"],
            stream=False if options["no_stream"] else None,
            on_token=self._print_token,
        )
        runner = AgentRunner()
        trace = self._run(runner, messages, config)
        # A run that waits for approvals goes on here once they are decided at the terminal.
        while trace.status == TraceStatus.WAITING and sys.stdin.isatty():
            if not self._decide_in_terminal(trace, options["approver"]):
                break
            trace = self._run(runner, [], RunConfig(trace_id=trace.trace_id, on_token=self._print_token))
        self._print_summary(trace)
        if options["reflect"] is not None:
            self._reflect(trace.trace_id, options["reflect"], exit_on_failure=False)
        code = EXIT_CODES.get(trace.status, 1)
        if code:
            raise CommandError(f"trace {trace.trace_id} ended {trace.status}", returncode=code)

    def _messages(self, task: str, images: list[str]) -> list[dict[str, Any]]:
        """The user message: the task, and each --image as a checked, stored part (exit 2 naming a refused one)."""
        if not images:
            return [{"role": "user", "content": task}] if task else []
        parts: list[dict[str, Any]] = [{"type": "text", "text": task or "(see the attached files)"}]
        try:
            parts += [local_file_part(Path(path)) for path in images]
            return media_intake([{"role": "user", "content": parts}])
        except OSError as exc:
            raise CommandError(f"--image: {exc}", returncode=2) from None
        except InvalidMedia as exc:
            match = re.match(r"^messages\[0\]\.content\[(\d+)\]", exc.where)
            where = images[int(match[1]) - 1] if match else exc.where
            raise CommandError(f"--image {where}: {exc.reason}", returncode=2) from None

    def _run_settings(self, options: dict[str, Any]) -> dict[str, Any]:
        """The run settings given as flags, checked like the API's (exit 2 naming the flag's field)."""
        params = {}
        for item in options["llm_param"]:
            key, _, raw = item.partition("=")
            try:
                params[key.strip()] = json.loads(raw)
            except json.JSONDecodeError:
                params[key.strip()] = raw  # a bare word: a string
        values = {
            "max_iterations": options["max_iterations"],
            "temperature": options["temperature"],
            "tools": _names(options["tools"]),
            "skills": _names(options["skills"]),
            "system_prompt": options["system_prompt"],
            "llm_params": params or None,
            "confirm_policy": options["confirm_policy"],
            "enable_memory": False if options["no_memory"] else None,
            "sandbox_network": options["network"],
            "strategy": options["strategy"],
            "reflexion": options["reflexion"],
            "project": options["project"],
        }
        try:  # the terminal is the operator's: it may loosen the gate
            return run_settings.check_request(values, baseline_policy="auto", may_loosen=True)
        except RunError as exc:
            raise CommandError(str(exc), returncode=2) from None

    def _run(self, runner: AgentRunner, messages: list[dict[str, Any]], config: RunConfig) -> Trace:
        """One run, printed as it goes; Ctrl-C stops it cleanly."""
        trace: Trace | None = None
        previous = signal.getsignal(signal.SIGINT)

        def interrupt(signum: int, frame: Any) -> None:
            if trace is not None:
                self.stderr.write("\nstopping (Ctrl-C again to abort) ...")
                runner.stop(trace.trace_id)
            signal.signal(signal.SIGINT, previous)

        signal.signal(signal.SIGINT, interrupt)
        try:
            for item in runner.run(messages, config):
                if isinstance(item, Trace):
                    if trace is None and not config.trace_id:
                        self.stdout.write(self.style.MIGRATE_HEADING(f"trace {item.trace_id}  {item.name}"))
                    trace = item
                else:
                    self._print_message(item)
        except RunError as exc:
            raise CommandError(_pointing_at_show(str(exc), config.trace_id), returncode=2) from None
        finally:
            signal.signal(signal.SIGINT, previous)
        assert trace is not None
        return trace

    def _show(self, trace_id: str, last: int, start: int | None) -> None:
        """`--show ID`: the main path, a page of it, then the status line as after a run."""
        trace = Trace.objects.filter(pk=trace_id).first()
        if trace is None:
            raise CommandError(f"trace {trace_id} does not exist", returncode=2)
        if last < 1:
            raise CommandError("--last must be at least 1", returncode=2)
        style = self.style
        for line in main_path_lines(
            trace, last=last, start=start, heading=style.MIGRATE_HEADING, mark=style.WARNING
        ):
            self.stdout.write(line)
        waits = traces_waiting_for([trace]).get(trace.trace_id)
        if waits:
            self.stdout.write(style.WARNING(waits))
        self._print_summary(trace)

    def _decide_in_terminal(self, trace: Trace, approver: str) -> bool:
        """G5 at a terminal: approve / deny / edit each waiting call; False when one is left open."""
        from django.contrib.auth import get_user_model

        user = get_user_model().objects.filter(username=approver, is_staff=True, is_active=True).first()
        if user is None:
            self.stderr.write(f"no active staff user {approver!r} to record the decisions (use --as USER)")
            return False
        pending = approvals_for(user=user, trace_id=trace.trace_id).filter(status=ApprovalStatus.PENDING)
        for approval in pending:
            self.stdout.write(self.style.WARNING(f"\n{approval.tool_name} waits for your approval"))
            if approval.question:
                self.stdout.write(approval.question)
            self.stdout.write(f"arguments: {json.dumps(approval.arguments, ensure_ascii=False)}")
            choice = self._ask("[a]pprove, approve for the [r]est of the run, [d]eny, [e]dit, [q]uit: ")
            arguments = None
            if choice == "e":
                decision, scope, arguments = "approve", "call", self._edited_arguments()
            elif choice in TERMINAL_DECISIONS:
                decision, scope = TERMINAL_DECISIONS[choice]
            else:
                return False
            try:
                approval_decide(
                    user=user,
                    trace_id=trace.trace_id,
                    approval_id=approval.pk,
                    decision=decision,
                    arguments=arguments,
                    note="decided in the terminal",
                    scope=scope,
                    resume=False,
                )
            except RunError as exc:
                self.stderr.write(str(exc))
                return False
        return True

    def _ask(self, prompt: str) -> str:
        try:
            return input(prompt).strip().lower()[:1]
        except EOFError:
            return "q"

    def _edited_arguments(self) -> dict[str, Any]:
        while True:
            try:
                value = json.loads(input("arguments as one line of JSON: "))
            except EOFError:
                raise CommandError("no arguments given", returncode=4) from None
            except json.JSONDecodeError as exc:
                self.stderr.write(f"not JSON: {exc.msg}")
                continue
            if isinstance(value, dict):
                return value
            self.stderr.write("the arguments are a JSON object")

    def _reflect(self, trace_id: str, focus: str, *, exit_on_failure: bool = True) -> None:
        """M3: a side branch off the head extracts draft experiences; exit 1 when it fails."""

        try:
            result = reflect_on_trace(trace_id=trace_id, focus=focus)
        except RunError as exc:
            raise CommandError(str(exc), returncode=2) from None
        if result.status == "completed":
            codes = ", ".join(result.codes) or "none"
            self.stdout.write(self.style.SUCCESS(f"reflection on {trace_id}: draft experiences {codes}"))
            return
        self.stdout.write(self.style.ERROR(f"reflection on {trace_id} failed: {result.error}"))
        if exit_on_failure:
            raise CommandError(f"reflection on {trace_id} failed", returncode=1)

    def _print_token(self, text: str) -> None:
        if self.stdout.isatty():
            self.stdout.write(self.style.HTTP_INFO(text), ending="")
            self.stdout.flush()

    def _print_message(self, message: Message) -> None:
        if self.stdout.isatty() and message.role == "assistant" and message.content:
            self.stdout.write("")  # the tokens were streamed already; end their line
        label = f"[{message.sequence:>4}] {message.role:<9}"
        if message.role == "assistant":
            text = (message.content or "").strip()
            for call in map(ToolCall.of, message.tool_calls or ()):
                text += f"\n           -> {call.name}({_clip(str(call.arguments or ''), 200)})"
            self.stdout.write(f"{self.style.SUCCESS(label)} {text.strip()}")
        elif message.role == "tool":
            style = self.style.ERROR if message.kind in ("tool_error", "healed") else self.style.NOTICE
            self.stdout.write(f"{style(label)} {message.name}: {_clip(str(message.content), 400)}")
        else:
            self.stdout.write(f"{self.style.WARNING(label)} {_clip(str(message.content), 400)}")
        sys.stdout.flush()

    def _print_summary(self, trace: Trace) -> None:
        cost = f"cost {cost_text(trace.total_cost, trace.unpriced_calls)}"
        self.stdout.write(
            f"\ntrace {trace.trace_id} {trace.status}: {trace.total_messages} messages, "
            f"{trace.total_tokens} tokens, {cost}, head {trace.head_sequence}"
        )
        if trace.error_message:
            self.stdout.write(self.style.ERROR(trace.error_message))
        self.stdout.write(
            f'continue:  python manage.py run_agent --trace {trace.trace_id} "next message"\n'
            f'rewind:    python manage.py run_agent --trace {trace.trace_id} --after N "new text"'
        )


def _pointing_at_show(message: str, trace_id: str | None) -> str:
    """A refused --after, in the terminal's words: the flag, and where to pick a sequence."""
    if "after_sequence" not in message:
        return message
    message = message.replace("after_sequence", "--after").split("; pick a sequence")[0]
    if trace_id:
        message += f"; pick a sequence from: python manage.py run_agent --show {trace_id}"
    return message


def _names(text: str | None) -> list[str] | None:
    names = [n.strip() for n in (text or "").split(",") if n.strip()]
    return names or None


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + " ..."
