"""Lesson 06: reference loss in bits, the task contract, wrappers, rubric gates, rater agreement,
the frozen protocol and its append-only log, Wilson intervals, the recording."""

import itertools
import json
import math
import re

import pytest
import torch
from sklearn.metrics import cohen_kappa_score

import evalcore as ec
from conftest import make_tiny

V = ec.InstructionTokenizer.vocab_size


def fixed_prob_model(tok, prompt, reference, probs):
    """A callable model that gives the i-th reference token exactly probs[i] under teacher forcing
    (the rest of the mass on one other token)."""
    ref = tok.encode(reference)
    first = (
        len(tok.encode_prompt(prompt)) - 1
    )  # the position that predicts the first reference token

    def model(ids):
        logits = torch.zeros(1, ids.shape[1], V, dtype=torch.float64)
        for i, (t, p) in enumerate(zip(ref, probs)):
            row = torch.full((V,), -math.inf, dtype=torch.float64)
            row[t] = math.log(p) if p > 0 else -math.inf
            if p < 1:
                row[(t + 1) % 256] = math.log(1 - p)
            logits[0, first + i] = row
        return logits

    return model


# Reference loss under teacher forcing ---------------------------------------------------------


def test_surprise_bits_by_hand():
    assert ec.surprise_bits(1) == 0.0 and str(ec.surprise_bits(1.0)) == "0.0"
    assert ec.surprise_bits(0.5) == pytest.approx(1.0)
    assert ec.surprise_bits(0.25) == pytest.approx(2.0)
    assert ec.surprise_bits(0) == math.inf
    assert ec.mean_bits([1.0, 2.0]) == 1.5
    assert ec.mean_bits([]) is None
    for bad in (-0.1, 1.5, "0.5", None, True):
        with pytest.raises(ValueError, match="p must be"):
            ec.surprise_bits(bad)


def test_reference_loss_half_and_quarter_is_one_and_a_half_bits(tok):
    model = fixed_prob_model(tok, "Q", "ab", [0.5, 0.25])
    loss = ec.reference_loss(model, tok, "Q", "ab")
    assert loss.tokens == ["a", "b"]
    assert loss.probs == pytest.approx([0.5, 0.25])
    assert loss.bits == pytest.approx([1.0, 2.0])
    assert loss.mean_bits == pytest.approx(1.5)


def test_probability_one_costs_zero_and_zero_costs_infinity(tok):
    certain = ec.reference_loss(fixed_prob_model(tok, "Q", "ab", [1.0, 1.0]), tok, "Q", "ab")
    assert certain.bits == [0.0, 0.0] and certain.mean_bits == 0.0
    loss = ec.reference_loss(fixed_prob_model(tok, "Q", "ab", [0.5, 0.0]), tok, "Q", "ab")
    assert loss.bits[0] == pytest.approx(1.0) and loss.bits[1] == math.inf
    assert loss.mean_bits == math.inf  # kept as infinity in the record
    d = loss.to_dict()
    assert d["bits"][1] is None and d["infinite"] == [False, True]
    assert d["mean_bits"] is None and d["mean_is_infinite"] is True
    json.dumps(d, allow_nan=False)  # strict JSON


def test_empty_reference_has_no_mean(tok):
    loss = ec.reference_loss(make_tiny(), tok, "What time?", "")
    assert loss.mean_bits is None and loss.tokens == []
    assert loss.to_dict()["mean_bits"] is None and loss.to_dict()["mean_is_infinite"] is False


def test_rule_based_system_loss_is_not_applicable(tok):
    loss = ec.reference_loss(None, tok, "What time?", "16:15")
    assert loss.mean_bits == ec.NOT_APPLICABLE == "not applicable"
    assert loss.mean_bits != 0 and not loss.applicable
    assert json.loads(json.dumps(loss.to_dict()))["mean_bits"] == "not applicable"


def test_reference_loss_matches_cross_entropy_of_the_full_sequence(tok):
    model = make_tiny(seed=3)
    prompt, ref = "When?", "16:15"
    loss = ec.reference_loss(model, tok, prompt, ref)
    ids = torch.tensor([tok.encode_prompt(prompt) + tok.encode(ref)])
    with torch.no_grad():
        logits = model(ids[:, :-1])[0].double()
        nll = torch.nn.functional.cross_entropy(logits, ids[0, 1:], reduction="none")
    assert loss.bits == pytest.approx((nll[-len(ref) :] / math.log(2)).tolist(), rel=1e-6)
    assert sum(loss.probs) < len(ref) and all(0 < p < 1 for p in loss.probs)


def test_reference_loss_rejects_bad_input(tok):
    model = make_tiny()  # max_len 96
    with pytest.raises(ValueError, match="max_len=96"):
        ec.reference_loss(model, tok, "x" * 100, "16:15")
    with pytest.raises(ValueError, match="must be str"):
        ec.reference_loss(model, tok, "x", None)


# The task contract ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer, value",
    [
        ("15:30", "15:30"),
        (" 15:30\n", "15:30"),
        ("unknown", "unknown"),
        ("Unknown", "unknown"),
        ("15:30.", None),
        ("3:30", None),
        ("24:00", None),
        ("15:30 or 16:00", None),
        ("The club meets at 15:30.", None),
        ("", None),
        ("not known", None),
    ],
)
def test_contract_value(answer, value):
    assert ec.contract_value(answer) == value


def test_task_success_needs_the_contract_and_the_right_value():
    assert ec.task_success("16:15", "16:15")
    assert ec.task_success(" unknown ", "unknown")
    assert not ec.task_success("15:30", "16:15")
    assert not ec.task_success("It is at 16:15.", "16:15")  # right value, wrong shape
    assert not ec.task_success("unknown", "16:15")
    with pytest.raises(ValueError, match="reference must be"):
        ec.task_success("16:15", "4pm")
    with pytest.raises(ValueError, match="prediction must be a str"):
        ec.task_success(None, "16:15")


# Wrappers, each on its own (no reference file) -------------------------------------------------


def test_wrap_raw_delivers_the_response_untouched():
    assert ec.wrap_raw("  It is at 16:15? ", "notice", "q") == "  It is at 16:15? "
    with pytest.raises(ValueError):
        ec.wrap_raw(None)


def test_wrap_first_time():
    assert ec.wrap_first_time("Meet at 16:15, not 15:30.") == "16:15"
    assert ec.wrap_first_time("Doors open at 7:05.") == "07:05"  # zero-padded to HH:MM
    assert ec.wrap_first_time("Sorry, that is unknown.") == "unknown"
    assert ec.wrap_first_time("no idea") == "no idea"  # nothing to extract: left as it is
    assert ec.wrap_first_time("Room 123:45 is shut") == "Room 123:45 is shut"
    # the failure the lesson shows: the first time belongs to another day
    assert ec.wrap_first_time("Monday is 09:00 and Tuesday is 13:30.") == "09:00"


def test_wrap_source_rule_reads_the_notice_not_the_response():
    notice = "Gym: Monday 10:00-11:00, Friday 14:00. The Sunday session is cancelled."
    assert (
        ec.wrap_source_rule("ignored 23:59", notice, "When does the gym open on Monday?") == "10:00"
    )
    assert ec.wrap_source_rule("", notice, "When does the gym close on Monday?") == "11:00"
    assert ec.wrap_source_rule("", notice, "When is the gym on friday?") == "14:00"
    assert ec.wrap_source_rule("", notice, "When is the gym on Sunday?") == "unknown"
    assert ec.wrap_source_rule("", notice, "When is the gym on Tuesday?") == "unknown"
    assert ec.wrap_source_rule("", notice, "When is the gym open?") == "unknown"  # no day asked
    # its limit: "weekdays" is not "Monday"
    assert ec.wrap_source_rule("", "Open 08:00 on weekdays.", "Open on Monday?") == "unknown"
    with pytest.raises(ValueError, match="notice and question"):
        ec.wrap_source_rule("", None, "q")


# Rubric -----------------------------------------------------------------------------------------


def test_rubric_weighted_score_by_hand():
    unsupported = {"source_support": 0, "format": 1, "clarity": 1}
    rubric = ec.Rubric({"source_support": 2, "format": 1, "clarity": 1}, threshold=0.5)
    assert ec.rubric_score(unsupported, rubric) == {
        "score": 0.5,
        "gates_failed": [],
        "passed": True,
    }


def test_clarity_weight_lets_a_fluent_wrong_answer_pass_and_a_gate_stops_it():
    fluent_wrong = ec.rubric_labels(
        "The library opens at 08:00 on Saturday.",
        "Library: Monday 08:00-16:00. Closed on Saturday.",
        "unknown",
    )
    assert fluent_wrong == {"source_support": 0, "format": 0, "clarity": 1}
    clarity_only = ec.Rubric({"source_support": 0, "format": 0, "clarity": 1})
    assert ec.rubric_score(fluent_wrong, clarity_only)["passed"]
    gated = ec.Rubric({"source_support": 0, "format": 0, "clarity": 1}, gates=("source_support",))
    verdict = ec.rubric_score(fluent_wrong, gated)
    assert verdict["score"] == 1.0 and verdict["gates_failed"] == ["source_support"]
    assert not verdict["passed"]


def test_rubric_rejects_bad_settings_and_labels():
    with pytest.raises(ValueError, match="weights must be a dict"):
        ec.Rubric({"fluency": 1})
    with pytest.raises(ValueError, match="weight for 'format'"):
        ec.Rubric({"format": -1})
    with pytest.raises(ValueError, match="sum to 0"):
        ec.Rubric({"format": 0})
    with pytest.raises(ValueError, match="gates must be a tuple"):
        ec.Rubric({"format": 1}, gates=("truth",))
    with pytest.raises(ValueError, match="threshold"):
        ec.Rubric({"format": 1}, threshold=1.5)
    with pytest.raises(ValueError, match="label for 'clarity'"):
        ec.rubric_score({"format": 1}, ec.Rubric({"format": 1, "clarity": 1}))


@pytest.mark.parametrize(
    "answer, reference, support, clarity",
    [
        ("16:15", "16:15", 1, 1),
        ("Chess is at 16:15. Want Tuesday too?", "16:15", 1, 0),
        ("Maths 09:00 Monday, science 13:30 Tuesday.", "13:30", 1, 0),  # true, but two times
        ("09:00", "13:30", 0, 1),
        ("It is at 21:00.", "16:15", 0, 1),  # a time the notice never gives
        ("The notice gives no time.", "unknown", 1, 1),
        ("unknown", "16:15", 0, 1),
        ("A ca ca ca", "16:15", 0, 0),
    ],
)
def test_source_support_and_anchored_clarity(answer, reference, support, clarity):
    notice = "Maths: Monday 09:00. Science: Tuesday 13:30. Chess: Thursday 16:15."
    assert ec.source_support(answer, notice, reference) == support
    assert ec.anchored_clarity(answer) == clarity


# Raters -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "a, b",
    [
        ([1, 0, 1, 1, 0, 1], [1, 1, 1, 0, 0, 1]),
        ([0, 0, 0, 1], [0, 0, 1, 1]),
        ([1, 1, 1, 1, 0], [0, 1, 1, 1, 1]),
        (["y", "n", "y", "m", "n"], ["y", "y", "y", "m", "n"]),
    ],
)
def test_cohen_kappa_matches_sklearn(a, b):
    assert ec.cohen_kappa(a, b) == pytest.approx(cohen_kappa_score(a, b))


def test_kappa_undefined_when_chance_agreement_is_one():
    assert ec.cohen_kappa([1, 1, 1], [1, 1, 1]) is None
    assert ec.percent_agreement([1, 1, 1], [1, 1, 1]) == 1.0
    with pytest.raises(ValueError, match="equal length"):
        ec.cohen_kappa([1, 0], [1])


def test_confusion_table_and_disputes_keep_both_reasons():
    assert ec.confusion_table([1, 0, 1, 1], [1, 1, 0, 1]) == [[0, 1], [1, 2]]
    with pytest.raises(ValueError, match="not in labels"):
        ec.confusion_table([2], [1])
    raters = ec.load_raters()
    for phase in ("before", "after"):
        a, b = ec.rater_labels(raters, phase, "A"), ec.rater_labels(raters, phase, "B")
        assert ec.cohen_kappa(a, b) == pytest.approx(cohen_kappa_score(a, b))
        disputes = ec.rater_disputes(raters, phase)
        assert len(disputes) == sum(x != y for x, y in zip(a, b))
        assert all(d["A"] != d["B"] and d["A_reason"] and d["B_reason"] for d in disputes)


def test_rater_file_is_authored_on_development_cases_and_the_anchor_helps():
    raters, task = ec.load_raters(), ec.load_notices()
    split = {c["id"]: c["split"] for c in task["cases"]}
    assert "not the results of a human study" in raters["note"]
    assert all(split[ex["case"]] == "development" for ex in raters["examples"])  # reserved unseen
    kappa = {
        p: ec.cohen_kappa(ec.rater_labels(raters, p, "A"), ec.rater_labels(raters, p, "B"))
        for p in ("before", "after")
    }
    assert kappa["before"] < 0.3 < 0.7 < kappa["after"] < 1  # better, still not unanimous


# Split, protocol and its log ----------------------------------------------------------------------


def test_split_is_disjoint_by_source_group():
    task = ec.load_notices()
    groups = ec.check_split(task["cases"])
    assert not set(groups["development"]) & set(groups["reserved"])
    for case in task["cases"]:
        assert case["source_group"] in groups[case["split"]]
    assert len(task["notices"]) == 8
    assert set(groups["development"]) | set(groups["reserved"]) == set(task["notices"])
    refs = {c["reference"] for c in task["cases"]}
    assert "unknown" in refs and len(refs) > 1  # stated and unknown answers both present


def test_a_source_group_across_the_split_is_refused():
    case = {
        "id": "a",
        "source_group": "g",
        "question": "q",
        "reference": "10:00",
        "split": "development",
    }
    cases = [case, {**case, "id": "b", "reference": "unknown", "split": "reserved"}]
    with pytest.raises(ValueError, match="'g'.*both splits"):
        ec.check_split(cases)
    with pytest.raises(ValueError, match="more than once"):
        ec.check_split([cases[0], cases[0]])
    with pytest.raises(ValueError, match="split must be"):
        ec.check_split([{**cases[0], "split": "test"}])


@pytest.fixture()
def task():
    t = ec.load_notices()
    return {
        **t,
        "responses": {c["id"]: "A ca ca" for c in t["cases"]},
        "reserved": [c["id"] for c in t["cases"] if c["split"] == "reserved"],
    }


RUBRIC = ec.Rubric(
    {"source_support": 2, "format": 1, "clarity": 1}, ("source_support", "format"), 0.75
)
RULE = {"model": None, "wrapper": "source_rule"}


def test_reserved_cases_cannot_be_scored_outside_a_frozen_protocol(task, tmp_path):
    with pytest.raises(ValueError, match="reserved"):
        ec.score_development(task["cases"], task["responses"], task["notices"], "raw", RUBRIC)
    log = ec.ProtocolLog(tmp_path / "log.jsonl")
    body = ec.protocol_body(RULE, RUBRIC, "anchor", task["reserved"], 0.95)
    with pytest.raises(ValueError, match="not frozen"):
        ec.reveal_reserved(
            log, body["protocol_sha256"], task["cases"], task["responses"], task["notices"]
        )
    assert log.exposed() == []


def test_freeze_then_reveal_marks_cases_exposed(task, tmp_path):
    log = ec.ProtocolLog(tmp_path / "log.jsonl")
    frozen = ec.freeze_protocol(log, RULE, RUBRIC, "anchor", task["reserved"], 0.95)
    records = ec.reveal_reserved(
        log, frozen["protocol_sha256"], task["cases"], task["responses"], task["notices"]
    )
    assert [r["id"] for r in records] == sorted(task["reserved"])
    assert all(r["exposed"] and not r["previously_exposed"] for r in records)
    assert log.exposed() == sorted(task["reserved"])
    assert [e["kind"] for e in log.verify()] == ["freeze", "exposure"]
    again = ec.reveal_reserved(
        log, frozen["protocol_sha256"], task["cases"], task["responses"], task["notices"]
    )
    assert all(r["previously_exposed"] for r in again)  # now development evidence


def test_protocol_hash_covers_what_is_frozen(task):
    body = ec.protocol_body(RULE, RUBRIC, "anchor", task["reserved"], 0.95)
    assert body == ec.protocol_body(RULE, RUBRIC, "anchor", list(reversed(task["reserved"])), 0.95)
    for changed in [
        ec.protocol_body(
            {**RULE, "wrapper": "first_time"}, RUBRIC, "anchor", task["reserved"], 0.95
        ),
        ec.protocol_body(
            RULE, ec.Rubric(RUBRIC.weights, RUBRIC.gates, 0.5), "anchor", task["reserved"], 0.95
        ),
        ec.protocol_body(RULE, RUBRIC, "another anchor", task["reserved"], 0.95),
        ec.protocol_body(RULE, RUBRIC, "anchor", task["reserved"][:-1], 0.95),
        ec.protocol_body(RULE, RUBRIC, "anchor", task["reserved"], 0.9),  # another target
    ]:
        assert changed["protocol_sha256"] != body["protocol_sha256"]
    with pytest.raises(ValueError, match="candidate must be"):
        ec.protocol_body({"wrapper": "magic"}, RUBRIC, "anchor", task["reserved"], 0.95)


def test_protocol_log_is_append_only_and_never_rewritten(task, tmp_path):
    path = tmp_path / "log.jsonl"
    log = ec.ProtocolLog(path)
    first = ec.freeze_protocol(log, RULE, RUBRIC, "anchor", task["reserved"], 0.95)
    before = path.read_bytes()
    changed = ec.Rubric(RUBRIC.weights, RUBRIC.gates, 0.5)  # a later change: a new entry
    second = ec.freeze_protocol(log, RULE, changed, "anchor", task["reserved"], 0.95)
    after = path.read_bytes()
    assert after.startswith(before) and after.count(b"\n") == 2
    entries = log.verify()
    assert entries[0] == first and entries[1] == second
    assert second["prev_sha256"] == first["entry_sha256"]
    assert log.protocol(first["protocol_sha256"])["rubric"]["threshold"] == 0.75
    # rewriting the first entry in place is detected
    lines = after.decode().splitlines()
    lines[0] = lines[0].replace('"threshold": 0.75', '"threshold": 0.5')
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match="line 1 was changed"):
        log.verify()


def test_a_rewritten_protocol_with_its_chain_redone_is_refused(task, tmp_path):
    # Rewrite the frozen wrapper and recompute every entry hash: the chain verifies, but the
    # content no longer hashes to the protocol id reveal_reserved is given.
    path = tmp_path / "log.jsonl"
    log = ec.ProtocolLog(path)
    frozen = ec.freeze_protocol(log, RULE, RUBRIC, "anchor", task["reserved"], 0.95)
    entry = json.loads(path.read_text(encoding="utf-8"))
    entry["candidate"]["wrapper"] = "first_time"
    body = {k: v for k, v in entry.items() if k != "entry_sha256"}
    entry["entry_sha256"] = ec._canonical_sha256(body)
    path.write_text(json.dumps(entry, sort_keys=True) + "\n", encoding="utf-8")
    assert len(log.verify()) == 1  # the hash chain alone cannot tell
    with pytest.raises(ValueError, match="does not hash to protocol"):
        ec.reveal_reserved(
            log, frozen["protocol_sha256"], task["cases"], task["responses"], task["notices"]
        )
    assert log.exposed() == []  # nothing was scored or logged


def test_a_log_whose_last_line_lost_its_newline_is_refused_not_corrupted(task, tmp_path):
    path = tmp_path / "log.jsonl"
    log = ec.ProtocolLog(path)
    ec.freeze_protocol(log, RULE, RUBRIC, "anchor", task["reserved"], 0.95)
    cut = path.read_bytes().rstrip(b"\n")
    path.write_bytes(cut)
    with pytest.raises(ValueError, match="ends without a newline"):
        log.verify()
    with pytest.raises(ValueError, match="ends without a newline"):
        ec.freeze_protocol(log, RULE, RUBRIC, "other anchor", task["reserved"], 0.95)
    assert path.read_bytes() == cut  # append refused before writing anything


# Honest reporting --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "k, n, low, high",
    [
        (1, 4, 0.0456, 0.6994),
        (0, 10, 0.0, 0.2775),
        (10, 10, 0.7225, 1.0),
        (5, 10, 0.2366, 0.7634),
        (4, 5, 0.3755, 0.9638),
    ],
)
def test_wilson_interval_known_values(k, n, low, high):
    lo, hi = ec.wilson_interval(k, n)
    assert lo == pytest.approx(low, abs=1e-4) and hi == pytest.approx(high, abs=1e-4)


def test_wilson_rejects_bad_counts():
    for k, n in [(1, 0), (5, 4), (-1, 4), (1.0, 4), (1, True)]:
        with pytest.raises(ValueError):
            ec.wilson_interval(k, n)


def test_rate_keeps_numerator_and_denominator():
    records = [{"success": s} for s in (True, False, False, False)]
    rate = ec.success_rate(records)
    assert (rate.k, rate.n, rate.value) == (1, 4, 0.25)
    assert str(rate) == "1/4 = 25% (95% Wilson interval 4.6% to 69.9%)"
    table = ec.rate_table({"dev": records})
    assert table.loc[0, ["successes", "n"]].tolist() == [1, 4]
    with pytest.raises(ValueError, match="empty"):
        ec.success_rate([])


def test_cases_needed():
    assert ec.cases_needed(20, 20, 0.8) == 0
    m = ec.cases_needed(4, 5, 0.95)
    assert ec.wilson_interval(4 + m, 5 + m)[0] >= 0.95 > ec.wilson_interval(3 + m, 4 + m)[0]
    with pytest.raises(ValueError, match="target"):
        ec.cases_needed(1, 2, 1.0)


def _records(outcomes):
    return [
        {
            "id": f"c{i}",
            "source_group": f"g{i}",
            "success": ok,
            "delivered": d,
            "reference": "10:00",
            "source_support": int(ok),
        }
        for i, (ok, d) in enumerate(outcomes)
    ]


def _brief(tmp_path, records, target, name="x", **kwargs):
    """decision_brief under a protocol frozen, with this target, on exactly these records' cases."""
    log = ec.ProtocolLog(tmp_path / f"log-{target}-{len(records)}.jsonl")
    frozen = ec.freeze_protocol(log, RULE, RUBRIC, "anchor", [r["id"] for r in records], target)
    return ec.decision_brief(name, "use", records, log, frozen["protocol_sha256"], **kwargs)


def test_decision_brief_accept_restrict_reject(tmp_path):
    assert _brief(tmp_path, _records([(True, "10:00")] * 20), 0.8)["decision"] == "accept"
    safe_miss = _records([(True, "10:00")] * 4 + [(False, "unknown")])
    brief = _brief(tmp_path, safe_miss, 0.95, "rule")
    assert brief["decision"] == "restrict" and "4/5" in brief["rate"]
    assert any("further cases answered right" in w for w in brief["would_change"])
    wrong_time = _records([(True, "10:00")] * 19 + [(False, "11:00")])
    assert _brief(tmp_path, wrong_time, 0.8)["decision"] == "reject"  # critical
    gibberish = _records([(False, "A ca ca")] * 9)
    assert _brief(tmp_path, gibberish, 0.95)["decision"] == "reject"


# The decision reads its target from the frozen protocol (issue 35 item 9) -------------------------


def test_the_target_is_frozen_with_the_protocol(tmp_path):
    log = ec.ProtocolLog(tmp_path / "log.jsonl")
    frozen = ec.freeze_protocol(log, RULE, RUBRIC, "anchor", ["c0", "c1"], 0.95)
    assert (frozen["target"], frozen["rate"]) == (0.95, "task_success_per_case")
    assert {"target", "rate"} <= set(ec.PROTOCOL_FIELDS)  # covered by the protocol's hash
    assert log.protocol(frozen["protocol_sha256"])["target"] == 0.95
    got = ec.frozen_target(log, frozen["protocol_sha256"])
    assert got == {
        "target": 0.95,
        "rate": "task_success_per_case",
        "cases": ["c0", "c1"],
        "exposed_before": [],
    }


def test_the_decision_uses_the_frozen_target(tmp_path):
    # 4/5 per case, Wilson 0.376 to 0.964: accept against a frozen 0.3, restrict against 0.95
    records = _records([(True, "10:00")] * 4 + [(False, "unknown")])
    low, high = _brief(tmp_path, records, 0.3), _brief(tmp_path, records, 0.95)
    assert (low["decision"], low["target"]) == ("accept", 0.3)
    assert (high["decision"], high["target"]) == ("restrict", 0.95)
    assert "target 95% per case, frozen in protocol" in high["reasons"][0]
    assert high["would_change"][0].startswith(f"{ec.cases_needed(4, 5, 0.95)} further cases")
    with pytest.raises(TypeError):  # a target can no longer be passed in beside the protocol
        ec.decision_brief("x", "use", records, target=0.3)


def test_a_target_edited_after_the_freeze_is_refused(tmp_path):
    # Lower the frozen target in the log and redo the hash chain: the chain verifies, but the
    # entry no longer hashes to its protocol id, so no decision is made on the new target.
    records = _records([(True, "10:00")] * 4 + [(False, "unknown")])
    path = tmp_path / "log.jsonl"
    log = ec.ProtocolLog(path)
    frozen = ec.freeze_protocol(log, RULE, RUBRIC, "anchor", [r["id"] for r in records], 0.95)
    entry = json.loads(path.read_text(encoding="utf-8"))
    entry["target"] = 0.3
    entry["entry_sha256"] = ec._canonical_sha256(
        {k: v for k, v in entry.items() if k != "entry_sha256"}
    )
    path.write_text(json.dumps(entry, sort_keys=True) + "\n", encoding="utf-8")
    assert len(log.verify()) == 1  # the hash chain alone cannot tell
    with pytest.raises(ValueError, match="does not hash to protocol"):
        ec.decision_brief("x", "use", records, log, frozen["protocol_sha256"])
    # edited in place, without redoing the chain: refused too
    path.write_text(json.dumps({**entry, "entry_sha256": frozen["entry_sha256"]}) + "\n")
    with pytest.raises(ValueError, match="line 1 was changed"):
        ec.decision_brief("x", "use", records, log, frozen["protocol_sha256"])


def test_a_target_changed_after_the_reveal_is_flagged_as_a_protocol_change(task, tmp_path):
    log = ec.ProtocolLog(tmp_path / "log.jsonl")
    first = ec.freeze_protocol(log, RULE, RUBRIC, "anchor", task["reserved"], 0.95)
    args = (task["cases"], task["responses"], task["notices"])
    records = ec.reveal_reserved(log, first["protocol_sha256"], *args)
    brief = ec.decision_brief("rule", "use", records, log, first["protocol_sha256"])
    assert brief["protocol_change"] == [] and not any(
        "protocol change" in r for r in brief["reasons"]
    )
    # the results are in view; a lower target now is a new protocol, and the brief says so
    later = ec.freeze_protocol(log, RULE, RUBRIC, "anchor", task["reserved"], 0.3)
    again = ec.reveal_reserved(log, later["protocol_sha256"], *args)
    flagged = ec.decision_brief("rule", "use", again, log, later["protocol_sha256"])
    assert flagged["target"] == 0.3 and flagged["protocol_change"] == sorted(task["reserved"])
    assert any(r.startswith("protocol change: cases") for r in flagged["reasons"])
    assert ec.frozen_target(log, first["protocol_sha256"])["exposed_before"] == []


def test_a_decision_is_made_on_the_frozen_cases_only(tmp_path):
    records = _records([(True, "10:00")] * 3)
    log = ec.ProtocolLog(tmp_path / "log.jsonl")
    frozen = ec.freeze_protocol(log, RULE, RUBRIC, "anchor", ["c0", "c1"], 0.5)
    with pytest.raises(ValueError, match="froze"):
        ec.decision_brief("x", "use", records, log, frozen["protocol_sha256"])


def test_a_target_frozen_for_another_rate_is_refused_not_held_to_the_per_case_rate(
    tmp_path, monkeypatch
):
    # decision_brief reads the frozen rate, not only the target: were a second rate added to
    # RATES, a target frozen for it must not silently be applied to the per-case rate.
    records = _records([(True, "10:00")] * 4 + [(False, "unknown")])
    ids = [r["id"] for r in records]
    log = ec.ProtocolLog(tmp_path / "log.jsonl")
    per_case = ec.freeze_protocol(log, RULE, RUBRIC, "anchor", ids, 0.3)
    assert _brief(tmp_path, records, 0.3)["target_rate"] == "task_success_per_case"
    monkeypatch.setitem(ec.RATES, "groups_all_right", "source groups with every case right")
    other = ec.freeze_protocol(log, RULE, RUBRIC, "anchor", ids, 0.3, rate="groups_all_right")
    assert ec.frozen_target(log, other["protocol_sha256"])["rate"] == "groups_all_right"
    with pytest.raises(ValueError, match="froze its target for the rate 'groups_all_right'"):
        ec.decision_brief("x", "use", records, log, other["protocol_sha256"])
    brief = ec.decision_brief("x", "use", records, log, per_case["protocol_sha256"])
    assert brief["decision"] == "accept"  # the per-case protocol in the same log still decides


def test_a_target_of_one_can_never_be_accepted(tmp_path):
    brief = _brief(tmp_path, _records([(True, "10:00")] * 50), 1.0)
    assert brief["decision"] == "restrict" and "never accept" in brief["would_change"][0]


@pytest.mark.parametrize("target", [0, -0.1, 1.5, 95, float("nan"), "0.95", None, True])
def test_a_target_outside_zero_to_one_is_refused_by_name(tmp_path, target):
    log = ec.ProtocolLog(tmp_path / "log.jsonl")
    wanted = rf"target must be a finite number in \(0, 1\], got {re.escape(repr(target))}$"
    with pytest.raises(ValueError, match=wanted):
        ec.freeze_protocol(log, RULE, RUBRIC, "anchor", ["c0"], target)
    assert log.verify() == []  # nothing was written


def test_an_unknown_rate_name_is_refused_by_name(tmp_path):
    log = ec.ProtocolLog(tmp_path / "log.jsonl")
    with pytest.raises(
        ValueError, match=r"rate must be one of \['task_success_per_case'\], got 'f1'"
    ):
        ec.freeze_protocol(log, RULE, RUBRIC, "anchor", ["c0"], 0.9, rate="f1")
    assert log.verify() == []


def _grouped(pairs):
    return [{"source_group": g, "success": ok} for g, ok in pairs]


def test_a_grouped_rate_counts_cases_and_resamples_groups():
    # three notices: a 1/1, b 1/2, c 2/2. The rate stays per case, 4/5; only its interval changes.
    records = _grouped([("a", True), ("b", True), ("b", False), ("c", True), ("c", True)])
    by_case, grouped = ec.success_rate(records), ec.success_rate(records, group_key="source_group")
    assert (by_case.k, by_case.n) == (grouped.k, grouped.n) == (4, 5)
    # By hand: a resample draws 3 notices with replacement; its rate is successes / cases over
    # the drawn notices. The 27 equally likely draws give these rates, each with its count:
    rates = []
    for draw in itertools.product("abc", repeat=3):
        k = sum({"a": 1, "b": 1, "c": 2}[g] for g in draw)
        n = sum({"a": 1, "b": 2, "c": 2}[g] for g in draw)
        rates.append(k / n)
    assert min(rates) == 0.5 and max(rates) == 1.0
    assert sum(r < 0.6 for r in rates) / 27 > 0.025  # the 2.5% point is the lowest rate, 0.5 ...
    assert sum(r == 1.0 for r in rates) / 27 > 0.025  # ... and the 97.5% point the highest, 1.0
    assert (grouped.low, grouped.high) == (0.5, 1.0)
    assert grouped.method == "cluster bootstrap over 3 source groups"
    assert (
        str(grouped)
        == "4/5 = 80% (95% interval 50.0% to 100.0%, cluster bootstrap over 3 source groups)"
    )


def test_a_grouped_rate_that_cannot_vary_falls_back_to_wilson_over_groups():
    # Every notice all right: every resample is 100%, a zero-width interval that would claim
    # certainty. Wilson with n = the number of notices is used instead.
    records = _grouped([(g, True) for g in "aabbccdde"])
    rate = ec.success_rate(records, group_key="source_group")
    assert (rate.k, rate.n) == (9, 9)
    assert (rate.low, rate.high) == pytest.approx(ec.wilson_interval(5, 5))
    assert "Wilson over 5 source groups" in rate.method
    one = ec.success_rate(_grouped([("a", True), ("a", False)]), group_key="source_group")
    assert (one.low, one.high) == pytest.approx(_wilson_by_hand(0.5, 1))


def _wilson_by_hand(p, n, z=1.959963984540054):
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def test_all_right_rate_is_a_separate_metric_over_groups():
    # two notices: g0's three questions all right, g1's two with one miss -> 1 of 2 notices
    records = _grouped([("g0", True), ("g0", True), ("g0", True), ("g1", True), ("g1", False)])
    whole = ec.all_right_rate(records)
    assert (whole.k, whole.n) == (1, 2) and (whole.low, whole.high) == ec.wilson_interval(1, 2)
    # A system right on exactly 95% of questions: on notices of 2 questions it gets a notice all
    # right only 0.95**2 = 90.25% of the time, so the per-question target fails it by construction.
    assert 0.95**2 < 0.95
    with pytest.raises(ValueError, match="empty"):
        ec.all_right_rate([])


def test_decision_brief_with_source_groups_decides_per_case(tmp_path):
    # four right cases on one notice and a miss on another: 4/5 per case, the interval over groups
    records = [
        {
            "id": f"c{i}",
            "source_group": "g0" if i < 4 else "g1",
            "success": i < 4,
            "delivered": "10:00" if i < 4 else "unknown",
            "reference": "10:00",
            "source_support": int(i < 4),
        }
        for i in range(5)
    ]
    grouped = _brief(tmp_path, records, 0.3, "rule", group_key="source_group")
    rate = ec.success_rate(records, group_key="source_group")
    assert "4/5" in grouped["rate"] and "cluster bootstrap" in grouped["rate"]
    assert grouped["decision"] == ("accept" if rate.low >= 0.3 else "restrict")
    assert "1/2" in grouped["reasons"][1] and "not held to this target" in grouped["reasons"][1]
    assert any("from new source groups" in w for w in grouped["would_change"])
    by_case = _brief(tmp_path, records, 0.3, "rule")  # Wilson 0.376 to 0.964
    assert "4/5" in by_case["rate"] and by_case["decision"] == "accept"


# The recording ----------------------------------------------------------------------------------


def test_recording_pins_the_current_checkpoint_and_fixture(root):
    rec = ec.load_recording()
    manifest = json.loads((root / "checkpoints" / "tinygpt.json").read_text())
    assert rec["checkpoint"]["sha256"] == manifest["sha256"] == ec._sha256(ec.CHECKPOINT_PATH)
    assert rec["fixture"]["sha256"] == ec._sha256(ec.NOTICES_PATH)
    assert {"python", "torch", "numpy"} <= set(rec["versions"])
    assert rec["decoding"]["method"] == "greedy" and rec["date"]
    task = ec.load_notices()
    assert set(rec["completions"]) == {c["id"] for c in task["cases"]}
    for c in task["cases"]:
        prompt = ec.notice_prompt(task["notices"][c["source_group"]], c["question"])
        assert rec["completions"][c["id"]]["prompt"] == prompt
        assert len(prompt.encode()) + 2 + rec["decoding"]["max_new_tokens"] <= 256
    assert ec.recorded_responses(rec)["chess-thu"] == rec["completions"]["chess-thu"]["response"]


def test_stale_recording_is_refused(tmp_path):
    rec = json.loads(ec.RECORDING_06_PATH.read_text())
    rec["checkpoint"]["sha256"] = "0" * 64
    path = tmp_path / "rec.json"
    path.write_text(json.dumps(rec))
    with pytest.raises(ValueError, match="evalcore.py record"):
        ec.load_recording(path)


def test_record_subcommand_dispatches(monkeypatch):
    calls = []
    monkeypatch.setattr(ec, "record_06", lambda: calls.append(1))
    assert ec.main(["record"]) == 0 and calls == [1]
