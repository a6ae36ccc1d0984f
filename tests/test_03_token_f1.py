"""Lesson 03: normalise_f1 and token F1 by hand: a bag of tokens, punctuation kept, empty sides."""

import pytest

import evalcore as ec

# ----------------------------------------------------------------------------------------------
# normalise_f1 and token_f1
# ----------------------------------------------------------------------------------------------


def test_normalise_f1_keeps_punctuation():
    assert ec.normalise_f1("  Paris.\u00a0Is  BIG! ") == "paris. is big!"


def test_token_f1_hand_computed_exact_values():
    # 4 shared tokens in 5 + 5: 2 * 4 / 10 = 0.8, exactly the float 0.8
    assert ec.token_f1("the cat sat on mat", "the cat sat on rug") == 0.8
    # 1 shared in 2 + 2: 0.5
    assert ec.token_f1("paris france", "paris city") == 0.5
    # 1 shared in 5 + 5: 0.2
    assert ec.token_f1("a b c d e", "a f g h i") == 0.2
    # precision 2/3, recall 1: harmonic mean 0.8
    assert ec.token_f1("a b c", "a b") == 0.8
    assert ec.token_f1("x y", "a b") == 0.0
    assert ec.token_f1("Tower Eiffel", "eiffel tower") == 1.0  # a bag: order is free


def test_token_f1_counts_repeated_tokens_as_a_multiset():
    # "the" three times against once: overlap 1 (not 3); 2 * 1 / (3 + 2) = 0.4
    assert ec.token_f1("the the the", "the cat") == pytest.approx(0.4, abs=1e-15)
    # overlap min(2, 2) + 0 = 2: 2 * 2 / 6
    assert ec.token_f1("a a b", "a a c") == pytest.approx(2 / 3, abs=1e-15)
    assert ec.f1_counts("the the the", "the cat") == (1, 3, 2)
    assert ec.f1_counts("a a b", "a a c") == (2, 3, 3)


def test_token_f1_punctuation_is_kept():
    assert ec.token_f1("Paris.", "Paris") == 0.0
    assert ec.exact_match("Paris.", "Paris") == 1.0  # EM drops the trailing full stop
    assert ec.token_f1("PARIS  is\u00a0big", "paris is big") == 1.0


def test_token_f1_empty_sides():
    assert ec.token_f1("", "") == 1.0
    assert ec.token_f1("   ", "\u3000") == 1.0
    assert ec.token_f1("a", "") == 0.0
    assert ec.token_f1("", "a") == 0.0


def test_token_f1_best_over_a_list_of_references():
    assert ec.token_f1("a b", ["c", "a b c"]) == 0.8
    assert ec.token_f1("a b", ["c d", "e"]) == 0.0
    assert ec.token_f1("a b", ["a b c", "a b"]) == 1.0
