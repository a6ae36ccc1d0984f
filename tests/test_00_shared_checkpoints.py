"""Part 0: the shipped TinyGPT checkpoints: trained at their full context (issue 9's acceptance
criteria,
checked on the files themselves), and the short-window one that shows the pitfall of lesson 01."""

import json

import pytest

import evalcore as ec


@pytest.fixture(scope="module")
def models():
    return {
        "main": ec.load_pretrained(),
        "early": ec.load_pretrained(ec.EARLY_CHECKPOINT_PATH),
        "short": ec.load_pretrained(ec.SHORT_CHECKPOINT_PATH),
    }


@pytest.fixture(scope="module")
def lm_texts():
    texts = ec.load_fixtures()["lm"]
    long = [t for t in texts if len(t) > ec.TinyGPTConfig.max_len]
    assert len(long) == 1, "the lm fixture has one text longer than the context"
    return {"all": texts, "short": [t for t in texts if t not in long], "long": long}


def _mean(xs):
    return sum(xs) / len(xs)


def test_every_position_of_the_shipped_model_is_trained(models, lm_texts, tok):
    per_position = ec.nll_by_position(models["main"], tok, lm_texts["all"])
    assert len(per_position) == 256
    early, late = _mean(per_position[16:128]), _mean(per_position[128:256])
    assert late <= 1.3 * early, f"positions 128-255: {late:.4f} nats, 16-127: {early:.4f}"


def test_the_short_window_checkpoint_fails_past_its_training_length(models, lm_texts, tok):
    manifest = json.loads(ec.SHORT_CHECKPOINT_PATH.with_suffix(".json").read_text(encoding="utf-8"))
    assert manifest["train_len"] == ec.SHORT_TRAIN_LEN == 64
    per_position = ec.nll_by_position(models["short"], tok, lm_texts["all"])
    trained, untrained = _mean(per_position[16:64]), _mean(per_position[128:256])
    assert untrained > 1.5 * trained, f"positions 128-255: {untrained:.4f}, 16-63: {trained:.4f}"


@pytest.mark.parametrize("which", ["all", "short"])
def test_the_shipped_checkpoint_beats_the_early_one(models, lm_texts, tok, which):
    main = ec.perplexity_eval(models["main"], tok, lm_texts[which]).value
    early = ec.perplexity_eval(models["early"], tok, lm_texts[which]).value
    assert main < early, f"{which}: shipped {main:.4f}, early {early:.4f}"


def test_on_the_long_text_a_smaller_stride_scores_lower(models, lm_texts, tok):
    """Issue 9's acceptance figure, on text 19 at max_len 256 only: lesson 01 shows that at shorter
    windows, and on other texts, the order does not hold, so it is no general law of this model."""
    L = models["main"].config.max_len
    ppl = [
        ec.perplexity_eval(models["main"], tok, lm_texts["long"], stride=s).value
        for s in (L // 4, L // 2, L)
    ]
    assert ppl[0] < ppl[1] < ppl[2], f"strides {L // 4}/{L // 2}/{L}: {ppl}"


def test_manifests_record_how_each_checkpoint_was_trained():
    for path, steps in [
        (ec.CHECKPOINT_PATH, ec.CHECKPOINT_STEPS),
        (ec.EARLY_CHECKPOINT_PATH, ec.EARLY_CHECKPOINT_STEPS),
        (ec.SHORT_CHECKPOINT_PATH, ec.SHORT_CHECKPOINT_STEPS),
    ]:
        manifest = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
        assert manifest["steps"] == steps and manifest["seed"] == ec.SEED
        assert manifest["threads"] == ec.CHECKPOINT_THREADS
    hf = json.loads((ec.HF_CHECKPOINT_DIR / ec.HF_MANIFEST).read_text(encoding="utf-8"))
    assert hf["steps"] == ec.HF_STEPS and hf["seed"] == ec.SEED
