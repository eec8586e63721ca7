"""The sandbox policy is a value: planned once, then copied per slot and lane, each copy
saying by itself who its commands run as and what they may reach."""

from __future__ import annotations

import os
from pathlib import Path

import attrs
import pytest

from tests.toolchain import world_readable_dir
from verifier.sandbox import Sandbox, SandboxPolicy, discard_policy, plan_policy
from verifier.sandbox.policy import SECRET_MOUNTS, readable_around

ROOT_POLICY = SandboxPolicy(
    hidden=("/srv/tests",),
    hidden_ids=frozenset(),
    readable=("/bin", "/usr"),
    scratch="/tmp/verifier-sandbox-0/grade-x",
    landlock=4,
    as_root=True,
    base_uid=65534,
    slots=3,
    lanes=2,
    processes=100,
    supervised=False,
    hidden_by="Landlock",
    weakness=None,
)


def test_each_slot_and_lane_of_a_root_grader_runs_as_a_uid_of_its_own() -> None:
    uids = {ROOT_POLICY.in_slot(slot).in_lane(lane).uid for slot in range(3) for lane in range(2)}
    assert uids == set(range(65534 - 5, 65534 + 1))


def test_a_lane_past_the_planned_ones_shares_the_last_lane_uid() -> None:
    assert ROOT_POLICY.in_lane(7).uid == ROOT_POLICY.in_lane(1).uid == 65533


@pytest.mark.parametrize("slot", [-1, 3])
def test_a_slot_the_policy_was_not_planned_for_is_refused(slot: int) -> None:
    with pytest.raises(ValueError, match=f"slot {slot} of a sandbox planned for 3"):
        ROOT_POLICY.in_slot(slot)


def test_a_slot_copy_starts_at_its_first_lane_and_leaves_the_plan_unchanged() -> None:
    copy = ROOT_POLICY.in_lane(1).in_slot(2)
    assert (copy.slot, copy.lane, copy.uid) == (2, 0, 65534 - 4)
    assert attrs.evolve(copy, slot=0, lane=0) == ROOT_POLICY


def test_a_non_root_grader_runs_every_command_as_itself() -> None:
    policy = attrs.evolve(ROOT_POLICY, as_root=False, base_uid=1000680000)
    assert {policy.in_slot(2).in_lane(1).uid, policy.uid} == {1000680000}


def test_the_sandbox_handed_to_a_slot_and_lane_carries_that_copy() -> None:
    sandbox = Sandbox(ROOT_POLICY).in_slot(1).in_lane(1)
    assert sandbox.policy.uid == 65534 - 3
    assert Sandbox(ROOT_POLICY).policy.uid == 65534  # the original is untouched


@pytest.mark.parametrize(
    ("changes", "said", "refused"),
    [
        ({}, "UID 65534, in a private copy of the case; Landlock ABI 4", False),
        ({"landlock": 6}, "writes to its dirs only, no signals out", False),
        ({"landlock": 0, "hidden_by": "file modes"}, "hidden by their modes", False),
        ({"hidden_by": None, "weakness": "no Landlock"}, "WEAK sandbox refused: no Landlock", True),
        (
            {"hidden_by": None, "weakness": "no Landlock", "accept_weak": True},
            "WEAK sandbox accepted (--weak-sandbox)",
            False,
        ),
        ({"as_root": False, "supervised": True}, "the grader's UID", False),
        (
            {"as_root": False, "supervised": True, "landlock": 7},
            "limits and scheduling of its own processes only",
            False,
        ),
    ],
)
def test_a_policy_describes_its_confinement(changes: dict, said: str, refused: bool) -> None:
    policy = attrs.evolve(ROOT_POLICY, **changes)
    assert said in policy.describe()
    assert policy.refused is refused


def test_a_planned_policy_hides_what_it_was_given_and_every_graders_scratch(
    tmp_path: Path,
) -> None:
    hidden = tmp_path / "tests"
    hidden.mkdir()
    (tmp_path / "open").mkdir()
    (tmp_path / "scratch-root").mkdir()
    policy = plan_policy([hidden], scratch_root=str(tmp_path / "scratch-root"))
    try:
        assert str(hidden) in policy.hidden
        assert os.path.dirname(policy.scratch) in policy.hidden
        assert os.path.isdir(policy.scratch)
        assert str(tmp_path / "open") in policy.readable
        assert not any(path == str(hidden) for path in policy.readable)
        for mount in SECRET_MOUNTS:
            assert not os.path.lexists(mount) or mount in policy.hidden
    finally:
        discard_policy(policy)
    assert not os.path.exists(policy.scratch)


def test_what_stays_readable_leads_around_each_hidden_path(tmp_path: Path) -> None:
    for name in ("a/hidden", "a/sibling", "b"):
        (tmp_path / name).mkdir(parents=True)
    readable = readable_around([str(tmp_path / "a" / "hidden")])
    assert str(tmp_path / "a" / "sibling") in readable
    assert str(tmp_path / "b") in readable
    assert not any(
        path in (str(tmp_path / "a"), str(tmp_path / "a" / "hidden")) for path in readable
    )
    assert readable_around([]) == ["/"]
    assert readable_around(["/"]) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="root hides paths by their modes")
def test_without_landlock_the_case_is_left_to_its_modes_and_the_config_is_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("verifier.sandbox.policy.landlock_abi", lambda: 0)
    with world_readable_dir("verifier-policy-") as root:
        check_modes(root)


def check_modes(root: Path) -> None:
    config, case = root / "tests", root / "case"
    config.mkdir(mode=0o700)
    case.mkdir(mode=0o755)
    policy = plan_policy([config], case_dirs=[case])
    try:
        assert (policy.hidden_by, policy.weakness) == ("file modes", None)
        assert str(case) in policy.hidden  # with Landlock it would be out of reach too
    finally:
        discard_policy(policy)
    config.chmod(0o755)
    policy = plan_policy([config], case_dirs=[case])
    try:
        assert policy.hidden_by is None
        assert f"{config} is open to UID" in (policy.weakness or "")
    finally:
        discard_policy(policy)
