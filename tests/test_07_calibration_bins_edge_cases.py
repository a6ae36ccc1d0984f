"""Lesson 07's calibration bins, edge cases (issue 19): equal-mass bins are cut from the
confidences in sorted order, whatever order the examples come in."""

import pytest

import evalcore as ec


def test_equal_mass_bins_sort_by_confidence_not_input_order():
    conf, hit = [0.9, 0.1, 0.8, 0.2], [1, 0, 1, 0]
    bins = ec.calibration_bins(conf, hit, n_bins=2, binning="mass")
    # {0.1, 0.2}: confidence 0.15, accuracy 0; {0.8, 0.9}: confidence 0.85, accuracy 1
    assert [(b["lo"], b["hi"], b["count"]) for b in bins] == [(0.1, 0.2, 2), (0.8, 0.9, 2)]
    assert [b["accuracy"] for b in bins] == [0.0, 1.0]
    assert [b["confidence"] for b in bins] == pytest.approx([0.15, 0.85], abs=1e-12)
    # cut in input order it would be {0.9, 0.1} and {0.8, 0.2}: ECE 0
    assert ec.expected_calibration_error(conf, hit, 2, "mass") == pytest.approx(0.15, abs=1e-12)


def test_equal_mass_bins_do_not_depend_on_the_order_of_the_examples():
    conf = [0.55, 0.05, 0.95, 0.35, 0.75, 0.15]
    hit = [1, 0, 1, 0, 1, 1]
    order = [3, 0, 5, 1, 4, 2]
    shuffled = ([conf[i] for i in order], [hit[i] for i in order])
    assert ec.calibration_bins(*shuffled, n_bins=3, binning="mass") == ec.calibration_bins(
        conf, hit, n_bins=3, binning="mass"
    )
    # sorted: {0.05, 0.15} accuracy 1/2, {0.35, 0.55} 1/2, {0.75, 0.95} 1: gaps 0.4, 0.05, 0.15
    ece = (2 * 0.4 + 2 * 0.05 + 2 * 0.15) / 6
    assert ec.expected_calibration_error(conf, hit, 3, "mass") == pytest.approx(ece, abs=1e-12)
