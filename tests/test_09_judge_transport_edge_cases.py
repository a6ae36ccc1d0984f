"""The judge's transport, edge cases (issue 19). The verdict cache: an entry is served only if it
is a verdict the judge could have given, an integer score from 1 to 5 and a text rationale;
anything else (a hand-edited or damaged file) is a miss, and the judge is asked again. Replies
that hold no verdict: unscored with the reason, never a crash."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import evalcore as ec

ITEM = ("Capital of France?", "Paris", "Paris")  # the mock judge gives 5: an exact match


@pytest.fixture(scope="module")
def server():
    with ec.JudgeServer().start() as srv:
        yield srv


@pytest.mark.parametrize(
    "entry",
    [
        {"score": 3.5, "rationale": "half"},  # not an integer
        {"score": True, "rationale": "a bool"},
        {"score": 6, "rationale": "out of range"},
        {"score": 4, "rationale": None},
    ],
)
def test_a_cached_entry_that_is_no_verdict_is_a_miss(server, tmp_path, entry):
    judge = ec.HTTPJudge(server.url, server.model, max_retries=0, cache_dir=tmp_path)
    assert judge(*ITEM) == ec.mock_judge(*ITEM)
    (path,) = tmp_path.iterdir()
    assert json.loads(path.read_text(encoding="utf-8"))["score"] == 5
    path.write_text(json.dumps(entry), encoding="utf-8")
    assert judge(*ITEM) == ec.mock_judge(*ITEM)  # asked again, not served the entry
    assert judge.stats["cache_hits"] == 0 and judge.stats["requests"] == 2


def test_a_valid_cached_entry_is_served_without_a_request(server, tmp_path):
    judge = ec.HTTPJudge(server.url, server.model, max_retries=0, cache_dir=tmp_path)
    judge(*ITEM)
    (path,) = tmp_path.iterdir()
    path.write_text(json.dumps({"score": 2, "rationale": "edited"}), encoding="utf-8")
    assert judge(*ITEM) == (2, "edited")
    assert judge.stats["cache_hits"] == 1 and judge.stats["requests"] == 1


class FixedReply(BaseHTTPRequestHandler):
    """Answers every POST with the server's fixed status and JSON body, and counts them."""

    def log_message(self, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.server.hits += 1
        data = json.dumps(self.server.reply).encode()
        self.send_response(self.server.status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def fixed_reply():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), FixedReply)
    srv.daemon_threads = True
    srv.status, srv.hits = 200, 0
    thread = threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    thread.join(timeout=5)
    srv.server_close()


def url_of(server):
    return f"http://127.0.0.1:{server.server_address[1]}/v1"


@pytest.mark.parametrize(
    "reply",
    [
        {"object": "chat.completion", "choices": []},  # a filtered or empty completion
        {"choices": [{"message": {}}]},
        {"choices": [None]},
        {"choices": "none"},
    ],
)
def test_a_reply_without_a_message_is_unscored_not_a_crash(fixed_reply, reply):
    fixed_reply.reply = reply
    judge = ec.HTTPJudge(url_of(fixed_reply), "m", max_retries=0)
    with pytest.raises(ec.JudgeUnavailable, match=r"no choices\[0\]\.message\.content"):
        judge(*ITEM)
    assert judge.stats["unscored"] == 1 and judge.stats["requests"] == 1


@pytest.mark.parametrize("status", [501, 507, 599])  # server errors outside RETRY_STATUSES
def test_every_server_error_is_retried(fixed_reply, status):
    fixed_reply.status, fixed_reply.reply = status, {"error": "overloaded"}
    judge = ec.HTTPJudge(url_of(fixed_reply), "m", max_retries=1, backoff=0.001)
    with pytest.raises(ec.JudgeUnavailable, match=f"HTTP {status}; gave up after 1 retries"):
        judge(*ITEM)
    assert fixed_reply.hits == 2 and judge.stats["retries"] == 1


def test_a_client_error_is_not_retried(fixed_reply):
    fixed_reply.status, fixed_reply.reply = 422, {"error": "bad request"}
    judge = ec.HTTPJudge(url_of(fixed_reply), "m", max_retries=3, backoff=0.001)
    with pytest.raises(ec.JudgeUnavailable, match="HTTP 422"):
        judge(*ITEM)
    assert fixed_reply.hits == 1 and judge.stats["retries"] == 0
