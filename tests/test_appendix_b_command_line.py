"""Appendix B: the demo end to end (`python evalcore.py`), and one smoke test of the setup a user
runs (the lock against pyproject's ranges, and what `make test` and CI call)."""

import os
import re
import subprocess
import sys
import tomllib

import pytest
import torch
from packaging.requirements import Requirement

import evalcore as ec
from conftest import REPORT_KEYS, strict_loads

# ----------------------------------------------------------------------------------------------
# The demo, end to end
# ----------------------------------------------------------------------------------------------

DEMO_STEPS = "3"
TIMING_LINE = re.compile(r'^\s*"\w+_s": [-+0-9.eE]+,?$')


def _env():
    # One thread per process: the two demo runs go side by side on a 2-core machine.
    return {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _demo(root, *args):
    return subprocess.Popen(
        [sys.executable, "evalcore.py", *args],
        cwd=root,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(proc, timeout=240):
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


@pytest.fixture(scope="module")
def demo_runs(root, tmp_path_factory):
    """Two runs of `python evalcore.py` with the same seed, each into its own folder."""
    dirs = [tmp_path_factory.mktemp(f"demo{i}") for i in range(2)]
    procs = [
        _demo(root, "--seed", "0", "--steps", DEMO_STEPS, "--out", str(d / "r.json")) for d in dirs
    ]
    return [(d, *_finish(p)) for d, p in zip(dirs, procs)]


def test_demo_exits_0_and_writes_strict_json_with_stable_keys(demo_runs):
    for folder, rc, out, err in demo_runs:
        assert rc == 0, err
        assert "aggregate score" in out
        for name in ("perplexity", "exact_match", "token_f1", "judge"):
            assert name in out
        report = strict_loads((folder / "r.json").read_text(encoding="utf-8"))
        assert set(report) == REPORT_KEYS
        assert set(report["evals"]) == {"perplexity", "exact_match", "token_f1", "judge"}
        for ev in report["evals"].values():
            assert set(ev) == {
                "value",
                "ci95",
                "normalised",
                "weight",
                "n",
                "extras",
                "per_example",
            }
            assert ev["n"] == 20 and len(ev["per_example"]) == 20
            assert ev["ci95"] == ev["extras"]["ci95"] and ev["extras"]["n"] == 20
            assert ev["ci95"][0] <= ev["value"] <= ev["ci95"][1]
        assert 0.0 <= report["aggregate"] <= 1.0
        assert report["schema_version"] == 3
        assert report["aggregate_ci_method"].startswith("percentile bootstrap, 25 facts drawn")
        low, high = report["aggregate_ci95"]
        assert low <= report["aggregate"] <= high
        assert report["aggregate"] == pytest.approx(
            sum(ev["weight"] * ev["normalised"] for ev in report["evals"].values()), abs=1e-12
        )
        meta = report["meta"]
        assert {"seed", "versions", "model", "timings"} <= set(meta)
        assert meta["seed"] == 0
        assert meta["model"]["num_params"] == 859264
        assert meta["versions"]["torch"].split("+")[0] == "2.13.0"


def test_demo_writes_a_png_beside_the_json(demo_runs):
    for folder, *_ in demo_runs:
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
    assert all(
        (TIMING_LINE.match(x) and TIMING_LINE.match(y))
        or ('"created_utc"' in x and '"created_utc"' in y)
        for x, y in differing
    ), differing[:3]


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


@pytest.mark.parametrize(
    "args,message",
    [
        (["--steps", "0"], "steps"),
        (["--steps", "-2"], "steps"),
        (["--steps", "many"], "--steps"),
        (["--seed", "x"], "--seed"),
        (["bogus"], "invalid choice"),
    ],
)
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
# Setup: what a user runs
# ----------------------------------------------------------------------------------------------


def test_setup_smoke(root):
    """requirements.txt pins every dependency pyproject.toml names, each inside its range; `make
    test` runs ruff and pytest; CI runs `make test`."""
    lock = {}
    for line in (root / "requirements.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            req = Requirement(line)
            lock[req.name.lower()] = next(iter(req.specifier)).version
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    wanted = project["dependencies"] + [
        d for g in project["optional-dependencies"].values() for d in g
    ]
    for dep in map(Requirement, wanted):
        assert dep.name.lower() in lock, f"requirements.txt does not pin {dep.name}"
        assert dep.specifier.contains(lock[dep.name.lower()]), (
            f"{dep.name}=={lock[dep.name.lower()]} is outside {dep}"
        )
    dry = subprocess.run(
        ["make", "-n", "test"], cwd=root, capture_output=True, text=True, check=True
    )
    assert (
        "ruff check" in dry.stdout
        and "ruff format --check" in dry.stdout
        and "pytest" in dry.stdout
    )
    assert "make test" in (root / ".ci" / "run").read_text(encoding="utf-8")
