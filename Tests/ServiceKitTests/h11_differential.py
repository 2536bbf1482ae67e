"""Our HTTP/1.1 parser against h11, a strict independent one, on generated requests (HTTPParserDifferentialTests).

    python h11_differential.py PORT EXAMPLES

PORT is a server of ours that answers every request it accepts with 200 and a JSON echo of what it read (method, path,
headers by lower-cased name, body in base64). For each generated request, sent whole and then half-closed: either our
server refuses it (any status but 200, or no answer), or h11 accepts the same bytes as one complete request with the
same method, path, headers (repeated lines combined in order) and body. Exit 1 on the first counterexample
(hypothesis shrinks it first).
"""
import base64
import json
import socket
import sys

import h11
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

PORT = int(sys.argv[1])
EXAMPLES = int(sys.argv[2]) if len(sys.argv) > 2 else 300

def mostly(good, bad, share=8):
    """`good` most of the time, one of `bad` about one time in `share`."""
    return st.sampled_from(good * share + bad) if bad else st.sampled_from(good)


tokens = mostly(["GET", "POST", "PUT", "PATCH", "DELETE", "X-Y_Z"], ["get", "G@T", ""], 6)
path_chars = mostly(list("abz019-._~/") + ["%2F", "%6d", "%20", "?", "=", "&", "+"], ["%00", "%zz", " ", "\t", "\x7f", "é"], 20)
targets = st.tuples(st.integers(0, 11), st.lists(path_chars, max_size=10), st.sampled_from(["*", "x"])).map(
    lambda t: t[2] if t[0] == 0 else "/" + "".join(t[1]))
versions = mostly(["HTTP/1.1"], ["HTTP/1.0", "HTTP/1.2", "http/1.1", "HTTP/2.0", "HTTP/1.1 "], 8)
eols = mostly(["\r\n"], ["\n", "\r"], 6)
spaces = mostly(["", " "], ["  ", "\t", " \t"], 8)
names = mostly(["X-A", "X-Forwarded-For", "Accept", "Cookie"],
               ["Host", "Content-Length", "Transfer-Encoding", "X A", "X:A", "", "Host ", "Content-length"], 5)
values = mostly(["x", "a b", "1", "example.com:80", "[::1]:8080", "text/plain, */*", "\t tab"],
                ["0", "5", "chunked", "identity", "chunked, identity", "gzip, chunked", "Chunked", "1, 1", "+1", "-1",
                 "0x5", "", "a b/c@d", "v\x00x", "v\rx", "é", "\x7f"], 6)
chunk_sizes = mostly(["3", "03", "3;a=b", "3 ;a", "3;a=\"q;r\""], ["3 zz", "3\t", "x", "", "FFFFFFFFFFFFFFFFFF"], 4)


@st.composite
def requests(draw):
    eol = draw(eols)
    method, target, version = draw(tokens), draw(targets), draw(versions)
    lines = [f"{method} {target} {version}"]
    headers = draw(st.lists(st.tuples(names, spaces, values, spaces), max_size=5))
    if draw(st.integers(0, 9)) > 0:
        headers.insert(0, ("Host", " ", "x", ""))
    kind = draw(st.sampled_from(["none", "length", "chunked"]))
    body = b""
    if kind == "length":
        body = draw(st.binary(max_size=8))
        headers.append(("Content-Length", " ", str(len(body)) if draw(st.integers(0, 5)) else "3", ""))
    elif kind == "chunked":
        size = draw(chunk_sizes)
        end = draw(mostly(["\r\n"], ["\n", ""], 3))
        trailer = draw(mostly(["", "X-T: 1\r\n"], ["junk\r\n"], 3))
        body = f"{size}\r\nabc{end}0\r\n{trailer}\r\n".encode()
        headers.append(("Transfer-Encoding", " ", "chunked", ""))
    for name, before, value, after in draw(st.permutations(headers)):
        lines.append(f"{name}:{before}{value}{after}")
        if draw(st.integers(0, 30)) == 0:
            lines.append(" folded")  # obs-fold
    lines.append("Connection: close")
    return (eol.join(lines) + eol + eol).encode("utf-8") + body


def ours(data):
    s = socket.create_connection(("127.0.0.1", PORT), timeout=5)
    try:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        out = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            out += chunk
    except OSError:
        pass
    finally:
        s.close()
    if not out.startswith(b"HTTP/1.1 200 "):
        samples.append((data[:80], out[:12] + out.split(b"\r\n\r\n", 1)[-1][:90]))
        return None
    return json.loads(out.split(b"\r\n\r\n", 1)[1])


def theirs(data):
    conn = h11.Connection(h11.SERVER)
    conn.receive_data(data)
    conn.receive_data(b"")
    request, body = None, b""
    try:
        while True:
            event = conn.next_event()
            if isinstance(event, h11.Request):
                request = event
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                break
            else:  # NEED_DATA, PAUSED, ConnectionClosed: not one complete request
                return None
    except h11.RemoteProtocolError:
        return None
    headers = {}
    for name, value in request.headers:
        name, value = name.decode("latin-1"), value.decode("utf-8", "replace")
        if name in headers and name not in ("content-length",):
            headers[name] += ("; " if name == "cookie" else ", ") + value
        else:
            headers[name] = value
    return {"method": request.method.decode(), "path": request.target.decode("latin-1").split("?")[0],
            "headers": headers, "body": base64.b64encode(body).decode()}


counts = {"accepted": 0, "refused": 0}
samples = []


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(requests())
def test_we_accept_only_what_h11_accepts_the_same(data):
    mine = ours(data)
    counts["refused" if mine is None else "accepted"] += 1
    if mine is None:
        return
    other = theirs(data)
    assert other is not None, f"we accepted what h11 refuses: {data!r} -> {mine}"
    assert mine == other, f"read differently: {data!r}\n ours: {mine}\n h11:  {other}"


if __name__ == "__main__":
    try:
        test_we_accept_only_what_h11_accepts_the_same()
    except AssertionError as failure:
        print(failure)
        sys.exit(1)
    print(f"{sum(counts.values())} generated requests: ours read {counts['accepted']} as h11 does and refused "
          f"{counts['refused']}")
    if counts["accepted"] < sum(counts.values()) // 10:
        print("too few requests were accepted for the comparison to mean anything: widen the generator")
        for sample in samples[:: max(1, len(samples) // 15)]:
            print(sample)
        sys.exit(1)
