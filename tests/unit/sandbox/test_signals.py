"""Code from the case cannot signal the grader: as root it runs as another UID; as the
grader's own UID, Landlock ABI 6 scopes its signals, and on kernels before it (the
policy made with ABI 4 here, as Linux 5.19 to 6.11 would) the supervisor answers every
signal by whom it is aimed at. The grader's side is a driver process: the judge's
process (the command's parent), a helper of the grader's UID beside it (a batch
sibling, test.sh's shell), and their process group; the command may still signal its
own children."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.hostile import NONROOT, give, world_verifier

DRIVER = textwrap.dedent("""
    import json, os, subprocess, sys, attrs
    from pathlib import Path
    from verifier.processes import JUDGE_TOKEN_ENV
    from verifier.sandbox import Command, Sandbox, discard_policy, plan_policy


    case, abi, supervised = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "supervised"
    helper = subprocess.Popen(["sleep", "60"])  # the grader's, beside the judge
    os.environ[JUDGE_TOKEN_ENV] = "the judge's token"  # as the engine gives its judges
    policy = plan_policy()
    policy = attrs.evolve(policy, landlock=min(abi, policy.landlock), supervised=supervised)
    try:
        command = Command(["sh", "attack.sh", str(helper.pid), sys.argv[4]], 30)
        run = Sandbox(policy).run(command, case)
    finally:
        discard_policy(policy)
    alive = helper.poll() is None
    helper.kill()
    print(json.dumps({"confinement": run.confinement, "tail": run.tail, "helper": alive}))
""")

# Each line an attack the grader must survive, and one the command's own processes allow.
ATTACK = textwrap.dedent("""
    judge=$PPID
    kill -STOP "$1" 2>/dev/null && echo "stopped the helper" && kill -CONT "$1"
    group=$(cut -d' ' -f5 "/proc/$judge/stat")
    python3 -c "import os, signal; os.killpg($group, signal.SIGSTOP)" 2>/dev/null \\
        && echo "stopped the judge's group" && kill -CONT "$judge"
    python3 -c "import os, signal; os.kill($judge, signal.SIGSTOP)" 2>/dev/null \\
        && echo "stopped the judge" && kill -CONT "$judge"
    python3 -c "import signal; signal.pthread_kill($judge, 0)" 2>/dev/null && echo "tgkill"
    if [ "$2" = everyone ]; then  # USR1 ends the grader's processes, and not this shell
        trap '' USR1; kill -USR1 -1 2>/dev/null; trap - USR1
    fi
    python3 sigio.py "$judge"
    sleep 30 & child=$!
    kill "$child"; wait "$child" 2>/dev/null; echo "own child: $?"
    setsid sleep 30 & kill "$!" && echo "own child in a session of its own: killed"
    echo done
""")

# SIGIO, which no kill call sends: a socket whose owner (F_SETOWN, or FIOSETOWN and
# SIOCSPGRP, ioctls of sockets) is sent a signal of its choosing when data arrives.
SIGIO = textwrap.dedent("""
    import fcntl, os, signal, socket, struct, sys, time
    judge = int(sys.argv[1])
    group = os.getpgid(judge)
    setown = lambda fd, pid: fcntl.fcntl(fd, fcntl.F_SETOWN, pid)
    ioctl = lambda request: lambda fd, pid: fcntl.ioctl(fd, request, struct.pack("i", pid))
    routes = {"F_SETOWN": setown, "FIOSETOWN": ioctl(0x8901), "SIOCSPGRP": ioctl(0x8902)}
    kept = []

    def arm(route, owner, signum):
        a, b = socket.socketpair()
        route(a.fileno(), owner)
        fcntl.fcntl(a, fcntl.F_SETSIG, signum)
        fcntl.fcntl(a, fcntl.F_SETFL, os.O_ASYNC | os.O_NONBLOCK)
        b.send(b"x")
        kept.append((a, b))

    def state():
        with open(f"/proc/{judge}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0]

    for name, route in routes.items():
        for owner, whom in ((judge, "the judge"), (-group, "the judge's group")):
            try:
                arm(route, owner, signal.SIGSTOP)
            except OSError:
                continue
            time.sleep(0.2)
            if state() == "T":
                print(f"stopped {whom} through SIGIO ({name})")
                arm(route, owner, signal.SIGCONT)
    got = []
    signal.signal(signal.SIGUSR1, lambda *_: got.append(1))
    arm(setown, os.getpid(), signal.SIGUSR1)
    time.sleep(0.2)
    print("own SIGIO:", "received" if got else "lost")
    for a, b in kept:  # the owned end first: closing the other would signal its owner
        a.close()
        b.close()
""")


def drive(root: Path, abi: int, supervised: bool) -> dict:
    case = root / "case"
    case.mkdir()
    (case / "attack.sh").write_text(ATTACK)
    (case / "attack.sh").chmod(0o644)
    (case / "sigio.py").write_text(SIGIO)
    give(NONROOT, case)
    python, environment = world_verifier()
    mode = "supervised" if supervised else "unsupervised"
    # every process of the UID would end where nothing answers kill(-1): not in the control
    everyone = "everyone" if supervised else "some"
    command = [python, "-c", DRIVER, str(case), str(abi), mode, everyone]
    completed = subprocess.run(
        ["setpriv", f"--reuid={NONROOT}", "--regid=0", "--clear-groups", *command],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=root,
        env={"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", **environment},
    )
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="runs the grader as another UID")


@needs_root
@pytest.mark.parametrize("abi", [4, 7], ids=["supervised signals (ABI 4)", "Landlock scoping"])
def test_the_command_cannot_signal_the_grader_but_signals_its_own(root_dir: Path, abi: int) -> None:
    run = drive(root_dir, abi, supervised=True)
    if abi < 6:
        assert "signals only to its own processes" in run["confinement"]
    assert run["tail"] == (
        "own SIGIO: received\nown child: 143\nown child in a session of its own: killed\ndone\n"
    ), run["tail"]
    assert run["helper"] is True


@needs_root
def test_without_either_the_same_command_signals_the_grader(root_dir: Path) -> None:
    """The control: the attacks work where nothing answers them."""
    run = drive(root_dir, 4, supervised=False)
    for line in (
        "stopped the helper",
        "stopped the judge's group",
        "stopped the judge",
        "stopped the judge through SIGIO (F_SETOWN)",
        "stopped the judge's group through SIGIO (FIOSETOWN)",
    ):
        assert line in run["tail"], run["tail"]
