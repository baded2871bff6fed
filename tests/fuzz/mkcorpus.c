/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Writes the seed corpora of the fuzz targets: OUT/wire/ gets valid
 * encodings of every control message (made with wire_encode()), valid
 * 64-byte slot headers, packed slot payloads (records made with
 * wire_pack_put()), tagged messages (protocol 3) and a few malformed
 * inputs; OUT/path/ gets valid
 * and hostile peer paths. The committed tests/fuzz/corpus/ is its output:
 *
 *   cc -std=c11 -D_GNU_SOURCE -I. -o build/mkcorpus tests/fuzz/mkcorpus.c \
 *       build/librdcp.a $(pkg-config --libs libibverbs librdmacm zlib \
 *       libcrypto libisal) -pthread
 *   build/mkcorpus tests/fuzz/corpus
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "transfer/wire/wire.h"
#include "util/path.h"

static const char *out;
static int errs;

static void put(const char *dir, const char *name, const void *p, size_t n)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s/%s", out, dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(p, 1, n, f) != n || fclose(f)) {
		perror(path);
		errs++;
	}
}

/* Encodes m as wire/NAME; returns its length (buf keeps the bytes). */
static int msg(const char *name, const struct wire_msg *m, uint8_t *buf)
{
	int n = wire_encode(m, buf, WIRE_CTRL_SIZE);

	if (n < 0) {
		fprintf(stderr, "%s: wire_encode: %d\n", name, n);
		errs++;
		return 0;
	}
	put("wire", name, buf, (size_t)n);
	return n;
}

/* Patches the total length in a control header. */
static void set_total(uint8_t *p, size_t n)
{
	p[4] = (uint8_t)(n >> 24);
	p[5] = (uint8_t)(n >> 16);
	p[6] = (uint8_t)(n >> 8);
	p[7] = (uint8_t)n;
}

static void fill(uint8_t *p, size_t n, uint8_t seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (uint8_t)(seed + i * 7);
}

/* Appends record r and its data at *off of p (a packed slot's payload). */
static void pack_rec(uint8_t *p, size_t *off, const struct wire_pack_rec *r)
{
	size_t n = wire_pack_put(p + *off, r);

	memcpy(p + *off + n, r->data, r->size);
	*off += n + r->size;
}

/* Packed slot payloads: records back to back (fuzz_wire reads them so). */
static void pack_seeds(void)
{
	static const char text[] = "hello, packed world\n";
	static const char why[] = "cannot open 'dir/gone': No such file";
	static uint8_t p[1024];
	struct wire_pack_rec r;
	size_t off = 0;
	int n;

	/* a file with its CRC32, then one the source could not read */
	memset(&r, 0, sizeof(r));
	r.file_id = 2;
	r.mode = 0100644;
	r.mtime_sec = 1700000000;
	r.mtime_nsec = 123456789;
	r.atime_sec = 1700000001;
	r.path = "dir/small.txt";
	r.path_len = (uint16_t)strlen(r.path);
	r.data = (const uint8_t *)text;
	r.size = sizeof(text) - 1;
	n = wire_pack_digest(WIRE_CSUM_CRC32, r.data, r.size, r.digest);
	if (n < 0)
		errs++;
	r.digest_len = n < 0 ? 0 : (uint8_t)n;
	pack_rec(p, &off, &r);
	memset(&r, 0, sizeof(r));
	r.file_id = 3;
	r.flags = WIRE_PACK_ABORT;
	r.status = -ENOENT;
	r.path = "dir/gone";
	r.path_len = (uint16_t)strlen(r.path);
	r.data = (const uint8_t *)why;
	r.size = sizeof(why) - 1;
	pack_rec(p, &off, &r);
	put("wire", "pack-two", p, off);
	put("wire", "bad-pack-truncated", p, off - 1);

	/* SHA-256: an empty file, then one byte; mtime before 1970 */
	off = 0;
	memset(&r, 0, sizeof(r));
	r.file_id = 7;
	r.mode = 0100600;
	r.mtime_sec = -1;
	r.mtime_nsec = 999999999;
	r.path = "e";
	r.path_len = 1;
	r.data = (const uint8_t *)"";
	n = wire_pack_digest(WIRE_CSUM_SHA256, r.data, r.size, r.digest);
	if (n < 0)
		errs++;
	r.digest_len = n < 0 ? 0 : (uint8_t)n;
	pack_rec(p, &off, &r);
	r.file_id = 8;
	r.path = "sub/one";
	r.path_len = (uint16_t)strlen(r.path);
	r.data = (const uint8_t *)"1";
	r.size = 1;
	n = wire_pack_digest(WIRE_CSUM_SHA256, r.data, r.size, r.digest);
	if (n < 0)
		errs++;
	r.digest_len = n < 0 ? 0 : (uint8_t)n;
	pack_rec(p, &off, &r);
	put("wire", "pack-sha256", p, off);
}

static void wire_seeds(void)
{
	static struct wire_msg m;
	static uint8_t buf[WIRE_CTRL_SIZE], bad[WIRE_CTRL_SIZE];
	struct wire_slot_hdr h;
	uint8_t slot[WIRE_SLOT_HDR];
	int n;

	memset(&m, 0, sizeof(m));
	m.type = WIRE_HELLO;
	m.u.hello.role = WIRE_PUSH;
	m.u.hello.csum = WIRE_CSUM_CRC32;
	m.u.hello.flags = WIRE_HELLO_FSYNC | WIRE_HELLO_DEST_DIR;
	m.u.hello.features = WIRE_FEAT_AUTH;
	m.u.hello.chunk_size = 1 << 20;
	fill(m.u.hello.nonce, WIRE_NONCE_LEN, 1);
	if (wire_hello_add_path(&m.u.hello, "backups/2024/"))
		errs++;
	n = msg("hello-push", &m, buf);

	/* malformed variants of that HELLO */
	memcpy(bad, buf, (size_t)n);
	put("wire", "bad-hello-truncated", bad, (size_t)n - 3);
	set_total(bad, (size_t)n + 1); /* total length one too many */
	memcpy(bad + n, "x", 1);
	put("wire", "bad-hello-trailing", bad, (size_t)n + 1);
	memcpy(bad, buf, (size_t)n);
	bad[n - 9] = '\0'; /* NUL inside the path (4 filter bytes after) */
	put("wire", "bad-hello-nul-in-path", bad, (size_t)n);
	memcpy(bad, buf, (size_t)n);
	bad[0] = 0;
	put("wire", "bad-type-0", bad, (size_t)n);
	bad[0] = WIRE_TYPE_MAX;
	put("wire", "bad-type-max", bad, (size_t)n);

	/* protocol 3: tagged messages (the tag's bytes are arbitrary here) */
	{
		static struct wire_msg t;
		int tn;

		memset(&t, 0, sizeof(t));
		t.type = WIRE_CREDIT;
		t.ctrl_ack = 3;
		t.slot_ack = 9;
		tn = wire_encode(&t, bad, WIRE_CTRL_SIZE);
		tn = tn < 0 ? tn : wire_tag_append(bad, (size_t)tn, WIRE_CTRL_SIZE);
		if (tn < 0)
			errs++;
		else {
			fill(bad + tn - WIRE_TAG_LEN, WIRE_TAG_LEN, 7);
			put("wire", "tagged-credit", bad, (size_t)tn);
			bad[1] = 0; /* a tag without the flag: trailing bytes */
			put("wire", "bad-tag-unflagged", bad, (size_t)tn);
			bad[1] = 3; /* an unknown header flag */
			put("wire", "bad-header-flags", bad, (size_t)tn);
			bad[1] = WIRE_CTRL_TAGGED; /* too short for a tag */
			set_total(bad, WIRE_CTRL_HDR + 4);
			put("wire", "bad-tag-short", bad, WIRE_CTRL_HDR + 4);
		}
		memcpy(bad, buf, (size_t)n);
		tn = wire_tag_append(bad, (size_t)n, WIRE_CTRL_SIZE);
		if (tn < 0)
			errs++;
		else {
			fill(bad + n, WIRE_TAG_LEN, 8);
			put("wire", "tagged-hello", bad, (size_t)tn);
		}
	}

	/* --direct: the client's O_DIRECT choice reaches the receiver */
	m.u.hello.flags = WIRE_HELLO_DIRECT | WIRE_HELLO_SPARSE;
	msg("hello-push-direct", &m, buf);

	/* --sync checksum (-a's mtime is the byte 3) */
	m.u.hello.flags = WIRE_HELLO_RECURSIVE | WIRE_HELLO_PRESERVE;
	m.u.hello.sync = WIRE_SYNC_CHECKSUM;
	msg("hello-push-sync", &m, buf);
	m.u.hello.sync = WIRE_SYNC_NONE;

	m.u.hello.role = WIRE_PULL;
	m.u.hello.csum = WIRE_CSUM_SHA256;
	m.u.hello.flags = WIRE_HELLO_RECURSIVE | WIRE_HELLO_PRESERVE |
			  WIRE_HELLO_RESUME | WIRE_HELLO_ENCRYPT |
			  WIRE_HELLO_COMPRESS;
	m.u.hello.level = 6;
	m.u.hello.features = 0;
	m.u.hello.npaths = 0;
	m.u.hello.paths_len = 0;
	{
		char longp[4095];

		memset(longp, 'p', sizeof(longp) - 1);
		longp[sizeof(longp) - 1] = '\0';
		if (wire_hello_add_path(&m.u.hello, longp))
			errs++;
	}
	if (wire_hello_add_filter(&m.u.hello, true, "*/") ||
	    wire_hello_add_filter(&m.u.hello, false, "/build/**.o"))
		errs++;
	msg("hello-pull-longpath", &m, buf);
	m.u.hello.nfilters = 0;
	m.u.hello.filters_len = 0;
	m.u.hello.npaths = 0;
	m.u.hello.paths_len = 0;
	if (wire_hello_add_path(&m.u.hello, "a") ||
	    wire_hello_add_path(&m.u.hello, "dir/b") ||
	    wire_hello_add_path(&m.u.hello, "c/"))
		errs++;
	msg("hello-pull-three", &m, buf);
	m.u.hello.npaths = 0;
	m.u.hello.paths_len = 0;
	m.u.hello.csum = WIRE_CSUM_NONE;
	msg("hello-pull-empty", &m, buf);

	memset(&m, 0, sizeof(m));
	m.type = WIRE_WELCOME;
	m.ctrl_ack = 1;
	m.u.welcome.features = WIRE_FEAT_AUTH;
	fill(m.u.welcome.nonce, WIRE_NONCE_LEN, 2);
	fill(m.u.welcome.mac, WIRE_MAC_LEN, 3);
	msg("welcome-ok", &m, buf);
	m.u.welcome.streams = 4;
	m.u.welcome.rails = 2;
	m.u.welcome.rail[1].family = 4;
	memcpy(m.u.welcome.rail[1].addr, "\x0a\x4d\x03\x01", 4);
	msg("welcome-rails", &m, buf);
	m.u.welcome.streams = 0;
	m.u.welcome.rails = 0;
	m.u.welcome.status = -EACCES;
	m.u.welcome.features = 0;
	memset(m.u.welcome.mac, 0, WIRE_MAC_LEN);
	strcpy(m.u.welcome.msg, "permission denied: /srv/rdcp/x");
	msg("welcome-eacces", &m, buf);
	memset(m.u.welcome.msg, 'm', WIRE_MSG_MAX);
	m.u.welcome.msg[WIRE_MSG_MAX] = '\0';
	n = msg("welcome-longmsg", &m, buf);
	/* string length one over WIRE_MSG_MAX */
	memcpy(bad, buf, (size_t)n);
	bad[n - WIRE_MSG_MAX - 2] = (WIRE_MSG_MAX + 1) >> 8;
	bad[n - WIRE_MSG_MAX - 1] = (WIRE_MSG_MAX + 1) & 0xff;
	set_total(bad, (size_t)n + 1);
	bad[n] = 'm';
	put("wire", "bad-welcome-msg-too-long", bad, (size_t)n + 1);

	memset(&m, 0, sizeof(m));
	m.type = WIRE_FREED; /* any slot: slots released, by index */
	m.slot_ack = 3;
	m.u.freed.count = 3;
	m.u.freed.slot[0] = 5;
	m.u.freed.slot[2] = 4095;
	msg("freed", &m, buf);

	memset(&m, 0, sizeof(m));
	m.type = WIRE_AUTH;
	m.ctrl_ack = 1;
	fill(m.u.auth.mac, WIRE_MAC_LEN, 4);
	msg("auth", &m, buf);

	memset(&m, 0, sizeof(m));
	m.type = WIRE_RING;
	m.ctrl_ack = 2;
	m.u.ring.addr = 0x7f1234560000ull;
	m.u.ring.rkey = 0xdeadbeef;
	m.u.ring.slots = 64;
	m.u.ring.chunk_size = 1 << 20;
	m.u.ring.hdr_addr = 0x7f1234460000ull;
	msg("ring", &m, buf);
	m.u.ring.rails = 2; /* doc/PROTOCOL.md: Rails */
	m.u.ring.rkeys[1] = 0xfeedf00d;
	msg("ring-rails", &m, buf);

	memset(&m, 0, sizeof(m));
	m.type = WIRE_FILE;
	m.ctrl_ack = 3;
	m.slot_ack = 17;
	m.u.file.file_id = 1;
	m.u.file.size = 123456789;
	m.u.file.mode = 0100644;
	m.u.file.mtime_sec = 1700000000;
	m.u.file.mtime_nsec = 999999999;
	strcpy(m.u.file.path, "dir/sub/file.bin");
	msg("file", &m, buf);
	m.u.file.file_id = 0xffffffffu;
	m.u.file.flags = WIRE_FILE_SPARSE;
	m.u.file.size = ~0ull;
	m.u.file.mtime_sec = -1;
	strcpy(m.u.file.path, "../../etc/shadow");
	msg("file-hostile-path", &m, buf);
	memset(&m, 0, sizeof(m));
	m.type = WIRE_FILE;
	m.u.file.file_id = 2;
	m.u.file.kind = WIRE_KIND_SYMLINK;
	m.u.file.mode = 0120777;
	strcpy(m.u.file.path, "tree/link");
	strcpy(m.u.file.link, "../../../etc/passwd");
	msg("file-symlink", &m, buf);
	m.u.file.kind = WIRE_KIND_DIR;
	m.u.file.link[0] = '\0';
	m.u.file.atime_sec = 1;
	m.u.file.atime_nsec = 2;
	strcpy(m.u.file.path, "tree/empty");
	msg("file-dir", &m, buf);

	memset(&m, 0, sizeof(m));
	m.type = WIRE_HAVE;
	m.u.have.file_id = 1;
	m.u.have.flags = WIRE_HAVE_SUMS;
	msg("have", &m, buf);
	m.u.have.flags = WIRE_HAVE_SKIP;
	m.u.have.status = -EBUSY;
	msg("have-skip", &m, buf);
	memset(&m, 0, sizeof(m));
	m.type = WIRE_SUMS;
	m.u.sums.file_id = 1;
	m.u.sums.first = 2;
	m.u.sums.count = 3;
	memset(m.u.sums.sums[1], 0xab, WIRE_SUM_LEN);
	msg("sums", &m, buf);
	memset(&m, 0, sizeof(m));
	m.type = WIRE_MATCH;
	m.u.match.file_id = 1;
	m.u.match.first = 2;
	m.u.match.count = 3;
	m.u.match.bits[0] = 5;
	msg("match", &m, buf);

	memset(&m, 0, sizeof(m));
	m.type = WIRE_FILE_END;
	m.u.end.file_id = 1;
	m.u.end.nchunks = 118;
	m.u.end.seq_end = 130;
	m.u.end.csum = WIRE_CSUM_CRC32;
	m.u.end.digest_len = 4;
	fill(m.u.end.digest, 4, 5);
	msg("file-end-crc32", &m, buf);
	m.u.end.csum = WIRE_CSUM_SHA256;
	m.u.end.digest_len = WIRE_DIGEST_MAX;
	fill(m.u.end.digest, WIRE_DIGEST_MAX, 6);
	n = msg("file-end-sha256", &m, buf);
	/* digest_len 33 */
	memcpy(bad, buf, (size_t)n);
	bad[n - WIRE_DIGEST_MAX - 1] = WIRE_DIGEST_MAX + 1;
	set_total(bad, (size_t)n + 1);
	bad[n] = 0;
	put("wire", "bad-file-end-digest-33", bad, (size_t)n + 1);
	m.u.end.flags = WIRE_END_ABORT;
	m.u.end.csum = WIRE_CSUM_NONE;
	m.u.end.digest_len = 0;
	msg("file-end-abort", &m, buf);

	memset(&m, 0, sizeof(m));
	m.type = WIRE_FILE_RESULT;
	m.ctrl_ack = 9;
	m.u.result.file_id = 1;
	m.u.result.digest_len = WIRE_DIGEST_MAX;
	fill(m.u.result.digest, WIRE_DIGEST_MAX, 6);
	msg("file-result-ok", &m, buf);
	m.u.result.status = -EBADMSG;
	m.u.result.digest_len = 4;
	strcpy(m.u.result.msg, "checksum mismatch");
	msg("file-result-badmsg", &m, buf);

	memset(&m, 0, sizeof(m));
	m.type = WIRE_DONE;
	m.ctrl_ack = 10;
	m.slot_ack = 118;
	m.u.done.flags = WIRE_DONE_WHOLE;
	m.u.done.max_delete = WIRE_DELETE_ANY;
	m.u.done.seq_end = 131;
	msg("done", &m, buf);

	memset(&m, 0, sizeof(m));
	m.type = WIRE_DELETED;
	m.u.deleted.kind = WIRE_KIND_SYMLINK;
	strcpy(m.u.deleted.path, "tree/old/link");
	msg("deleted", &m, buf);
	m.u.deleted.kind = WIRE_KIND_DIR;
	m.u.deleted.flags = WIRE_DELETED_DRY;
	m.u.deleted.status = -EBUSY;
	strcpy(m.u.deleted.path, "tree/mnt");
	strcpy(m.u.deleted.msg, "cannot delete 'tree/mnt': a mount point");
	msg("deleted-failed", &m, buf);
	memset(&m, 0, sizeof(m));
	m.type = WIRE_DELETE_END;
	m.u.delete_end.status = -E2BIG;
	m.u.delete_end.count = 1000;
	strcpy(m.u.delete_end.msg, "nothing deleted: 1000 entries would go");
	msg("delete-end", &m, buf);

	memset(&m, 0, sizeof(m));
	m.type = WIRE_NAMES;
	if (wire_names_add(&m.u.names, "a/b.txt", 7) ||
	    wire_names_add(&m.u.names, "sub/dir", 7))
		errs++;
	msg("names", &m, buf);
	m.u.names.flags = WIRE_NAMES_END;
	msg("names-end", &m, buf);
	memset(&m, 0, sizeof(m));
	m.type = WIRE_NAMES_ACK;
	m.u.names_ack.done = 4096;
	m.u.names_ack.seq_end = 77;
	msg("names-ack", &m, buf);

	memset(&m, 0, sizeof(m));
	m.type = WIRE_BYE;
	m.u.bye.files_ok = 3;
	m.u.bye.files_failed = 1;
	m.u.bye.bytes = 123456789;
	msg("bye", &m, buf);

	memset(&m, 0, sizeof(m));
	m.type = WIRE_ERROR;
	m.u.error.status = -EIO;
	m.u.error.klass = 2;
	strcpy(m.u.error.msg, "write: Input/output error");
	msg("error", &m, buf);

	memset(&m, 0, sizeof(m));
	m.type = WIRE_CREDIT;
	m.ctrl_ack = 0xffffffffu;
	m.slot_ack = 0x80000000u;
	n = msg("credit", &m, buf);
	put("wire", "bad-header-short", buf, 15);
	put("wire", "bad-empty", buf, 0);

	memset(&m, 0, sizeof(m));
	m.type = WIRE_PACK_DONE;
	m.ctrl_ack = 11;
	m.u.pack_done.first_id = 2;
	m.u.pack_done.count = 2;
	msg("pack-done", &m, buf);

	memset(&m, 0, sizeof(m));
	m.type = WIRE_KEPT;
	m.ctrl_ack = 12;
	m.u.kept.first_id = 3;
	m.u.kept.count = 40;
	msg("kept", &m, buf);

	pack_seeds();

	/* 64-byte slot headers (wire_slot_decode gets an input's first 64) */
	memset(&h, 0, sizeof(h));
	h.seq = 5;
	h.file_id = 1;
	h.len = 1 << 20;
	h.offset = 5ull << 20;
	h.crc = 0x12345678;
	h.raw_len = h.len;
	wire_slot_encode(slot, &h);
	put("wire", "slot-plain", slot, sizeof(slot));
	slot[10] ^= 1; /* header CRC no longer matches */
	put("wire", "bad-slot-crc", slot, sizeof(slot));
	h.seq = ~0ull;
	h.flags = WIRE_SLOT_COMPRESSED | WIRE_SLOT_ENCRYPTED;
	h.raw_len = 4 << 20;
	fill(h.tag, sizeof(h.tag), 7);
	wire_slot_encode(slot, &h);
	put("wire", "slot-flags", slot, sizeof(slot));
}

static void path_seed(const char *name, const char *p, size_t n)
{
	put("path", name, p, n);
}

#define SEED(name, lit) path_seed(name, lit, sizeof(lit) - 1)

static void path_seeds(void)
{
	static char big[PATH_PEER_MAX + 2];
	size_t i;

	SEED("ok-file", "file.bin");
	SEED("ok-nested", "a/b/c");
	SEED("ok-dir", "d/");
	SEED("ok-dir-nested", "d/e/");
	SEED("ok-d-g", "d/g");
	SEED("ok-f", "f");
	SEED("ok-three-dots", "...");
	SEED("ok-hidden", ".hidden");
	SEED("ok-dots-inside", "a..b/..c/d..");
	SEED("ok-missing", "nosuch/x");
	SEED("bad-dotdot", "..");
	SEED("bad-dotdot-inside", "a/../b");
	SEED("bad-dotdot-lead", "../a");
	SEED("bad-dotdot-tail", "a/..");
	SEED("bad-dotdot-slash", "../");
	SEED("bad-dot", ".");
	SEED("bad-dot-lead", "./a");
	SEED("bad-dot-inside", "a/./b");
	SEED("bad-absolute", "/etc/passwd");
	SEED("bad-root", "/");
	SEED("bad-double-slash", "a//b");
	SEED("bad-two-trailing", "a//");
	SEED("bad-nul", "a\0b");
	SEED("bad-nul-tail", "etc\0");
	SEED("bad-empty", "");
	SEED("link-out", "out");
	SEED("link-out-etc", "out/etc");
	SEED("link-out-dir", "out/");
	SEED("link-lnk-g", "lnk/g");
	SEED("link-up-out", "d/up/out");
	SEED("link-loop-etc", "d/loop/etc");
	SEED("link-abs-passwd", "d/e/abs/passwd");
	SEED("link-dl", "dl");
	SEED("file-as-dir", "f/");

	/* one component of 255 bytes (ok) and of 256 (too long) */
	memset(big, 'n', 256);
	path_seed("ok-name-255", big, 255);
	path_seed("bad-name-256", big, 256);
	/* 16 names of 255 and 15 '/': 4095 bytes (ok); one more: too long */
	for (i = 0; i < PATH_PEER_MAX + 1; i++)
		big[i] = (i % 256 == 255) ? '/' : 'x';
	path_seed("ok-total-4095", big, PATH_PEER_MAX);
	big[PATH_PEER_MAX] = 'x';
	path_seed("bad-total-4096", big, PATH_PEER_MAX + 1);
}

int main(int argc, char **argv)
{
	char dir[4096];

	if (argc != 2) {
		fprintf(stderr, "usage: %s OUTDIR\n", argv[0]);
		return 2;
	}
	out = argv[1];
	snprintf(dir, sizeof(dir), "%s/wire", out);
	mkdir(out, 0755);
	mkdir(dir, 0755);
	snprintf(dir, sizeof(dir), "%s/path", out);
	mkdir(dir, 0755);
	wire_seeds();
	path_seeds();
	return errs ? 1 : 0;
}
