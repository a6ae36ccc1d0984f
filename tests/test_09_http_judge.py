"""Lesson 09: the HTTP judge against a real local server, its failure modes, the cache, the key,
the mock-judge server behind the same API, and judge_eval's unscored examples.

Every server here binds 127.0.0.1 in this process (or, for the CLI, in a child process this test
starts and stops) and is shut down by its fixture. Backoff settings are tiny, so the suite stays
fast.
"""

import json
import logging
import socket
import subprocess
import sys
import time
from email.utils import formatdate

import httpx
import pytest

import evalcore as ec
from conftest import JSONHandler, loopback_server

KEY = "sk-test-DO-NOT-LEAK-7f3a9c"
FAST = dict(backoff=0.001, max_backoff=0.005)  # retries in milliseconds


def completion(content):
    return {
        "object": "chat.completion",
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
    }


class ScriptedHandler(JSONHandler):
    """Behaves as the first path segment says (/ok/..., /429/...); /mixed/ reads the instruction."""

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        mode = self.path.strip("/").split("/")[0]
        if mode == "mixed":
            mode = ec._judge_item(body)[0]
        server = self.server
        with server.lock:
            server.hits[mode] = server.hits.get(mode, 0) + 1
            n = server.hits[mode]
            server.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
        ok = completion(json.dumps({"score": 4, "rationale": "fine"}))
        auth = self.headers.get("Authorization", "")
        if mode == "ok":
            return self.send(200, ok)
        if mode == "429":  # rate limited once, with a Retry-After, then fine
            return (
                self.send(429, {"error": "slow down"}, [("Retry-After", "0.2")])
                if n == 1
                else self.send(200, ok)
            )
        if mode == "429-huge":
            return (
                self.send(429, {"error": "slow down"}, [("Retry-After", "100")])
                if n == 1
                else self.send(200, ok)
            )
        if mode == "500":
            return self.send(500, {"error": "boom"})
        if mode == "slow":
            time.sleep(1.0)
            return self.send(200, ok)
        if mode == "badbody":
            return self.send(200, b'{"choices": [ {"message": ')
        if mode == "badcontent":
            return self.send(200, completion('{"score": 4, "rationale": '))
        if mode == "nochoices":
            return self.send(200, {"object": "chat.completion"})
        if mode == "fence":
            text = (
                'Sure! Here is my grade.\n```json\n{"score": 3, "rationale": "partly right"}\n```\n'
                "Let me know if you need anything else."
            )
            return self.send(200, completion(text))
        if mode == "seven":
            return self.send(200, completion('{"score": 7, "rationale": "excellent!"}'))
        if mode == "404":
            return self.send(404, {"error": "no such model"})
        if mode == "echo401":  # a careless server that echoes the credentials it was sent
            return self.send(401, {"error": f"invalid credentials: {auth}"})
        if mode == "echo-rationale":
            return self.send(
                200, completion(json.dumps({"score": 2, "rationale": f"you sent {auth}"}))
            )
        if mode == "echo500":
            return self.send(500, {"error": f"boom for {auth}"})
        if mode == "echo-header":  # the key comes back in a response header, which httpcore logs
            return self.send(200, ok, [("X-Echo", auth)])
        self.send(400, {"error": f"unknown mode {mode}"})


@pytest.fixture
def server():
    with loopback_server(ScriptedHandler, hits={}, requests=[]) as srv:
        yield srv


def judge_for(server, mode, model="judge-model", **kw):
    return ec.HTTPJudge(
        f"{server.base}/{mode}/v1",
        model,
        api_key=KEY,
        **{"timeout": 2.0, "max_retries": 2, **FAST, **kw},
    )


# ----------------------------------------------------------------------------------------------
# each failure mode against a real server
# ----------------------------------------------------------------------------------------------


def test_a_correct_answer(server):
    judge = judge_for(server, "ok")
    assert judge("Capital of France?", "Paris", "Paris is the capital.") == (4, "fine")
    assert server.hits == {"ok": 1} and judge.stats["retries"] == 0 and judge.stats["requests"] == 1
    req = server.requests[0]
    assert req["path"] == "/ok/v1/chat/completions"
    assert req["headers"]["Authorization"] == f"Bearer {KEY}"  # the key travels as a header only
    assert req["body"]["model"] == "judge-model" and req["body"]["temperature"] == 0
    roles = [m["role"] for m in req["body"]["messages"]]
    assert roles == ["system", "user"]
    assert "1 = wrong" in req["body"]["messages"][0]["content"]  # the rubric says what 1-5 mean
    assert ec._judge_item(req["body"]) == ("Capital of France?", "Paris", "Paris is the capital.")
    assert KEY not in json.dumps(req["body"])


def test_429_then_success_honours_retry_after(server):
    judge = judge_for(server, "429")
    t0 = time.perf_counter()
    assert judge("q", "p", "r") == (4, "fine")
    assert time.perf_counter() - t0 >= 0.2
    assert server.hits["429"] == 2
    assert judge.stats["retries"] == 1 and judge.stats["requests"] == 2
    assert judge.waits[0] >= 0.2  # backoff alone would have waited ~1 ms


def test_retry_after_is_capped_by_max_retry_after(server):
    judge = judge_for(server, "429-huge", max_retry_after=0.05)
    t0 = time.perf_counter()
    assert judge("q", "p", "r") == (4, "fine")
    assert time.perf_counter() - t0 < 5 and judge.waits == [0.05]


def test_500_until_retries_run_out(server, caplog):
    judge = judge_for(server, "500", max_retries=3)
    with pytest.raises(ec.JudgeUnavailable, match=r"HTTP 500; gave up after 3 retries") as info:
        judge("q", "p", "r")
    assert server.hits["500"] == 4  # the first try and 3 retries
    assert judge.stats == {"calls": 1, "requests": 4, "retries": 3, "cache_hits": 0, "unscored": 1}
    assert len(judge.waits) == 3
    caps = [min(0.005, 0.001 * 2**a) for a in range(3)]  # exponential, with jitter in [cap/2, cap]
    assert all(c / 2 <= w <= c for w, c in zip(judge.waits, caps))
    assert info.value.reason == str(info.value)
    assert len([r for r in caplog.records if r.name == "evalcore.judge"]) == 3  # one line per retry


def test_slower_than_the_timeout(server):
    judge = judge_for(server, "slow", timeout=0.2, max_retries=1)
    t0 = time.perf_counter()
    with pytest.raises(ec.JudgeUnavailable, match=r"timeout; gave up after 1 retries"):
        judge("q", "p", "r")
    assert time.perf_counter() - t0 < 0.9  # never waited for the 1 s answers
    assert server.hits["slow"] == 2 and judge.stats["retries"] == 1


@pytest.mark.parametrize(
    "mode,reason",
    [
        ("badbody", "not JSON"),
        ("badcontent", "no JSON object with a score"),
        ("nochoices", "no choices"),
        ("seven", "score 7 is not an integer from 1 to 5"),
        ("404", "HTTP 404"),
    ],
)
def test_unusable_answers_are_not_retried(server, mode, reason):
    judge = judge_for(server, mode)
    with pytest.raises(ec.JudgeUnavailable, match=reason):
        judge("q", "p", "r")
    assert server.hits[mode] == 1 and judge.stats["retries"] == 0 and judge.stats["unscored"] == 1


def test_prose_with_a_score_in_a_code_fence(server):
    assert judge_for(server, "fence")("q", "p", "r") == (3, "partly right")


def test_nobody_listening():
    with socket.socket() as s:  # a port that was free a moment ago and that nobody serves
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    judge = ec.HTTPJudge(f"http://127.0.0.1:{port}/v1", "m", max_retries=1, timeout=1.0, **FAST)
    with pytest.raises(ec.JudgeUnavailable, match=r"connection failed .*gave up after 1 retries"):
        judge("q", "p", "r")


# ----------------------------------------------------------------------------------------------
# parsing, Retry-After, arguments
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,verdict",
    [
        ('{"score": 5, "rationale": "same"}', (5, "same")),
        ('```\n{"score": 1, "rationale": "no"}\n```', (1, "no")),
        ('```JSON\n{"score": 2, "rationale": "a bit"}```', (2, "a bit")),
        ('Verdict: {"score": 4, "rationale": "close"} -- done', (4, "close")),
        ('{"notes": {"x": 1}, "score": 3, "rationale": "nested"}', (3, "nested")),
        (
            '{"other": 1} then {"score": 2}',
            (2, ""),
        ),  # no rationale: an empty one, the score decides
        ('```json\n{"score": 5, "rationale": 7}\n```', (5, "")),
        # a reasoning reply quotes an example verdict first: its own, the last one, wins
        (
            'e.g. {"score": 1, "rationale": "example"} ... so: {"score": 5, "rationale": "mine"}',
            (5, "mine"),
        ),
        (
            '```\n{"score": 2}\n```\nOn reflection: {"score": 4, "rationale": "revised"}',
            (4, "revised"),
        ),
        ('{"score": 4.0, "rationale": "float"}', (4, "float")),  # integral scores, however written
        ('{"score": "4", "rationale": "string"}', (4, "string")),
        ('{"score": " 3.0 "}', (3, "")),
    ],
)
def test_parse_is_tolerant_of_wrapping(text, verdict):
    assert ec.parse_judge_reply(text) == verdict


@pytest.mark.parametrize(
    "text",
    [
        '{"score": 0}',
        '{"score": 6}',
        '{"score": "6"}',
        '{"score": 4.5}',
        '{"score": "4.5"}',
        '{"score": "four"}',
        '{"score": true}',
        '{"score": null}',
        '{"score": "nan"}',
        '{"score": 5} {"score": 9}',
        "Score: 4",
        "",
        "{not json}",
        '["score", 4]',
        '{"rating": 4}',
    ],
)
def test_parse_is_strict_about_the_score(text):
    with pytest.raises(ec.JudgeUnavailable):
        ec.parse_judge_reply(text)


def test_retry_after_parsing():
    def ra(value):
        return ec._retry_after(
            httpx.Response(429, headers={} if value is None else {"Retry-After": value})
        )

    assert ra("3") == 3.0 and ra("0.5") == 0.5 and ra("-2") == 0.0
    assert ra(None) is None and ra("soon") is None and ra("nan") is None
    future = ra(formatdate(time.time() + 30, usegmt=True))
    assert 25 < future <= 31
    assert ra(formatdate(time.time() - 30, usegmt=True)) == 0.0


@pytest.mark.parametrize(
    "kw,name",
    [
        (dict(base_url="127.0.0.1:80"), "base_url"),
        (dict(model=""), "model"),
        (dict(timeout=0), "timeout"),
        (dict(timeout=float("nan")), "timeout"),
        (dict(max_retries=-1), "max_retries"),
        (dict(max_retries=1.5), "max_retries"),
        (dict(backoff=-1), "backoff"),
        (dict(api_key=123), "api_key"),
    ],
)
def test_bad_arguments_are_named(kw, name):
    args = {"base_url": "http://127.0.0.1:1/v1", "model": "m", **kw}
    with pytest.raises(ValueError, match=name):
        ec.HTTPJudge(**args)


# ----------------------------------------------------------------------------------------------
# the cache and the key
# ----------------------------------------------------------------------------------------------


def test_cache_hit_costs_no_request(server, tmp_path):
    judge = judge_for(server, "ok", cache_dir=tmp_path / "cache")
    assert judge("q", "p", "r") == judge("q", "p", "r") == (4, "fine")
    assert server.hits["ok"] == 1 and judge.stats["cache_hits"] == 1
    again = judge_for(server, "ok", cache_dir=tmp_path / "cache")  # a fresh process, same cache
    assert again("q", "p", "r") == (4, "fine") and server.hits["ok"] == 1
    other = judge_for(server, "ok", model="another-model", cache_dir=tmp_path / "cache")
    other("q", "p", "r")  # the cache key is (base_url, model, prompt): a new model misses
    assert server.hits["ok"] == 2
    files = list((tmp_path / "cache").iterdir())
    assert len(files) == 2 and not any(f.suffix == ".tmp" for f in files)
    assert all(KEY not in f.read_text() for f in files)


def test_failures_are_not_cached_and_a_damaged_entry_is_a_miss(server, tmp_path):
    judge = judge_for(server, "seven", cache_dir=tmp_path)
    for _ in range(2):
        with pytest.raises(ec.JudgeUnavailable):
            judge("q", "p", "r")
    assert server.hits["seven"] == 2 and list(tmp_path.iterdir()) == []
    ok = judge_for(server, "ok", cache_dir=tmp_path)
    ok("q", "p", "r")
    (entry,) = tmp_path.iterdir()
    entry.write_text("{damaged")
    assert ok("q", "p", "r") == (4, "fine") and server.hits["ok"] == 2


def test_key_from_the_environment(server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    ec.HTTPJudge(f"{server.base}/ok/v1", "m")("q", "p", "r")
    monkeypatch.setenv("MY_JUDGE_KEY", "sk-other-env")
    ec.HTTPJudge(f"{server.base}/ok/v1", "m", api_key_env="MY_JUDGE_KEY")("q", "p", "r")
    monkeypatch.delenv("OPENAI_API_KEY")
    ec.HTTPJudge(f"{server.base}/ok/v1", "m")("q", "p", "r")
    auth = [r["headers"].get("Authorization") for r in server.requests]
    assert auth == ["Bearer sk-from-env", "Bearer sk-other-env", None]


@pytest.mark.parametrize("mode", ["echo401", "echo500", "echo-rationale", "echo-header"])
def test_an_echoing_server_cannot_leak_the_key(server, mode, caplog):
    caplog.set_level(logging.DEBUG)  # every logger, httpx's and httpcore's included
    judge = judge_for(server, mode)
    try:
        verdict = judge("q", "p", "r")
        assert KEY not in verdict[1] and (mode != "echo-rationale" or "[api key]" in verdict[1])
    except ec.JudgeUnavailable as exc:
        assert KEY not in str(exc) and KEY not in exc.reason
        assert mode == "echo500" or "[api key]" in str(exc)  # 401's body is quoted, redacted
    assert KEY not in caplog.text and KEY not in repr(judge) and "api_key=set" in repr(judge)


PAIRS = [("ok", "Paris"), ("seven", "Tokyo"), ("echo500", "Rome"), ("echo-rationale", "Mars")]
ANSWERS = {"ok": "Paris", "seven": "Kyoto", "echo500": "Rome", "echo-rationale": "Venus"}


@pytest.fixture
def fixed_answers(monkeypatch):
    monkeypatch.setattr(
        ec, "generate", lambda model, tok, qs, max_new_tokens=48, **_: [ANSWERS[q] for q in qs]
    )


def test_judge_eval_records_unscored_examples_and_never_leaks_the_key(
    server, fixed_answers, tok, tmp_path, caplog
):
    caplog.set_level(logging.DEBUG)
    judge = judge_for(server, "mixed", max_retries=1)
    result = ec.judge_eval(None, tok, PAIRS, judge_fn=judge)
    scores = [r["score"] for r in result.per_example]
    assert scores == [4, None, None, 2]
    assert result.value == 3.0  # the mean over the 2 scored, never a 0 or a 1 for the failures
    assert result.extras["scored"] == 2 and result.extras["total"] == 4
    reasons = {u["index"]: u["reason"] for u in result.extras["unscored"]}
    assert set(reasons) == {1, 2}
    assert "score 7" in reasons[1] and "HTTP 500; gave up after 1 retries" in reasons[2]
    assert (
        result.per_example[1]["unscored"] == reasons[1]
        and result.per_example[1]["rationale"] is None
    )
    report = ec.aggregate([result])
    table = report.table()
    assert "2/4" in table and "could not score example 1: score 7" in table
    path = report.to_json(tmp_path / "report.json")
    text = path.read_text()
    json.loads(text)  # strict JSON
    assert '"scored": 2' in text and '"total": 4' in text
    everything = text + table + caplog.text + repr(result) + repr(judge) + str(report.to_frame())
    assert KEY not in everything


def test_judge_eval_when_nothing_could_be_scored(fixed_answers, tok):
    def down(q, p, r):
        raise ec.JudgeUnavailable("endpoint down")

    with pytest.raises(ValueError, match=r"none of the 4 examples.*endpoint down"):
        ec.judge_eval(None, tok, PAIRS, judge_fn=down)


def test_the_mock_judge_counts_n_of_n(fixed_answers, tok):
    result = ec.judge_eval(None, tok, PAIRS)
    assert {k: result.extras[k] for k in ("scored", "total", "unscored", "prompt_format", "n")} == {
        "scored": 4,
        "total": 4,
        "unscored": [],
        "prompt_format": "inst_resp",
        "n": 4,
    }
    assert "4/4" in ec.aggregate([result]).table()


# ----------------------------------------------------------------------------------------------
# the mock judge served over HTTP: in process, and as `python evalcore.py serve-judge`
# ----------------------------------------------------------------------------------------------


def test_judge_server_gives_the_mock_judges_verdicts(tok):
    fx = ec.load_fixtures()
    items = [
        (q, p, ref) for (q, ref), (_, p) in zip(fx["judge"] + fx["em"], fx["f1"] + fx["judge"])
    ]
    items += [(q, ref if isinstance(ref, str) else ref[-1], ref) for q, ref in fx["em"]]  # all 5s
    with ec.JudgeServer().start() as srv:
        assert srv.url.startswith("http://127.0.0.1:") and srv.server_address[0] == "127.0.0.1"
        judge = ec.HTTPJudge(srv.url, srv.model, max_retries=0)
        for q, p, ref in items:  # list references too (the EM fixture has two)
            assert judge(q, p, ref) == ec.mock_judge(q, p, ref)
        assert httpx.get(f"{srv.url}/models").json()["data"][0]["id"] == "mock-judge"
        assert httpx.post(f"{srv.url}/chat/completions", content=b"{}").status_code == 400
        assert httpx.post(f"{srv.url}/nowhere", json={}).status_code == 404


def test_judge_server_reports_a_failing_judge_as_500():
    def broken(q, p, r):
        raise RuntimeError("the GPU caught fire")

    with ec.JudgeServer(judge_fn=broken).start() as srv:
        judge = ec.HTTPJudge(srv.url, srv.model, max_retries=1, **FAST)
        with pytest.raises(ec.JudgeUnavailable, match="HTTP 500; gave up after 1 retries"):
            judge("q", "p", "r")


def test_judge_server_rejects_a_bad_port():
    with pytest.raises(ValueError, match="port"):
        ec.JudgeServer(port=70000)


def test_serve_judge_command(root):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "evalcore.py", "serve-judge", "--port", str(port)],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}/v1"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # bounded: the child imports torch first
            try:
                httpx.get(f"{url}/models", timeout=1.0)
                break
            except httpx.TransportError:
                assert proc.poll() is None, proc.communicate()
                time.sleep(0.2)
        judge = ec.HTTPJudge(url, "mock-judge", max_retries=0)
        assert judge("q", "Paris.", "paris") == ec.mock_judge("q", "Paris.", "paris")
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=10)
    assert f"http://127.0.0.1:{port}/v1" in out


def test_the_judge_server_works_as_a_context_manager():
    with ec.JudgeServer() as server:  # before the fix __enter__ was inherited and never served
        judge = ec.HTTPJudge(server.url, server.model, timeout=2.0, max_retries=0)
        assert judge("Capital of France?", "Paris", "Paris")[0] == 5
        url = server.url
    with pytest.raises(ec.JudgeUnavailable):  # stopped after the block
        ec.HTTPJudge(url, "m", timeout=1.0, max_retries=0)("q", "p", "r")


def test_entering_a_started_server_does_not_start_it_twice():
    server = ec.JudgeServer().start()
    with server as same:
        assert same is server
        judge = ec.HTTPJudge(server.url, server.model, timeout=2.0, max_retries=0)
        assert judge("q", "Paris", "Paris")[0] == 5


def test_a_key_read_with_its_trailing_newline_is_stripped_not_retried(server, caplog):
    caplog.set_level(logging.DEBUG)
    judge = ec.HTTPJudge(
        f"{server.base}/ok/v1", "m", api_key=KEY + "\n", timeout=2.0, max_retries=2, **FAST
    )
    assert judge("q", "p", "r")[0] == 4
    assert (
        judge.stats["retries"] == 0
    )  # a newline in a header used to fail as a "connection failure"
    assert [r["headers"]["Authorization"] for r in server.requests] == [f"Bearer {KEY}"]
    assert KEY not in caplog.text


@pytest.mark.parametrize("bad", [KEY + "é", "sk two words", "sk-\x00-nul"])
def test_a_key_no_header_can_carry_is_refused_without_showing_it(bad, caplog):
    caplog.set_level(logging.DEBUG)
    with pytest.raises(ValueError, match="api_key holds characters") as info:
        ec.HTTPJudge("http://127.0.0.1:9/v1", "m", api_key=bad)
    assert bad not in str(info.value) and bad not in repr(info.value) and bad not in caplog.text


def test_the_cache_key_is_documented_and_can_be_chosen(server, tmp_path):
    # the default files verdicts under the base URL: the same judge elsewhere misses
    first = judge_for(server, "ok", cache_dir=tmp_path / "a")
    first("q", "p", "r")
    moved = ec.HTTPJudge(
        f"{server.base}/ok/v2", "judge-model", api_key=KEY, cache_dir=tmp_path / "a"
    )
    moved("q", "p", "r")
    assert moved.stats["cache_hits"] == 0 and "base_url" in ec.default_cache_key.__doc__
    # a key without the address: a server on a new port reuses the verdicts
    by_model = lambda url, model, messages: json.dumps([model, messages])  # noqa: E731
    a = judge_for(server, "ok", cache_dir=tmp_path / "b", cache_key=by_model)
    a("q", "p", "r")
    b = ec.HTTPJudge(
        f"{server.base}/ok/v2",
        "judge-model",
        api_key=KEY,
        cache_dir=tmp_path / "b",
        cache_key=by_model,
    )
    assert b("q", "p", "r") == a("q", "p", "r") and b.stats["cache_hits"] == 1
    with pytest.raises(ValueError, match="cache_key must be a function"):
        judge_for(server, "ok", cache_dir=tmp_path, cache_key="model")
