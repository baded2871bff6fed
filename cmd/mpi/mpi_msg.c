/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * rdcp-mpi's messages (mpi_job.h): byte strings built and read field by
 * field, and the only MPI calls of the job besides init and its end:
 * non-blocking sends kept until complete, and a poll for what arrived.
 * MPI_ERRORS_RETURN is set by main(): a failed call is logged here and
 * becomes -EIO, never an abort inside MPI.
 */
#include <errno.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd/mpi/mpi_job.h"
#include "util/be_codec.h"
#include "util/clock.h"
#include "util/log.h"

static void grow(struct mbuf *b, size_t n)
{
	size_t cap = b->cap ? b->cap : 256;
	uint8_t *p;

	if (b->bad)
		return;
	while (cap < b->len + n)
		cap *= 2;
	if (cap == b->cap)
		return;
	p = realloc(b->p, cap);
	if (!p) {
		b->bad = true;
		return;
	}
	b->p = p;
	b->cap = cap;
}

/* A cursor over n more bytes at the end of b, grown for them. */
static struct be_put room(struct mbuf *b, size_t n)
{
	grow(b, n);
	if (b->bad)
		return (struct be_put){ .err = true };
	return be_put_init(b->p + b->len, n);
}

static void wrote(struct mbuf *b, const struct be_put *w)
{
	if (w->err)
		b->bad = true;
	else
		b->len += w->off;
}

/* A cursor reading b from its read offset; done() takes its place back. */
static struct be_get reader(const struct mbuf *b)
{
	struct be_get r = be_get_init(b->p, b->len);

	r.off = b->off;
	r.err = b->bad;
	return r;
}

static void done(struct mbuf *b, const struct be_get *r)
{
	b->off = r->off;
	b->bad = r->err;
}

void mbuf_bytes(struct mbuf *b, const void *p, size_t n)
{
	struct be_put w = room(b, n);

	be_put_bytes(&w, p, n);
	wrote(b, &w);
}

void mbuf_u8(struct mbuf *b, uint8_t v)
{
	struct be_put w = room(b, 1);

	be_put_u8(&w, v);
	wrote(b, &w);
}

void mbuf_u16(struct mbuf *b, uint16_t v)
{
	struct be_put w = room(b, 2);

	be_put_u16(&w, v);
	wrote(b, &w);
}

void mbuf_u32(struct mbuf *b, uint32_t v)
{
	struct be_put w = room(b, 4);

	be_put_u32(&w, v);
	wrote(b, &w);
}

void mbuf_u64(struct mbuf *b, uint64_t v)
{
	struct be_put w = room(b, 8);

	be_put_u64(&w, v);
	wrote(b, &w);
}

void mbuf_str(struct mbuf *b, const char *s)
{
	size_t n = strnlen(s, UINT16_MAX);
	struct be_put w = room(b, 2 + n);

	be_put_str(&w, s, n);
	wrote(b, &w);
}

uint8_t mbuf_get_u8(struct mbuf *b)
{
	struct be_get r = reader(b);
	uint8_t v = be_get_u8(&r);

	done(b, &r);
	return v;
}

uint16_t mbuf_get_u16(struct mbuf *b)
{
	struct be_get r = reader(b);
	uint16_t v = be_get_u16(&r);

	done(b, &r);
	return v;
}

uint32_t mbuf_get_u32(struct mbuf *b)
{
	struct be_get r = reader(b);
	uint32_t v = be_get_u32(&r);

	done(b, &r);
	return v;
}

uint64_t mbuf_get_u64(struct mbuf *b)
{
	struct be_get r = reader(b);
	uint64_t v = be_get_u64(&r);

	done(b, &r);
	return v;
}

void mbuf_get_str(struct mbuf *b, char *out, size_t outsz)
{
	size_t n = mbuf_get_u16(b);

	if (b->bad || b->len - b->off < n) {
		b->bad = true;
		out[0] = '\0';
		return;
	}
	snprintf(out, outsz, "%.*s", (int)n, (const char *)b->p + b->off);
	b->off += n;
}

void mbuf_release(struct mbuf *b)
{
	free(b->p);
	*b = (struct mbuf){ 0 };
}

void mj_result_put(struct mbuf *b, const struct mj_result *r)
{
	const struct xfer_stats *st = &r->st;

	mbuf_u8(b, (uint8_t)r->v);
	mbuf_u8(b, r->early);
	mbuf_u64(b, st->files_ok);
	mbuf_u64(b, st->files_failed);
	mbuf_u64(b, st->files_skipped);
	mbuf_u64(b, st->files_packed);
	mbuf_u64(b, st->bytes);
	mbuf_u64(b, (uint64_t)(st->seconds * 1e6));
	mbuf_u8(b, (uint8_t)st->first_fail);
	mbuf_str(b, st->transport);
	mbuf_str(b, st->device);
	mbuf_str(b, st->peer);
	mbuf_str(b, st->error);
}

void mj_result_get(struct mbuf *b, struct mj_result *r)
{
	struct xfer_stats *st = &r->st;

	memset(r, 0, sizeof(*r));
	r->v = (enum xfer_fail)mbuf_get_u8(b);
	r->early = mbuf_get_u8(b);
	st->files_ok = mbuf_get_u64(b);
	st->files_failed = mbuf_get_u64(b);
	st->files_skipped = mbuf_get_u64(b);
	st->files_packed = mbuf_get_u64(b);
	st->bytes = mbuf_get_u64(b);
	st->seconds = mbuf_get_u64(b) / 1e6;
	st->first_fail = (enum xfer_fail)mbuf_get_u8(b);
	mbuf_get_str(b, st->transport, sizeof(st->transport));
	mbuf_get_str(b, st->device, sizeof(st->device));
	mbuf_get_str(b, st->peer, sizeof(st->peer));
	mbuf_get_str(b, st->error, sizeof(st->error));
}

/* Sends under way: each request with the buffer it reads from. */
static struct pending {
	MPI_Request req;
	uint8_t *p;
} * sends;
static size_t nsends, capsends;

static int mpi_failed(const char *what, int rc)
{
	char s[MPI_MAX_ERROR_STRING];
	int n = 0;

	if (MPI_Error_string(rc, s, &n) != MPI_SUCCESS)
		snprintf(s, sizeof(s), "error %d", rc);
	log_err("MPI: %s failed: %s", what, s);
	return -EIO;
}

int mj_post(int dest, int tag, struct mbuf *b)
{
	struct pending *p;
	int rc;

	if (b->bad) {
		mbuf_release(b);
		log_err("out of memory for a message");
		return -ENOMEM;
	}
	if (nsends == capsends) {
		size_t cap = capsends ? 2 * capsends : 16;

		p = realloc(sends, cap * sizeof(*p));
		if (!p) {
			mbuf_release(b);
			return -ENOMEM;
		}
		sends = p;
		capsends = cap;
	}
	p = &sends[nsends];
	rc = MPI_Isend(b->p ? b->p : (uint8_t *)"", (int)b->len, MPI_BYTE, dest,
		       tag, MPI_COMM_WORLD, &p->req);
	if (rc != MPI_SUCCESS) {
		mbuf_release(b);
		return mpi_failed("a send", rc);
	}
	p->p = b->p;
	nsends++;
	*b = (struct mbuf){ 0 };
	return 0;
}

size_t mj_sends_progress(void)
{
	size_t i = 0;

	while (i < nsends) {
		int done = 0;

		if (MPI_Test(&sends[i].req, &done, MPI_STATUS_IGNORE) !=
			    MPI_SUCCESS ||
		    done) {
			free(sends[i].p);
			sends[i] = sends[--nsends];
			continue;
		}
		i++;
	}
	return nsends;
}

void mj_sends_drain(int ms)
{
	uint64_t end = clock_now_ms() + (uint64_t)ms;
	struct timespec nap = { .tv_nsec = 1000000 };

	while (mj_sends_progress() && clock_now_ms() < end)
		nanosleep(&nap, NULL);
	/*
	 * A peer that is gone never takes them. MPI may still read their
	 * buffers (a freed or cancelled request's send goes on), so they
	 * stay allocated: the process is about to end.
	 */
	nsends = 0;
}

int mj_poll(struct mbuf *b, int *source, int *tag)
{
	MPI_Status st;
	MPI_Message msg;
	int flag = 0, n = 0, rc;

	rc = MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag,
			 &msg, &st);
	if (rc != MPI_SUCCESS)
		return mpi_failed("a probe", rc);
	if (!flag)
		return 0;
	MPI_Get_count(&st, MPI_BYTE, &n);
	*b = (struct mbuf){ 0 };
	grow(b, n > 0 ? (size_t)n : 1);
	if (b->bad)
		return -ENOMEM;
	rc = MPI_Mrecv(b->p, n, MPI_BYTE, &msg, MPI_STATUS_IGNORE);
	if (rc != MPI_SUCCESS) {
		mbuf_release(b);
		return mpi_failed("a receive", rc);
	}
	b->len = (size_t)n;
	*source = st.MPI_SOURCE;
	*tag = st.MPI_TAG;
	return 1;
}
