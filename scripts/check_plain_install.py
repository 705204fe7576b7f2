"""What a plain machine installs for each documented command, checked against what the docs say.

The README (and docs/install.md) carry their claims in an HTML comment, one line per command::

    <!-- plain-machine: ...
    pip install -e '.[vision,example]' => torch none; nvidia 0; cv2 opencv-python-headless
    -->

For each line this script runs the command as ``pip install --dry-run --report`` from the
repository root with every machine-local pip setting switched off: ``--isolated`` (no ``PIP_*``
variables such as a local wheel folder, no user configuration) and ``PIP_CONFIG_FILE`` set to
``os.devnull`` (``--isolated`` alone still reads the global ``pip.conf``, where a machine may keep a
constraint file), ``--ignore-installed`` (a fresh virtualenv has nothing installed). It then checks
what pip selected against the claims:

* ``torch none`` / ``torch X.Y.Z`` — no torch, or torch of that version (a ``+cpu`` label counts);
* ``nvidia N`` — the number of ``nvidia-*`` CUDA wheels (``nvidia-ml-py``, the small pure-Python
  NVML binding ultralytics asks for, is not a CUDA library and is not counted);
* ``gb X`` — the download size of torch, triton and the ``nvidia-*``/``cuda-*`` wheels, in GB
  rounded to one decimal (read from the package index's ``Content-Length``);
* ``cv2 NAME`` — the one distribution among OpenCV's four builds that provides ``cv2``;
* ``with NAME`` / ``without NAME`` — a distribution is, or is not, selected.

It needs the package index (PyPI); CI runs it before the tests. Exit status 0 when every claim
holds, 1 otherwise, 2 on a usage error::

    python scripts/check_plain_install.py [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ("README.md", "docs/install.md")
CV2_DISTS = (
    "opencv-python",
    "opencv-python-headless",
    "opencv-contrib-python",
    "opencv-contrib-python-headless",
)
NOT_CUDA = frozenset({"nvidia-ml-py"})  # NVML's Python binding: 50 kB, no CUDA library
_BLOCK = re.compile(r"<!-- plain-machine:(.*?)-->", re.S)


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass
class Claim:
    """What a document says pip selects for one command on a plain machine."""

    command: str  # "pip install ..." as written
    source: str  # the document it comes from
    torch: str | None = None  # "none" or a version
    nvidia: int | None = None
    gb: float | None = None
    cv2: str | None = None
    with_: list[str] = field(default_factory=list)
    without: list[str] = field(default_factory=list)

    def pip_args(self) -> list[str]:
        words = shlex.split(self.command)
        if words[:2] != ["pip", "install"]:
            raise ValueError(f"{self.source}: not a pip install command: {self.command!r}")
        return words[2:]


def parse_claims(text: str, source: str) -> list[Claim]:
    """The claim lines of every ``plain-machine`` comment in ``text``."""
    claims = []
    for block in _BLOCK.findall(text):
        for line in block.splitlines():
            if "=>" not in line:
                continue
            command, _, said = (s.strip() for s in line.partition("=>"))
            claim = Claim(command=command, source=source)
            for part in filter(None, (p.strip() for p in said.split(";"))):
                key, _, value = part.partition(" ")
                value = value.strip()
                if key == "torch":
                    claim.torch = value
                elif key == "nvidia":
                    claim.nvidia = int(value)
                elif key == "gb":
                    claim.gb = float(value)
                elif key == "cv2":
                    claim.cv2 = norm(value)
                elif key == "with":
                    claim.with_.append(norm(value))
                elif key == "without":
                    claim.without.append(norm(value))
                else:
                    raise ValueError(f"{source}: unknown claim {part!r} in {line.strip()!r}")
            claims.append(claim)
    return claims


def all_claims(root: Path = ROOT) -> list[Claim]:
    return [c for doc in DOCS for c in parse_claims((root / doc).read_text(encoding="utf-8"), doc)]


@dataclass
class Selection:
    """What one pip report selects: {normalised name: (version, download URL)}."""

    packages: dict[str, tuple[str, str]]

    @classmethod
    def from_report(cls, report: dict) -> Selection:
        packages = {}
        for item in report.get("install", []):
            meta = item["metadata"]
            url = (item.get("download_info") or {}).get("url", "")
            packages[norm(meta["name"])] = (meta["version"], url)
        return cls(packages)

    def cuda_wheels(self) -> list[str]:
        return sorted(n for n in self.packages if n.startswith("nvidia-") and n not in NOT_CUDA)

    def heavy(self) -> list[str]:
        """torch and its GPU stack: what the ``gb`` claim measures."""
        return sorted(
            n
            for n in self.packages
            if n in ("torch", "triton") or n.startswith("cuda-") or n in self.cuda_wheels()
        )


def download_size(urls: list[str], timeout: float = 60.0) -> int:
    """Bytes to download for these wheel URLs (HEAD requests to the package index's file host)."""
    total = 0
    for url in urls:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout) as resp:
            total += int(resp.headers["Content-Length"])
    return total


def check(claim: Claim, sel: Selection, size: int | None = None) -> list[str]:
    """The claims ``sel`` contradicts, as sentences (empty: all hold). ``size`` is the download
    size of ``sel.heavy()`` in bytes, needed only for a ``gb`` claim."""
    wrong = []
    torch = sel.packages.get("torch", (None, ""))[0]
    if claim.torch == "none" and torch is not None:
        wrong.append(f"says no torch, pip selects torch {torch}")
    elif claim.torch not in (None, "none") and (torch or "").split("+")[0] != claim.torch:
        wrong.append(f"says torch {claim.torch}, pip selects {torch or 'no torch'}")
    if claim.nvidia is not None and len(sel.cuda_wheels()) != claim.nvidia:
        wrong.append(
            f"says {claim.nvidia} nvidia-* wheels, pip selects {len(sel.cuda_wheels())}: {sel.cuda_wheels()}"
        )
    if claim.gb is not None:
        got = round((size or 0) / 1e9, 1)
        if got != claim.gb:
            wrong.append(f"says {claim.gb} GB of torch and CUDA wheels, they are {got} GB")
    if claim.cv2 is not None:
        cv2 = sorted(n for n in CV2_DISTS if n in sel.packages)
        if cv2 != [claim.cv2]:
            wrong.append(f"says cv2 comes from {claim.cv2} alone, pip selects {cv2 or 'none'}")
    wrong += [f"says {n} is installed, pip does not select it" for n in claim.with_ if n not in sel.packages]
    wrong += [f"says {n} is not installed, pip selects it" for n in claim.without if n in sel.packages]
    return wrong


def dry_run(claim: Claim, report: Path, root: Path = ROOT) -> Selection:
    """``pip install --dry-run --report`` of the claim's command, as on a machine with only PyPI."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull  # no pip.conf at all (--isolated still reads the global one)
    cmd = [sys.executable, "-m", "pip", "install", "--isolated", "--dry-run", "--ignore-installed"]
    cmd += ["--quiet", "--report", str(report), *claim.pip_args()]
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{claim.command}: pip failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
    return Selection.from_report(json.loads(report.read_text(encoding="utf-8")))


def describe(sel: Selection, size: int | None) -> str:
    torch = sel.packages.get("torch", ("none", ""))[0]
    parts = [f"{len(sel.packages)} packages", f"torch {torch}", f"{len(sel.cuda_wheels())} nvidia-* wheels"]
    if size is not None:
        parts.append(f"{size / 1e9:.2f} GB of torch and CUDA wheels")
    cv2 = [n for n in CV2_DISTS if n in sel.packages]
    parts.append(f"cv2 from {', '.join(cv2) or 'nothing'}")
    return ", ".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", type=Path, help="keep pip's JSON reports in this folder")
    args = parser.parse_args(argv)
    claims = all_claims()
    if not claims:
        print("no plain-machine claims found in " + ", ".join(DOCS), file=sys.stderr)
        return 2
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for i, claim in enumerate(claims, 1):
            sel = dry_run(claim, folder / f"report-{i}.json")
            heavy = [sel.packages[n][1] for n in sel.heavy()]
            size = download_size(heavy) if claim.gb is not None or heavy else None
            wrong = check(claim, sel, size)
            print(
                f"{'ok' if not wrong else 'WRONG'}: {claim.command} ({claim.source}): {describe(sel, size)}"
            )
            for w in wrong:
                print(f"  {claim.source} {w}")
            failed += bool(wrong)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
