"""Lesson 3 fixtures, the demo end to end (`python evalcore.py`), and the packaging around it."""

import json
import os
import re
import subprocess
import sys
from importlib import metadata

import pytest
import torch

import evalcore as ec
from conftest import strict_loads

# ----------------------------------------------------------------------------------------------
# Fixtures
# ----------------------------------------------------------------------------------------------


def test_load_fixtures_shape_and_types():
    fx = ec.load_fixtures()
    assert set(fx) == {"lm", "em", "f1", "judge"}
    for key in fx:
        assert len(fx[key]) == 20, key
    assert all(isinstance(t, str) and len(t.encode("utf-8")) >= 2 for t in fx["lm"])
    for key in ("em", "f1", "judge"):
        for q, ref in fx[key]:
            assert isinstance(q, str) and q.strip()
            refs = [ref] if isinstance(ref, str) else ref
            assert isinstance(refs, list) and refs and all(isinstance(r, str) and r.strip() for r in refs)
        assert len({q for q, _ in fx[key]}) == 20, f"{key}: duplicate instructions"


def test_load_fixtures_is_deterministic_and_matches_the_file(root):
    a, b = ec.load_fixtures(), ec.load_fixtures()
    assert a == b
    raw = json.loads((root / "data" / "fixtures.json").read_text(encoding="utf-8"))
    assert a["lm"] == raw["lm"]
    for key in ("em", "f1", "judge"):
        assert [list(p) for p in a[key]] == raw[key]
    a["lm"].append("changed")
    a["em"].clear()
    assert ec.load_fixtures() == b  # each call is a fresh copy


def _squash(text):
    return " ".join(text.lower().split())


def training_pieces(tok):
    """The text the model is trained on, as evalcore builds it: each training sequence cut at
    the special ids (so a question and its answer are separate pieces)."""
    pieces = []
    for seq in ec.training_sequences(tok):
        segment = []
        for i in seq + [tok.pad_id]:
            if i >= 256:
                if segment:
                    pieces.append(tok.decode(segment))
                segment = []
            else:
                segment.append(i)
    return pieces


def test_held_out_items_never_appear_verbatim_in_the_training_text(root, tok):
    raw = json.loads((root / "data" / "fixtures.json").read_text(encoding="utf-8"))
    train = raw["train"]
    assert train["statements"] and train["qa"]
    pieces = list(train["statements"]) + [s for qa in train["qa"] for s in qa]
    trained_on = training_pieces(tok)
    # the decoding above is the real text; a statement is followed by the space that joins it
    # to the next one in the packed stream
    assert {s + " " for s in train["statements"]} <= set(trained_on)
    assert {a for _, a in train["qa"]} <= set(trained_on)
    blob = _squash("\n".join(pieces + trained_on))
    fx = ec.load_fixtures()
    held_out = list(fx["lm"]) + [q for key in ("em", "f1", "judge") for q, _ in fx[key]]
    leaked = [item for item in held_out if _squash(item) in blob]
    assert leaked == []


# ----------------------------------------------------------------------------------------------
# The demo, end to end
# ----------------------------------------------------------------------------------------------

DEMO_STEPS = "3"
TIMING_LINE = re.compile(r'^\s*"\w+_s": [-+0-9.eE]+,?$')


def _env():
    # One thread per process: the two demo runs go side by side on a 2-core machine.
    return {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _demo(root, *args):
    return subprocess.Popen([sys.executable, "evalcore.py", *args], cwd=root, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(proc, timeout=240):
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


@pytest.fixture(scope="module")
def demo_runs(root, tmp_path_factory):
    """Two runs of `python evalcore.py` with the same seed, each into its own folder."""
    dirs = [tmp_path_factory.mktemp(f"demo{i}") for i in range(2)]
    procs = [_demo(root, "--seed", "0", "--steps", DEMO_STEPS, "--out", str(d / "r.json"))
             for d in dirs]
    return [(d, *_finish(p)) for d, p in zip(dirs, procs)]


def test_demo_exits_0_and_writes_strict_json_with_stable_keys(demo_runs):
    for folder, rc, out, err in demo_runs:
        assert rc == 0, err
        assert "aggregate score" in out
        for name in ("perplexity", "exact_match", "token_f1", "judge"):
            assert name in out
        report = strict_loads((folder / "r.json").read_text(encoding="utf-8"))
        assert set(report) == {"schema_version", "aggregate", "aggregate_ci95", "weights", "evals",
                               "meta"}
        assert set(report["evals"]) == {"perplexity", "exact_match", "token_f1", "judge"}
        for ev in report["evals"].values():
            assert set(ev) == {"value", "ci95", "normalised", "weight", "n", "extras", "per_example"}
            assert ev["n"] == 20 and len(ev["per_example"]) == 20
            assert ev["ci95"] == ev["extras"]["ci95"] and ev["extras"]["n"] == 20
            assert ev["ci95"][0] <= ev["value"] <= ev["ci95"][1]
        assert 0.0 <= report["aggregate"] <= 1.0
        low, high = report["aggregate_ci95"]
        assert low <= report["aggregate"] <= high
        assert report["aggregate"] == pytest.approx(
            sum(ev["weight"] * ev["normalised"] for ev in report["evals"].values()), abs=1e-12)
        meta = report["meta"]
        assert {"seed", "versions", "model", "timings"} <= set(meta)
        assert meta["seed"] == 0
        assert meta["model"]["num_params"] == 859264
        assert meta["versions"]["torch"].split("+")[0] == "2.13.0"


def test_demo_writes_a_png_beside_the_json(demo_runs):
    for folder, rc, out, err in demo_runs:
        png = folder / "r.png"
        assert png.is_file()
        data = png.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000


def test_demo_same_seed_gives_identical_json_apart_from_timings(demo_runs):
    (d1, *_), (d2, *_) = demo_runs
    a_text, b_text = ((d / "r.json").read_text(encoding="utf-8") for d in (d1, d2))
    a, b = strict_loads(a_text), strict_loads(b_text)
    assert set(a["meta"]["timings"]) == set(b["meta"]["timings"])
    del a["meta"]["timings"], b["meta"]["timings"]
    del a["meta"]["provenance"]["created_utc"], b["meta"]["provenance"]["created_utc"]
    assert a == b
    a_lines, b_lines = a_text.splitlines(), b_text.splitlines()
    assert len(a_lines) == len(b_lines)
    differing = [(x, y) for x, y in zip(a_lines, b_lines) if x != y]
    assert all((TIMING_LINE.match(x) and TIMING_LINE.match(y)) or ('"created_utc"' in x and
               '"created_utc"' in y) for x, y in differing), differing[:3]


def test_demo_json_carries_provenance_and_no_token_losses(demo_runs, root):
    report = strict_loads((demo_runs[0][0] / "r.json").read_text(encoding="utf-8"))
    meta = report["meta"]
    assert meta["threads"] == ec.DEMO_THREADS == 1  # set on purpose, whatever the environment says
    assert f"on {ec.DEMO_THREADS} thread(s)" in demo_runs[0][2]  # and printed
    prov = meta["provenance"]
    assert prov["fixtures_sha256"] == ec._sha256(ec.FIXTURES_PATH)
    assert prov["checkpoint_sha256"] == ec._sha256(ec.CHECKPOINT_PATH)
    assert prov["created_utc"].endswith("+00:00")
    assert prov["git_commit"] is None or len(prov["git_commit"]) == 40
    assert all("token_nll" not in e for e in report["evals"]["perplexity"]["per_example"])
    assert all(e["n_tokens"] > 0 for e in report["evals"]["perplexity"]["per_example"])


def test_per_token_losses_stay_in_the_json_only_when_asked(tmp_path, tok):
    uniform = lambda ids: torch.zeros(*ids.shape, tok.vocab_size)  # noqa: E731
    report = ec.aggregate([ec.perplexity_eval(uniform, tok, ["abc", "defg"])])
    assert "token_nll" not in report.to_dict()["evals"]["perplexity"]["per_example"][0]
    kept = strict_loads(report.to_json(tmp_path / "r.json", per_token=True).read_text())
    assert len(kept["evals"]["perplexity"]["per_example"][0]["token_nll"]) == 2
    assert "token_nll" in report.results[0].per_example[0]  # the result itself is untouched


@pytest.mark.parametrize("args,message", [
    (["--steps", "0"], "steps"),
    (["--steps", "-2"], "steps"),
    (["--steps", "many"], "--steps"),
    (["--seed", "x"], "--seed"),
    (["bogus"], "invalid choice"),
])
def test_demo_bad_arguments_exit_nonzero_with_a_clear_message(root, tmp_path, args, message):
    rc, out, err = _finish(_demo(root, *args, "--out", str(tmp_path / "r.json")), timeout=60)
    assert rc == 2  # argparse's usage error, before anything trains
    last = err.strip().splitlines()[-1]  # the usage, then one line that says what is wrong
    assert last.startswith("evalcore.py: error:") and message in last
    assert "Traceback" not in err
    assert not (tmp_path / "r.json").exists()


def test_demo_trains_for_ten_steps(root, tmp_path):
    # OneCycleLR divided by zero at exactly 10 steps: the demo ended in a ZeroDivisionError
    rc, out, err = _finish(_demo(root, "--steps", "10", "--out", str(tmp_path / "r.json")))
    assert rc == 0, err
    assert strict_loads((tmp_path / "r.json").read_text(encoding="utf-8"))["meta"]["steps"] == 10


def test_demo_unwritable_out_exits_nonzero_with_a_clear_message(root, tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    rc, out, err = _finish(_demo(root, "--steps", "1", "--out", str(blocker / "r.json")))
    assert rc != 0
    assert "error:" in err and "Traceback" not in err


# ----------------------------------------------------------------------------------------------
# Setup: requirements.txt, environment.yml, CI
# ----------------------------------------------------------------------------------------------

PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([0-9][A-Za-z0-9.+!-]*)$")


def _canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_pins(root):
    pins = {}
    for line in (root / "requirements.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        match = PIN.match(line)
        assert match, f"requirements.txt: {line!r} is not an exact == pin"
        name = _canonical(match.group(1))
        assert name not in pins, f"requirements.txt pins {name} twice"
        pins[name] = match.group(2)
    return pins


def test_requirements_are_exact_pins_of_what_the_course_needs(root):
    pins = requirement_pins(root)
    assert pins["torch"] == "2.13.0"
    for name in ("jupyterlab", "nbval", "pandas", "matplotlib", "tqdm", "pytest", "torchmetrics",
                 "transformers", "tokenizers"):
        assert name in pins, f"requirements.txt lacks {name}"


@pytest.mark.parametrize("name", ["torch", "pandas", "pytest", "torchmetrics", "matplotlib", "tqdm",
                                  "transformers", "tokenizers"])
def test_the_tests_run_on_the_pinned_versions(root, name):
    installed = metadata.version(name).split("+")[0]  # torch's CPU build is 2.13.0+cpu
    assert installed == requirement_pins(root)[name]


def environment_entries(root):
    """The dependency entries of environment.yml, read as text (PyYAML is not pinned here)."""
    entries = []
    for line in (root / "environment.yml").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].rstrip()
        stripped = line.strip()
        if stripped.startswith("- "):
            entries.append(stripped[2:].strip())
    return entries


def test_environment_installs_requirements_and_pins_nothing_else(root):
    entries = environment_entries(root)
    assert "-r requirements.txt" in entries
    assert "-e ." in entries
    assert "pip" in entries or "pip:" in entries
    python = [e for e in entries if re.match(r"^python\b", e)]
    assert python and re.match(r"^python\s*=+\s*3\.11(\.\*)?$", python[0]), python
    pins = requirement_pins(root)
    own = [e for e in entries if e not in ("-r requirements.txt", "-e .", "pip", "pip:",
                                           "conda-forge", "defaults") and e not in python]
    for entry in own:
        match = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:(==|=|>=|<=|~=|!=|<|>)\s*(\S+))?$", entry)
        assert match, f"environment.yml: cannot read {entry!r}"
        name, version = _canonical(match.group(1)), match.group(3)
        assert name in pins, f"environment.yml adds {name}, which requirements.txt does not pin"
        assert version is None or version.strip("=") == pins[name], (
            f"environment.yml pins {name} {version}, requirements.txt {pins[name]}")


def test_python_version_agrees_with_pyproject(root):
    text = (root / "pyproject.toml").read_text(encoding="utf-8")
    match = re.search(r'requires-python\s*=\s*">=\s*3\.(\d+)"', text)
    assert match and int(match.group(1)) <= 11
    assert sys.version_info >= (3, int(match.group(1)))


def test_ci_runs_make_test(root):
    ci = root / ".ci" / "run"
    assert ci.is_file() and os.access(ci, os.X_OK)
    lines = [line.strip() for line in ci.read_text(encoding="utf-8").splitlines()]
    assert lines[0].startswith("#!")
    commands = [line for line in lines if line and not line.startswith("#")]
    assert any(re.search(r"(^|[;&|]\s*)make test\b", c) for c in commands), commands


def test_make_test_runs_pytest(root):
    makefile = (root / "Makefile").read_text(encoding="utf-8")
    match = re.search(r"^test:.*\n((?:\t.*\n)+)", makefile, flags=re.M)
    assert match and "pytest" in match.group(1)
