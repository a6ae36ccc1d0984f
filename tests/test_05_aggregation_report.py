"""Lesson 05: normalise_metric, aggregate, and the FinalReport (dict, strict JSON, table, frame)."""

import json
import math

import pandas as pd
import pytest

import evalcore as ec
from conftest import REPORT_KEYS, strict_loads
from evalcore import EvalResult

# ----------------------------------------------------------------------------------------------
# normalise_metric
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name,value,expected",
    [
        ("perplexity", 1.0, 1.0),
        ("perplexity", 1, 1.0),
        ("perplexity", math.e, 0.5),  # 1 / (1 + 1)
        ("perplexity", math.e**3, 0.25),  # 1 / (1 + 3)
        ("perplexity", 0.5, 1.0),  # below 1: no real distribution, clipped to 1
        ("perplexity", 0.0, 0.0),
        ("perplexity", -1.0, 0.0),
        ("perplexity", math.inf, 0.0),
        ("perplexity", -math.inf, 0.0),
        ("perplexity", math.nan, 0.0),
        ("judge", 5, 1.0),
        ("judge", 2.5, 0.5),
        ("judge", 1, 0.2),
        ("judge", 6, 1.0),  # clipped
        ("judge", math.nan, 0.0),
        ("exact_match", 0.37, 0.37),
        ("exact_match", 1.0, 1.0),
        ("exact_match", 0, 0.0),
        ("exact_match", math.nan, 0.0),
        ("exact_match", 1.5, 1.0),  # clipped
        ("token_f1", 0.6, 0.6),
        ("token_f1", -0.1, 0.0),  # clipped
        ("token_f1", math.nan, 0.0),
    ],
)
def test_normalise_metric(name, value, expected):
    got = ec.normalise_metric(name, value)
    assert got == pytest.approx(expected, abs=1e-15)
    assert 0.0 <= got <= 1.0


def test_normalise_metric_perplexity_is_decreasing():
    values = [ec.normalise_metric("perplexity", p) for p in (1.0, 1.5, 2.0, 10.0, 259.0, 1e6)]
    assert all(a > b for a, b in zip(values, values[1:]))


@pytest.mark.parametrize("name", ["accuracy", "Perplexity", "f1", "", "exact match"])
def test_normalise_metric_unknown_name(name):
    with pytest.raises(ValueError):
        ec.normalise_metric(name, 0.5)


# ----------------------------------------------------------------------------------------------
# aggregate
# ----------------------------------------------------------------------------------------------


def results(*names, nan_in_extras=False):
    """Four hand-made results; normalised values: ppl e -> 0.5, em 0.5, f1 0.25, judge 4 -> 0.8."""
    made = {
        "perplexity": EvalResult(
            "perplexity",
            math.e,
            [
                {
                    "index": 0,
                    "text": "ab",
                    "score": 2.0,
                    "n_tokens": 1,
                    "nll": math.log(2),
                    "token_nll": [math.log(2)],
                },
                {"index": 1, "text": "x", "score": None, "n_tokens": 0, "nll": None},
            ],
            {
                "total_tokens": 1,
                "mean_nll": 1.0,
                "histogram": {"edges": [0.0, 1.0], "counts": [1]},
                "oops": math.nan if nan_in_extras else 0.0,
                "far": -math.inf if nan_in_extras else 1.0,
            },
        ),
        "exact_match": EvalResult(
            "exact_match",
            0.5,
            [
                {"instruction": "q1", "prediction": "Paris", "reference": "Paris", "score": 1.0},
                {
                    "instruction": "q2",
                    "prediction": "Rome",
                    "reference": ["8", "eight"],
                    "score": 0.0,
                },
            ],
        ),
        "token_f1": EvalResult(
            "token_f1",
            0.25,
            [
                {
                    "instruction": "q1",
                    "prediction": "a b",
                    "reference": "a c d e f g h",
                    "score": 0.25,
                }
            ],
        ),
        "judge": EvalResult(
            "judge",
            4.0,
            [
                {
                    "instruction": "q",
                    "prediction": "p",
                    "reference": "r",
                    "score": 5,
                    "rationale": "x",
                },
                {
                    "instruction": "q",
                    "prediction": "p",
                    "reference": "r",
                    "score": 3,
                    "rationale": "y",
                },
            ],
        ),
    }
    return [made[n] for n in names]


ALL = ("perplexity", "exact_match", "token_f1", "judge")


def test_aggregate_default_weights_hand_computed():
    report = ec.aggregate(results(*ALL))
    # 0.2 * 0.5 + 0.3 * 0.5 + 0.3 * 0.25 + 0.2 * 0.8 = 0.1 + 0.15 + 0.075 + 0.16
    assert report.score == pytest.approx(0.485, abs=1e-12)
    assert report.weights == pytest.approx({n: ec.DEFAULT_WEIGHTS[n] for n in ALL}, abs=1e-12)
    assert {n: ec.DEFAULT_WEIGHTS[n] for n in ALL} == {
        "perplexity": 0.2,
        "exact_match": 0.3,
        "token_f1": 0.3,
        "judge": 0.2,
    }


def test_aggregate_renormalises_over_the_evals_present():
    report = ec.aggregate(results("exact_match", "judge"))
    # weights 0.3 and 0.2 -> 0.6 and 0.4: 0.6 * 0.5 + 0.4 * 0.8
    assert report.weights == pytest.approx({"exact_match": 0.6, "judge": 0.4}, abs=1e-12)
    assert set(report.weights) == {"exact_match", "judge"}
    assert report.score == pytest.approx(0.62, abs=1e-12)
    assert sum(report.weights.values()) == pytest.approx(1.0, abs=1e-12)


def test_aggregate_ignores_weights_of_evals_not_present():
    report = ec.aggregate(
        results("exact_match", "judge"), weights={"exact_match": 1, "judge": 3, "token_f1": 5}
    )
    # 1 : 3 -> 0.25, 0.75: 0.25 * 0.5 + 0.75 * 0.8
    assert report.weights == pytest.approx({"exact_match": 0.25, "judge": 0.75}, abs=1e-12)
    assert report.score == pytest.approx(0.725, abs=1e-12)


def test_aggregate_a_zero_weight_drops_an_eval():
    report = ec.aggregate(
        results(*ALL), weights={"perplexity": 0, "exact_match": 1, "token_f1": 1, "judge": 0}
    )
    assert report.score == pytest.approx(0.375, abs=1e-12)  # (0.5 + 0.25) / 2


def test_aggregate_single_eval():
    report = ec.aggregate(results("perplexity"))
    assert report.score == pytest.approx(0.5, abs=1e-12)
    assert report.weights == {"perplexity": 1.0}


def test_aggregate_score_stays_in_unit_interval():
    extreme = [
        EvalResult("perplexity", 0.3, []),
        EvalResult("exact_match", 1.0, []),
        EvalResult("token_f1", 7.0, []),
        EvalResult("judge", 9.0, []),
    ]
    assert ec.aggregate(extreme).score == pytest.approx(1.0, abs=1e-12)
    bad = [EvalResult("perplexity", math.nan, []), EvalResult("exact_match", math.nan, [])]
    assert ec.aggregate(bad).score == 0.0


@pytest.mark.parametrize(
    "names,weights",
    [
        (ALL, {"perplexity": -0.1, "exact_match": 0.5, "token_f1": 0.3, "judge": 0.3}),  # negative
        (ALL, {"perplexity": math.nan, "exact_match": 0.5, "token_f1": 0.3, "judge": 0.2}),  # NaN
        (
            ("exact_match", "judge"),
            {"exact_match": 0, "judge": 0, "token_f1": 1},
        ),  # zero sum present
        (("exact_match", "judge"), {"exact_match": 1}),  # judge present without weight
        (("exact_match", "judge"), {"exact_match": 1, "judge": 1, "exactmatch": 1}),  # unknown name
        (("exact_match",), {"exact_match": 1, "f1": 1}),
        (("exact_match",), {"exact_match": "1"}),
        (("exact_match",), {}),
    ],
)
def test_aggregate_rejects_bad_weights(names, weights):
    with pytest.raises(ValueError):
        ec.aggregate(results(*names), weights=weights)


def test_aggregate_rejects_bad_results():
    with pytest.raises(ValueError):  # unknown eval name
        ec.aggregate(results("exact_match") + [EvalResult("accuracy", 0.5, [])])
    with pytest.raises(ValueError):  # the same eval twice
        ec.aggregate(results("exact_match", "judge") + results("exact_match"))
    with pytest.raises(ValueError):
        ec.aggregate([])
    with pytest.raises(ValueError):
        ec.aggregate([{"name": "exact_match", "value": 0.5}])


# ----------------------------------------------------------------------------------------------
# FinalReport
# ----------------------------------------------------------------------------------------------


def test_report_to_dict_keys_and_values():
    report = ec.aggregate(results(*ALL), meta={"seed": 0})
    d = report.to_dict()
    assert set(d) == REPORT_KEYS
    assert d["schema_version"] == 3
    assert d["aggregate_ci_method"].startswith("undefined")
    assert d["aggregate"] == pytest.approx(0.485, abs=1e-12)
    assert (
        d["aggregate_ci95"] is None
    )  # one scored text: perplexity has no interval, nor the aggregate
    assert list(d["evals"]) == list(ALL)
    for name, ev in d["evals"].items():
        assert set(ev) == {"value", "ci95", "normalised", "weight", "n", "extras", "per_example"}
        assert ev["weight"] == pytest.approx(ec.DEFAULT_WEIGHTS[name], abs=1e-12)
    assert d["evals"]["perplexity"]["normalised"] == pytest.approx(0.5, abs=1e-12)
    assert d["evals"]["judge"]["normalised"] == pytest.approx(0.8, abs=1e-12)
    assert d["evals"]["perplexity"]["n"] == 1  # the unscored text is not counted
    assert d["evals"]["exact_match"]["n"] == 2
    assert d["evals"]["exact_match"]["per_example"][1]["reference"] == ["8", "eight"]
    assert d["meta"] == {"seed": 0}
    assert strict_loads(json.dumps(d, allow_nan=False)) == d


def test_report_nan_and_inf_become_none():
    rs = results(*ALL, nan_in_extras=True)
    rs[2] = EvalResult("token_f1", math.nan, rs[2].per_example)
    report = ec.aggregate(rs, meta={"timings": {"x": math.inf}})
    d = report.to_dict()
    assert d["evals"]["perplexity"]["extras"]["oops"] is None
    assert d["evals"]["perplexity"]["extras"]["far"] is None
    assert d["evals"]["token_f1"]["value"] is None
    assert d["evals"]["token_f1"]["normalised"] == 0.0
    assert d["meta"]["timings"]["x"] is None
    json.dumps(d, allow_nan=False)  # raises ValueError on any NaN or infinity left
    # the report's own objects are left as they were
    assert math.isnan(rs[0].extras["oops"])


def test_report_to_json_is_strict_and_stable(tmp_path):
    rs = results(*ALL, nan_in_extras=True)
    a = ec.aggregate(rs, meta={"seed": 0}).to_json(tmp_path / "sub" / "a.json")
    b = ec.aggregate(rs, meta={"seed": 0}).to_json(tmp_path / "b.json")
    assert a.read_bytes() == b.read_bytes()
    text = a.read_text(encoding="utf-8")
    assert "NaN" not in text and "Infinity" not in text
    assert strict_loads(text) == ec.aggregate(rs, meta={"seed": 0}).to_dict()


def test_report_json_keeps_unicode(tmp_path):
    rs = [
        EvalResult(
            "exact_match",
            1.0,
            [
                {
                    "instruction": "首都は？",
                    "prediction": "東京 🙂",
                    "reference": "東京 🙂",
                    "score": 1.0,
                }
            ],
        )
    ]
    path = ec.aggregate(rs).to_json(tmp_path / "u.json")
    d = strict_loads(path.read_text(encoding="utf-8"))
    assert d["evals"]["exact_match"]["per_example"][0]["prediction"] == "東京 🙂"


def test_report_table():
    report = ec.aggregate(results(*ALL))
    table = report.table()
    assert isinstance(table, str)
    first = table.splitlines()[0]
    assert "aggregate" in first and f"{report.score:.4f}" in first  # aggregate on top
    for name in ALL:
        assert name in table
    rows = [line for line in table.splitlines() if line.split() and line.split()[0] in ALL]
    assert [r.split()[0] for r in rows[:4]] == list(ALL)  # one row per eval, in order
    assert "Rome" in table  # the worst exact-match example is listed


def test_report_frame():
    report = ec.aggregate(results(*ALL))
    frame = report.to_frame()
    assert isinstance(frame, pd.DataFrame)
    assert len(frame) == 2 + 2 + 1 + 2  # one row per example, across evals
    assert (
        list(frame["eval"])
        == ["perplexity"] * 2 + ["exact_match"] * 2 + ["token_f1"] + ["judge"] * 2
    )
    assert {"eval", "score", "normalised"} <= set(frame.columns)
    judge = frame[frame["eval"] == "judge"]
    assert list(judge["normalised"]) == pytest.approx([1.0, 0.6], abs=1e-12)
    assert "token_nll" not in frame.columns


def test_report_from_real_evals(trained_model, tok, tmp_path):
    fx = ec.load_fixtures()
    rs = [
        ec.perplexity_eval(trained_model, tok, fx["lm"][:5] + ["x"], max_len=64),
        ec.exact_match_eval(trained_model, tok, fx["em"][:3], max_new_tokens=8),
        ec.token_f1_eval(trained_model, tok, fx["f1"][:3], max_new_tokens=8),
        ec.judge_eval(trained_model, tok, fx["judge"][:3], max_new_tokens=8),
    ]
    report = ec.aggregate(rs)
    expected = sum(ec.DEFAULT_WEIGHTS[r.name] * ec.normalise_metric(r.name, r.value) for r in rs)
    assert report.score == pytest.approx(expected, abs=1e-12)
    d = strict_loads(report.to_json(tmp_path / "r.json").read_text(encoding="utf-8"))
    assert d["evals"]["perplexity"]["n"] == 5
    assert len(report.to_frame()) == 6 + 3 + 3 + 3


def test_plot_report_shows_raw_values_strips_and_the_run(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    report = ec.aggregate(
        results(*ALL), meta={"seed": 3, "steps": 40, "model": {"num_params": 859264}}
    )
    fig = ec.plot_report(report)
    bars_ax, strips_ax = fig.axes
    labels = [t.get_text() for t in bars_ax.texts]
    assert labels[0].startswith(
        f"{math.e:.4g}"
    )  # the raw perplexity, not only its normalised value
    from matplotlib.collections import PathCollection

    dots = [c for c in strips_ax.collections if isinstance(c, PathCollection)]
    assert not strips_ax.patches and len(dots) == len(ALL)  # a strip of dots per eval, no boxes
    em_dots = dots[1].get_offsets()
    assert len({round(float(x), 6) for x, _ in em_dots}) == len(em_dots)  # jittered apart
    title = fig._suptitle.get_text()
    assert "seed 3" in title and "40 steps" in title and "0.86 M" in title
    ec.plot_report(report, tmp_path / "r.png")
    assert (tmp_path / "r.png").stat().st_size > 1000
