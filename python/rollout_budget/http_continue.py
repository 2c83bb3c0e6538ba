"""``Expect: 100-continue`` for HttpClient's large bodies (RFC 9110 §10.1.1), which http.client
lacks: it sends a whole body before it reads a byte of the answer.

The service refuses a body over its ``--body-limit`` (or with a wrong token) from its headers, then
reads at most 64 MiB (or 10 s) more of it before it cuts the connection (src/service/http.ts,
``refuse``). A body larger than that still being sent was cut, the 413 lost: the client took it
for a service it could not reach, sent it again 14 times, and never split it (pyrev4 F1). With
``Expect: 100-continue`` the headers go first and the body only once the server says "100
Continue"; the service answers a request it refuses with that refusal instead, before a byte of
the body is sent, whatever the body's size.
"""

from __future__ import annotations

import http.client
import select
import socket
import time

#: Bodies larger than this (bytes) are sent with ``Expect: 100-continue``: a round trip more for
#: each, spent only where a body is large (curl's threshold, 1 MiB).
EXPECT_CONTINUE_BYTES = 1 << 20
#: How long the headers wait for "100 Continue" before the body is sent all the same (curl's 1 s):
#: a server or proxy that does not know the header waits for the body without a word.
CONTINUE_WAIT_S = 1.0


def send_head_expecting(conn, method, url, headers, length, wait):
    """Sends the head of `method url` on `conn` (connected) with `headers`, ``Content-Length:
    length`` and ``Expect: 100-continue``, and waits up to `wait` seconds for the server's word.

    Returns None when the body is to be sent now (``conn.send(body)``, then ``conn.getresponse()``
    reads the answer, skipping a "100 Continue" that comes late), or the answer the server gave
    instead, as ``(status, Location, body bytes)``: the connection is then of no further use (the
    server still waits for a body that will never come), the caller closes it."""
    conn.putrequest(method, url)
    for name, value in headers.items():
        conn.putheader(name, value)
    conn.putheader("Content-Length", str(length))
    conn.putheader("Expect", "100-continue")
    conn.endheaders()
    sock = conn.sock
    deadline = time.monotonic() + wait
    # A TLS socket may hold what select() cannot see (bytes the TLS layer already read), and be
    # readable with no HTTP byte in it (TLS 1.3's session tickets after the handshake): the wait
    # is for the answer's first byte, read with what is left of it as the socket's timeout; none
    # by then sends the body. The rest of an answer begun is read under the client's own timeout.
    pending = getattr(sock, "pending", None)
    if not (pending is not None and pending() > 0) and not select.select([sock], [], [], wait)[0]:
        return None
    before = sock.gettimeout()
    sock.settimeout(max(0.001, deadline - time.monotonic()))
    try:
        first = sock.recv(1)
    except (socket.timeout, TimeoutError):
        return None  # no answer in the wait (a server that ignores the header): the body goes now
    finally:
        sock.settimeout(before)
    if not first:
        raise http.client.RemoteDisconnected("the server closed the connection without an answer")
    return _early_answer(sock, first)


def _early_answer(sock, first):
    """The answer waiting on `sock` before the body, whose `first` byte was read already: None for
    an interim one (1xx: "100 Continue"), else (status, Location, body bytes). An answer read from a buffered file over
    `sock`: after "100 Continue" the server sends nothing until it has the body, so nothing past
    it is read here and lost to the answer http.client reads later."""
    fp = sock.makefile("rb")
    try:
        line = first + (b"" if first == b"\n" else fp.readline(65536))
        if not line:
            raise http.client.RemoteDisconnected("the server closed the connection without an answer")
        try:
            status = int(line.split(None, 2)[1])
        except (IndexError, ValueError):
            raise http.client.BadStatusLine(line.decode("iso-8859-1").rstrip()) from None
        head = http.client.parse_headers(fp)
        if 100 <= status < 200:
            return None
        length = head.get("Content-Length")
        # (the service always gives a length; another server's answer without one: what has come)
        body = fp.read(int(length)) if length is not None and length.strip().isdigit() else fp.read1(65536)
        return status, head.get("Location"), body
    finally:
        fp.close()
