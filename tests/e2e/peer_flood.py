#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""A peer that announces N regular files (FILE) and never ends one.

  peer_flood.py push PORT KEYFILE N        a client pushing into "out/"
  peer_flood.py serve-pull PORT KEYFILE N  a server answering one pull of
                                           "-r x": the directory x, then x/f0...

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


def main(argv):
    mode, port, keyfile, n = argv[1], int(argv[2]), argv[3], int(argv[4])
    key = peer.load_key(keyfile)
    if mode == "push":
        s = peer.Client(port, key=key).connect()
        s.handshake(peer.PUSH, ["out/"])
        s.expect_ring()
    else:
        s = peer.Server(port, key=key)
        s.accept(timeout=30)
        s.handshake()
        s.expect_ring()
    try:
        return flood(s, n, None if mode == "push" else "x")
    finally:
        s.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
