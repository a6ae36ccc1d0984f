"""Bits per character and per byte count only the texts that were scored (issue 19): a text too
short to predict anything adds neither bits nor characters nor bytes."""

import math

import pytest
import torch

import evalcore as ec


def test_an_unscored_text_adds_no_characters_or_bytes(tok):
    uniform = lambda ids: torch.zeros(*ids.shape, tok.vocab_size)  # noqa: E731
    # "x" is one byte token: nothing to predict. "巴黎" is 2 characters, 6 bytes, 5 predictions.
    result = ec.perplexity_eval(uniform, tok, ["x", "巴黎"])
    assert result.per_example[0]["score"] is None
    assert (result.extras["total_chars"], result.extras["total_bytes"]) == (2, 6)
    bits = 5 * math.log2(tok.vocab_size)
    assert result.extras["bits_per_char"] == pytest.approx(bits / 2, rel=1e-6)
    assert result.extras["bits_per_byte"] == pytest.approx(bits / 6, rel=1e-6)
