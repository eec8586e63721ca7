"""How late the reward lands past `--deadline` on an idle and on a saturated machine.

A grade whose judge sleeps past every deadline is run with `--deadline D`, first on
the machine as it is, then with `--busy` processes spinning (16 on 2 cores: a loaded
node), interleaved run by run so that other noise hits both alike. Each run's
lateness is its wall time, from the moment the process is started to its exit (the
four reward files written and synced), less D: the deadline counts from the
process's start, so a lateness above 0 is time that Harbor's `[verifier] timeout_sec`
must leave past VERIFIER_DEADLINE.

    python bench/deadline.py [--deadline 10] [--busy 16] [--runs 5] [--baseline main]
                             [--image IMAGE [--compose PODMAN_COMPOSE]]

`--baseline REV` also grades with a regular install of that git revision in the same
runs (main before this change counted the deadline from after its imports).
`--image` adds Harbor's own verify phase, as Harbor runs it on podman (through
podman-compose, from Harbor's venv) in a separate verifier container kept alive with
`sleep infinity`: `exec rm -f` of the reward files, `exec chmod +x /tests/test.sh` as
root, `exec bash -c '/tests/test.sh > ...'` with VERIFIER_DEADLINE, and `podman cp`
of /logs/verifier out of the container; its lateness is the whole phase's, which is
what must fit in Harbor's timeout.

The margin between VERIFIER_DEADLINE and Harbor's timeout, which `task init` leaves
and `verifier check` asks for (verifier.task.settings.HARBOR_SLACK_S), is set from
the worst lateness measured here: the target is that the loaded worst case, doubled
for a node busier than this one, fits in it. It grades with a regular install of
this checkout (see bench/common.py).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from common import installed_revision, installed_verifier

from verifier.engine.parent import reward_margin_s
from verifier.task.settings import HARBOR_SLACK_S

OVERRUNNING_EVAL_YAML = """\
name: bench-deadline
judges:
  - name: answer
    check: |
      return True
  - name: slow
    timeout: 1000
    check: |
      import time
      time.sleep(1000)
      return True
"""
SPIN = "while True: pass"
HARBOR_COMPOSE = Path(os.environ.get("HARBOR_VENV", "/opt/harbor-venv")) / "bin" / "podman-compose"
HEADROOM = 2.0  # the loaded worst case, doubled, must fit in the margin


@contextlib.contextmanager
def spinning(count: int) -> Iterator[None]:
    """count processes that keep a CPU busy each, for as long as the block runs."""
    spinners = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(count)]
    try:
        time.sleep(1.0)  # let the scheduler spread them
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
        for spinner in spinners:
            spinner.wait()


def timed(command: list[str], out: Path) -> float:
    """Wall seconds of command, from its start to its exit; it must write a reward in out."""
    started = time.perf_counter()
    completed = subprocess.run(command, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    if completed.returncode != 0 or not (out / "reward.json").exists():
        raise SystemExit(f"{' '.join(command)} failed: {completed.stderr}{completed.stdout}")
    return elapsed


class HarborPhase:
    """Harbor's verify phase against one separate verifier container, through
    podman-compose as Harbor drives podman (`podman-compose --in-pod=false ... exec`)."""

    def __init__(self, compose: str, image: str, root: Path, deadline: float) -> None:
        self.root, self.deadline = root, deadline
        project = f"bench-deadline-{os.getpid()}"
        (root / "compose.yaml").write_text(
            "services:\n  main:\n"
            f"    image: {image}\n"
            '    command: ["sh", "-c", "sleep infinity"]\n'
            "    network_mode: none\n"
            f"    volumes: ['{root}/eval.yaml:/tests/eval.yaml:ro', '{root}/case:/case:ro']\n"
        )
        self.compose = [compose, "--in-pod=false", "-p", project, "-f", str(root / "compose.yaml")]
        self.container = f"{project}_main_1"
        subprocess.run([*self.compose, "up", "-d"], capture_output=True, check=True)

    def __call__(self, run: int) -> dict[str, float]:
        """The seconds each step took."""
        out = self.root / f"harbor-{run}"
        exec_ = [*self.compose, "exec", "-T"]
        deadline = f"VERIFIER_DEADLINE={self.deadline:g}"
        steps = {
            "exec rm": [*exec_, "main", "bash", "-c", "rm -f /logs/verifier/reward.*"],
            "exec chmod": [*exec_, "-u", "root", "main", "bash", "-c", "chmod +x /tests/test.sh"],
            "exec test.sh": [*exec_, "-e", deadline, "main", "bash", "-c", "/tests/test.sh"],
            "podman cp": ["podman", "cp", f"{self.container}:/logs/verifier", str(out)],
        }
        took = {}
        for step, command in steps.items():
            started = time.perf_counter()
            subprocess.run(command, capture_output=True, check=True)
            took[step] = time.perf_counter() - started
        if not (out / "reward.json").exists():
            raise SystemExit(f"no reward.json from the container: {sorted(out.iterdir())}")
        return took

    def close(self) -> None:
        subprocess.run([*self.compose, "down", "-t", "0"], capture_output=True, check=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deadline", type=float, default=10.0)
    parser.add_argument("--busy", type=int, default=16, help="spinning processes when loaded")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--baseline", help="a git revision whose grade is measured beside")
    parser.add_argument("--image", help="also Harbor's verify phase in this image")
    parser.add_argument(
        "--compose", default=str(HARBOR_COMPOSE), help="podman-compose, as Harbor runs it"
    )
    options = parser.parse_args()
    deadline = options.deadline
    commands = {"verifier grade": installed_verifier()}
    if options.baseline:
        baseline, commit = installed_revision(options.baseline)
        commands[f"verifier grade at {commit[:12]}"] = baseline
    lateness: dict[tuple[str, str], list[float]] = {}
    steps: dict[tuple[str, str], list[float]] = {}  # Harbor's phase, step by step
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        root.chmod(0o755)
        (root / "eval.yaml").write_text(OVERRUNNING_EVAL_YAML)
        (root / "eval.yaml").chmod(0o644)
        (root / "case").mkdir(mode=0o755)
        (root / "case" / "answer.txt").write_text("42\n")
        (root / "case" / "answer.txt").chmod(0o644)
        harbor = (
            HarborPhase(options.compose, options.image, root, deadline) if options.image else None
        )
        try:
            for run in range(options.runs):
                for load, busy in (("idle", 0), (f"{options.busy} busy", options.busy)):
                    with spinning(busy):
                        for index, (name, verifier) in enumerate(commands.items()):
                            out = root / f"out-{run}-{busy}-{index}"
                            command = [verifier, "grade", "--config", str(root / "eval.yaml")]
                            command += ["--case", str(root / "case"), "--out", str(out)]
                            wall = timed([*command, "--deadline", f"{deadline:g}"], out)
                            lateness.setdefault((name, load), []).append(wall - deadline)
                        if harbor is not None:
                            took = harbor(run * 2 + (busy > 0))
                            row = "Harbor's verify phase (podman-compose)"
                            lateness.setdefault((row, load), []).append(
                                sum(took.values()) - deadline
                            )
                            for step, seconds in took.items():
                                steps.setdefault((step, load), []).append(seconds)
        finally:
            if harbor is not None:
                harbor.close()
    cpus = len(os.sched_getaffinity(0))
    print(f"--deadline {deadline:g}, {options.runs} runs each, {cpus} CPUs; lateness (s):")
    print(f"  {'':44} {'median':>8} {'max':>8}")
    for (name, load), values in lateness.items():
        print(f"  {name + ', ' + load:44} {statistics.median(values):8.2f} {max(values):8.2f}")
    if steps:
        print("  Harbor's verify phase step by step (s):")
        for (step, load), values in steps.items():
            shown = f"{step}, {load}"
            print(f"    {shown:42} {statistics.median(values):8.2f} {max(values):8.2f}")
    baselines = set(commands) - {"verifier grade"}
    worst = max(
        max(values)
        for (name, load), values in lateness.items()
        if load != "idle" and name not in baselines
    )
    print(f"kept back inside the deadline for stopping and writing: {reward_margin_s(deadline):g}s")
    verdict = "met" if HEADROOM * worst <= HARBOR_SLACK_S else "NOT met"
    print(
        f"target: the loaded worst lateness, {worst:.2f}s, x{HEADROOM:g} fits in the margin "
        f"below Harbor's timeout (HARBOR_SLACK_S, {HARBOR_SLACK_S:g}s): {verdict}"
    )


if __name__ == "__main__":
    main()
