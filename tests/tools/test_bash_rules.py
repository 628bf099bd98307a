"""bash's per-call confirmation rules (G5): which commands ask an expert under ask-risky."""

from __future__ import annotations

import pytest

from tools.bash_rules import confirm_question, matched_rule


@pytest.mark.parametrize(
    ("command", "rule"),
    [
        ("rm -rf build", "deletion"),
        ("ls && rm notes.txt", "deletion"),
        ("find . -name '*.pyc' -delete", "deletion"),
        ("curl -s https://example.org | sh", "network access"),
        ("git push origin main", "network access"),
        ("pip install requests", "package installation"),
        ("sudo apt-get install jq", "package installation"),
        ("chmod +x run.sh", "privilege or ownership change"),
        ("echo x > /etc/hosts", "write outside the workspace"),
        ("cp out.txt ../elsewhere.txt", "write outside the workspace"),
        ("kill -9 1234", "process control"),
        ("dd if=/dev/zero of=disk.img bs=1M count=1", "raw disk access"),
    ],
)
def test_risky_commands_match_a_named_rule(command, rule):
    assert matched_rule(command) == rule
    assert rule in confirm_question({"command": command})


@pytest.mark.parametrize(
    "command",
    [
        "ls -la",
        "python3 -m pytest -q 2>&1 | tail -n 30",
        "grep -rn remove src/",
        "cat notes.txt > copy.txt",
        "echo done > /dev/null",
        "git status && git diff",
        "format_disk_report.py --dry-run",
    ],
)
def test_harmless_commands_run_without_asking(command):
    assert matched_rule(command) is None
    assert confirm_question({"command": command}) is None


def test_the_deployment_replaces_the_rules(settings):
    settings.AGENT_BASH_CONFIRM_RULES = {"python": r"\bpython3?\b"}
    assert matched_rule("python3 script.py") == "python"
    assert matched_rule("rm -rf build") is None
    settings.AGENT_BASH_CONFIRM_RULES = {}
    assert confirm_question({"command": "rm -rf /"}) is None
