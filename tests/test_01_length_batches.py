"""Lesson 01's padding-capped batches by hand (issue 19): the cap is measured against a batch's
first row, its longest, never its last."""

import pytest

import evalcore as ec


def test_the_cap_is_measured_against_the_longest_row():
    # 8 >= 0.75 * 10 joins; 7 < 0.75 * 10 = 7.5 starts a new batch, though 7 >= 0.75 * 8 = 6
    assert ec.length_batches([10, 8, 7], batch_size=8) == [[0, 1], [2]]


def test_a_chain_of_small_steps_does_not_creep_below_the_cap():
    # each row is within 25% of the one before, but 56 < 0.75 * 100 = 75
    lengths = [100, 80, 64, 56]
    batches = ec.length_batches(lengths, batch_size=8)
    assert batches == [[0, 1], [2, 3]]
    for b in batches:
        assert min(lengths[i] for i in b) >= 0.75 * lengths[b[0]]


def test_a_row_at_exactly_the_cap_joins():
    # 3 = 0.75 * 4: padding is exactly 25% of the batch, which MAX_PADDING allows
    assert ec.length_batches([4, 3], batch_size=8) == [[0, 1]]
    assert ec.length_batches([4, 3], batch_size=8, max_padding=0.2) == [[0], [1]]


def test_no_padding_allowed_batches_equal_lengths_only():
    assert ec.length_batches([5, 4, 5], batch_size=8, max_padding=0.0) == [[0, 2], [1]]


def test_order_is_longest_first_and_stable_among_equal_lengths():
    assert ec.length_batches([3, 9, 3, 9, 3], batch_size=2) == [[1, 3], [0, 2], [4]]


@pytest.mark.parametrize("batch_size", [1, 2, 3])
def test_batch_size_caps_the_rows(batch_size):
    batches = ec.length_batches([6] * 7, batch_size=batch_size)
    assert [len(b) for b in batches] == [batch_size] * (7 // batch_size) + (
        [7 % batch_size] if 7 % batch_size else []
    )
    assert [i for b in batches for i in b] == list(range(7))
