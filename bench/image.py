#!/usr/bin/env python3
"""Figures for the verifier image (`make bench`): size, grading time, no network.

For each engine that holds the image (podman and/or docker):

- size: the image's total and what it adds above its base (the base is read from
  the image's org.opencontainers.image.base.name label); target: at most 30 MB;
- wall time, median of --runs runs, of
      ENGINE run --rm --network none <mounts> IMAGE grade   (the bundled example)
      ENGINE run --rm --network none IMAGE true
  side by side; target: grading adds at most 0.3 s;
- the grading runs use --network none and must produce the expected reward:
  nothing is downloaded or installed at run time;
- the verifier's own layer, /opt/verifier (docker/bundle.sh), part by part: the
  interpreter, its shared libraries, the stdlib, the dependencies, the verifier itself;
- the runtime packages: everything the bundle's site-packages holds (its zip and its
  dir: the dependencies and the verifier, without the interpreter and the stdlib), as
  unpacked files, package by package; target: at most 10 MB.

Exit status 0 when every run worked (figures over their targets are reported as
such, not failures, unless --strict), 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
OWN_LAYERS_TARGET_MB = 30.0
RUNTIME_PACKAGES_TARGET_MB = 10.0
GRADE_OVERHEAD_TARGET_S = 0.3
MB = 1_000_000


def sh(args: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, check=False, **kwargs)


def inspect(engine: str, image: str) -> dict | None:
    proc = sh([engine, "image", "inspect", image])
    if proc.returncode != 0:
        return None
    return json.loads(proc.stdout)[0]


def engine_available(engine: str) -> bool:
    return shutil.which(engine) is not None and sh([engine, "info"]).returncode == 0


def size_figures(engine: str, image: str) -> dict:
    info = inspect(engine, image)
    labels = (info.get("Config") or {}).get("Labels") or {}
    base = labels.get("org.opencontainers.image.base.name", "")
    figures = {
        "total_mb": info["Size"] / MB,
        "layers": len(info["RootFS"]["Layers"]),
        "base": base,
    }
    base_info = inspect(engine, base) if base else None
    if base_info is None:
        figures["own_mb"] = None
        figures["base_note"] = f"base {base or '?'} is not in {engine}"
        return figures
    base_layers = base_info["RootFS"]["Layers"]
    if info["RootFS"]["Layers"][: len(base_layers)] != base_layers:
        figures["own_mb"] = None
        figures["base_note"] = f"{base} in {engine} is not this image's base (rebuilt since?)"
        return figures
    figures["base_mb"] = base_info["Size"] / MB
    figures["own_mb"] = (info["Size"] - base_info["Size"]) / MB
    figures["own_layers"] = len(info["RootFS"]["Layers"]) - len(base_layers)
    return figures


# Run by the bundle's own interpreter in the image: the size of each part of /opt/verifier.
BUNDLE_SCRIPT = r"""
import json, os, sys, zipfile
root = "/opt/verifier"
def size(path):
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)
python = os.path.join(root, "python")
lib = os.path.join(python, "lib")
version = "python%d.%d" % sys.version_info[:2]
stdlib_zip = os.path.join(lib, version.replace(".", "") + ".zip")
site = os.path.join(lib, version, "site-packages")
deps = os.path.join(lib, "site-packages.zip")
# Each top-level name of site-packages (a package, a module, its .dist-info): its files
# unpacked, from the zip and from the dir alike.
packages = {}
for info in zipfile.ZipFile(deps).infolist():
    top = info.filename.split("/")[0]
    packages[top] = packages.get(top, 0) + info.file_size
for name in os.listdir(site):
    packages[name] = packages.get(name, 0) + size(os.path.join(site, name))
figures = {
    "total": size(root),
    "interpreter": size(os.path.join(python, version)),
    "shared libraries": sum(size(os.path.join(lib, n)) for n in os.listdir(lib) if ".so" in n),
    "stdlib (byte code zip)": size(stdlib_zip),
    "extension modules": size(os.path.join(lib, version, "lib-dynload")),
    "dependencies (zip)": size(deps),
    "dependencies with extension modules": sum(
        size(os.path.join(site, n)) for n in os.listdir(site)
        if n not in ("verifier",) and not n.endswith(".dist-info")),
    "verifier": size(os.path.join(site, "verifier")),
    "metadata, CA bundle, scripts": 0,
}
figures["metadata, CA bundle, scripts"] = figures["total"] - sum(
    v for k, v in figures.items() if k != "total")
print(json.dumps({"parts": figures, "packages": packages}))
"""


def bundle_figures(engine: str, image: str) -> dict:
    proc = sh(
        [
            engine,
            "run",
            "--rm",
            "--network",
            "none",
            "--entrypoint",
            "/opt/verifier/python/python3.11",
            image,
            "-I",
            "-c",
            BUNDLE_SCRIPT,
        ]
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{engine}: measuring /opt/verifier failed:\n{proc.stderr}")
    return json.loads(proc.stdout)


def timed(args: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    proc = sh(args)
    return time.perf_counter() - start, proc


def time_figures(engine: str, image: str, runs: int, case: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-image-") as tmp:
        out = Path(tmp) / "out"
        out.mkdir()
        out.chmod(0o777)  # the image runs as a non-root UID
        grade = [
            engine,
            "run",
            "--rm",
            "--network",
            "none",
            "-v",
            f"{EXAMPLES / case}:/case:ro",
            "-v",
            f"{EXAMPLES / 'eval.yaml'}:/tests/eval.yaml:ro",
            "-v",
            f"{out}:/logs/verifier",
            image,
            "grade",
        ]
        true = [engine, "run", "--rm", "--network", "none", image, "true"]
        grade_times, true_times = [], []
        reward = None
        for i in range(runs + 1):  # the first round warms caches and is not counted
            for label, args, times in (("grade", grade, grade_times), ("true", true, true_times)):
                for name in ("reward.json", "reward.txt", "judges.json"):
                    (out / name).unlink(missing_ok=True)
                elapsed, proc = timed(args)
                if proc.returncode != 0:
                    raise RuntimeError(
                        f"{engine} run ... {label} exited {proc.returncode}:\n"
                        f"{proc.stdout}{proc.stderr}"
                    )
                if label == "grade":
                    reward = json.loads((out / "reward.json").read_text())
                if i:
                    times.append(elapsed)
    return {
        "grade_s": statistics.median(grade_times),
        "true_s": statistics.median(true_times),
        "grade_min_s": min(grade_times),
        "true_min_s": min(true_times),
        "reward": reward,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--image", default="localhost/harbor-verifier:latest")
    parser.add_argument(
        "--engine",
        action="append",
        choices=["podman", "docker"],
        help="engine(s) to measure (default: every running engine that holds the image)",
    )
    parser.add_argument("--runs", type=int, default=11, help="timed runs of each command")
    parser.add_argument("--case", default="case-pass", help="example case under examples/")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args()

    engines = args.engine or [
        e for e in ("podman", "docker") if engine_available(e) and inspect(e, args.image)
    ]
    if not engines:
        print(f"bench/image.py: no running engine holds {args.image} (make image)", file=sys.stderr)
        return 1

    results, ok, targets_met = {}, True, True
    for engine in engines:
        if inspect(engine, args.image) is None:
            print(f"{engine}: {args.image} not found (make image)", file=sys.stderr)
            ok = False
            continue
        figures = {"size": size_figures(engine, args.image)}
        try:
            figures["bundle"] = bundle_figures(engine, args.image)
            figures["time"] = time_figures(engine, args.image, args.runs, args.case)
        except RuntimeError as error:
            print(f"{engine}: {error}", file=sys.stderr)
            ok = False
        results[engine] = figures

    print(f"image {args.image}")
    print()
    print("size (uncompressed)")
    for engine, figures in results.items():
        size = figures["size"]
        own = size.get("own_mb")
        line = f"  {engine:<7} total {size['total_mb']:6.1f} MB  ({size['layers']} layers)"
        if own is None:
            line += f"   above base: unknown ({size['base_note']})"
        else:
            verdict = "ok" if own <= OWN_LAYERS_TARGET_MB else "OVER TARGET"
            targets_met &= own <= OWN_LAYERS_TARGET_MB
            line += (
                f"   base {size['base_mb']:6.1f} MB ({size['base']})"
                f"   above base {own:5.1f} MB in {size['own_layers']} layers"
                f"  [target <= {OWN_LAYERS_TARGET_MB:.0f} MB: {verdict}]"
            )
        print(line)
    for figures in list(results.values())[:1]:
        if "bundle" not in figures:
            continue
        bundle = figures["bundle"]
        print()
        print("/opt/verifier, the verifier's own layer (files, uncompressed)")
        for part, size in bundle["parts"].items():
            print(f"  {part:<38} {size / MB:6.2f} MB")
        packages = bundle["packages"]
        runtime_mb = sum(packages.values()) / MB
        verdict = "ok" if runtime_mb <= RUNTIME_PACKAGES_TARGET_MB else "OVER TARGET"
        targets_met &= runtime_mb <= RUNTIME_PACKAGES_TARGET_MB
        print()
        print(
            f"runtime packages (site-packages, unpacked): {runtime_mb:.2f} MB"
            f"  [target <= {RUNTIME_PACKAGES_TARGET_MB:.0f} MB: {verdict}]"
        )
        for name, size in sorted(packages.items(), key=lambda item: -item[1]):
            print(f"  {name:<38} {size / MB:6.2f} MB")
    print()
    print(f"wall time, median of {args.runs} runs (min), --network none, examples/{args.case}")
    print(f"  {'engine':<7} {'run IMAGE grade':>20} {'run IMAGE true':>20} {'grading adds':>14}")
    for engine, figures in results.items():
        if "time" not in figures:
            continue
        t = figures["time"]
        added = t["grade_s"] - t["true_s"]
        verdict = "ok" if added <= GRADE_OVERHEAD_TARGET_S else "OVER TARGET"
        targets_met &= added <= GRADE_OVERHEAD_TARGET_S
        print(
            f"  {engine:<7} {t['grade_s']:10.3f} s ({t['grade_min_s']:.3f}) "
            f"{t['true_s']:10.3f} s ({t['true_min_s']:.3f}) {added:+10.3f} s"
            f"  [target <= {GRADE_OVERHEAD_TARGET_S} s: {verdict}]"
        )
    print()
    print("runtime downloads: none (every grading run above used --network none)")
    for engine, figures in results.items():
        if "time" in figures:
            reward = json.dumps(figures["time"]["reward"])
            print(f"  {engine:<7} reward.json {reward}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    if not ok:
        return 1
    return 1 if args.strict and not targets_met else 0


if __name__ == "__main__":
    sys.exit(main())
