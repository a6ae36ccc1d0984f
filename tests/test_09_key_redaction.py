"""Key redaction in log records (issue 19): a library may log the key among a record's arguments
(logger.debug("headers %r", headers)), where the format string alone does not show it. The filter
must read the formatted message, and leave a record that still formats."""

import logging

import pytest

import evalcore as ec

KEY = "sk-test-REDACT-ME-4d2b81"


@pytest.fixture(scope="module")
def judge():
    """A judge holding the key; nothing is sent anywhere (no call is made)."""
    return ec.HTTPJudge("http://127.0.0.1:9/v1", "m", api_key=KEY)


@pytest.mark.parametrize("name", ["httpcore.http11", "httpx", "evalcore.judge"])
def test_a_key_among_the_arguments_is_redacted(judge, caplog, name):
    caplog.set_level(logging.DEBUG)
    headers = [(b"Authorization", f"Bearer {KEY}".encode()), (b"Accept", b"*/*")]
    logging.getLogger(name).debug("send_request_headers.started request=%r", headers)
    assert KEY not in caplog.text
    assert "send_request_headers.started request=" in caplog.text
    assert "Bearer [api key]" in caplog.text and "*/*" in caplog.text


def test_a_key_in_a_mapping_argument_is_redacted(judge, caplog):
    caplog.set_level(logging.DEBUG)
    logging.getLogger("httpx").debug("echo %(auth)s from %(host)s", {"auth": KEY, "host": "h"})
    assert KEY not in caplog.text and "echo [api key] from h" in caplog.text


def test_a_key_in_the_message_itself_is_redacted(judge, caplog):
    caplog.set_level(logging.DEBUG)
    logging.getLogger("httpcore.http11").debug(f"raw header Bearer {KEY}")
    assert KEY not in caplog.text and "raw header Bearer [api key]" in caplog.text


def test_a_record_without_the_key_is_left_as_it_was(judge, caplog):
    caplog.set_level(logging.DEBUG)
    logging.getLogger("httpx").info("HTTP Request: %s %s %r", "POST", "/v1/chat", 200)
    (record,) = [r for r in caplog.records if r.name == "httpx"]
    assert record.args == ("POST", "/v1/chat", 200)  # untouched: formatted only when shown
    assert "HTTP Request: POST /v1/chat 200" in caplog.text
