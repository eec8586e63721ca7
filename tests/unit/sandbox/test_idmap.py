"""Who a command run as root is in its own user namespace: 0 inside is its UID outside,
and with a root grader UIDs 1-65535 inside a range of real IDs of its own, never root,
never a sandbox UID, one range per sandbox UID, and only where the container maps it."""

from __future__ import annotations

import itertools

from verifier.sandbox.idmap import RANGE_IDS, IdMap, id_range

ROOTFUL = ("0 0 4294967295\n", "0 0 4294967295\n")  # a rootful container's maps
ROOTLESS = ("0 1000 1\n1 100000 65536\n", "0 1000 1\n1 100000 65536\n")  # rootless podman's


def test_each_sandbox_uid_has_a_range_of_its_own_far_from_root_and_the_sandbox_uids() -> None:
    uids = range(65534, 65534 - 64, -1)
    bases = [id_range(uid, ROOTFUL) for uid in uids]
    assert None not in bases
    spans = sorted((base + 1, base + RANGE_IDS) for base in bases if base is not None)
    assert all(first > 65534 for first, _ in spans)  # no root, no sandbox UID, no image user
    assert all(last < 4294967295 for _, last in spans)  # (uid_t)-1 is never an ID
    assert all(a[1] < b[0] for a, b in itertools.pairwise(spans))  # disjoint


def test_no_range_where_the_container_does_not_map_it() -> None:
    assert id_range(65534, ROOTLESS) is None
    assert id_range(65534, (ROOTFUL[0], ROOTLESS[1])) is None  # the GIDs too


def test_the_maps_put_0_inside_on_its_own_uid() -> None:
    assert IdMap(65534, 65534).lines(65534) == "0 65534 1\n"
    base = id_range(65534, ROOTFUL)
    assert base is not None
    text = IdMap(65534, 65534, base).lines(65534)
    assert text == f"0 65534 1\n1 {base + 1} {RANGE_IDS}\n"
    assert "UIDs 1-65535 inside" in IdMap(65534, 65534, base).describe()
