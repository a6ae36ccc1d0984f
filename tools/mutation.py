"""A mutation pass over the newer parts of evalcore: do the unit tests catch the bugs a developer
would make? (`make mutation`; not part of `make test`.)

Each mutant below is one realistic edit to evalcore.py: a bug someone could write. For each, a
copy of the repository is made in a temporary folder with that one edit applied, and only the
test files of its area run there (pytest -x, under a timeout). A mutant is *killed* when those
tests fail (or time out), *survives* when they all pass. Every kill is then confirmed: the test
that made it must pass on the unmutated code (a timing test that fails under load would kill a
mutant it cannot see). A mutant whose edit changes no behaviour at all is *equivalent*: it is
listed with the reason, run anyway (it should survive), and left out of the score. A mutant whose
text is no longer in evalcore.py (the code was rewritten) is *stale*: reported, never run, never
scored.

The score is killed / (mutants - equivalent - stale), per area, over every area but
"intervals" (whose mutants are reported apart: that code has another owner; issue 19), and over
every area. --min-score holds each area and the whole to it.

    python tools/mutation.py                    # every mutant, then the scores
    python tools/mutation.py --area hf_adapter  # one area (repeatable)
    python tools/mutation.py --mutant pad-fixed-id --jobs 2
    python tools/mutation.py --list             # the mutants, without running anything
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = "evalcore.py"
COPIED = ("evalcore.py", "pyproject.toml", "tests", "tools")  # copied; everything else linked
SKIPPED = {"reports", "__pycache__"}  # and every hidden entry (.git, .venv, caches)
SEPARATE = "intervals"  # reported apart from the score (its code has another owner)

# The test files that cover each area: all that runs for one of its mutants (fast ones first:
# pytest -x stops at the first failure). LESSON_13 names tests of a file that also loads SmolLM2
# (slow): only those that need no real model.
LESSON_13 = "test_13_real_instruct_model.py::test_"
AREA_TESTS = {
    "hf_adapter": (
        "test_11_hf_adapter_edge_cases.py",
        "test_11_real_model.py",
        f"{LESSON_13}generation_on_a_tiny_llama_equals_the_uncached_loop_and_hf_generate",
        f"{LESSON_13}generation_stops_at_every_stop_id_and_keeps_a_pad_like_token",
        f"{LESSON_13}the_prompt_budget_is_counted_and_an_overflow_refused",
        f"{LESSON_13}load_hf_with_a_gguf_file_loads_the_cached_folder",
    ),
    "bits_per_byte": (
        "test_12_bits_per_char_edge_cases.py",
        "test_12_beyond_english.py",
        "test_11_real_model.py",
        f"{LESSON_13}token_losses_match_float64_on_a_100k_vocabulary",
        f"{LESSON_13}token_nll_keeps_infinite_and_refuses_nan_losses",
        f"{LESSON_13}perplexity_on_a_100k_vocabulary_matches_float64",
        f"{LESSON_13}token_nll_subtracts_the_two_logits_in_float64",
        f"{LESSON_13}token_nll_of_bfloat16_logits_is_computed_in_float32_or_better",
        f"{LESSON_13}token_nll_with_a_chunk_smaller_than_a_row_takes_one_position_at_a_time",
        "test_01_perplexity.py",
    ),
    "multiple_choice": ("test_07_multiple_choice_edge_cases.py", "test_07_calibration.py"),
    "choice_accuracy": ("test_07_multiple_choice_edge_cases.py", "test_11_real_model.py"),
    "segmentation_nfkc": (
        "test_12_segmentation_edge_cases.py",
        "test_12_beyond_english.py",
        "test_03_token_f1.py",
    ),
    "judge_transport": (
        "test_09_key_redaction.py",
        "test_09_judge_transport_edge_cases.py",
        "test_09_http_judge.py",
        "test_09_real_judge.py::test_http_judge_caps_its_reply_only_when_asked",
        "test_14_served_stub.py",
    ),
    "protocol_log": ("test_06_protocol_log_edge_cases.py", "test_06_evidence.py"),
    "calibration_bins": (
        "test_07_calibration_bins_edge_cases.py",
        "test_07_multiple_choice_edge_cases.py",
        "test_07_calibration.py",
    ),
    "length_batches": ("test_01_length_batches.py", "test_01_perplexity.py"),
    "contamination": ("test_15_contamination.py",),
    "sampling": ("test_00_shared_sampling.py", "test_14_served_sampling.py"),
    "intervals": (
        "test_00_shared_uncertainty.py",
        "test_06_evidence.py",
        "test_08_robustness.py",
        "test_05_aggregation_report.py",
    ),
}


@dataclass(frozen=True)
class Mutant:
    area: str
    name: str
    old: str  # must occur exactly once in evalcore.py
    new: str
    bug: str  # the mistake it stands for
    equivalent: str = ""  # why no test can tell it apart, when it is equivalent


M = Mutant
MUTANTS = [
    # -- The Hugging Face adapter (lesson 11) ------------------------------------------------
    M(
        "hf_adapter",
        "ids-not-moved",
        "        ids = ids.to(_device_of(self))\n",
        "",
        "ids are not moved to the model's device",
    ),
    M(
        "hf_adapter",
        "load-ignores-device",
        "        hf_model = hf_model.to(device)\n",
        "        hf_model = hf_model\n",
        "load_hf ignores device",
    ),
    M(
        "hf_adapter",
        "load-ignores-dtype",
        "_from_pretrained(str(name_or_path), dtype=dtype, gguf_file=gguf_file)",
        "_from_pretrained(str(name_or_path), gguf_file=gguf_file)",
        "load_hf ignores dtype",
    ),
    M(
        "hf_adapter",
        "bos-from-eos",
        "bos = hf_tokenizer.bos_token_id if hf_tokenizer.bos_token_id is not None else eos",
        "bos = eos",
        "BOS taken from EOS even when the tokenizer has its own",
    ),
    M(
        "hf_adapter",
        "pad-fixed-id",
        "self.pad_id = hf_tokenizer.pad_token_id if hf_tokenizer.pad_token_id is not None else eos",
        "self.pad_id = hf_tokenizer.pad_token_id if hf_tokenizer.pad_token_id is not None else 0",
        "a missing pad falls back to id 0 instead of EOS",
    ),
    M(
        "hf_adapter",
        "no-generation-prompt",
        "                add_generation_prompt=True,\n",
        "                add_generation_prompt=False,\n",
        "the chat template is applied without opening the assistant's turn",
    ),
    M(
        "hf_adapter",
        "bos-before-template",
        "            return self.encode(text)  # the template writes its own BOS",
        "            return list(self.bos_ids) + self.encode(text)  # the template writes its own"
        " BOS",
        "BOS added in front of the chat template's output",
    ),
    M(
        "hf_adapter",
        "prefix-under-template",
        'return "" if self.use_chat_template else PLAIN_ANSWER_PREFIX',
        "return PLAIN_ANSWER_PREFIX",
        "the answer prefix added under a chat template too",
    ),
    M(
        "hf_adapter",
        "decode-cuts-unconditionally",
        'without the space that follows "Answer:"."""\n        text = self.decode(ids)\n'
        "        return text[len(self._prefix()) :] if text.startswith(self._prefix()) else text",
        'without the space that follows "Answer:"."""\n        text = self.decode(ids)\n'
        "        return text[len(self._prefix()) :]",
        "decode_answer cuts a character whether or not the answer starts with the prefix",
    ),
    M(
        "hf_adapter",
        "stop-ids-dropped",
        "tok = HFTokenizer(hf_tokenizer, add_bos=add_bos, stop_ids=extra)",
        "tok = HFTokenizer(hf_tokenizer, add_bos=add_bos)",
        "the generation_config's EOS ids are dropped",
    ),
    M(
        "hf_adapter",
        "stop-ids-int-only",
        "[extra] if isinstance(extra, int) else list(extra)",
        "[extra] if isinstance(extra, int) else []",
        "a list of EOS ids in the generation_config is dropped, a single int kept",
    ),
    M(
        "hf_adapter",
        "stop-ids-without-eos",
        "self.stop_ids = frozenset({eos, *stop_ids})",
        "self.stop_ids = frozenset(stop_ids)",
        "the tokenizer's own EOS stops generation only if the generation_config lists it",
    ),
    M(
        "hf_adapter",
        "context-key-missing",
        'for key in ("max_position_embeddings", "n_positions", "n_ctx", "seq_length"):',
        'for key in ("n_positions", "n_ctx", "seq_length"):',
        "the context length read from GPT-2's key names only",
    ),
    M(
        "hf_adapter",
        "vocab-check-off-by-one",
        "if tok.vocab_size > model.config.vocab_size:",
        "if tok.vocab_size >= model.config.vocab_size:",
        "a tokenizer exactly as large as the embedding is refused",
    ),
    M(
        "hf_adapter",
        "not-in-eval-mode",
        "type(hf_model).__name__,\n        )\n        self.eval()\n",
        "type(hf_model).__name__,\n        )\n",
        "the wrapped model is left in train mode (dropout on)",
    ),
    # -- Bits per byte and per character (lessons 01, 11, 12) --------------------------------
    M(
        "bits_per_byte",
        "bytes-are-characters",
        '"n_bytes": len(text.encode("utf-8"))',
        '"n_bytes": len(text)',
        "bytes counted as characters",
    ),
    M(
        "bits_per_byte",
        "bytes-of-every-text",
        'total_bytes, total_chars = sum(r["n_bytes"] for r in scored)',
        'total_bytes, total_chars = sum(r["n_bytes"] for r in records)',
        "the bytes of texts too short to score counted in the denominator",
    ),
    M(
        "bits_per_byte",
        "chars-are-bytes",
        '"bits_per_char": bits / total_chars',
        '"bits_per_char": bits / total_bytes',
        "bits per character divided by bytes",
    ),
    M(
        "bits_per_byte",
        "nats-not-bits",
        "    bits = total_nll / math.log(2)\n",
        "    bits = total_nll\n",
        "nats reported as bits",
    ),
    M(
        "bits_per_byte",
        "chars-of-every-text",
        'sum(r["n_chars"] for r in scored)',
        'sum(r["n_chars"] for r in records)',
        "the characters of texts too short to score counted in the denominator",
    ),
    # -- Multiple choice: completion log-likelihoods (lesson 07) --------------------------------
    M(
        "multiple_choice",
        "end-token-always",
        "windows.append((prompt + (answer if end_token else answer[:-1]), len(prompt)))",
        "windows.append((prompt + answer, len(prompt)))",
        "the closing EOS/PAD always scored (not lm-evaluation-harness's rule)",
    ),
    M(
        "multiple_choice",
        "scores-last-prompt-token",
        "windows.append((prompt + (answer if end_token else answer[:-1]), len(prompt)))",
        "windows.append((prompt + (answer if end_token else answer[:-1]), len(prompt) - 1))",
        "the last prompt token scored as part of the completion",
    ),
    M(
        "multiple_choice",
        "choices-misaligned",
        'return [[next(scored)[0] for _ in it["choices"]] for it in items]',
        'return [[next(scored)[0] for _ in it["choices"]][::-1] for it in items]',
        "each item's log-likelihoods returned in the wrong order",
    ),
    M(
        "multiple_choice",
        "calibration-tie-to-last",
        "top = max(range(len(probs)), key=probs.__getitem__)",
        "top = max(reversed(range(len(probs))), key=probs.__getitem__)",
        "a tie between choices goes to the last, not the first",
    ),
    # -- Multiple choice: acc and acc_norm (lesson 11) -----------------------------------------
    M(
        "choice_accuracy",
        "acc-norm-bytes",
        'per_char = [ll / len(c) for ll, c in zip(lls, it["choices"])]',
        'per_char = [ll / len(c.encode("utf-8")) for ll, c in zip(lls, it["choices"])]',
        "acc_norm divides by UTF-8 bytes instead of characters",
    ),
    M(
        "choice_accuracy",
        "acc-tie-to-last",
        "pred, pred_norm = lls.index(max(lls)), per_char.index(max(per_char))",
        "pred, pred_norm = len(lls) - 1 - lls[::-1].index(max(lls)), per_char.index(max(per_char))",
        "acc breaks a tie to the last choice",
    ),
    M(
        "choice_accuracy",
        "acc-norm-tie-to-last",
        "pred, pred_norm = lls.index(max(lls)), per_char.index(max(per_char))",
        "pred, pred_norm = lls.index(max(lls)), "
        "len(per_char) - 1 - per_char[::-1].index(max(per_char))",
        "acc_norm breaks a tie to the last choice",
    ),
    M(
        "choice_accuracy",
        "acc-norm-by-tokens",
        'per_char = [ll / len(c) for ll, c in zip(lls, it["choices"])]',
        'per_char = [ll / len(c.split()) for ll, c in zip(lls, it["choices"])]',
        "acc_norm divides by words instead of characters",
    ),
    M(
        "choice_accuracy",
        "disagreements-inverted",
        'disagree = sum(r["pred"] != r["pred_norm"] for r in records)',
        'disagree = sum(r["pred"] == r["pred_norm"] for r in records)',
        "disagreements count the agreements",
    ),
    # -- Lesson 12: segmentation and NFKC -----------------------------------------------------
    M(
        "segmentation_nfkc",
        "no-compatibility-ideographs",
        r"\u4e00-\u9fff\uf900-\ufaff\U00020000",
        r"\u4e00-\u9fff\U00020000",
        "compatibility ideographs (U+F900-FAFF) not split",
    ),
    M(
        "segmentation_nfkc",
        "no-kana",
        r'"([\u3040-\u30ff\u3400-\u4dbf',
        r'"([\u3400-\u4dbf',
        "kana not split",
    ),
    M(
        "segmentation_nfkc",
        "no-extension-b",
        r"\uf900-\ufaff\U00020000-\U0002fa1f])",
        r"\uf900-\ufaff])",
        "ideographs beyond the BMP not split",
    ),
    M(
        "segmentation_nfkc",
        "nfkc-after-lowercase",
        '(lambda text: normalise(unicodedata.normalize("NFKC", text)))',
        '(lambda text: unicodedata.normalize("NFKC", normalise(text)))',
        "NFKC applied after lowercasing ('5㎒' -> '5MHz', not '5mhz')",
    ),
    M(
        "segmentation_nfkc",
        "nfc-not-nfkc",
        'normalise(unicodedata.normalize("NFKC", text))',
        'normalise(unicodedata.normalize("NFC", text))',
        "NFC instead of NFKC",
    ),
    M(
        "segmentation_nfkc",
        "eval-drops-segmentation",
        "(f1_counts(pred, r, normalise_f1, segmentation, nfkc) for r in _references(ref))",
        '(f1_counts(pred, r, normalise_f1, "whitespace", nfkc) for r in _references(ref))',
        "token_f1_eval scores with whitespace whatever segmentation it is given",
    ),
    M(
        "segmentation_nfkc",
        "eval-drops-nfkc",
        "(f1_counts(pred, r, normalise_f1, segmentation, nfkc) for r in _references(ref))",
        "(f1_counts(pred, r, normalise_f1, segmentation, False) for r in _references(ref))",
        "token_f1_eval scores without NFKC whatever nfkc it is given",
    ),
    M(
        "segmentation_nfkc",
        "eval-records-without-nfkc",
        '"prediction_normalised": normalise(pred),',
        '"prediction_normalised": normalise_f1(pred),',
        "token_f1_eval records the prediction normalised without NFKC",
    ),
    M(
        "segmentation_nfkc",
        "hangul-split",
        r"\u4e00-\u9fff\uf900-\ufaff",
        r"\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff",
        "Hangul syllables split though Korean writes spaces between words",
    ),
    # -- Key redaction and the judge transport (lesson 09, appendix A) -----------------------
    M(
        "judge_transport",
        "redact-unformatted-message",
        "            text = record.getMessage()\n",
        "            text = str(record.msg)\n",
        "the log filter reads the format string, not the message with its arguments",
    ),
    M(
        "judge_transport",
        "redact-keeps-args",
        "                record.msg, record.args = text, None\n",
        "                record.msg = text\n",
        "the redacted message keeps its arguments (formatted twice: a broken record)",
    ),
    M(
        "judge_transport",
        "key-not-stripped",
        "    key = key.strip()\n    if key and",
        "    if key and",
        "a key read from a file keeps its trailing newline",
    ),
    M(
        "judge_transport",
        "body-redacted-after-clip",
        "        body = self._redact(response.text)  # before any clipping",
        "        body = response.text  # before any clipping",
        "the key is redacted only after the body was clipped (a cut key survives)",
    ),
    M(
        "judge_transport",
        "no-retry-on-429",
        "    {408, 429, 500, 502, 503, 504}",
        "    {408, 500, 502, 503, 504}",
        "a rate limit (429) is not retried",
    ),
    M(
        "judge_transport",
        "no-retry-on-other-5xx",
        "if response.status_code in RETRY_STATUSES or response.status_code >= 500:",
        "if response.status_code in RETRY_STATUSES:",
        "a 5xx outside the list (507, 599) is not retried",
    ),
    M(
        "judge_transport",
        "retry-after-uncapped",
        "wait = max(wait, min(retry_after, self.max_retry_after))",
        "wait = max(wait, retry_after)",
        "a server's Retry-After obeyed however long",
    ),
    M(
        "judge_transport",
        "retry-after-negative",
        "    return max(0.0, seconds) if math.isfinite(seconds) else None",
        "    return seconds if math.isfinite(seconds) else None",
        "a Retry-After date in the past gives a negative wait",
    ),
    M(
        "judge_transport",
        "failure-cached",
        '            self._count("unscored")\n'
        "            raise JudgeUnavailable(self._redact(exc.reason)) from None\n",
        '            self._count("unscored")\n'
        "            _write_verdict(path, (3, 'unavailable'))\n"
        "            raise JudgeUnavailable(self._redact(exc.reason)) from None\n",
        "a failed call leaves a verdict in the cache",
    ),
    M(
        "judge_transport",
        "cache-ignores-url",
        "return json.dumps([base_url, model, messages], sort_keys=True, ensure_ascii=False)",
        "return json.dumps([model, messages], sort_keys=True, ensure_ascii=False)",
        "the cache key leaves out the endpoint",
    ),
    M(
        "judge_transport",
        "cached-float-score",
        "    ok = _in_range(score, 1, 5, integer=True)\n",
        "    ok = _in_range(score, 1, 5)\n",
        "a cached score of 3.5 is served as a verdict",
    ),
    M(
        "judge_transport",
        "retries-counted-every-request",
        'self._count("retries", attempt > 0)',
        'self._count("retries")',
        "the first request counted as a retry",
    ),
    M(
        "judge_transport",
        "backoff-not-exponential",
        "cap = min(self.max_backoff, self.backoff * 2**attempt)",
        "cap = min(self.max_backoff, self.backoff)",
        "the backoff does not grow between retries",
    ),
    # -- The protocol log (lesson 06) --------------------------------------------------------
    M(
        "protocol_log",
        "empty-log-refused",
        '        if text and not text.endswith("\\n"):',
        '        if not text.endswith("\\n"):',
        "an empty log file is refused as cut",
    ),
    M(
        "protocol_log",
        "chain-to-first",
        '"prev_sha256": entries[-1]["entry_sha256"] if entries else None,',
        '"prev_sha256": entries[0]["entry_sha256"] if entries else None,',
        "each entry chained to the first instead of the one before",
    ),
    M(
        "protocol_log",
        "chain-not-checked",
        'if entry.get("prev_sha256") != prev or _canonical_sha256(body) != entry.get(',
        "if _canonical_sha256(body) != entry.get(",
        "verify checks each line's own hash but not the chain",
    ),
    M(
        "protocol_log",
        "index-from-one",
        '            "index": len(entries),\n',
        '            "index": len(entries) + 1,\n',
        "entries numbered from 1",
    ),
    M(
        "protocol_log",
        "exposed-includes-freezes",
        'e["kind"] == "exposure" for i in e["cases"]',
        'e["kind"] in ("exposure", "freeze") for i in e["cases"]',
        "frozen (not yet revealed) cases counted as exposed",
    ),
    # -- Calibration bins (lesson 07) --------------------------------------------------------
    M(
        "calibration_bins",
        "one-outside-the-top-bin",
        "            members[min(b, n_bins - 1)].append(i)",
        "            members[b].append(i)",
        "confidence 1.0 falls outside the top bin",
    ),
    M(
        "calibration_bins",
        "bins-right-closed",
        'index = numpy.searchsorted(edges, conf, side="right") - 1',
        'index = numpy.searchsorted(edges, conf, side="left") - 1',
        "bins closed on the right: an edge value goes to the bin below",
    ),
    M(
        "calibration_bins",
        "int-multiplication-bins",
        '        index = numpy.searchsorted(edges, conf, side="right") - 1\n',
        "        index = numpy.array([int(c * n_bins) for c in conf])\n",
        "bins computed as int(c * n_bins) (0.29 * 100 = 28.999...)",
    ),
    M(
        "calibration_bins",
        "mass-remainder-dropped",
        "starts = [b * size + min(b, extra) for b in range(n_bins + 1)]",
        "starts = [b * size for b in range(n_bins + 1)]",
        "equal-mass bins drop the remainder",
    ),
    M(
        "calibration_bins",
        "ece-unweighted",
        'return sum(b["count"] * b["gap"] for b in full) / n, max(b["gap"] for b in full)',
        'return sum(b["gap"] for b in full) / len(full), max(b["gap"] for b in full)',
        "ECE as the unweighted mean over bins",
    ),
    M(
        "calibration_bins",
        "mass-bins-by-input-order",
        "    order = sorted(range(len(conf)), key=lambda i: conf[i])  # equal mass",
        "    order = list(range(len(conf)))  # equal mass",
        "equal-mass bins cut in input order, not by confidence",
    ),
    # -- Padding-capped batching (lesson 01) -------------------------------------------------
    M(
        "length_batches",
        "cap-against-last-row",
        "and lengths[i] >= (1 - max_padding) * lengths[batches[-1][0]]",
        "and lengths[i] >= (1 - max_padding) * lengths[batches[-1][-1]]",
        "the padding cap measured against the batch's last row, not its longest",
    ),
    M(
        "length_batches",
        "cap-strict",
        "and lengths[i] >= (1 - max_padding) * lengths[batches[-1][0]]",
        "and lengths[i] > (1 - max_padding) * lengths[batches[-1][0]]",
        "a row at exactly the cap is refused",
    ),
    M(
        "length_batches",
        "cap-inverted",
        "and lengths[i] >= (1 - max_padding) * lengths[batches[-1][0]]",
        "and lengths[i] >= max_padding * lengths[batches[-1][0]]",
        "max_padding read as the share of real tokens",
    ),
    M(
        "length_batches",
        "rows-overflow",
        "            and len(batches[-1]) < batch_size\n",
        "            and len(batches[-1]) <= batch_size\n",
        "a batch takes one row more than batch_size",
    ),
    M(
        "length_batches",
        "shortest-first",
        "    for i in sorted(range(len(lengths)), key=lambda i: -lengths[i]):",
        "    for i in sorted(range(len(lengths)), key=lambda i: lengths[i]):",
        "rows sorted shortest first, so the first row is not the longest",
    ),
    # -- Round 2: written after the first run's survivors were closed, before any test for them
    M(
        "hf_adapter",
        "encode-adds-specials",
        "        return self.hf.encode(text, add_special_tokens=False)\n",
        "        return self.hf.encode(text)\n",
        "encode lets the tokenizer's post-processor add its BOS to every text",
    ),
    M(
        "hf_adapter",
        "vocab-without-added-tokens",
        "        self.vocab_size = len(hf_tokenizer)\n",
        "        self.vocab_size = hf_tokenizer.vocab_size\n",
        "the vocabulary counted without added tokens (tokenizer.vocab_size, not len)",
    ),
    M(
        "hf_adapter",
        "load-drops-add-bos",
        "    model, tok = wrap_hf(hf_model, hf_tokenizer, add_bos=add_bos)\n",
        "    model, tok = wrap_hf(hf_model, hf_tokenizer)\n",
        "load_hf ignores add_bos",
    ),
    M(
        "hf_adapter",
        "decode-keeps-specials",
        "return self.hf.decode([int(i) for i in ids], skip_special_tokens=True)",
        "return self.hf.decode([int(i) for i in ids])",
        "decoded answers keep special tokens' text",
    ),
    M(
        "hf_adapter",
        "short-name-absolute",
        "        return folder.relative_to(ROOT).as_posix()\n",
        "        return folder.as_posix()\n",
        "a course folder named by its machine path in reports",
    ),
    M(
        "hf_adapter",
        "attention-mask-omitted",
        "self.hf(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False)",
        "self.hf(input_ids=ids, use_cache=False)",
        "the all-ones attention mask left out",
        equivalent="a transformers model given no attention_mask attends to every earlier "
        "position, which is what the all-ones mask says: the causal mask built is the same "
        "(transformers' masking_utils even skips an all-ones padding mask as if it were None)",
    ),
    M(
        "multiple_choice",
        "empty-completion-allowed",
        '    if not end_token and "" in completions:\n'
        '        i = list(completions).index("")\n'
        '        raise ValueError(f"completions[{i}] is empty: with end_token=False no token is '
        'scored")\n',
        "",
        "an empty completion scores nothing and gets log-likelihood 0 (the best)",
    ),
    M(
        "multiple_choice",
        "confidence-without-end",
        "    scored = completion_logliks(model, tok, instructions, answers, end_token=True)\n",
        "    scored = completion_logliks(model, tok, instructions, answers)\n",
        "answer_confidences leaves out the closing token its docstring includes",
    ),
    M(
        "segmentation_nfkc",
        "no-extension-a",
        r"\u3040-\u30ff\u3400-\u4dbf\u4e00",
        r"\u3040-\u30ff\u4e00",
        "ideographs of extension A (U+3400-4DBF) not split",
    ),
    M(
        "judge_transport",
        "key-not-registered",
        "            _RedactKeys.keys.add(key)",
        "            pass",
        "the key never reaches the log filter",
    ),
    M(
        "judge_transport",
        "empty-choices-crash",
        'not JSON: {_clip(body)!r}"\n    except (KeyError, IndexError, TypeError):\n',
        'not JSON: {_clip(body)!r}"\n    except (KeyError, TypeError):\n',
        "a reply with an empty choices list crashes instead of being unscored",
    ),
    M(
        "protocol_log",
        "nan-written",
        "f.write(json.dumps(_json_safe(entry), sort_keys=True, allow_nan=False) + ",
        "f.write(json.dumps(entry, sort_keys=True) + ",
        "a NaN in an entry written as NaN (not strict JSON)",
    ),
    M(
        "calibration_bins",
        "gap-signed",
        '"gap": None if c is None else abs(a - c),',
        '"gap": None if c is None else a - c,',
        "a bin's gap signed: over- and under-confidence cancel",
    ),
    # -- Round 3: a held-out round, run once before any test was written for it -------------
    M(
        "hf_adapter",
        "template-attribute-only",
        'self.use_chat_template = bool(getattr(hf_tokenizer, "chat_template", None))',
        'self.use_chat_template = hasattr(hf_tokenizer, "chat_template")',
        "a tokenizer counted as chatty because it has the attribute, though it is None",
    ),
    M(
        "hf_adapter",
        "answer-without-eos",
        'the EOS that ends it."""\n        _check_str("answer", answer)\n'
        "        return self.encode(self._prefix() + answer) + [self.eos_id]\n",
        'the EOS that ends it."""\n        _check_str("answer", answer)\n'
        "        return self.encode(self._prefix() + answer)\n",
        "encode_answer forgets the EOS that closes the answer",
    ),
    M(
        "hf_adapter",
        "answer-closed-by-pad",
        'the EOS that ends it."""\n        _check_str("answer", answer)\n'
        "        return self.encode(self._prefix() + answer) + [self.eos_id]\n",
        'the EOS that ends it."""\n        _check_str("answer", answer)\n'
        "        return self.encode(self._prefix() + answer) + [self.pad_id]\n",
        "an answer closed by the pad token (Qwen's differs from its EOS)",
    ),
    M(
        "hf_adapter",
        "missing-file-passes",
        '        actual = _sha256(path) if path.is_file() else "missing"\n',
        "        if not path.is_file():\n            continue\n        actual = _sha256(path)\n",
        "a file the manifest lists but the folder lacks passes the check",
    ),
    M(
        "multiple_choice",
        "gold-past-the-end",
        "ok = ok and _in_range(gold, 0, len(choices), open_high=True, integer=True)",
        "ok = ok and _in_range(gold, 0, len(choices), integer=True)",
        "gold == len(choices) accepted, then an IndexError deep inside",
    ),
    M(
        "segmentation_nfkc",
        "space-after-only",
        '_CJK_CHAR.sub(r" \\1 ", text))',
        '_CJK_CHAR.sub(r"\\1 ", text))',
        "a space put only after each CJK character: a Latin word before one sticks to it",
    ),
    M(
        "judge_transport",
        "key-may-hold-spaces",
        'if key and not re.fullmatch(r"[\\x21-\\x7e]+", key):',
        'if key and not re.fullmatch(r"[\\x20-\\x7e]+", key):',
        "a key with a space inside is sent (an invalid header, or a split credential)",
    ),
    M(
        "judge_transport",
        "retry-reason-unredacted",
        "            self._redact(why),\n",
        "            why,\n",
        "the retry warning's reason not redacted",
        equivalent="the reasons that reach _sleep are built by _attempt from a status code, the "
        "timeout setting or an exception's class name, never from the server's text, so they "
        "cannot hold the key",
    ),
    M(
        "calibration_bins",
        "width-edges-shifted",
        "            (b / n_bins, (b + 1) / n_bins)\n",
        "            ((b - 1) / n_bins, b / n_bins)\n",
        "each equal-width bin reports the edges of the bin below",
    ),
    # -- Round 4: code the merges rewrote or added (batched KV-cached HF decoding, lesson 12's
    # punctuation, the float64-accurate token NLL, the shared HTTPClient), run once before any
    # test was written for it: 11 of 17 killed here, 11 of 14 in intervals (22 of 31). The
    # mutants above whose code was rewritten plant their bug in the new code (all 14 killed).
    M(
        "hf_adapter",
        "decode-counts-past-stop",
        "        live = [i for i, row in enumerate(batch) if row.text is None]\n",
        "        live = list(range(len(batch))) if any(r.text is None for r in batch) else []\n",
        "a row that stopped keeps counting while others decode: its answer runs past its stop",
    ),
    M(
        "hf_adapter",
        "decode-stop-forgotten",
        "    if token in tok.stop_ids:\n        row.text = tok.decode_answer(row.tokens)\n",
        "    if token == min(tok.stop_ids):\n        row.text = tok.decode_answer(row.tokens)\n",
        "only one of the stop tokens ends an answer; it runs on through the others",
    ),
    M(
        "hf_adapter",
        "decode-positions-count-padding",
        "positions = (mask.cumsum(1) - 1).clamp(min=0)",
        "positions = torch.arange(L, device=device).expand(B, L)",
        "position ids count the left padding: a shorter prompt starts at a later position",
    ),
    M(
        "hf_adapter",
        "decode-right-padded",
        "ids[i, L - len(p) :], mask[i, L - len(p) :] = torch.tensor(p), 1",
        "ids[i, : len(p)], mask[i, : len(p)] = torch.tensor(p), 1",
        "prompts padded on the right for generation: a short prompt's next token follows pads",
    ),
    M(
        "hf_adapter",
        "decode-ids-not-moved",
        "        ids, mask = ids.to(device), mask.to(device)\n",
        "",
        "the generation batch is left on the CPU whatever the model's device",
    ),
    M(
        "hf_adapter",
        "answers-in-batch-order",
        "                out[row.prompt].append(row)\n",
        "                out[sorted(i for i, _ in batch)[rows.index(row) // chunk]].append(row)\n",
        "answers filed in input order within a batch, though length_batches put it longest first",
    ),
    M(
        "hf_adapter",
        "room-off-by-one",
        "    if longest + max_new_tokens > model.config.max_len:\n",
        "    if longest + max_new_tokens >= model.config.max_len:\n",
        "a prompt and answer that exactly fill the context are refused",
    ),
    M(
        "hf_adapter",
        "gguf-file-dropped",
        "return _load_wrapped(name_or_path, name, device, dtype, add_bos, gguf_file)",
        "return _load_wrapped(name_or_path, name, device, dtype, add_bos)",
        "a hub name's gguf_file never reaches transformers (it loads the repository's other "
        "weights, or fails)",
    ),
    M(
        "segmentation_nfkc",
        "punctuation-tokens-kept",
        "return [t for t in spaced.split() if not _is_punctuation(t)]",
        "return spaced.split()",
        'mixed segmentation keeps punctuation-only tokens ("。" is a token of its own)',
    ),
    M(
        "segmentation_nfkc",
        "punctuation-any-character",
        'return all(unicodedata.category(ch).startswith("P") for ch in token)',
        'return any(unicodedata.category(ch).startswith("P") for ch in token)',
        'a token with any punctuation dropped ("Paris." vanishes, not just ".")',
    ),
    M(
        "segmentation_nfkc",
        "cjk-punctuation-not-split",
        'spaced = _CJK_PUNCT.sub(r" \\1 ", _CJK_CHAR.sub(r" \\1 ", text))',
        'spaced = _CJK_CHAR.sub(r" \\1 ", text)',
        'CJK punctuation not split off: "2048。" stays one token, not "2048"',
    ),
    M(
        "bits_per_byte",
        "nll-top-term-summed",
        "rest = (x - top[:, None]).exp_().scatter_(1, arg[:, None], 0.0).sum(-1)",
        "rest = (x - top[:, None]).exp_().sum(-1)",
        "the largest logit's term (exactly 1) left in the sum log1p adds 1 to",
    ),
    M(
        "bits_per_byte",
        "nll-gap-in-float32",
        "gap = top.double() - target.double()",
        "gap = (top - target).double()",
        "the logit gap subtracted in float32, then widened (its rounding kept)",
    ),
    M(
        "bits_per_byte",
        "nll-chunk-of-no-rows",
        "    rows = max(1, chunk // V)\n",
        "    rows = chunk // V\n",
        "a vocabulary larger than the chunk gives chunks of no rows",
    ),
    M(
        "bits_per_byte",
        "nll-exp-in-model-dtype",
        "x = flat[begin : begin + rows].float()",
        "x = flat[begin : begin + rows]",
        "a bfloat16 model's logits exponentiated and summed in bfloat16",
    ),
    M(
        "judge_transport",
        "requests-not-counted",
        '            self._count("requests")\n',
        "",
        "HTTPClient's request count left at 0",
    ),
    M(
        "judge_transport",
        "max-tokens-not-sent",
        '            payload["max_tokens"] = self.max_tokens\n',
        "            pass\n",
        "the judge's max_tokens cap never sent (vLLM's default is the whole context)",
    ),
    # an answer a served model never gave (lesson 14): unscored in the evals, an error in generate
    M(
        "judge_transport",
        "unanswered-scored-zero",
        '            record |= {"score": None, "unscored": reason}\n',
        '            record |= {"score": 0.0, "unscored": reason}\n',
        "an answer the server never gave scored 0, as if it had been wrong",
    ),
    M(
        "judge_transport",
        "answer-mean-over-every-record",
        '_mean(r["score"] for r in scored), records, extras))',
        '_mean(r["score"] or 0 for r in records), records, extras))',
        "the value averaged over every example, an unscored one counting as 0",
    ),
    M(
        "judge_transport",
        "served-answers-raise",
        '"answering", keep_failures=True)',
        '"answering")',
        "one failed request stops the whole eval instead of leaving its example unscored",
    ),
    M(
        "judge_transport",
        "generate-hides-unanswered",
        "    if failed and not keep_unanswered:\n",
        "    if failed and keep_unanswered:\n",
        "generate hands back placeholders where answers failed, without saying so",
    ),
    M(
        "judge_transport",
        "policy-rescores-unanswered",
        '        r if "unscored" in r else r | {"score": score(r["prediction"], r["reference"])}\n',
        '        r | {"score": score(r["prediction"] or "", r["reference"])}\n',
        "an answer policy scores a missing answer as the empty string",
    ),
    # -- Round 5: issue 28's decoder (sampling, stop strings, rows leaving the batch, served
    # sampling and a dead server), planted as the code was written
    M(
        "sampling",
        "temperature-multiplies",
        "probs = torch.softmax(logits.double() / temperature, dim=-1)  # (B, V)",
        "probs = torch.softmax(logits.double() * temperature, dim=-1)  # (B, V)",
        "the logits multiplied by the temperature, not divided: hotter is sharper",
    ),
    M(
        "sampling",
        "nucleus-not-renormalised",
        "        target = u[:, None] * cum.gather(-1, last)\n",
        "        target = u[:, None]\n",
        "the draw inside the nucleus uses the full distribution's scale: its last token too often",
    ),
    M(
        "sampling",
        "nucleus-one-short",
        "(F.pad(cum[:, :-1], (1, 0)) < top_p).sum(-1, keepdim=True) - 1",
        "(cum < top_p).sum(-1, keepdim=True) - 1",
        "the nucleus stops before the token that reaches top_p",
    ),
    M(
        "sampling",
        "ties-by-higher-id",
        "logits.gather(-1, candidates).argsort(dim=-1, descending=True, stable=True)",
        "logits.gather(-1, candidates).argsort(dim=-1, descending=True)",
        "tied tokens in whatever order the sort leaves them: draws differ between machines",
    ),
    M(
        "sampling",
        "seed-without-sample-index",
        '_seeded_rng(seed, "sample", prompts[i], j)',
        '_seeded_rng(seed, "sample", prompts[i])',
        "every sample of a prompt draws the same numbers: n copies of one answer",
    ),
    M(
        "sampling",
        "seed-from-position",
        '_seeded_rng(seed, "sample", prompts[i], j)',
        '_seeded_rng(seed, "sample", i, j)',
        "a sample's generator keyed by the prompt's place: reordering the prompts changes it",
    ),
    M(
        "sampling",
        "stop-string-not-cut",
        "        row.text = text[:cut]\n",
        "        row.text = text\n",
        "an answer ends at a stop string but keeps it",
    ),
    M(
        "sampling",
        "ended-rows-kept",
        "        if len(batch) - len(live) >= max(1, len(batch) // 4):\n",
        "        if not live:\n",
        "rows that ended stay in the batch and its KV cache until every row has ended",
    ),
    M(
        "sampling",
        "served-sends-seed",
        'options = {"temperature": temperature, "top_p": top_p, "max_tokens": max_new_tokens}',
        'options = {"temperature": temperature, "top_p": top_p, "max_tokens": max_new_tokens,\n'
        '                   "seed": SEED}',
        "a served sampling request carries a seed (it kills vLLM 0.32.0's CPU engine)",
    ),
    M(
        "sampling",
        "dead-server-unanswered",
        "                except ServerDead:  # the other requests would fail too: not sent\n"
        "                    pool.shutdown(cancel_futures=True)\n"
        "                    raise\n",
        "",
        "a dead server's failures left as unanswered examples, every request still sent",
    ),
    M(
        "sampling",
        "no-health-is-dead",
        "        if isinstance(status, int) and status < 500:\n",
        "        if status == 200:\n",
        "a server without /health (404) is reported dead",
    ),
    M(
        "sampling",
        "served-greedy-asks-n",
        "        if temperature == 0:  # greedy: vLLM refuses n > 1; one answer is all n\n",
        "        if False:\n",
        "temperature 0 sent with n > 1, which vLLM refuses (HTTP 400)",
    ),
    # -- Intervals (Part 0, lesson 06): reported apart --------------------------------------
    M(
        "intervals",
        "aggregate-shared-seed",
        "            drawn = torch.randint(n_units, (n_resamples, n_units), generator=generator)",
        "            drawn = torch.randint(n_units, (n_resamples, n_units), "
        "generator=torch.Generator().manual_seed(seed))",
        "every eval's own examples in the aggregate interval resampled with the same seed (each "
        "stratum its own generator, seeded alike: two evals of one size share their draws)",
    ),
    M(
        "intervals",
        "robustness-wilson-counts-records",
        "        return [worst[i] for i in sorted(worst)], None, "
        "[fact_of[i] for i in sorted(worst)]",
        '        return [r["score"] for r in scored], None, facts',
        "robustness's Wilson n counts records (clean + perturbed), not examples",
    ),
    M(
        "intervals",
        "wilson-centre",
        "    centre = (p + z * z / (2 * n)) / (1 + z * z / n)",
        "    centre = p",
        "the Wald centre instead of Wilson's",
    ),
    M(
        "intervals",
        "percentile-tail",
        "    tail = (1 - confidence) / 2",
        "    tail = 1 - confidence",
        "a one-sided tail for a two-sided interval",
    ),
    M(
        "intervals",
        "mcnemar-tail",
        "tail = sum(math.comb(n, i) for i in range(low + 1)) / 2**n",
        "tail = sum(math.comb(n, i) for i in range(low)) / 2**n",
        "McNemar's tail without its end point",
    ),
    M(
        "intervals",
        "cluster-draws-examples",
        "    return counts[:, index]  # (R, n)",
        "    return counts[:, index] if groups is None else bootstrap_weights(n, None, "
        "n_resamples, seed)",
        "the cluster bootstrap draws examples, not groups",
    ),
    M(
        "intervals",
        "perplexity-mean-of-ratios",
        "    return torch.exp((weights * values[:, 0]).sum(-1) / (weights * values[:, 1]).sum(-1))",
        "    return torch.exp((weights * values[:, 0] / values[:, 1]).sum(-1) / weights.sum(-1))",
        "a resample's perplexity as the mean of per-text ratios",
    ),
    M(
        "intervals",
        "paired-unscored-kept",
        '        if a["score"] is not None and b["score"] is not None\n',
        '        if a["score"] is not None or b["score"] is not None\n',
        "an example unscored in one result kept in the paired difference",
    ),
    M(
        "intervals",
        "paired-aggregate-unpaired",
        "joint_resampled_values(rs, n_resamples, seed) for rs in (results_a, ordered_b)",
        "joint_resampled_values(rs, n_resamples, seed + (rs is ordered_b)) "
        "for rs in (results_a, ordered_b)",
        "a and b resampled on different draws in the paired aggregate difference",
    ),
    M(
        "intervals",
        "success-rate-groups-any",
        "outcomes = [all(g) for g in _groups_of(records, key, group_key).values()]",
        "outcomes = [any(g) for g in _groups_of(records, key, group_key).values()]",
        "all_right_rate counts a source group right when any of its records is",
    ),
    # Round 4 (intervals): code the merges added, run once before any test was written for it
    # (aggregate-shared-seed, paired-aggregate-unpaired and success-rate-groups-any above were
    # rewritten for the joint resampling of facts and all_right_rate)
    M(
        "intervals",
        "joint-draws-rows-not-facts",
        "            index, n_units = _group_index(labels, len(labels))\n",
        "            index, n_units = list(range(len(labels))), len(labels)\n",
        "the shared facts resampled row by row: a fact asked by two evals drawn apart in each",
    ),
    # Killed by _finite_percentiles' own test and through aggregate_interval, since a resample
    # without an eval stays NaN through normalisation (_normalised)
    M(
        "intervals",
        "aggregate-keeps-nan-resamples",
        "    kept = stats[stats.isfinite()]\n",
        "    kept = stats\n",
        "resamples that leave an eval with no example kept: a NaN interval",
    ),
    M(
        "intervals",
        "ci-method-counts-fact-rows",
        "    facts = len(set(joint[1][None]))\n",
        "    facts = len(joint[1][None])\n",
        "the method text counts a fact once per eval that asks about it",
    ),
    M(
        "intervals",
        "newcombe-correction-unclamped",
        "        excess = max(excess - n / 2, 0)\n",
        "        excess = excess - n / 2\n",
        "Newcombe's n/2 correction turns a small positive correlation negative",
    ),
    M(
        "intervals",
        "newcombe-correction-both-signs",
        "    if excess > 0:",
        "    if excess != 0:",
        "Newcombe's correction applied to a negative correlation too (it zeroes it)",
    ),
    M(
        "intervals",
        "newcombe-limits-swapped",
        "(p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))",
        "(p1 - l1) * (p2 - l2) + (p2 - l2) ** 2))",
        "the lower limit built from the second proportion's lower distance, not its upper",
    ),
    M(
        "intervals",
        "paired-newcombe-sides-swapped",
        "table = (counts[1, 1], rescued, broke, counts[0, 0])",
        "table = (counts[1, 1], broke, rescued, counts[0, 0])",
        "paired_difference's Newcombe interval for a - b, though diff is b - a",
    ),
    M(
        "intervals",
        "tarone-k-not-recomputed",
        "k = tarone_count([floors[i] for i in left], alpha)",
        "k = tarone_count(floors, alpha)",
        "Tarone's K counted over every test at each step, not the tests left",
    ),
    M(
        "intervals",
        "tarone-count-strict",
        "sum(f <= alpha / k for f in floors) <= k)",
        "sum(f <= alpha / k for f in floors) < k)",
        "Tarone's K needs fewer than K tests that could reach alpha / K, not at most K",
    ),
    M(
        "intervals",
        "holm-boundary-strict",
        "        if p[left[0]] > alpha / k:\n",
        "        if p[left[0]] >= alpha / k:\n",
        "a p-value exactly at alpha / K not rejected",
    ),
    M(
        "intervals",
        "holm-unsorted",
        "sorted(range(len(p)), key=lambda i: p[i])",
        "list(range(len(p)))",
        "the step-down walks the tests in input order, not from the smallest p-value",
    ),
    M(
        "intervals",
        "success-rate-cautious-n-cases",
        "*_wilson_bounds(k / n, n_groups), method)",
        "*_wilson_bounds(k / n, n), method)",
        "a rate whose bootstrap cannot vary gets Wilson over its cases, not its groups",
    ),
    M(
        "intervals",
        "success-rate-flat-bootstrap",
        "    if n_groups < 2 or bool((draws == draws[0]).all()):\n",
        "    if n_groups < 2:\n",
        "a cluster bootstrap that cannot vary reported as a zero-width interval",
    ),
    M(
        "intervals",
        "success-rate-ignores-groups",
        "bootstrap_distribution(outcomes, groups=labels, n_resamples=n_resamples, seed=seed)",
        "bootstrap_distribution(outcomes, n_resamples=n_resamples, seed=seed)",
        "the grouped success rate bootstraps cases, not whole source groups",
    ),
    # -- Lesson 15: GPT-3's n, grouped AUC intervals, DeLong's interval, exercise checks ------
    M(
        "contamination",
        "gpt3-n-rounds-up",
        "    return min(max(math.floor(fifth), low), high)\n",
        "    return min(max(math.ceil(fifth), low), high)\n",
        "GPT-3's n rounds the 5th percentile up",
    ),
    M(
        "contamination",
        "gpt3-n-no-cap",
        "    return min(max(math.floor(fifth), low), high)\n",
        "    return max(math.floor(fifth), low)\n",
        "GPT-3's n without its cap of 13",
    ),
    M(
        "contamination",
        "groups-resampled-apart",
        "    weights = bootstrap_weights(m + n, labels, n_resamples, seed)  # (R, m + n)\n",
        "    weights = torch.cat([bootstrap_weights(m, labels[:m], n_resamples, seed),\n"
        "                         bootstrap_weights(n, labels[m:], n_resamples, seed + 1)], 1)\n",
        "a group's members and non-members drawn apart, not together",
    ),
    M(
        "contamination",
        "grouped-empty-side-kept",
        '        out["ci95"] = _finite_percentiles(_weighted_auc(wins, w_m, w_n), 0.95)\n',
        '        out["ci95"] = list(_percentiles('
        "_weighted_auc(wins, w_m, w_n).nan_to_num(0.5), 0.95))\n",
        "a resample with no member or no non-member counted as AUC 1/2",
    ),
    M(
        "contamination",
        "delong-biased-variance",
        "    variance = float(wins.mean(1).var() / m + wins.mean(0).var() / n)  # var: 1/(k - 1)\n",
        "    variance = float(wins.mean(1).var(correction=0) / m"
        " + wins.mean(0).var(correction=0) / n)\n",
        "DeLong's structural components with the biased (1/k) variance",
    ),
    M(
        "contamination",
        "delong-no-logit",
        "    return [1 / (1 + math.exp(half - centre)), 1 / (1 + math.exp(-half - centre))]\n",
        "    return [auc - z * math.sqrt(variance), auc + z * math.sqrt(variance)]\n",
        "the interval built on the AUC's own scale, not the logit",
    ),
    M(
        "contamination",
        "delong-at-one",
        "    if variance == 0:  # AUC 0 or 1 (every pair lost or won), or every score tied\n",
        "    if False:\n",
        "an AUC of 1 (no spread) gets an interval: a logit of infinity",
    ),
    M(
        "contamination",
        "n-flagged-of-nonmembers",
        '        "n_flagged": round(tpr * m),\n',
        '        "n_flagged": round(tpr * n),\n',
        "the flagged count scaled by the non-members",
    ),
    M(
        "contamination",
        "share-check-accepts-anything",
        '        if abs(got - r["share"]) >= 1e-12:\n',
        '        if abs(got - r["share"]) > 1:\n',
        "exercise 1's check accepts any share",
    ),
    M(
        "contamination",
        "counts-check-off-by-one",
        "    bars = [*sorted(nonmember_losses), math.inf]"
        "  # flagging j of them: below the (j + 1)-th\n",
        "    bars = [-math.inf, *sorted(nonmember_losses)]\n",
        "exercise 4's reference counts shifted by one false positive",
    ),
    M(
        "contamination",
        "statement-facts-unchecked",
        "    if sorted(facts) != sorted(statements):\n",
        "    if False:\n",
        "a statement-facts file that misses a statement is accepted",
    ),
]


def _tests_of(mutant):
    return [f"tests/{name}" for name in AREA_TESTS[mutant.area]]


def _status(mutant, source):
    count = source.count(mutant.old)
    return "stale" if count == 0 else "ambiguous" if count > 1 else None


def _prepare(folder, source):
    """A copy of the repository in folder: COPIED copied, evalcore.py = source, everything else
    linked file by file under real folders (a linked folder would resolve to the original, outside
    the copy's ROOT)."""
    for entry in ROOT.iterdir():
        if entry.name in SKIPPED or entry.name.startswith(".") or entry.suffix == ".egg-info":
            continue
        copy = shutil.copy2 if entry.name in COPIED else os.symlink
        if entry.is_dir():
            ignore = shutil.ignore_patterns("__pycache__")
            shutil.copytree(entry, folder / entry.name, ignore=ignore, copy_function=copy)
        else:
            copy(entry, folder / entry.name)
    (folder / TARGET).write_text(source, encoding="utf-8")


def _pytest(folder, tests, timeout, first_failure=True):
    """(outcome, seconds, failing tests, output tail) of pytest over tests in folder; outcome is
    passed, failed (a test failed, or the module broke collection), timeout or error."""
    env = {**os.environ, "PYTHONPATH": str(folder), "PYTHONDONTWRITEBYTECODE": "1"}
    command = [sys.executable, "-m", "pytest", "-q", "-rfE", "-o", "addopts="]
    command += ["-x"] * first_failure + ["-p", "no:cacheprovider", "-p", "no:nbval", *tests]
    start = time.monotonic()
    try:
        run = subprocess.run(
            command, cwd=folder, env=env, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return "timeout", time.monotonic() - start, [], f"over {timeout:g} s"
    seconds = time.monotonic() - start
    failures = re.findall(r"^(?:FAILED|ERROR) (\S+)", run.stdout, re.M)
    if run.returncode == 0:
        return "passed", seconds, [], ""
    if run.returncode in (1, 2):
        return "failed", seconds, failures, run.stdout[-300:].strip()
    return "error", seconds, [], run.stdout[-500:] + run.stderr[-500:]


def _function_of(node):
    """The test function of a node id, without its parameters."""
    return node.split("[")[0]


def _imports_the_copy(folder):
    """True if python started in folder imports that folder's evalcore, not the installed one."""
    env = {**os.environ, "PYTHONPATH": str(folder)}
    probe = "import evalcore, pathlib; print(pathlib.Path(evalcore.__file__).resolve())"
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=folder, env=env, capture_output=True, text=True
    )
    return Path(out.stdout.strip()) == (folder / TARGET).resolve()


def run_mutant(mutant, source, timeout):
    """(verdict, seconds, detail) for one mutant: killed, survived, stale, ambiguous or error."""
    status = _status(mutant, source)
    if status:
        return status, 0.0, "its text is not in evalcore.py exactly once"
    mutated = source.replace(mutant.old, mutant.new)
    try:
        compile(mutated, TARGET, "exec")
    except SyntaxError as exc:
        return "error", 0.0, f"the mutant does not compile: {exc}"
    with tempfile.TemporaryDirectory(prefix="mutant-") as tmp:
        folder = Path(tmp)
        _prepare(folder, mutated)
        outcome, seconds, failures, tail = _pytest(folder, _tests_of(mutant), timeout)
    verdict = {"failed": "killed", "timeout": "killed", "passed": "survived"}.get(outcome, outcome)
    return verdict, seconds, failures[0] if failures else tail


def baseline(source, mutants, timeout):
    """Every test file the mutants use must pass on the unmutated code, in the same kind of copy."""
    tests = sorted({t for m in mutants for t in _tests_of(m)})
    with tempfile.TemporaryDirectory(prefix="mutant-baseline-") as tmp:
        folder = Path(tmp)
        _prepare(folder, source)
        if not _imports_the_copy(folder):
            sys.exit("the copy's evalcore.py is not the one imported: check PYTHONPATH")
        outcome, seconds, failures, tail = _pytest(folder, tests, timeout * 2)
    if outcome != "passed":
        sys.exit(f"the unmutated tests do not pass ({outcome}): {failures or tail}")
    print(f"baseline: {len(tests)} test files pass on the unmutated code ({seconds:.0f} s)")


def confirm_kills(rows, source, timeout):
    """A kill counts only if its test passes on the unmutated code: a test that fails now and then
    (a time limit under load) would kill mutants it cannot see. Mutants killed by such a test run
    once more; killed by one again, they are "unsure" and scored as survivors."""
    killers = sorted({_function_of(r[3]) for r in rows if r[1] == "killed" and "::" in r[3]})
    if not killers:
        return rows
    with tempfile.TemporaryDirectory(prefix="mutant-confirm-") as tmp:
        folder = Path(tmp)
        _prepare(folder, source)
        outcome, _, failures, tail = _pytest(folder, killers, timeout * 2, first_failure=False)
    if outcome not in ("passed", "failed"):
        sys.exit(f"the killing tests could not be rerun unmutated ({outcome}): {tail}")
    flaky = {_function_of(f) for f in failures}
    print(f"{len(killers)} killing tests rerun on the unmutated code: {len(flaky)} failed there")
    confirmed = []
    for m, verdict, seconds, detail in rows:
        if verdict == "killed" and _function_of(detail) in flaky:
            print(f"  {m.area}/{m.name} was killed by {detail}, which failed unmutated: rerun")
            verdict, seconds, detail = run_mutant(m, source, timeout)
            verdict = "unsure" if _function_of(detail) in flaky else verdict
        confirmed.append((m, verdict, seconds, detail))
    return confirmed


def _score(rows):
    """(killed, scored): equivalent mutants, stale and broken ones are not scored; unsure ones
    count as survivors."""
    scored = [r for r in rows if not r[0].equivalent and r[1] in ("killed", "survived", "unsure")]
    return sum(r[1] == "killed" for r in scored), len(scored)


def _percent(killed, scored):
    return f"{killed}/{scored} = {killed / scored:.1%}" if scored else "nothing scored"


def report(rows):
    """Per-mutant lines, then the score per area and over every area but SEPARATE."""
    for m, verdict, seconds, detail in rows:
        note = f"  [equivalent: {m.equivalent}]" if m.equivalent else ""
        shown = detail if verdict != "survived" else m.bug
        print(f"{verdict.upper():9} {m.area}/{m.name} ({seconds:.0f} s): {shown}{note}")
    print()
    for area in AREA_TESTS:
        part = [r for r in rows if r[0].area == area]
        if part:
            print(f"{area:18} {_percent(*_score(part))}")
    main_rows = [r for r in rows if r[0].area != SEPARATE]
    separate = [r for r in rows if r[0].area == SEPARATE]
    killed, scored = _score(main_rows)
    print(f"\nscore, every area but {SEPARATE}: {_percent(killed, scored)}")
    if separate:
        print(f"{SEPARATE} (reported apart): {_percent(*_score(separate))}")
        print(f"score, every area: {_percent(*_score(rows))}")
    for verdict in ("survived", "unsure", "stale", "ambiguous", "error"):
        names = [
            f"{r[0].area}/{r[0].name}" for r in rows if r[1] == verdict and not r[0].equivalent
        ]
        if names:
            print(f"{verdict}: {', '.join(names)}")
    equivalent = [f"{r[0].area}/{r[0].name} ({r[1]})" for r in rows if r[0].equivalent]
    if equivalent:
        print(f"equivalent, not scored: {', '.join(equivalent)}")
    return killed, scored


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--area", action="append", choices=sorted(AREA_TESTS))
    parser.add_argument("--mutant", action="append", help="a mutant's name (repeatable)")
    parser.add_argument("--jobs", type=int, default=1, help="mutants run at once (default 1)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per mutant")
    parser.add_argument("--no-baseline", action="store_true", help="skip the unmutated run")
    parser.add_argument("--list", action="store_true", help="list the mutants and stop")
    parser.add_argument(
        "--min-score", type=float, default=0.0, help="exit 1 if any area or the whole is below it"
    )
    args = parser.parse_args(argv)
    source = (ROOT / TARGET).read_text(encoding="utf-8")
    mutants = [
        m
        for m in MUTANTS
        if (not args.area or m.area in args.area) and (not args.mutant or m.name in args.mutant)
    ]
    if not mutants:
        parser.error("no mutant matches")
    if args.list:
        for m in mutants:
            state = _status(m, source) or ("equivalent" if m.equivalent else "ok")
            print(f"{m.area}/{m.name} [{state}]: {m.bug}")
        return 0
    if not args.no_baseline:
        baseline(source, mutants, args.timeout)
    print(f"{len(mutants)} mutants, {args.jobs} at a time\n", flush=True)
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        results = pool.map(lambda m: (m, *run_mutant(m, source, args.timeout)), mutants)
        rows = []
        for row in results:
            rows.append(row)
            print(f"  {row[1]:9} {row[0].area}/{row[0].name} ({row[2]:.0f} s)", flush=True)
    print()
    rows = confirm_kills(rows, source, args.timeout)
    print()
    report(rows)
    parts = [rows] + [[r for r in rows if r[0].area == area] for area in AREA_TESTS]
    scores = [k / n for k, n in map(_score, parts) if n]
    return 1 if any(score < args.min_score for score in scores) else 0


if __name__ == "__main__":
    sys.exit(main())
