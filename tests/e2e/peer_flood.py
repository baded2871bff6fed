#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""A peer that announces N regular files (FILE) and never ends one, or
sends N file names and never waits for the receiver to take them.

  peer_flood.py push PORT KEYFILE N        a client pushing into "out/"
  peer_flood.py push-ask PORT KEYFILE N    the same with -n (asks first:
                                           each FILE waits for its HAVE);
                                           prints WELCOME's WIDE bit first
  peer_flood.py serve-pull PORT KEYFILE N  a server answering one pull of
                                           "-r x": the directory x, then x/f0...
                                           ("listening on PORT" once it is)
  peer_flood.py names PORT KEYFILE N       a client pulling with a file list
                                           beneath "x" (HELLO flag LIST): N
                                           names of 1000 bytes in NAMES, no
                                           NAMES_ACK waited for

The real rdcp on the other side must end the session with a protocol error
(ERROR, class 5) long before N: prints "refused after K files: MESSAGE" and
exits 0 then (or when it hung up before the ERROR was read: the caller
checks its log), 1 if it took all N or the session ended another way.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer  # noqa: E402


def flood(s, n, top=None):
    try:
        pre = ""
        if top:
            # A pull only takes what it asked for: the tree of its SRC.
            s.send_file(peer.Entry(top, b"", kind=peer.KIND_DIR))
            pre = top + "/"
        for i in range(n):
            s.send_file(peer.Entry(pre + "f%d" % i, b"x"))
        s.pump(lambda: False, timeout=10)
    except peer.RemoteError as e:
        print("refused after %d files: class %d: %s" %
              (s.next_id, e.msg.klass,
               e.msg.message.decode("utf-8", "replace")))
        return 0 if e.msg.klass == 5 else 1
    except peer.PeerError as e:
        # Refused and hung up before its ERROR was read: the caller
        # checks the other side's words.
        print("after %d files: %s" % (s.next_id, e))
        return 0 if s.next_id < n and "closed" in str(e) else 1
    print("all %d files announced and not refused" % n)
    return 1


def flood_names(s, n):
    """Names past the receiver's window: its buffer must not follow."""
    sent = 0
    try:
        while sent < n:
            k = min(8, n - sent)  # 8 names of 1000 bytes fill a NAMES
            s.send_names(["%07d" % (sent + i) + "n" * 993 for i in range(k)])
            sent += k
        s.pump(lambda: False, timeout=10)
    except peer.RemoteError as e:
        print("refused after %d names: class %d: %s" %
              (sent, e.msg.klass, e.msg.message.decode("utf-8", "replace")))
        return 0 if e.msg.klass == 5 else 1
    except peer.PeerError as e:
        print("after %d names: %s" % (sent, e))
        return 0 if sent < n and "closed" in str(e) else 1
    print("all %d names taken and not refused" % n)
    return 1


def main(argv):
    mode, port, keyfile, n = argv[1], int(argv[2]), argv[3], int(argv[4])
    key = peer.load_key(keyfile)
    if mode == "names":
        s = peer.Client(port, key=key).connect()
        s.handshake(peer.PULL, ["x"], flags=peer.F_LIST)
        s.send_ring()
        try:
            return flood_names(s, n)
        finally:
            s.close()
    if mode in ("push", "push-ask"):
        s = peer.Client(port, key=key).connect()
        w = s.handshake(peer.PUSH, ["out/"], flags=peer.F_NO_CLOBBER
                        if mode == "push-ask" else 0)
        print("wide %d" % bool(w.features & peer.FEAT_WIDE), flush=True)
        s.expect_ring()
    else:
        s = peer.Server(port, key=key)
        print("listening on %d" % port, flush=True)
        s.accept(timeout=30)
        s.handshake()
        s.expect_ring()
    try:
        return flood(s, n, None if mode.startswith("push") else "x")
    finally:
        s.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
