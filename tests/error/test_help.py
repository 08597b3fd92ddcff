"""Every command's --help has examples, and every option that takes a number or one of a set of
words shows its default (issue 15: "examples and defaults in every --help")."""
import os
import re
import subprocess
from pathlib import Path

KORCH = os.environ.get("KORCH_BIN", str(Path(__file__).resolve().parents[2] / "build" / "korch"))


def help_of(*command):
    r = subprocess.run([KORCH, *command, "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def section(text, title):
    """The entries of one section ("Options:", "Subcommands:"): one string per entry, with the
    description joined in when CLI11 wrapped it onto the next line."""
    entries, inside = [], False
    for line in text.splitlines():
        if line == title:
            inside = True
            continue
        if inside:
            if not line.strip():
                break
            if line.startswith("  ") and not line.startswith("   "):
                entries.append(line.strip())
            elif entries:
                entries[-1] += " " + line.strip()
    return entries


def commands():
    top = [e.split()[0] for e in section(help_of(), "Subcommands:")]
    assert {"compile", "run", "bench", "explain", "inspect", "cache"} <= set(top), top
    out = [[c] for c in top]
    for c in top:
        out += [[c, e.split()[0]] for e in section(help_of(c), "Subcommands:")]
    return out


def test_every_command_has_examples_and_shows_its_defaults():
    cmds = commands()
    assert ["cache", "clear"] in cmds
    top = help_of()
    assert "Examples:" in top and "korch compile" in top
    for cmd in cmds:
        text = help_of(*cmd)
        name = " ".join(cmd)
        assert re.search(r"^Examples?:\n  korch " + re.escape(cmd[0]), text, re.M), f"{name}: no examples\n{text}"
        for entry in section(text, "Options:"):
            flag = entry.split()[0]
            typed = re.match(r"\S+ (INT|FLOAT|UINT|TEXT:\{)", entry)
            if not typed or "REQUIRED" in entry:
                continue
            assert "(default: " in entry, f"korch {name} {flag}: no default shown: {entry}"
            # A sentinel is not a default a person can use.
            assert "(default: -1)" not in entry, f"korch {name} {flag}: {entry}"
        # CLI11's own layout put defaults and needs/excludes in the left column ("TEXT=[]").
        assert not re.search(r"^  -\S+ \S+=", text, re.M), f"{name}:\n{text}"


def test_defaults_are_the_values_used():
    compile_help = " ".join(section(help_of("compile"), "Options:"))
    assert "--threads INT:INT in [1 - 256] CPU threads for kernels and measurement (default: 2)" in compile_help
    assert "(default: 0 with analytic costs, 0.005 with measured ones)" in compile_help
    assert "--time-limit FLOAT:POSITIVE Solver time limit in seconds" in compile_help and "(default: 20)" in compile_help
    run_help = " ".join(section(help_of("run"), "Options:"))
    assert "[needs --artifact]" in run_help and "[not with --inputs]" in run_help
