#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""-H and -D against real rdcp processes over TCP, as a malicious peer.

    links_peer.py RDCP PORT KEYFILE DIR

A malicious client (peer.py) pushes to `RDCP --listen` (key KEYFILE, root
DIR/root, without --allow-devices; on 127.0.0.1:PORT): first an honest -H
tree (a LINKED file and a hard link to it: one inode), then hard links to
a name outside DEST, to an absolute one, to a file reached through a
symlink it made (never sent LINKED), a LINKED file placed through that
symlink with a link to it, a device node (--devices) the receiver may not
make, a device node the session did not ask for, and one whose mode is no
device's. Then a malicious server (on PORT + 1) serves `RDCP -r -H` a
hard link outside DEST, and `RDCP -r` a device node it did not ask for.
Every refusal is a protocol error (the receiver's ERROR, the client's exit
5) before anything is made, and nothing appears outside DEST. Prints one
line per check; exit 0 when all hold, 1 when one failed, 2 on a setup
error.
"""
import os
import stat
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer  # noqa: E402
from peer_wire import (F_DEST_DIR, F_DEVICES, F_HARD_LINKS,  # noqa: E402
                       F_RECURSIVE, KIND_DIR, KIND_HARDLINK, KIND_SPECIAL,
                       KIND_SYMLINK, PeerError, RemoteError, rdev)

EXIT_PROTOCOL = 5
failed = []


def check(ok, what):
    print("%s - %s" % ("ok" if ok else "FAILED", what))
    if not ok:
        failed.append(what)


def tree(*entries):
    """A directory t, then entries beneath it."""
    return [peer.Entry("t", kind=KIND_DIR, mode=0o755)] + list(entries)


def push(port, key, flags, entries):
    """One push session to in/: its FILE_RESULTs, and the receiver's
    ERROR message (b"" when it ended well) and NOTICEs."""
    c = peer.Client(port, key=key).connect(slots=8, chunk=65536)
    why = b""
    try:
        c.handshake(peer.PUSH, ["in/"],
                    flags=F_DEST_DIR | F_RECURSIVE | flags)
        c.expect_ring()
        c.run_source(entries)
    except RemoteError as e:
        why = e.msg.message
    finally:
        c.close()
    return c, why


def refused(why, words, what):
    check(words.encode() in why, "%s: refused (%s)" %
          (what, why.decode(errors="replace") or "not refused"))


def pushes(port, key, root, outside):
    t = os.path.join(root, "in", "t")
    c, why = push(port, key, F_HARD_LINKS, tree(
        peer.Entry("t/f", b"linked data", linked=True),
        peer.Entry("t/g", kind=KIND_HARDLINK, link="t/f")))
    ok = (not why and os.path.exists(os.path.join(t, "g")) and
          os.stat(os.path.join(t, "g")).st_ino ==
          os.stat(os.path.join(t, "f")).st_ino)
    check(ok, "an honest -H push: the LINKED file and its link are one "
          "inode (%s)" % why.decode(errors="replace"))
    for link, words in (("../../../escape", "not a path beneath DEST"),
                        ("/etc/passwd", "not a path beneath DEST")):
        _, why = push(port, key, F_HARD_LINKS, tree(
            peer.Entry("t/f", b"x", linked=True),
            peer.Entry("t/l", kind=KIND_HARDLINK, link=link)))
        refused(why, words, "a hard link to '%s'" % link)
        check(not os.path.lexists(os.path.join(t, "l")),
              "no 't/l' made for a link to '%s'" % link)
    check(not os.path.lexists(os.path.join(root, "..", "escape")),
          "nothing made outside the root")
    secret = os.path.join(outside, "secret")
    _, why = push(port, key, F_HARD_LINKS, tree(
        peer.Entry("t/s", kind=KIND_SYMLINK, link=outside),
        peer.Entry("t/l", kind=KIND_HARDLINK, link="t/s/secret")))
    refused(why, "did not send before as a file with links",
            "a hard link through a symlink the peer made to a file outside")
    check(os.stat(secret).st_nlink == 1 and
          not os.path.lexists(os.path.join(t, "l")),
          "the file outside has no new name")
    _, why = push(port, key, F_HARD_LINKS, tree(
        peer.Entry("t/s", kind=KIND_SYMLINK, link=outside),
        peer.Entry("t/s/planted", b"x", linked=True),
        peer.Entry("t/l2", kind=KIND_HARDLINK, link="t/s/planted")))
    check(sorted(os.listdir(outside)) == ["secret"] and
          not os.path.lexists(os.path.join(t, "l2")),
          "a LINKED file placed through that symlink and its link: nothing "
          "outside, no link (%s)" % why.decode(errors="replace"))
    c, why = push(port, key, F_DEVICES, tree(
        peer.Entry("t/disk", kind=KIND_SPECIAL, mode=stat.S_IFBLK | 0o666,
                   dev=rdev(8, 0))))
    check(not why and not os.path.lexists(os.path.join(t, "disk")),
          "a block device to a receiver without --allow-devices: not made "
          "(%s)" % why.decode(errors="replace"))
    check(any(b"--allow-devices" in n for n in c.notices),
          "the client is told (NOTICE): %r" % c.notices)
    _, why = push(port, key, 0, tree(
        peer.Entry("t/null", kind=KIND_SPECIAL, mode=stat.S_IFCHR | 0o666,
                   dev=rdev(1, 3))))
    refused(why, "which --devices did not ask for",
            "a device node the session did not ask for")
    _, why = push(port, key, F_DEVICES, tree(
        peer.Entry("t/odd", kind=KIND_SPECIAL, mode=stat.S_IFREG | 0o644,
                   dev=rdev(8, 0))))
    check(why != b"" and not os.path.lexists(os.path.join(t, "odd")),
          "a special entry of a regular file's mode: refused (%s)"
          % why.decode(errors="replace"))


def serve(rdcp, port, keyfile, key, args, dest, entries):
    """A malicious server for one `RDCP ARGS 127.0.0.1::t DEST/` pull:
    the client's exit status and its last words."""
    srv = peer.Server(port, key=key)
    client = subprocess.Popen(
        [rdcp, "--transport", "tcp", "--port", str(port), "--key-file",
         keyfile, "--timeout", "10"] + args + ["127.0.0.1::t", dest + "/"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        srv.accept()
        srv.handshake()
        srv.expect_ring()
        srv.run_source(entries)
    except PeerError:
        pass  # the client's ERROR, or its going: its exit says which
    finally:
        srv.close()
    try:
        _, err = client.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        client.kill()
        _, err = client.communicate()
    return client.returncode, err.decode(errors="replace").strip()


def pulls(rdcp, port, keyfile, key, d):
    dest = os.path.join(d, "pulled")
    os.makedirs(dest, exist_ok=True)
    rc, err = serve(rdcp, port, keyfile, key, ["-r", "-H"], dest, tree(
        peer.Entry("t/f", b"x", linked=True),
        peer.Entry("t/l", kind=KIND_HARDLINK, link="../escape")))
    check(rc == EXIT_PROTOCOL and "not a path beneath DEST" in err,
          "-H pull, a server's hard link outside DEST: exit %d (%s)"
          % (rc, err[-200:]))
    check(not os.path.lexists(os.path.join(d, "escape")) and
          not os.path.lexists(os.path.join(dest, "t", "l")),
          "nothing linked outside DEST")
    rc, err = serve(rdcp, port + 1, keyfile, key, ["-r"], dest, tree(
        peer.Entry("t/disk", kind=KIND_SPECIAL, mode=stat.S_IFBLK | 0o666,
                   dev=rdev(8, 0))))
    check(rc == EXIT_PROTOCOL and "--devices did not ask for" in err,
          "a pull without -D, a server's device node: exit %d (%s)"
          % (rc, err[-200:]))
    check(not os.path.lexists(os.path.join(dest, "t", "disk")),
          "no device node made")


def main(rdcp, port, keyfile, d):
    port = int(port)
    root = os.path.join(d, "root")
    outside = os.path.join(d, "outside")
    os.makedirs(os.path.join(root, "in"), exist_ok=True)
    os.makedirs(outside, exist_ok=True)
    with open(os.path.join(outside, "secret"), "w") as f:
        f.write("not the peer's\n")
    key = peer.load_key(keyfile)
    log = os.path.join(d, "rx.log")
    rx = subprocess.Popen(
        [rdcp, "--listen", "-v", "--transport", "tcp", "--bind", "127.0.0.1",
         "--port", str(port), "--key-file", keyfile, "--root", root],
        stdout=open(log, "w"), stderr=subprocess.STDOUT)
    try:
        end = time.monotonic() + 10
        while "listening" not in open(log).read():
            if time.monotonic() > end or rx.poll() is not None:
                print("error: the receiver did not start: %s"
                      % open(log).read())
                return 2
            time.sleep(0.05)
        pushes(port, key, root, outside)
    except (OSError, PeerError) as e:
        check(False, "the pushes ran: %s" % e)
    finally:
        rx.terminate()
        try:
            rx.wait(10)
        except subprocess.TimeoutExpired:
            rx.kill()
    try:
        pulls(rdcp, port + 1, keyfile, key, d)
    except (OSError, PeerError) as e:
        check(False, "the pulls ran: %s" % e)
    print("# receiver's log:")
    for line in open(log).read().splitlines()[-20:]:
        print("#   " + line)
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    sys.exit(main(*sys.argv[1:]))
