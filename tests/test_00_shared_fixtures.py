"""Part 0: the fixtures every lesson evaluates on, loaded deterministically and held out."""

import json

import pytest

import evalcore as ec


def test_load_fixtures_shape_and_types():
    fx = ec.load_fixtures()
    assert set(fx) == {"lm", "em", "f1", "judge", "facts"}
    for key in ("lm", "em", "f1", "judge"):
        assert len(fx[key]) == 20, key
    assert all(isinstance(t, str) and len(t.encode("utf-8")) >= 2 for t in fx["lm"])
    for key in ("em", "f1", "judge"):
        for q, ref in fx[key]:
            assert isinstance(q, str) and q.strip()
            refs = [ref] if isinstance(ref, str) else ref
            assert (
                isinstance(refs, list)
                and refs
                and all(isinstance(r, str) and r.strip() for r in refs)
            )
        assert len({q for q, _ in fx[key]}) == 20, f"{key}: duplicate instructions"


def test_load_fixtures_is_deterministic_and_matches_the_file(root):
    a, b = ec.load_fixtures(), ec.load_fixtures()
    assert a == b
    raw = json.loads((root / "data" / "fixtures.json").read_text(encoding="utf-8"))
    assert a["lm"] == raw["lm"]
    for key in ("em", "f1", "judge"):
        assert [list(p) for p in a[key]] == raw[key]
    assert a["facts"] == raw["facts"]
    a["lm"].append("changed")
    a["em"].clear()
    a["facts"]["em"].clear()
    assert ec.load_fixtures() == b  # each call is a fresh copy


# Words that name each fact; an example is about a fact when its text (question and reference)
# contains one of them. Written by hand from the fixtures, independently of their fact ids.
FACT_WORDS = {
    "france": ["france", "paris"],
    "japan": ["japan", "tokyo"],
    "italy": ["italy", "rome"],
    "egypt": ["egypt", "cairo"],
    "bees": ["bee", "honey"],
    "spider": ["spider"],
    "boiling": ["boil"],
    "freezing": ["freeze", "ice", "cold"],
    "pacific": ["ocean"],
    "mars": ["mars", "red planet"],
    "jupiter": ["jupiter", "largest planet", "biggest"],
    "sun": ["sun is", "the sun"],
    "year": ["365", "year"],
    "moon": ["moon"],
    "cows": ["cow"],
    "penguin": ["penguin"],
    "whale": ["whale"],
    "owls": ["owl"],
    "frog": ["frog", "tadpole"],
    "plants": ["plant"],
    "heart": ["heart"],
    "week": ["week"],
    "everest": ["mountain"],
    "snakes": ["snake"],
    "many facts": ["simple facts"],
}


def test_every_example_carries_the_fact_it_asks_about():
    fx = ec.load_fixtures()
    for key in ("lm", "em", "f1", "judge"):
        assert len(fx["facts"][key]) == len(fx[key]), key
        for example, fact in zip(fx[key], fx["facts"][key]):
            text = json.dumps(example).lower()
            assert any(w in text for w in FACT_WORDS[fact]), (key, fact, example)
    shared = {f for f in FACT_WORDS if sum(f in fx["facts"][k] for k in fx["facts"]) >= 3}
    assert len(shared) >= 15, shared  # the four evals ask about the same facts


@pytest.mark.parametrize("facts", [None, {"lm": [], "em": [], "f1": [], "judge": []}])
def test_load_fixtures_refuses_missing_fact_ids(root, tmp_path, monkeypatch, facts):
    raw = json.loads((root / "data" / "fixtures.json").read_text(encoding="utf-8"))
    if facts is None:
        del raw["facts"]
    else:
        raw["facts"] = facts
    path = tmp_path / "fixtures.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    monkeypatch.setattr(ec, "FIXTURES_PATH", path)
    with pytest.raises(ValueError, match=r"facts\['lm'\] must list one non-empty fact id"):
        ec.load_fixtures()


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
