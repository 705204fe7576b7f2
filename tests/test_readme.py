"""The README opens with exactly two commands, and CI runs the second one verbatim."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = text.split("```bash", 1)[1].split("```", 1)[0]
    return [line for line in block.strip().splitlines() if line.strip()]


def test_readme_opens_with_two_commands() -> None:
    cmds = readme_commands()
    assert len(cmds) == 2
    assert "fairsets build builders/example.toml" in cmds[0]
    assert "pytest" in cmds[1]


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert readme_commands()[1] in [line.strip() for line in ci]


# `pip check` lines: "NAME VERSION requires DEP, which is not installed." and
# "NAME VERSION has requirement SPEC, but you have DEP VERSION."
_MISSING = re.compile(r"^(?P<name>\S+) (?P<version>\S+) requires (?P<dep>[^,\s]+), which is not installed\.$")
_CONFLICT = re.compile(
    r"^(?P<name>\S+) (?P<version>\S+) has requirement (?P<spec>.+?), but you have \S+ \S+\.$"
)
_ALLOW_ROW = re.compile(r"^\| (?P<name>\S+) (?P<version>\S+) \| `(?P<spec>[^`]+)` \| (?P<why>.+) \|$")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(spec: str) -> str:
    return _norm(re.split(r"[<>=!~;\[\s(]", spec.strip(), maxsplit=1)[0])


def pip_check_allow_list() -> dict[tuple[str, str, str], str]:
    """(package, version, requirement name) → why it is harmless, from docs/install.md's tables."""
    text = (ROOT / "docs" / "install.md").read_text()
    block = text.split("<!-- pip-check-allow-list: begin -->", 1)[1].split(
        "<!-- pip-check-allow-list: end -->"
    )[0]
    allowed: dict[tuple[str, str, str], str] = {}
    for line in block.strip().splitlines()[2:]:  # header and separator
        m = _ALLOW_ROW.match(line.strip())
        assert m, f"docs/install.md: not an allow-list row: {line!r}"
        allowed[(_norm(m["name"]), m["version"], _requirement_name(m["spec"]))] = m["why"].strip()
    return allowed


def parse_pip_check(output: str) -> list[tuple[tuple[str, str, str] | None, str]]:
    """Each line of `pip check` as ((package, version, requirement name) or None if unparsed, line)."""
    found: list[tuple[tuple[str, str, str] | None, str]] = []
    for line in output.splitlines():
        line = line.strip()
        if not line or line == "No broken requirements found.":
            continue
        m = _MISSING.match(line)
        dep = m["dep"] if m else None
        if m is None and (m := _CONFLICT.match(line)):
            dep = m["spec"]
        found.append(((_norm(m["name"]), m["version"], _requirement_name(dep)) if m and dep else None, line))
    return found


def test_pip_check_allow_list_is_documented() -> None:
    allowed = pip_check_allow_list()
    assert len(allowed) >= 4
    assert all(len(why) > 20 for why in allowed.values())
    # The README names every img2dataset conflict (or points to the table that does).
    readme = (ROOT / "README.md").read_text()
    assert "docs/install.md" in readme
    for name, _version, dep in allowed:
        if name == "img2dataset":
            assert dep in readme, f"README does not mention img2dataset's pin on {dep}"


def test_parse_pip_check() -> None:
    out = (
        "img2dataset 1.47.0 requires dataclasses, which is not installed.\n"
        "img2dataset 1.47.0 has requirement webdataset<0.3,>=0.2.5, but you have webdataset 1.0.2.\n"
        "mediapipe 0.10.21 has requirement protobuf<5,>=4.25.3, but you have protobuf 7.36.2.\n"
        "torchvision 0.29.1 has requirement torch==2.14.1, but you have torch 2.13.0+cpu.\n"
        "somepkg 1.0 is not supported on this platform\n"
    )
    found = parse_pip_check(out)
    assert [key for key, _ in found] == [
        ("img2dataset", "1.47.0", "dataclasses"),
        ("img2dataset", "1.47.0", "webdataset"),
        ("mediapipe", "0.10.21", "protobuf"),
        ("torchvision", "0.29.1", "torch"),
        None,
    ]
    allowed = pip_check_allow_list()
    unexpected = [line for key, line in found if key not in allowed]
    assert unexpected == [found[3][1], found[4][1]]  # a mismatched torchvision is never allowed


def test_pip_check_with_a_fresh_virtualenvs_pip_lists_only_documented_conflicts() -> None:
    """`pip check` checks the installed pip too: a package that declares a newer pip than the one a
    fresh virtualenv brings (ensurepip's) gets a line there that an upgraded pip never prints. The
    lines that pip would print are made here from what the installed packages declare."""
    import ensurepip

    from packaging.requirements import Requirement

    fresh = ensurepip.version()
    lines = []
    for dist in importlib.metadata.distributions():
        for spec in dist.requires or []:
            req = Requirement(spec)
            if _norm(req.name) != "pip" or (req.marker and not req.marker.evaluate({"extra": ""})):
                continue
            if not req.specifier.contains(fresh, prereleases=True):
                name = dist.metadata["Name"]
                lines.append(f"{name} {dist.version} has requirement {req}, but you have pip {fresh}.")
    allowed = pip_check_allow_list()
    unexpected = [line for key, line in parse_pip_check("\n".join(lines)) if key not in allowed]
    assert not unexpected, "docs/install.md does not explain:\n" + "\n".join(unexpected)


@pytest.mark.timeout(180)
def test_pip_check_lists_only_documented_conflicts() -> None:
    """`pip check` in this environment reports nothing beyond docs/install.md's allow-list."""
    if importlib.util.find_spec("pip") is None:
        pytest.skip("pip is not installed in this environment")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "check"],
        capture_output=True,
        text=True,
        timeout=150,
        check=False,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"},
    )
    allowed = pip_check_allow_list()
    unexpected = [line for key, line in parse_pip_check(proc.stdout) if key not in allowed]
    assert not unexpected, (
        "pip check reports conflicts that docs/install.md does not explain (fix the install, or add "
        "them to its allow-list with why they are harmless):\n" + "\n".join(unexpected)
    )
    assert proc.returncode == 0 or parse_pip_check(proc.stdout), proc.stderr


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            pins[_norm(name)] = version.strip()
    return pins


def test_cpu_constraints_pin_a_torchvision_built_for_the_pinned_torch() -> None:
    """Without a torchvision pin, open_clip's torchvision resolves to the newest release, which
    requires a newer torch: pip then replaces the CPU torch with a CUDA build."""
    pins = _pins(ROOT / "tests" / "constraints-cpu.txt")
    assert "torch" in pins and "torchvision" in pins
    try:
        installed = importlib.metadata.version("torchvision")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("torchvision is not installed")
    if installed.split("+")[0] != pins["torchvision"]:
        pytest.skip(f"torchvision {installed} here, not the pinned {pins['torchvision']}")
    torch_reqs = [
        r for r in importlib.metadata.requires("torchvision") or [] if _requirement_name(r) == "torch"
    ]
    assert torch_reqs, "torchvision declares no torch requirement"
    assert any(re.search(rf"==\s*{re.escape(pins['torch'])}\b", r) for r in torch_reqs), torch_reqs


def test_fetch_extra_brings_every_img2dataset_dependency() -> None:
    """img2dataset goes in with --no-deps: the core and the `fetch` extra must bring what it imports,
    or `pip install 'fairsets[fetch]'` leaves downloads broken (albumentations, OpenCV, pandas)."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    provided = {_requirement_name(r) for r in project["dependencies"]}
    provided |= {_requirement_name(r) for r in project["optional-dependencies"]["fetch"]}
    try:
        requires = importlib.metadata.requires("img2dataset") or []
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("img2dataset is not installed")
    # Only a dependency documented as absent (a bare name in the allow-list, no version range) may be
    # left out; one documented for its version range must still be installed.
    docs = (ROOT / "docs" / "install.md").read_text()
    absent = {_norm(m) for m in re.findall(r"^\| img2dataset \S+ \| `([A-Za-z0-9_.-]+)` \|", docs, re.M)}
    assert absent == {"dataclasses"}
    missing = sorted(
        name
        for name in (_requirement_name(r) for r in requires if "extra ==" not in r)
        if name not in provided and name not in absent
    )
    assert not missing, f"the fetch extra lacks img2dataset's dependencies {missing}"


def _project() -> dict:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _extra_names(project: dict, extra: str) -> set[str]:
    return {_requirement_name(r) for r in project["optional-dependencies"][extra]}


def _self_extras(project: dict, extra: str) -> set[str]:
    """The extras that ``extra`` includes by naming fairsets itself (``fairsets[vision,...]``)."""
    found: set[str] = set()
    for spec in project["optional-dependencies"][extra]:
        if m := re.match(r"fairsets\[(.*)\]", spec.strip()):
            found |= {e.strip() for e in m.group(1).split(",")}
    return found


def test_person_detection_installs_through_an_extra_with_one_cv2() -> None:
    """ultralytics was in no extra (users learnt a --no-deps line); plain `ultralytics` pulls
    opencv-python, a second cv2 beside the `vision` extra's headless one. Ultralytics' own
    `ultralytics-opencv-headless` is the same code with the headless OpenCV."""
    project = _project()
    persons = _extra_names(project, "persons")
    assert "ultralytics-opencv-headless" in persons
    everything = set().union(*(_extra_names(project, e) for e in project["optional-dependencies"]))
    assert not everything & {"ultralytics", "opencv-python", "opencv-contrib-python"}
    assert {"persons", "vision"} <= _self_extras(project, "dev")
    assert "persons" in _self_extras(project, "all")
    ci = [ln.split("#", 1)[0] for ln in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert not [ln for ln in ci if re.search(r"(?<![-\w])ultralytics(?:==|\s|$)", ln)], (
        "CI installs ultralytics by hand"
    )


def _allowed_minors(project: dict) -> list[int]:
    from packaging.specifiers import SpecifierSet

    spec = SpecifierSet(project["requires-python"])
    return [m for m in range(8, 20) if spec.contains(f"3.{m}.0")]


def test_the_fetch_extra_brings_imghdr_where_python_removed_it() -> None:
    """img2dataset imports `imghdr`, which Python 3.13 removed: on every allowed Python from 3.13
    on, the `fetch` extra must bring `standard-imghdr` (and not before, where the standard library
    has it)."""
    from packaging.requirements import Requirement

    project = _project()
    fetch = [Requirement(r) for r in project["optional-dependencies"]["fetch"]]
    minors = _allowed_minors(project)
    assert 13 in minors or max(minors) < 13
    for minor in minors:
        env = {"python_version": f"3.{minor}", "python_full_version": f"3.{minor}.0", "extra": ""}
        names = {_norm(r.name) for r in fetch if r.marker is None or r.marker.evaluate(env)}
        assert ("standard-imghdr" in names) == (minor >= 13), f"Python 3.{minor}"


def test_the_supported_python_versions_are_stated_alike() -> None:
    """The classifiers name the supported versions, from requires-python's lower bound up without a
    gap, and the README and docs/install.md say the same range."""
    project = _project()
    classified = sorted(
        int(c.rsplit(".", 1)[1])
        for c in project["classifiers"]
        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
    )
    minors = _allowed_minors(project)
    assert classified, "no Programming Language :: Python :: 3.N classifier"
    assert classified == list(range(minors[0], classified[-1] + 1)), (classified, minors)
    said = f"Python 3.{classified[0]} to 3.{classified[-1]}"
    assert said in (ROOT / "README.md").read_text()
    assert said in (ROOT / "docs" / "install.md").read_text()


def _plain_install_checker():
    spec = importlib.util.spec_from_file_location(
        "check_plain_install", ROOT / "scripts" / "check_plain_install.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _paragraph(text: str, start: str) -> str:
    return text.split(start, 1)[1].split("\n\n", 1)[0]


def test_every_readme_command_says_what_a_plain_machine_installs() -> None:
    """The README said no nvidia-* wheel comes in with the second command, while PyPI's torch is
    the CUDA build: each command's pip part has a claim that scripts/check_plain_install.py checks
    against pip's dry run (CI), and the prose says what the claim says."""
    checker = _plain_install_checker()
    claims = {c.command: c for c in checker.all_claims(ROOT)}
    readme = (ROOT / "README.md").read_text()
    for i, cmd in enumerate(readme_commands()):
        pip_part = next(p.strip() for p in cmd.split("&&") if p.strip().startswith("pip install"))
        assert pip_part in claims, f"no plain-machine claim for {pip_part!r}"
        claim = claims[pip_part]
        assert claim.torch is not None and claim.nvidia is not None
        prose = _paragraph(readme, ("The first command", "The second command")[i])
        if claim.nvidia == 0:
            assert "no `nvidia-*` wheel" in prose
        else:
            assert claim.gb is not None
            assert f"{claim.nvidia} `nvidia-*` wheels" in prose and f"{claim.gb} GB" in prose
            assert "so no `nvidia-*` wheel comes in" not in prose
        if claim.torch == "none":
            assert "no PyTorch" in prose
        else:
            assert f"torch {claim.torch}" in prose


def test_the_plain_machine_check_finds_what_pip_contradicts() -> None:
    checker = _plain_install_checker()
    (claim,) = checker.parse_claims(
        "<!-- plain-machine:\npip install -e '.[x]' => torch none; nvidia 0; cv2 opencv-python-headless\n-->",
        "doc",
    )
    assert claim.pip_args() == ["-e", ".[x]"]

    def report(*pkgs: tuple[str, str]) -> dict:
        return {
            "install": [
                {"metadata": {"name": n, "version": v}, "download_info": {"url": f"https://h/{n}-{v}.whl"}}
                for n, v in pkgs
            ]
        }

    cuda = checker.Selection.from_report(
        report(
            ("torch", "2.13.0"),
            ("nvidia_cublas", "13.1"),
            ("nvidia-ml-py", "13.0"),
            ("opencv-python", "4.14"),
        )
    )
    assert cuda.cuda_wheels() == ["nvidia-cublas"]  # NVML's binding is no CUDA library
    assert cuda.heavy() == ["nvidia-cublas", "torch"]
    wrong = checker.check(claim, cuda)
    assert len(wrong) == 3 and "torch 2.13.0" in wrong[0] and "opencv-python" in wrong[2]
    cpu = checker.Selection.from_report(report(("torch", "2.13.0+cpu"), ("opencv-python-headless", "4.14")))
    (pinned,) = checker.parse_claims(
        "<!-- plain-machine:\npip install . => torch 2.13.0; nvidia 1; gb 2.7; with ultralytics; "
        "without opencv-python-headless\n-->",
        "doc",
    )
    assert checker.check(pinned, cuda, size=2_740_000_000) == [
        "says ultralytics is installed, pip does not select it"
    ]
    assert len(checker.check(pinned, cpu, size=0)) == 4  # nvidia, GB, with, without
    assert (
        checker.check(claim, checker.Selection.from_report(report(("opencv-python-headless", "4.14")))) == []
    )
