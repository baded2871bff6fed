/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The --json event writer (json_out.h). Strings are escaped as JSON
 * requires (quote, backslash, control characters); other bytes, such as
 * the UTF-8 of a file name, pass through unchanged.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>

#include "cmd/json_out.h"
#include "util/json_esc.h"

void json_str(FILE *out, const char *s)
{
	char buf[256];
	size_t len;

	fputc('"', out);
	do {
		s = json_escape(buf, sizeof(buf), s, &len);
		fwrite(buf, 1, len, out);
	} while (*s);
	fputc('"', out);
}

/*
 * Whether out is a regular file: its file events go in blocks (stdio's),
 * not a write per line (two per file: 200,000 write(2) calls for a
 * re-run of 100,000 files). A pipe or terminal gets each line as it
 * happens; every other event is flushed at once everywhere.
 */
static bool to_file(FILE *out)
{
	static FILE *seen;
	static bool reg;
	struct stat st;

	if (out != seen) {
		seen = out;
		reg = fstat(fileno(out), &st) == 0 && S_ISREG(st.st_mode);
	}
	return reg;
}

static void end(FILE *out)
{
	fputs("}\n", out);
	fflush(out);
}

/* A file event's end: flushed unless out is a regular file. */
static void end_file(FILE *out)
{
	fputs("}\n", out);
	if (!to_file(out))
		fflush(out);
}

/* --delete: an entry removed from DEST (dry run: that would be). */
static void json_deleted(FILE *out, const struct xfer_file_report *r)
{
	fputs("{\"event\":\"file_deleted\",\"path\":", out);
	json_str(out, r->path);
	fputs(",\"type\":", out);
	json_str(out, r->kind ? r->kind : "file");
	fputs(",\"status\":", out);
	json_str(out, r->status ? "failed" : "ok");
	if (r->dry)
		fputs(",\"would\":\"delete\"", out);
	if (r->status) {
		fputs(",\"class\":", out);
		json_str(out, xfer_fail_name(r->klass));
		fputs(",\"error\":", out);
		json_str(out, r->message ? r->message : strerror(-r->status));
	}
	end_file(out);
}

void json_file(FILE *out, const struct xfer_file_report *r)
{
	if (r->deleted) {
		json_deleted(out, r);
		return;
	}
	/* A byte range of a split file (rdcp-mpi): its own event. */
	fputs(!r->done		   ? "{\"event\":\"file_start\",\"path\":"
	      : r->range_count && !r->final ? "{\"event\":\"range_done\",\"path\":"
					   : "{\"event\":\"file_done\",\"path\":",
	      out);
	json_str(out, r->path);
	if (r->range_count && r->done && !r->final)
		fprintf(out, ",\"range\":%" PRIu32, r->range_idx);
	if (r->range_count && r->done)
		fprintf(out, ",\"ranges\":%" PRIu32, r->range_count);
	fputs(",\"type\":", out);
	json_str(out, r->kind ? r->kind : "file");
	fprintf(out, ",\"bytes\":%" PRIu64, r->bytes);
	if (!r->done) {
		end_file(out);
		return;
	}
	fprintf(out,
		",\"sent\":%" PRIu64 ",\"seconds\":%.6f,\"status\":", r->sent,
		r->seconds);
	json_str(out, r->status ? "failed" : r->skipped ? "skipped" : "ok");
	if (!r->status && r->skipped && r->reason) {
		fputs(",\"reason\":", out);
		json_str(out, r->reason);
	}
	if (r->dry) { /* --dry-run: what a copy would do */
		fputs(",\"would\":", out);
		json_str(out, !r->exists ? "new"
			      : strcmp(r->kind ? r->kind : "", "dir")
				      ? "replace"
				      : "exists");
	}
	if (r->status) {
		fputs(",\"class\":", out);
		json_str(out, xfer_fail_name(r->klass));
		fputs(",\"error\":", out);
		json_str(out, r->message ? r->message : strerror(-r->status));
	} else {
		fputs(",\"digest\":", out);
		json_str(out, r->digest);
		fputs(",\"algorithm\":", out);
		json_str(out, r->algorithm);
	}
	end_file(out);
}

void json_error(FILE *out, enum xfer_fail f, int exit_code, const char *message)
{
	fputs("{\"event\":\"error\",\"class\":", out);
	json_str(out, xfer_fail_name(f));
	fprintf(out, ",\"exit\":%d,\"message\":", exit_code);
	json_str(out, message);
	end(out);
}

void json_attempt(FILE *out, int rank, unsigned int attempt, enum xfer_fail f,
		  int exit_code, const char *message, const char *transport,
		  bool again, unsigned int wait_ms)
{
	fputs("{\"event\":\"attempt\",", out);
	if (rank >= 0)
		fprintf(out, "\"rank\":%d,", rank);
	fprintf(out, "\"attempt\":%u,\"class\":", attempt);
	json_str(out, xfer_fail_name(f));
	fprintf(out, ",\"exit\":%d,\"message\":", exit_code);
	json_str(out, message);
	/* Where it ran: null when it never had a session. */
	if (transport) {
		fputs(",\"transport\":", out);
		if (transport[0])
			json_str(out, transport);
		else
			fputs("null", out);
	}
	fprintf(out, ",\"retry\":%s,\"wait\":%.3f", again ? "true" : "false",
		again ? wait_ms / 1000.0 : 0.0);
	end(out);
}

void json_summary(FILE *out, const struct xfer_stats *st, enum xfer_fail f,
		  int exit_code, bool dry_run, unsigned int retries)
{
	json_summary_with(out, st, f, exit_code, dry_run, retries, NULL);
}

void json_summary_with(FILE *out, const struct xfer_stats *st, enum xfer_fail f,
		       int exit_code, bool dry_run, unsigned int retries,
		       const char *extra)
{
	fprintf(out,
		"{\"event\":\"summary\",\"files_ok\":%" PRIu64
		",\"files_failed\":%" PRIu64 ",\"files_skipped\":%" PRIu64
		",\"files_packed\":%" PRIu64 ",\"bytes\":%" PRIu64
		",\"seconds\":%.6f,\"bytes_per_second\":%.0f,\"transport\":",
		st->files_ok, st->files_failed, st->files_skipped,
		st->files_packed, st->bytes, st->seconds,
		st->seconds > 0 ? st->bytes / st->seconds : 0.0);
	json_str(out, st->transport);
	fputs(",\"device\":", out);
	json_str(out, st->device);
	/* Where the last session ran (null before any did, or anywhere). */
	if (st->workers && st->numa_node >= 0)
		fprintf(out, ",\"numa_node\":%d", st->numa_node);
	else
		fputs(",\"numa_node\":null", out);
	fprintf(out, ",\"workers\":%u,\"pages\":", st->workers);
	json_str(out, st->pages);
	fprintf(out, ",\"sessions\":%u", st->sessions);
	fputs(",\"peer\":", out);
	json_str(out, st->peer);
	fprintf(out, ",\"deleted\":%" PRIu64, st->deleted);
	fputs(",\"result\":", out);
	json_str(out, xfer_fail_name(f));
	fprintf(out, ",\"retries\":%u,%s\"exit\":%d", retries,
		dry_run ? "\"dry_run\":true," : "", exit_code);
	if (extra)
		fprintf(out, ",%s", extra);
	end(out);
}
