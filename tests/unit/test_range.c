/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The state of a split file's ranges on the sink (transfer/sink/sink_range.c):
 * ranges recorded in any order make the file whole only with the last
 * one, and then the CRC32s combine into the file's; a range recorded
 * twice is harmless; another token while a session writes, or the same
 * token with another size, mtime or count, is -ESTALE; an earlier job's
 * state is taken over (with --resume its verified ranges kept, a failed
 * one sent again; without, started over); ranges that do not tile the
 * file never make it whole; a process that dies between ranges leaves a
 * state the next one resumes from.
 */
#include "tap.h"

#include "transfer/sink/sink_int.h"
#include "transfer/wire/wire.h"
#include "util/checksum.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define C 4096u
#define SIZE (5 * C - 100)

static uint8_t data[SIZE];
static char dir[64];

struct end {
	int state, part; /* descriptors, as a session holds them */
	bool fresh;	 /* part made by this open */
};

static struct rng_key key_of(uint8_t t)
{
	struct rng_key k = { .size = SIZE,
			     .mtime_sec = 1700000000,
			     .mtime_nsec = 5,
			     .count = 3 };

	memset(k.token, t, sizeof(k.token));
	return k;
}

/* The three ranges: [0, 2C), [2C, 4C), [4C, SIZE). */
static uint64_t off_of(uint32_t i)
{
	return (uint64_t)i * 2 * C;
}

static uint64_t len_of(uint32_t i)
{
	return i < 2 ? 2 * C : SIZE - 4 * C;
}

static uint32_t crc_of(uint32_t i)
{
	return ck_crc32(0, data + off_of(i), len_of(i));
}

static struct end open_end(void)
{
	char p[128];
	struct end e;

	snprintf(p, sizeof(p), "%s/.f.rdcp-ranges", dir);
	e.state = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	snprintf(p, sizeof(p), "%s/.f.rdcp-part", dir);
	e.part = open(p, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	e.fresh = e.part >= 0;
	if (!e.fresh)
		e.part = open(p, O_RDWR | O_CLOEXEC);
	return e;
}

static void close_end(struct end *e)
{
	close(e->state);
	close(e->part);
}

static int join(struct end *e, const struct rng_key *k, uint32_t i, bool resume,
		uint8_t *st)
{
	int rc = sink_rng_lock(e->state);

	if (rc)
		return rc;
	rc = sink_rng_join(e->state, e->part, e->fresh, k, i, off_of(i),
			   len_of(i), resume, st);
	sink_rng_unlock(e->state);
	e->fresh = false; /* later joins are as sessions that found it */
	return rc;
}

static int mark(struct end *e, const struct rng_key *k, uint32_t i,
		uint8_t state, bool *all, uint32_t *whole)
{
	int rc = sink_rng_lock(e->state);

	if (rc)
		return rc;
	rc = sink_rng_mark(e->state, k, i, state, crc_of(i), all, whole);
	sink_rng_unlock(e->state);
	return rc;
}

static void cleanup(void)
{
	char p[128];

	snprintf(p, sizeof(p), "%s/.f.rdcp-ranges", dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/.f.rdcp-part", dir);
	unlink(p);
	rmdir(dir);
}

/* No state, no temporary (and the data and directory made once). */
static void fresh(void)
{
	char p[128];

	if (!dir[0]) {
		for (size_t i = 0; i < SIZE; i++)
			data[i] = (uint8_t)(i * 131 + i / 7);
		snprintf(dir, sizeof(dir), "/tmp/rdcp-test-range.XXXXXX");
		if (!mkdtemp(dir))
			abort();
		atexit(cleanup);
	}

	snprintf(p, sizeof(p), "%s/.f.rdcp-ranges", dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/.f.rdcp-part", dir);
	unlink(p);
}

static void test_any_order(void)
{
	static const uint32_t orders[][3] = { { 0, 1, 2 },
					      { 2, 0, 1 },
					      { 1, 2, 0 } };
	struct rng_key k = key_of(1);

	for (size_t o = 0; o < 3; o++) {
		struct end e;
		uint32_t whole = 0;
		uint8_t st;
		bool all;

		fresh();
		e = open_end();
		for (int n = 0; n < 3; n++)
			CHECK_EQ(join(&e, &k, orders[o][n], false, &st), 0);
		for (int n = 0; n < 3; n++) {
			CHECK_EQ(mark(&e, &k, orders[o][n], RNG_VERIFIED, &all,
				      &whole),
				 0);
			CHECK_EQ(all, n == 2);
		}
		CHECK_EQ(whole, ck_crc32(0, data, SIZE));
		close_end(&e);
	}
}

static void test_duplicate(void)
{
	struct rng_key k = key_of(2);
	struct end e;
	uint32_t whole;
	uint8_t st;
	bool all;

	fresh();
	e = open_end();
	CHECK_EQ(join(&e, &k, 0, false, &st), 0);
	CHECK_EQ(st, RNG_MISSING);
	CHECK_EQ(mark(&e, &k, 0, RNG_VERIFIED, &all, &whole), 0);
	CHECK(!all);
	/* the same range again, in the same job: told it is verified */
	CHECK_EQ(join(&e, &k, 0, false, &st), 0);
	CHECK_EQ(st, RNG_VERIFIED);
	CHECK_EQ(mark(&e, &k, 0, RNG_VERIFIED, &all, &whole), 0);
	CHECK(!all);
	CHECK_EQ(join(&e, &k, 1, false, &st), 0);
	CHECK_EQ(join(&e, &k, 2, false, &st), 0);
	CHECK_EQ(mark(&e, &k, 2, RNG_VERIFIED, &all, &whole), 0);
	CHECK_EQ(mark(&e, &k, 1, RNG_VERIFIED, &all, &whole), 0);
	CHECK(all);
	CHECK_EQ(whole, ck_crc32(0, data, SIZE));
	close_end(&e);
}

static void test_mismatch(void)
{
	struct rng_key k = key_of(3), other;
	struct end e, busy;
	struct flock fl = { .l_type = F_WRLCK,
			    .l_whence = SEEK_SET,
			    .l_start = 0,
			    .l_len = 2 * C };
	uint8_t st;

	fresh();
	e = open_end();
	CHECK_EQ(join(&e, &k, 0, false, &st), 0);
	other = k;
	other.size--;
	CHECK_EQ(join(&e, &other, 1, false, &st), -ESTALE);
	other = k;
	other.mtime_nsec++;
	CHECK_EQ(join(&e, &other, 1, false, &st), -ESTALE);
	other = k;
	other.count = 4;
	CHECK_EQ(join(&e, &other, 1, false, &st), -ESTALE);
	/* a range recorded with other bytes */
	CHECK_EQ(mark(&e, &k, 0, RNG_VERIFIED, &(bool){ 0 }, &(uint32_t){ 0 }),
		 0);
	CHECK_EQ(sink_rng_lock(e.state), 0);
	CHECK_EQ(sink_rng_join(e.state, e.part, e.fresh, &k, 0, 0, C, false,
			       &st),
		 -ESTALE);
	sink_rng_unlock(e.state);
	/* another token while a session holds bytes of the temporary */
	busy = open_end();
	CHECK_EQ(fcntl(busy.part, F_OFD_SETLK, &fl), 0);
	other = key_of(4);
	CHECK_EQ(join(&e, &other, 1, false, &st), -ESTALE);
	close_end(&busy);
	/* ... and once nobody does: an earlier job's, started over */
	CHECK_EQ(join(&e, &other, 1, false, &st), 0);
	CHECK_EQ(st, RNG_MISSING);
	CHECK_EQ(join(&e, &other, 0, false, &st), 0);
	CHECK_EQ(st, RNG_MISSING);
	close_end(&e);
}

/*
 * A job dies between ranges (its descriptors simply closed, as a SIGKILL
 * leaves them): the next one, another token, resumes with --resume: the
 * verified range is told verified, a failed one is missing again, and
 * the file becomes whole with the ranges it sends.
 */
static void test_crash_resume(void)
{
	struct rng_key k = key_of(5), k2 = key_of(6);
	struct end e;
	uint32_t whole;
	uint8_t st;
	bool all;

	fresh();
	e = open_end();
	for (uint32_t i = 0; i < 3; i++)
		CHECK_EQ(join(&e, &k, i, false, &st), 0);
	CHECK_EQ(mark(&e, &k, 0, RNG_VERIFIED, &all, &whole), 0);
	CHECK_EQ(mark(&e, &k, 1, RNG_FAILED, &all, &whole), 0);
	CHECK_EQ(sink_rng_lock(e.state), 0);
	CHECK(!sink_rng_abandoned(e.state, 3)); /* range 2 never came */
	sink_rng_unlock(e.state);
	close_end(&e);

	e = open_end();
	CHECK_EQ(join(&e, &k2, 0, true, &st), 0);
	CHECK_EQ(st, RNG_VERIFIED);
	CHECK_EQ(join(&e, &k2, 1, true, &st), 0);
	CHECK_EQ(st, RNG_MISSING);
	CHECK_EQ(join(&e, &k2, 2, true, &st), 0);
	CHECK_EQ(st, RNG_MISSING);
	/* the old token's session, late, marks nothing any more */
	CHECK_EQ(mark(&e, &k, 2, RNG_VERIFIED, &all, &whole), -ESTALE);
	CHECK_EQ(mark(&e, &k2, 2, RNG_VERIFIED, &all, &whole), 0);
	CHECK(!all);
	CHECK_EQ(mark(&e, &k2, 1, RNG_VERIFIED, &all, &whole), 0);
	CHECK(all);
	CHECK_EQ(whole, ck_crc32(0, data, SIZE));
	close_end(&e);

	/* without --resume the same leftovers start over */
	fresh();
	e = open_end();
	CHECK_EQ(join(&e, &k, 0, false, &st), 0);
	CHECK_EQ(mark(&e, &k, 0, RNG_VERIFIED, &all, &whole), 0);
	close_end(&e);
	e = open_end();
	CHECK_EQ(join(&e, &k2, 0, false, &st), 0);
	CHECK_EQ(st, RNG_MISSING);
	close_end(&e);
}

/*
 * A temporary left with bytes but no state (an interrupted whole-file
 * copy of the name): the first range empties it, so the holes of a sparse
 * range read as zeros, as its CRC says.
 */
static void test_stale_part(void)
{
	struct rng_key k = key_of(8);
	struct end e;
	struct stat st;
	uint8_t s;

	fresh();
	e = open_end();
	CHECK_EQ(write(e.part, data, SIZE), (ssize_t)SIZE);
	close_end(&e);
	e = open_end();
	CHECK(!e.fresh);
	CHECK_EQ(join(&e, &k, 1, false, &s), 0);
	CHECK_EQ(fstat(e.part, &st), 0);
	CHECK_EQ(st.st_size, 0);
	close_end(&e);
}

/*
 * A state whose verified ranges were written to a temporary that is gone
 * (placed by a whole-file copy, removed): a new temporary holds none of
 * their bytes. --resume sends them again; the same token is refused.
 */
static void test_fresh_part(void)
{
	struct rng_key k = key_of(9), k2 = key_of(10);
	char p[128];
	struct end e;
	uint32_t whole;
	uint8_t st;
	bool all;

	fresh();
	e = open_end();
	CHECK(e.fresh);
	CHECK_EQ(join(&e, &k, 0, false, &st), 0);
	CHECK_EQ(mark(&e, &k, 0, RNG_VERIFIED, &all, &whole), 0);
	close_end(&e);
	snprintf(p, sizeof(p), "%s/.f.rdcp-part", dir);
	CHECK_EQ(unlink(p), 0);
	e = open_end();
	CHECK(e.fresh);
	CHECK_EQ(join(&e, &k, 1, false, &st), -ESTALE);
	close_end(&e);
	CHECK_EQ(unlink(p), 0);
	e = open_end();
	CHECK(e.fresh);
	CHECK_EQ(join(&e, &k2, 0, true, &st), 0);
	CHECK_EQ(st, RNG_MISSING);
	close_end(&e);
	/* the same, the temporary still there: range 0 stays verified */
	fresh();
	e = open_end();
	CHECK_EQ(join(&e, &k, 0, false, &st), 0);
	CHECK_EQ(mark(&e, &k, 0, RNG_VERIFIED, &all, &whole), 0);
	close_end(&e);
	e = open_end();
	CHECK(!e.fresh);
	CHECK_EQ(join(&e, &k2, 0, true, &st), 0);
	CHECK_EQ(st, RNG_VERIFIED);
	close_end(&e);
}

/* Ranges that overlap leave bytes out: never whole. */
static void test_tiling(void)
{
	struct rng_key k = key_of(7);
	struct end e;
	uint32_t whole;
	uint8_t st;
	bool all;

	k.count = 2;
	fresh();
	e = open_end();
	CHECK_EQ(sink_rng_lock(e.state), 0);
	CHECK_EQ(sink_rng_join(e.state, e.part, e.fresh, &k, 0, 0, 3 * C, false,
			       &st),
		 0);
	CHECK_EQ(sink_rng_join(e.state, e.part, e.fresh, &k, 1, 2 * C,
			       SIZE - 2 * C, false, &st),
		 0);
	CHECK_EQ(sink_rng_mark(e.state, &k, 0, RNG_VERIFIED, 1, &all, &whole),
		 0);
	CHECK_EQ(sink_rng_mark(e.state, &k, 1, RNG_VERIFIED, 2, &all, &whole),
		 -EBADMSG);
	CHECK(!all);
	/* every range seen, none failed: not abandoned; one failed: it is */
	CHECK(!sink_rng_abandoned(e.state, 2));
	CHECK_EQ(sink_rng_mark(e.state, &k, 1, RNG_FAILED, 0, &all, &whole), 0);
	CHECK(sink_rng_abandoned(e.state, 2));
	sink_rng_unlock(e.state);
	close_end(&e);
}

/*
 * FILE with the range flag: its fields after link (offset u64, length u64,
 * index u32, count u32, token[16], big-endian) survive a round trip; a
 * range outside the file, empty, an index past the count, a count past
 * WIRE_RANGES_MAX, a range of a directory and an unknown flag do not
 * decode (a protocol error, exit 5).
 */
static void test_wire_file_range(void)
{
	static const uint8_t tail[40] = {
		0, 0, 0, 0, 0, 0x20, 0, 0, /* offset 2 MiB */
		0, 0, 0, 0, 0, 0x10, 0, 0, /* length 1 MiB */
		0, 0, 0, 2,		   /* index 2 */
		0, 0, 0, 5,		   /* of 5 */
		7, 7, 7, 7, 7, 7,    7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
	};
	static uint8_t buf[WIRE_CTRL_SIZE];
	struct wire_msg m = { .type = WIRE_FILE }, d;
	struct wire_file *f = &m.u.file, good;
	int len;

	f->file_id = 3;
	f->flags = WIRE_FILE_RANGE;
	f->size = 5u << 20;
	strcpy(f->path, "big");
	f->range_off = 2u << 20;
	f->range_len = 1u << 20;
	f->range_idx = 2;
	f->range_count = 5;
	memset(f->token, 7, sizeof(f->token));
	len = wire_encode(&m, buf, sizeof(buf));
	CHECK(len > 40);
	CHECK_EQ(memcmp(buf + len - 40, tail, 40), 0);
	CHECK_EQ(wire_decode(buf, (size_t)len, &d), 0);
	CHECK_EQ(memcmp(&d, &m, sizeof(d)), 0);
	good = *f;
	/* without the flag, none of it is on the wire */
	f->flags = 0;
	CHECK_EQ(wire_encode(&m, buf, sizeof(buf)), len - 40);
	for (int bad = 0; bad < 6; bad++) {
		*f = good;
		if (bad == 0)
			f->range_len = (4u << 20) - 1 + 2; /* past the end */
		if (bad == 1)
			f->range_len = 0;
		if (bad == 2)
			f->range_idx = 5;
		if (bad == 3)
			f->range_count = WIRE_RANGES_MAX + 1;
		if (bad == 4) {
			f->kind = WIRE_KIND_DIR;
			f->size = 0;
			f->range_off = 0;
		}
		if (bad == 5)
			f->flags |= 1u << 30; /* no such flag */
		len = wire_encode(&m, buf, sizeof(buf));
		CHECK(len > 0);
		CHECK_EQ(wire_decode(buf, (size_t)len, &d), -EPROTO);
	}
}

/* The CRC32 of zeros holes fold in: equal to reading them. */
static void test_crc_zeros(void)
{
	static const uint64_t lens[] = { 0,    1,     4095,	     4096,
					 4097, 12293, (1 << 20) + 3, 3u << 20 };
	static uint8_t zero[3u << 20];

	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
		CHECK_EQ(ck_crc32_zeros(lens[i]), ck_crc32(0, zero, lens[i]));
}

TAP_RUN(TAP_TEST(test_wire_file_range), TAP_TEST(test_crc_zeros),
	TAP_TEST(test_any_order), TAP_TEST(test_duplicate),
	TAP_TEST(test_mismatch), TAP_TEST(test_crash_resume),
	TAP_TEST(test_tiling), TAP_TEST(test_stale_part),
	TAP_TEST(test_fresh_part))
