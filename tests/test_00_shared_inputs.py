"""Part 0: inputs that once crashed or misled: a model left in training mode, a model that puts zero
probability on a target, weights that are not a dict, a report path that is not JSON."""

import math
import subprocess
import sys

import pytest
import torch

import evalcore as ec
from conftest import make_tiny


def test_evals_run_a_training_mode_model_in_eval_mode_and_restore_it(tok):
    model = make_tiny(seed=3, dropout=0.5)
    reference = ec.perplexity_eval(model, tok, ["some held-out text"]).value
    answers = ec.generate(model, tok, ["a", "bb"], max_new_tokens=8)
    model.train()
    assert ec.perplexity_eval(model, tok, ["some held-out text"]).value == reference
    assert ec.generate(model, tok, ["a", "bb"], max_new_tokens=8) == answers
    assert model.training  # the caller's mode is left as it was


def test_zero_probability_target_gives_infinite_perplexity_not_a_crash(tok):
    base = make_tiny(seed=4)
    banned = tok.encode("z")[0]

    def never_z(ids):
        logits = base(ids)
        logits[..., banned] = -math.inf
        return logits

    result = ec.perplexity_eval(never_z, tok, ["fizz", "abc"])
    assert result.value == math.inf
    assert result.per_example[0]["score"] == math.inf
    assert math.isfinite(result.per_example[1]["score"])
    assert result.extras["histogram"]["infinite"] == 2
    assert sum(result.extras["histogram"]["counts"]) == result.extras["total_tokens"] - 2
    assert ec.aggregate([result]).to_dict()["evals"]["perplexity"]["value"] is None


def test_nan_logits_raise_a_clear_error(tok):
    with pytest.raises(ValueError, match="NaN"):
        ec.perplexity_eval(
            lambda ids: torch.full((*ids.shape, tok.vocab_size), math.nan), tok, ["abc"]
        )


@pytest.mark.parametrize("weights", [[1.0], "perplexity", 0.5])
def test_weights_must_be_a_dict(weights):
    result = ec.EvalResult("exact_match", 0.5, [{"score": 0.5}])
    with pytest.raises(ValueError, match="weights must be a dict"):
        ec.aggregate([result], weights=weights)


def test_demo_refuses_an_out_path_that_is_not_json(tmp_path, root):
    proc = subprocess.run(
        [
            sys.executable,
            str(root / "evalcore.py"),
            "--steps",
            "1",
            "--out",
            str(tmp_path / "report.png"),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert proc.returncode != 0
    assert "out must name a .json file" in proc.stderr
    assert not (tmp_path / "report.png").exists()
