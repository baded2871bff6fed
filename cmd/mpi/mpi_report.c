/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * What rdcp-mpi's coordinator (mpi_coord.c, on rank 0) tells at the end:
 * the job's verdict from every rank's session, the split files that
 * failed and --delete's mirror, and the summary, per rank and per
 * receiver, as --json's summary event and as the text lines on stderr.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/json_out.h"
#include "cmd/mpi/mpi_coord_int.h"
#include "util/clock.h"
#include "util/units.h"

enum xfer_fail mj_coord_verdict(const struct mj_coord *c, struct xfer_stats *st)
{
	enum xfer_fail first = XFER_OK;
	bool canceled = false;

	memset(st, 0, sizeof(*st));
	for (int i = 0; i < c->cfg.nranks; i++) {
		const struct xfer_stats *s = &c->r[i].res.st;

		st->files_ok += s->files_ok;
		st->files_failed += s->files_failed;
		st->files_skipped += s->files_skipped;
		st->files_packed += s->files_packed;
		st->bytes += s->bytes;
		if (!st->transport[0])
			memcpy(st->transport, s->transport,
			       sizeof(st->transport));
		if (!st->device[0])
			memcpy(st->device, s->device, sizeof(st->device));
		if (s->files_failed && first == XFER_OK)
			first = s->first_fail ? s->first_fail
					      : XFER_FAIL_LOCAL_IO;
		canceled |= c->r[i].res.v == XFER_FAIL_CANCELED;
	}
	st->files_failed += c->nsplit_failed;
	if (c->nsplit_failed && first == XFER_OK)
		first = c->split_first ? c->split_first : XFER_FAIL_LOCAL_IO;
	if (c->mirror == MIRROR_OVER) {
		st->deleted = c->mirror_st.deleted;
		st->files_failed += c->mirror_st.files_failed;
		if (c->mirror_st.files_failed && first == XFER_OK)
			first = c->mirror_st.first_fail;
	}
	st->seconds = clock_now_s() - c->t0;
	snprintf(st->peer, sizeof(st->peer), "%d receiver%s", c->cfg.nrecv,
		 c->cfg.nrecv == 1 ? "" : "s");
	snprintf(st->error, sizeof(st->error), "%s", c->cause_msg);
	st->first_fail = first;
	if (c->cause != XFER_OK)
		return c->cause;
	if (canceled)
		return XFER_FAIL_CANCELED;
	if (c->mirror == MIRROR_OVER && c->mirror_v != XFER_OK) {
		if (c->mirror_st.error[0])
			snprintf(st->error, sizeof(st->error), "%s",
				 c->mirror_st.error);
		return c->mirror_v;
	}
	if (st->files_failed)
		return st->files_ok ? XFER_FAIL_PARTIAL : first;
	return XFER_OK;
}

/* The bytes the ranks of receiver k moved, and how many ranks it has. */
static uint64_t receiver_bytes(const struct mj_coord *c, int k, int *nranks)
{
	uint64_t bytes = 0;

	*nranks = 0;
	for (int i = k; i < c->cfg.nranks; i += c->cfg.nrecv) {
		bytes += c->r[i].res.st.bytes;
		(*nranks)++;
	}
	return bytes;
}

/* The --json summary's "ranks" and "receivers", and the text lines. */
void mj_coord_summary(struct mj_coord *c, enum xfer_fail v, int code)
{
	struct xfer_stats st;
	char *extra = NULL, sz[32], rt[32], dl[32];
	size_t len = 0;
	FILE *f;

	mj_coord_verdict(c, &st);
	f = open_memstream(&extra, &len);
	if (f) {
		fputs("\"ranks\":[", f);
		for (int i = 0; i < c->cfg.nranks; i++) {
			const struct mj_rank_state *r = &c->r[i];
			const struct xfer_stats *s = &r->res.st;

			fprintf(f, "%s{\"rank\":%d,\"host\":", i ? "," : "", i);
			json_str(f, r->host);
			fputs(",\"receiver\":", f);
			json_str(f, mj_coord_receiver(c, i));
			fprintf(f,
				",\"files_ok\":%" PRIu64
				",\"files_failed\":%" PRIu64
				",\"bytes\":%" PRIu64
				",\"seconds\":%.6f,\"bytes_per_second\":%.0f,"
				"\"result\":",
				s->files_ok, s->files_failed, s->bytes,
				s->seconds,
				s->seconds > 0 ? s->bytes / s->seconds : 0.0);
			json_str(f,
				 r->lost ? "lost" : xfer_fail_name(r->res.v));
			fputc('}', f);
		}
		fputs("],\"receivers\":[", f);
		for (int k = 0; k < c->cfg.nrecv; k++) {
			int n;
			uint64_t bytes = receiver_bytes(c, k, &n);

			fprintf(f, "%s{\"receiver\":", k ? "," : "");
			json_str(f, c->cfg.receivers[k]);
			fprintf(f,
				",\"ranks\":%d,\"bytes\":%" PRIu64
				",\"bytes_per_second\":%.0f}",
				n, bytes,
				st.seconds > 0 ? bytes / st.seconds : 0.0);
		}
		fprintf(f, "],\"nranks\":%d", c->cfg.nranks);
		fclose(f);
	}
	if (c->cfg.json) {
		json_summary_with(stdout, &st, v, code, c->cfg.dry_run,
				  c->attempts, extra);
		fflush(stdout);
	}
	free(extra);
	if (c->cfg.quiet)
		return;
	snprintf(dl, sizeof(dl), "%" PRIu64, st.deleted);
	fprintf(stderr,
		"%s%" PRIu64 " files, %s in %.2f s (%s) over %s by %d ranks to "
		"%d receiver%s; skipped %" PRIu64 ", failed %" PRIu64 "%s%s\n",
		c->cfg.dry_run ? "dry run, nothing copied: " : "", st.files_ok,
		units_format_size(st.bytes, sz, sizeof(sz)), st.seconds,
		units_format_rate(st.seconds > 0 ? st.bytes / st.seconds : 0,
				  rt, sizeof(rt)),
		st.transport[0] ? st.transport : "-", c->cfg.nranks,
		c->cfg.nrecv, c->cfg.nrecv == 1 ? "" : "s", st.files_skipped,
		st.files_failed, c->mirror == MIRROR_OVER ? ", deleted " : "",
		c->mirror == MIRROR_OVER ? dl : "");
	for (int k = 0; k < c->cfg.nrecv; k++) {
		int n;
		uint64_t bytes = receiver_bytes(c, k, &n);

		fprintf(stderr, "  receiver %s: %d rank%s, %s (%s)\n",
			c->cfg.receivers[k], n, n == 1 ? "" : "s",
			units_format_size(bytes, sz, sizeof(sz)),
			units_format_rate(st.seconds > 0 ? bytes / st.seconds
							 : 0,
					  rt, sizeof(rt)));
	}
	for (int i = 0; i < c->cfg.nranks; i++) {
		const struct mj_rank_state *r = &c->r[i];
		const struct xfer_stats *s = &r->res.st;

		fprintf(stderr,
			"  rank %d on %s: %" PRIu64
			" files, %s in %.2f s (%s), "
			"%s\n",
			i, r->host[0] ? r->host : "?", s->files_ok,
			units_format_size(s->bytes, sz, sizeof(sz)), s->seconds,
			units_format_rate(s->seconds > 0 ? s->bytes / s->seconds
							 : 0,
					  rt, sizeof(rt)),
			r->lost ? "lost" : xfer_fail_name(r->res.v));
	}
}
