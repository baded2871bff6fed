#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# A misbehaving rdcp peer for tests/e2e/faults.sh: raw TCP clients that
# connect to a receiver on 127.0.0.1 and then say nothing, say garbage,
# or complete the 24-byte connect exchange of cm/tcp.c and then send
# malformed frames. Each waits (bounded) for the receiver to drop it and
# prints one line: what it sent, what came back, and after how long the
# receiver closed. Exit 0 when the receiver closed the connection, 1 when
# it was still open at the deadline, 2 on a setup error (cannot connect,
# the connect exchange failed).
#
#   faults_peer.py PORT MODE [WAIT_S] [COUNT]
#
# MODE: silent, junk, hs-silent, ctrl-random, bad-op, write-early,
# oversize, bad-ack, hello-junk, bad-auth (a key guesser: a valid HELLO
# that claims a key, then an AUTH with a random MAC), fuzz (COUNT sessions
# of random frames).
#
# Against the receiver's listener (issue #16):
#   paths   a pull HELLO without a key (a --no-auth receiver) naming COUNT
#           SRCs in 4096 bytes, "x" as many as fit, then empty ones;
#           prints the receiver's ERROR text
#   geom    connect data asking for control buffers and credits COUNT
#           ("65536/256"); prints the status the receiver answered
#   hold    COUNT silent connections at once, each held until the receiver
#           closes it or WAIT_S; exit 0 when the receiver closed them all
#   hold-hs the same, each silent after the connect exchange (or refused)
#   flood   for WAIT_S seconds, keeps COUNT connections open (silent,
#           silent after the connect exchange, or silent after a HELLO in
#           turn), opening a new one whenever the receiver closes one;
#           prints how many were made and how many refused busy; exit 0
# RDCP_PEER_SRC=ADDR connects from ADDR (127.0.0.2: another client).
import os
import random
import socket
import struct
import sys
import threading
import time

# The framing and private data come from the shared peer library.
from peer import CTRL_SIZE, FR_SEND, FR_WRITE, MAGIC, VERSION, frame
from peer import pd_encode as pd

ADDR = "127.0.0.1"


def connect(wait):
    src = os.environ.get("RDCP_PEER_SRC")
    s = socket.create_connection((ADDR, PORT), timeout=wait,
                                 source_address=(src, 0) if src else None)
    s.settimeout(wait)
    return s


def answer(s):
    """The receiver's 24-byte connect answer: (status, raw bytes)."""
    ans = b""
    while len(ans) < 24:
        b = s.recv(24 - len(ans))
        if not b:
            raise OSError("receiver closed during the connect exchange")
        ans += b
    magic, ver, st = struct.unpack(">IHH", ans[:8])
    if magic != MAGIC or ver != VERSION:
        raise OSError("bad connect answer %s" % ans.hex())
    return st, ans


def handshake(s, data=None):
    """Sends our private data, reads and checks the receiver's answer."""
    s.sendall(data or pd())
    st, ans = answer(s)
    if st != 0:
        raise OSError("bad connect answer %s" % ans.hex())


def wait_close(s, t0, wait):
    """Reads and discards until EOF/reset or wait seconds: (closed, got)."""
    got = 0
    deadline = t0 + wait
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return False, got
        s.settimeout(left)
        try:
            b = s.recv(65536)
        except socket.timeout:
            return False, got
        except OSError:
            return True, got
        if not b:
            return True, got
        got += len(b)


def ctrl(mtype, body, ctrl_ack=0):
    """One control message (transfer/wire/wire.c): 16-byte header + body."""
    return struct.pack(">B3xIII", mtype, 16 + len(body), ctrl_ack, 0) + body


def hello(rng, dest=b"guess"):
    """A push HELLO with crc32, claiming a key (features 1)."""
    body = struct.pack(">HBBIIIQ", 1, 1, 0, 0, 1, 65536, 0) + rng.randbytes(32)
    paths = dest + b"\0"
    # no filters, one lane, no --sync
    return ctrl(1, body + struct.pack(">HH", 1, len(paths)) + paths +
                struct.pack(">HHBB", 0, 0, 1, 0))


def pull_hello(npaths):
    """A pull HELLO without a key (features 0) naming npaths SRCs in 4096
    bytes: as many "x" as fit first, then empty ones."""
    body = struct.pack(">HBBIIIQ", 2, 1, 0, 0, 0, 65536, 0) + bytes(32)
    named = max(0, min(npaths, 4096 - npaths))
    paths = b"x\0" * named + b"\0" * (npaths - named)
    # no filters, one lane, no --sync
    return ctrl(1, body + struct.pack(">HH", npaths, len(paths)) + paths +
                struct.pack(">HHBB", 0, 0, 1, 0))


def read_frame(s):
    """One frame's (op, payload); raises OSError on EOF."""
    def full(n):
        b = b""
        while len(b) < n:
            c = s.recv(n - len(b))
            if not c:
                raise OSError("receiver closed")
            b += c
        return b
    op, n, _, _ = struct.unpack(">B3xIII", full(16))
    return op, full(n + (64 if op == FR_WRITE else 0))


def send_quiet(s, data):
    """Sends, ignoring a receiver that already dropped us."""
    try:
        s.sendall(data)
    except OSError:
        pass


def junk_ctrl(rng):
    """Random control-message bytes whose length field cannot match."""
    n = rng.randint(16, CTRL_SIZE)
    b = bytearray(rng.randbytes(n))
    struct.pack_into(">I", b, 4, n + 1 + rng.randint(0, 1000))
    return bytes(b)


def one(mode, wait, rng):
    """Runs one session of mode; returns (closed, sent, got, seconds)."""
    s = connect(wait)
    t0 = time.monotonic()
    sent = 0
    try:
        if mode == "silent":
            pass
        elif mode == "junk":
            first = bytearray(rng.randbytes(24))
            if first[:4] == b"RDCP":
                first[0] ^= 0xff
            data = bytes(first) + rng.randbytes(4096)
            send_quiet(s, data)
            sent = len(data)
        else:
            handshake(s)
            t0 = time.monotonic()
            if mode == "hs-silent":
                data = b""
            elif mode == "ctrl-random":
                data = b"".join(frame(FR_SEND, junk_ctrl(rng))
                                for _ in range(3))
            elif mode == "bad-op":
                data = struct.pack(">B3xIII", rng.choice([0, 3, 7, 255]),
                                   100, 0, 0) + rng.randbytes(100)
            elif mode == "write-early":
                data = frame(FR_WRITE, rng.randbytes(4096), imm=1, slot=0)
            elif mode == "oversize":
                data = frame(FR_SEND, rng.randbytes(CTRL_SIZE + 1))
            elif mode == "bad-ack":
                # A well-formed CREDIT acking 1000 messages never sent.
                data = frame(FR_SEND, struct.pack(">B3xIII", 10, 16,
                                                  1000, 0))
            elif mode == "hello-junk":
                n = rng.randint(60, 600)
                body = rng.randbytes(n - 16)
                data = frame(FR_SEND, struct.pack(">B3xIII", 1, n, 0, 0)
                             + body)
            elif mode == "bad-auth":
                s.sendall(frame(FR_SEND, hello(rng)))
                while True:  # skip keepalives (CREDIT) up to the WELCOME
                    op, msg = read_frame(s)
                    if op == FR_SEND and msg[0] == 2:
                        break
                data = frame(FR_SEND, ctrl(11, rng.randbytes(32), 1))
            elif mode == "fuzz":
                parts = []
                for _ in range(rng.randint(1, 4)):
                    k = rng.randint(0, 3)
                    if k == 0:
                        parts.append(frame(FR_SEND, junk_ctrl(rng)))
                    elif k == 1:
                        parts.append(rng.randbytes(rng.randint(1, 64)))
                    elif k == 2:
                        n = rng.randint(16, 300)
                        hdr = struct.pack(">B3xIII", rng.randint(0, 13), n,
                                          rng.getrandbits(32),
                                          rng.getrandbits(32))
                        parts.append(frame(FR_SEND,
                                           hdr + rng.randbytes(n - 16)))
                    else:
                        parts.append(frame(FR_WRITE, rng.randbytes(64),
                                           imm=rng.getrandbits(32),
                                           slot=rng.randint(0, 8)))
                data = b"".join(parts)
            else:
                raise SystemExit("unknown mode %s" % mode)
            send_quiet(s, data)
            sent = len(data)
            if mode == "fuzz":
                # A frame may be cut short: EOF ends the receiver's wait.
                try:
                    s.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
        closed, got = wait_close(s, t0, wait)
        return closed, sent, got, time.monotonic() - t0
    finally:
        s.close()


def paths(wait, npaths):
    """A pull HELLO of npaths empty SRCs: (closed, the ERROR text)."""
    s = connect(wait)
    t0 = time.monotonic()
    said = "no ERROR"
    try:
        handshake(s)
        s.sendall(frame(FR_SEND, pull_hello(npaths)))
        while True:
            op, msg = read_frame(s)
            if op == FR_SEND and msg[0] == 9:  # ERROR
                n = struct.unpack(">H", msg[24:26])[0]
                said = "ERROR: " + msg[26:26 + n].decode(errors="replace")
                break
        closed, _ = wait_close(s, t0, wait)
    except OSError as e:
        closed = True
        said += " (then %s)" % e
    finally:
        s.close()
    return closed, said


def geom(wait, what):
    """Connect data asking for CTRL/CREDITS: the status answered."""
    size, credits = (int(x) for x in what.split("/"))
    s = connect(wait)
    try:
        data = struct.pack(">IHHIHHI4x", MAGIC, VERSION, 0, size, credits,
                           4, 65536 + 64)
        s.sendall(data)
        st, _ = answer(s)
        closed, _ = wait_close(s, time.monotonic(), wait)
    finally:
        s.close()
    return st, closed


def hold(wait, count, hs):
    """count silent connections at once (hs: after the connect exchange):
    how many the receiver closed, and the slowest close in seconds."""
    socks = [connect(wait) for _ in range(count)]
    t0 = time.monotonic()
    res = [None] * count

    def one(i):
        try:
            if hs:
                socks[i].sendall(pd())
                answer(socks[i])
            closed, _ = wait_close(socks[i], t0, wait)
        except OSError:
            closed = True
        res[i] = time.monotonic() - t0 if closed else None
    ts = [threading.Thread(target=one, args=(i,)) for i in range(count)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for c in socks:
        c.close()
    done = [r for r in res if r is not None]
    return len(done), max(done) if done else 0.0


def flood(wait, count, rng):
    """count connections kept open for wait seconds: (made, busy)."""
    end = time.monotonic() + wait
    made = [0]
    busy = [0]
    lock = threading.Lock()

    def worker(k):
        while time.monotonic() < end:
            try:
                s = connect(min(5.0, max(0.1, end - time.monotonic())))
            except OSError:
                time.sleep(0.05)
                continue
            with lock:
                made[0] += 1
            try:
                kind = (made[0] + k) % 3
                if kind:
                    s.sendall(pd())
                    st, _ = answer(s)
                    if st == 3:
                        with lock:
                            busy[0] += 1
                    elif st == 0 and kind == 2:
                        s.sendall(frame(FR_SEND, hello(rng)))
                wait_close(s, time.monotonic(),
                           max(0.0, end - time.monotonic()))
            except OSError:
                pass
            finally:
                s.close()
    ts = [threading.Thread(target=worker, args=(k,)) for k in range(count)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return made[0], busy[0]


def main():
    global PORT
    if len(sys.argv) < 3:
        sys.exit(__doc__ or "usage: faults_peer.py PORT MODE [WAIT] [N]")
    PORT = int(sys.argv[1])
    mode = sys.argv[2]
    wait = float(sys.argv[3]) if len(sys.argv) > 3 else 10.0
    count = int(sys.argv[4]) if len(sys.argv) > 4 and \
        sys.argv[4].isdigit() else 1
    seed = int.from_bytes(os.urandom(4), "big")
    rng = random.Random(seed)
    try:
        if mode == "paths":
            closed, said = paths(wait, int(sys.argv[4]))
            print("paths: %s; %s" % (said, "closed" if closed
                                       else "STILL OPEN"))
            return 0 if closed else 1
        if mode == "geom":
            st, closed = geom(wait, sys.argv[4])
            print("geom %s: status %d, %s" % (sys.argv[4], st,
                                              "closed" if closed
                                              else "STILL OPEN"))
            return 0 if closed else 1
        if mode in ("hold", "hold-hs"):
            n, slowest = hold(wait, count, mode == "hold-hs")
            print("%s: %d of %d closed by the receiver, slowest after "
                  "%.2f s" % (mode, n, count, slowest))
            return 0 if n == count else 1
        if mode == "flood":
            made, busy = flood(wait, count, rng)
            print("flood: %d connections made, %d refused busy"
                  % (made, busy))
            return 0
        if mode == "fuzz":
            open_ = 0
            worst = 0.0
            for _ in range(count):
                closed, _, _, secs = one(mode, wait, rng)
                open_ += not closed
                worst = max(worst, secs)
            print("fuzz: %d sessions (seed %d), %d left open, slowest "
                  "close %.2f s" % (count, seed, open_, worst))
            return 0 if open_ == 0 else 1
        closed, sent, got, secs = one(mode, wait, rng)
    except OSError as e:
        print("%s: setup failed: %s" % (mode, e))
        return 2
    print("%s: sent %d bytes, got %d, %s after %.2f s" %
          (mode, sent, got, "closed" if closed else "STILL OPEN", secs))
    return 0 if closed else 1


if __name__ == "__main__":
    sys.exit(main())
