"""Lesson 16: the recording of SmolLM2's HumanEval samples (`make record-16`). Its plan (which
parts, which problems, which settings) is checked on the real settings; recording, resuming and
assembling are checked on a small recording made here (two problems, a few tokens), whose greedy
answers must be generate's and whose samples must be sample's, token for token."""

import json

import pytest

import evalcore as ec

SMALL_SETTINGS = {
    "greedy, chat": ("chat", 0.0, 1, 2),
    "T=0.8, chat": ("chat", 0.8, 3, 2),
}


@pytest.fixture(scope="module")
def smollm2():
    return ec.load_smollm2()


@pytest.fixture(scope="module")
def problems():
    return ec.load_humaneval()


def test_the_parts_cover_each_setting_once_in_batches_that_fit(problems):
    parts = ec._record_16_parts(problems)
    assert len({file for file, _, _ in parts}) == len(parts)
    for name, (_, _, n, subset) in ec.RECORD_16_SETTINGS.items():
        ids = [t for _, setting, task_ids in parts if setting == name for t in task_ids]
        assert ids == [p["task_id"] for p in problems[:subset]]
        assert all(len(t) * n <= ec.GENERATE_BATCH for _, s, t in parts if s == name)
    rows = sum(len(t) * ec.RECORD_16_SETTINGS[s][2] for _, s, t in parts)
    assert rows == 2 * 164 + 10 * 164 + 2 * 10 * 40 == 2768


def test_each_setting_names_everything_its_samples_depend_on():
    greedy, sampled = ec.record_16_settings("greedy, raw"), ec.record_16_settings("T=0.2, chat")
    assert set(ec.HUMANEVAL_SETTINGS) <= set(greedy) and greedy["n"] == 1
    assert (greedy["top_p"], greedy["seed"]) == (None, None)
    assert greedy["stop"] == list(ec.HUMANEVAL_STOP)
    assert (sampled["temperature"], sampled["top_p"], sampled["seed"]) == (0.2, 0.95, ec.SEED)
    assert sampled["stop"] == [ec.FENCE_STOP] and sampled["n"] == 10
    with pytest.raises(ValueError, match=r"setting must be one of .* got 'T=0\.5'"):
        ec.record_16_settings("T=0.5")


@pytest.mark.parametrize(("worker", "workers", "bad"), [(2, 2, "worker 2"), (0, 0, "workers 0")])
def test_a_worker_outside_the_workers_is_refused(tmp_path, worker, workers, bad):
    name, value = bad.split()
    with pytest.raises(ValueError, match=rf"^{name} must be an int .* got {value}$"):
        ec.record_16_parts(worker, workers, folder=tmp_path)


@pytest.fixture(scope="module")
def small_recording(smollm2, tmp_path_factory):
    """Two workers' parts, a resumed run that records nothing, then the assembled recording."""
    folder = tmp_path_factory.mktemp("parts")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ec, "RECORD_16_SETTINGS", SMALL_SETTINGS)
        mp.setattr(ec, "RECORD_16_MAX_NEW_TOKENS", 12)
        mp.setattr(ec, "load_smollm2", lambda: smollm2)
        made = [ec.record_16_parts(w, 2, folder) for w in (0, 1)]
        again = ec.record_16_parts(0, 1, folder)
        path = folder / "recording_16.json"
        rec = ec.record_16(path, folder)
    return made, again, rec, json.loads(path.read_text(encoding="utf-8"))


def test_workers_share_the_parts_and_a_resumed_run_records_none(small_recording):
    made, again, rec, written = small_recording
    assert made == [1, 1] and again == 0
    assert written == rec and list(rec["settings"]) == list(SMALL_SETTINGS)
    assert rec["model"]["sha256"] == ec.SMOLLM2_SHA256
    assert rec["benchmark"]["sha256"] == ec.HUMANEVAL_SHA256
    assert [len(s["samples"]) for s in rec["settings"].values()] == [2, 6]


def test_recorded_answers_are_generate_and_sample_token_for_token(
    small_recording, smollm2, problems
):
    model, tok = smollm2
    rec = small_recording[2]["settings"]
    ptok, prompts, stop = ec.humaneval_prompts(tok, problems[:2], "chat")
    greedy = ec.generate(model, ptok, prompts, max_new_tokens=12, stop=list(stop))
    assert [s["answer"] for s in rec["greedy, chat"]["samples"]] == greedy
    sampled = ec.sample(model, ptok, prompts, n=3, temperature=0.8, top_p=0.95, seed=ec.SEED,
                        max_new_tokens=12, stop=list(stop))  # fmt: skip
    assert [s["answer"] for s in rec["T=0.8, chat"]["samples"]] == [a for p in sampled for a in p]
    for s in rec["T=0.8, chat"]["samples"]:
        assert s["n_tokens"] <= 12


def test_each_recorded_outcome_is_the_sandbox_s_on_its_completion(small_recording, problems):
    samples = small_recording[2]["settings"]["greedy, chat"]["samples"]
    for s in samples:
        assert s["completion"] == ec.completion_from_answer(s["answer"], "chat")
    ran = ec.humaneval_results(problems[:2], samples)
    assert [s["outcome"] for s in samples] == [r.outcome for r in ran]
    assert {s["outcome"] for s in samples} <= set(ec.SANDBOX_OUTCOMES)


# The shipped recording (data/recording_16.json) ------------------------------------------------
@pytest.fixture(scope="module")
def shipped():
    return ec.load_recording_16()


def test_the_shipped_recording_holds_every_setting_in_full(shipped, problems):
    sizes = {name: len(s["samples"]) for name, s in shipped["settings"].items()}
    assert sizes == {"greedy, chat": 164, "greedy, raw": 164, "T=0.8, chat": 1640,
                     "T=0.2, chat": 400, "T=1.0, chat": 400}  # fmt: skip
    for name, s in shipped["settings"].items():
        assert {k: s[k] for k in (*ec.HUMANEVAL_SETTINGS, "n")} == ec.record_16_settings(name)
        for x in s["samples"]:
            assert x["completion"] == ec.completion_from_answer(x["answer"], s["prompt_format"])
            assert x["outcome"] in ec.SANDBOX_OUTCOMES
    assert shipped["sandbox"]["isolation"] == "bubblewrap"


def test_a_recording_from_another_model_file_is_refused(shipped, tmp_path):
    altered = {**shipped, "model": {**shipped["model"], "sha256": "0" * 64}}
    path = tmp_path / "recording_16.json"
    path.write_text(json.dumps(altered), encoding="utf-8")
    with pytest.raises(ValueError, match=r"recorded with SmolLM2.* run `make record-16`"):
        ec.load_recording_16(path)


def test_the_recorded_outcomes_are_what_the_sandbox_gives_again(shipped):
    recorded = ec.recorded_humaneval(shipped, "greedy, chat", ks=(1,))[1]
    rerun = ec.recorded_humaneval(shipped, "greedy, chat", ks=(1,), rerun=True)[1]
    assert [r["outcomes"] for r in rerun.per_example] == [
        r["outcomes"] for r in recorded.per_example
    ]
    passed = [x["outcome"] == "passed" for x in shipped["settings"]["greedy, chat"]["samples"]]
    assert recorded.value == pytest.approx(sum(passed) / 164, abs=1e-15)
    assert recorded.extras["ci_method"] == "wilson"


def test_a_setting_that_was_not_recorded_is_refused(shipped):
    with pytest.raises(ValueError, match=r"setting must be one of .* got 'T=0\.5, chat'"):
        ec.recorded_samples(shipped, "T=0.5, chat")


def test_the_pass_at_5_check_accepts_the_result_and_names_each_mistake(shipped):
    right = ec.recorded_humaneval(shipped, "T=0.8, chat", ks=(5, 10))
    assert ec.pass_at_5_mistake(right[5], shipped) is None
    assert ec.pass_at_5_mistake(right[10], shipped) == "pass_5 is pass@10, not pass@5"
    subset = ec.recorded_humaneval(shipped, "T=0.8, chat", ks=(5,), first=40)[5]
    assert "all 164 problems" in ec.pass_at_5_mistake(subset, shipped)
    shifted = ec.EvalResult("humaneval", right[5].value + 0.01, right[5].per_example,
                            right[5].extras)  # fmt: skip
    assert "not the mean over problems" in ec.pass_at_5_mistake(shifted, shipped)
    assert "must be an EvalResult" in ec.pass_at_5_mistake(0.08, shipped)


def test_the_low_temperature_check_accepts_the_list_and_names_each_mistake(shipped):
    right = ["HumanEval/13", "HumanEval/28"]  # by hand from the recording's c per problem
    assert ec.low_temperature_only_mistake(right, shipped) is None
    assert "misses 1 of" in ec.low_temperature_only_mistake(right[:1], shipped)
    assert "in the problems' order" in ec.low_temperature_only_mistake(right[::-1], shipped)
    assert "some T=1.0 sample passes" in ec.low_temperature_only_mistake(
        [*right, "HumanEval/22"], shipped
    )
    assert "no T=0.2 sample passes" in ec.low_temperature_only_mistake(["HumanEval/0"], shipped)
    assert "must be a list" in ec.low_temperature_only_mistake("HumanEval/13", shipped)
