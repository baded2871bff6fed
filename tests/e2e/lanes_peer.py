#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""Lane joins (--streams) against a real receiver, as a malicious client.

    lanes_peer.py RDCP PORT KEYFILE DIR

Starts `RDCP --listen` over TCP on 127.0.0.1:PORT with the key, root
DIR/root and --max-sessions 2, then plays a client (peer.py) that asks for
4 streams and, before the lanes it is owed, tries joins that must be
refused: a wrong proof, an unknown token, a lane beyond the 4, a proof
for another lane count, the same lane twice, a join replayed after its
first was turned away; then joins lanes 1..3 for
real, gets LANES (all 4) and the RING, and tries once more after it
(refused: the session started). Last, a session that never sends AUTH: only the joins it could
be owed may wait for it. None of them may cost a session slot: while its session still
holds one, a real `rdcp --streams 2` copy takes the other. The receiver's
log must name the refusals. Prints what failed; exit 0 if nothing did.
"""
import os
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer  # noqa: E402
from peer_wire import (_recv_exact, join_encode, lane_proof,  # noqa: E402
                       pd_decode)

ST_OK, ST_REFUSED = 0, 5
failed = []


def check(ok, what):
    print("%s - %s" % ("ok" if ok else "FAILED", what))
    if not ok:
        failed.append(what)


def join(port, token, lane, proof, geom):
    """The receiver's answer status to a join, and the socket."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(join_encode(token, lane, proof, slots=geom["slots"],
                          chunk_size=geom["chunk_size"]))
    try:
        st = pd_decode(_recv_exact(s, 24, 10))["status"]
    except Exception as e:  # a close without an answer is no acceptance
        st = "closed (%s)" % e
    return st, s


def preauth_flood(rx, port, key, geom):
    """A session that asks for 4 streams and never proves the key: of 8
    joins with its token, at most the 3 it could be owed wait (each holds
    a socket until the session's deadline); the rest are refused at once,
    so unauthenticated peers cannot hold descriptors nobody budgeted."""
    c = peer.Client(port, key=key).connect(slots=8, chunk=65536)
    w = c.handshake(peer.PUSH, ["flood/"], auth=False,
                    hello={"streams": 4})
    fd_dir = "/proc/%d/fd" % rx.pid
    before = len(os.listdir(fd_dir))
    socks, at_once = [], 0
    for i in range(8):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(join_encode(w.token, 1 + i % 3, bytes(16),
                              slots=geom["slots"],
                              chunk_size=geom["chunk_size"]))
        try:
            if pd_decode(_recv_exact(s, 24, 0.5))["status"] == ST_REFUSED:
                at_once += 1
        except Exception:  # no answer yet: it waits in the session's queue
            pass
        socks.append(s)
    grown = len(os.listdir(fd_dir)) - before
    check(at_once >= 5, "joins before AUTH beyond the 3 owed are refused "
          "at once (%d of 8 were)" % at_once)
    check(grown <= 3 + 2, "the receiver holds at most the 3 owed joins "
          "(+%d descriptors)" % grown)
    for s in socks:
        s.close()
    c.close()


def replay(port, key):
    """A lane's join, read off the wire and sent again from another
    connection, is refused even when the first was turned away (here: the
    one place a join may wait is taken, so the receiver refused it at
    once): a proof is good for one join. Before, the copy joined."""
    c = peer.Client(port, key=key).connect(slots=8, chunk=65536)
    w = c.handshake(peer.PUSH, ["replay/"], auth=False,
                    hello={"streams": 2})
    geom = c.conn.geom
    proof1 = lane_proof(key, c.hello.nonce, w.nonce, w.token, 1, 2)
    socks = []

    def send_join(proof):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(join_encode(w.token, 1, proof, slots=geom["slots"],
                              chunk_size=geom["chunk_size"]))
        socks.append(s)
        try:
            return pd_decode(_recv_exact(s, 24, 0.5))["status"]
        except Exception:  # no answer yet: it waits in the session's queue
            return None

    send_join(bytes(16))  # the one owed place, taken before AUTH
    first = send_join(proof1)  # the client's: refused, too many at once
    c.conn.send(peer.Msg(peer.AUTH,
                         mac=peer.auth_mac(key, "client", c.hello, w)))
    time.sleep(0.5)  # the session refuses the wrong proof it held
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(join_encode(w.token, 1, proof1, slots=geom["slots"],
                          chunk_size=geom["chunk_size"]))
    socks.append(s)
    try:
        st = pd_decode(_recv_exact(s, 24, 5))["status"]
    except Exception as e:
        st = "closed (%s)" % e
    check(first == ST_REFUSED, "the first join of lane 1 was turned away "
          "(got %r)" % (first,))
    check(st == ST_REFUSED, "the same join replayed is refused (got %r)"
          % (st,))
    for s in socks:
        s.close()
    c.close()


def main(rdcp, port, keyfile, d):
    port = int(port)
    root = os.path.join(d, "root")
    os.makedirs(root, exist_ok=True)
    log = os.path.join(d, "rx.log")
    key = peer.load_key(keyfile)
    rx = subprocess.Popen(
        [rdcp, "--listen", "-v", "--transport", "tcp", "--bind", "127.0.0.1",
         "--port", str(port), "--key-file", keyfile, "--root", root,
         "--max-sessions", "2"],
        stdout=open(log, "w"), stderr=subprocess.STDOUT)
    try:
        end = time.monotonic() + 10
        while "listening" not in open(log).read():
            if time.monotonic() > end or rx.poll() is not None:
                check(False, "receiver listening")
                return
            time.sleep(0.05)
        c = peer.Client(port, key=key).connect(slots=8, chunk=65536)
        w = c.handshake(peer.PUSH, ["in/"], hello={"streams": 4})
        check(w.streams == 4, "WELCOME agrees to 4 streams (got %d)"
              % w.streams)
        tok, n, g = w.token, w.streams, c.conn.geom

        def proof(lane, token=tok, nn=n):
            return lane_proof(key, c.hello.nonce, w.nonce, token, lane, nn)

        socks = []
        st, s = join(port, tok, 1, bytes(16), g)
        socks.append(s)
        check(st == ST_REFUSED, "a wrong proof is refused (got %r)" % (st,))
        other = os.urandom(8)
        st, s = join(port, other, 1, proof(1, token=other), g)
        socks.append(s)
        check(st == ST_REFUSED, "an unknown token is refused (got %r)" % (st,))
        st, s = join(port, tok, 4, proof(4), g)
        socks.append(s)
        check(st == ST_REFUSED, "lane 4 of 4 is refused (got %r)" % (st,))
        st, s = join(port, tok, 1, proof(1, nn=2), g)
        socks.append(s)
        check(st == ST_REFUSED,
              "a proof for another lane count is refused (got %r)" % (st,))
        st, s = join(port, tok, 1, proof(1), g)
        socks.append(s)
        check(st == ST_OK, "lane 1 with its proof joins (got %r)" % (st,))
        st, s = join(port, tok, 1, proof(1), g)
        socks.append(s)
        check(st == ST_REFUSED, "lane 1 again is refused (got %r)" % (st,))
        for lane in (2, 3):
            st, s = join(port, tok, lane, proof(lane), g)
            socks.append(s)
            check(st == ST_OK, "lane %d joins (got %r)" % (lane, st))
        lanes = c.conn.expect(peer.LANES)
        check(lanes.up == 4, "LANES says all 4 go on (got %r)" % (lanes.up,))
        ring = c.conn.expect(peer.RING)
        check(ring.slots == 8, "RING once all lanes joined")
        st, s = join(port, tok, 2, proof(2), g)
        socks.append(s)
        check(st == ST_REFUSED, "a join after RING is refused (got %r)"
              % (st,))
        # the other session slot is still free: a real copy with lanes
        src = os.path.join(d, "src")
        with open(src, "wb") as f:
            f.write(os.urandom(3 << 20))
        r = subprocess.run(
            [rdcp, "--transport", "tcp", "--port", str(port),
             "--key-file", keyfile, "--streams", "2", src,
             "127.0.0.1::after"], stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, timeout=60)
        check(r.returncode == 0, "a real copy meanwhile: exit %d %s"
              % (r.returncode, r.stdout.decode(errors="replace")[-300:]))
        c.close()
        for s in socks:
            s.close()
        with open(src, "rb") as a:
            want = a.read()
        got = open(os.path.join(root, "after"), "rb").read() \
            if os.path.exists(os.path.join(root, "after")) else b""
        check(got == want, "the copy is byte-identical")
        preauth_flood(rx, port, key, g)
    finally:
        rx.terminate()
        try:
            rx.wait(10)
        except subprocess.TimeoutExpired:
            rx.kill()
    text = open(log).read()
    for what in ("wrong proof of the session key", "that lane joined already",
                 "the session has fewer", "no session waits for it",
                 "2 streams from"):
        check(what in text, "the receiver logged '%s'" % what)
    # The replay on a receiver of its own: the wrong proofs above hold
    # this address off (2 failures), which would refuse the copy anyway.
    log2 = os.path.join(d, "rx-replay.log")
    rx = subprocess.Popen(
        [rdcp, "--listen", "-v", "--transport", "tcp", "--bind", "127.0.0.1",
         "--port", str(port + 1), "--key-file", keyfile, "--root", root],
        stdout=open(log2, "w"), stderr=subprocess.STDOUT)
    try:
        end = time.monotonic() + 10
        while "listening" not in open(log2).read():
            if time.monotonic() > end or rx.poll() is not None:
                check(False, "second receiver listening")
                break
            time.sleep(0.05)
        else:
            replay(port + 1, key)
    finally:
        rx.terminate()
        try:
            rx.wait(10)
        except subprocess.TimeoutExpired:
            rx.kill()
    text += open(log2).read()
    check("held off" not in open(log2).read(),
          "the replay was judged, not held off")
    if failed:
        sys.stdout.write(text[-3000:])


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    main(*sys.argv[1:])
    sys.exit(1 if failed else 0)
