/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The receiver's audit trail (rdcp.1, "RECEIVER LOG"): one line per
 * authenticated session at the default level and, at -v, one per file:
 * who (the client's name), from where, which module, which way, what,
 * the result; with --audit-log the same as JSON lines appended to a file
 * for a log shipper, each with one write() so that lines of concurrent
 * sessions never interleave, the file reopened on SIGHUP (logrotate);
 * with --json the same JSON lines on stdout too: one home for the fields.
 * Each file done is also counted in the metrics here (metrics.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "transfer/server/server_int.h"
#include "util/io.h"
#include "util/json_esc.h"
#include "util/log.h"

/* Longest JSON line: a path of PATH_MAX bytes each escaped to 6, and more. */
#define AUDIT_LINE_MAX (6 * 4400 + 2048)

int audit_log_open(struct audit_log *a, const char *path, bool events)
{
	pthread_mutex_init(&a->lock, NULL);
	a->path = path;
	a->fd = -1;
	a->events = events;
	if (!path)
		return 0;
	a->fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
	if (a->fd < 0) {
		int e = errno;

		log_err("cannot open audit log '%s': %s", path, strerror(e));
		pthread_mutex_destroy(&a->lock);
		return -e;
	}
	return 0;
}

void audit_log_reopen(struct audit_log *a)
{
	int fd;

	if (!a->path)
		return;
	fd = open(a->path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
	if (fd < 0) {
		log_err("cannot reopen audit log '%s': %s (still writing to "
			"the one open)",
			a->path, strerror(errno));
		return;
	}
	pthread_mutex_lock(&a->lock);
	close(a->fd);
	a->fd = fd;
	pthread_mutex_unlock(&a->lock);
	log_info("audit log '%s' reopened", a->path);
}

void audit_log_close(struct audit_log *a)
{
	if (a->fd >= 0)
		close(a->fd);
	a->fd = -1;
	pthread_mutex_destroy(&a->lock);
}

/* A JSON line being made; cut (never sent) when it does not fit. */
struct jline {
	char *buf;
	size_t len;
	bool cut;
};

static void jraw(struct jline *j, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void jraw(struct jline *j, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (j->cut)
		return;
	va_start(ap, fmt);
	n = vsnprintf(j->buf + j->len, AUDIT_LINE_MAX - j->len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= AUDIT_LINE_MAX - j->len)
		j->cut = true;
	else
		j->len += (size_t)n;
}

/* ,"name":"value" with value escaped. */
static void jstr(struct jline *j, const char *name, const char *v)
{
	size_t n;

	jraw(j, ",\"%s\":\"", name);
	if (j->cut)
		return;
	v = json_escape(j->buf + j->len, AUDIT_LINE_MAX - j->len, v, &n);
	j->len += n;
	if (*v)
		j->cut = true;
	jraw(j, "\"");
}

/* {"event":"...","time":"2026-01-02T03:04:05.678Z" and who, where, what. */
static void jhead(struct jline *j, const char *event,
		  const struct srv_session *s)
{
	struct timespec ts;
	struct tm tm;
	char t[32];

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(t, sizeof(t), "%Y-%m-%dT%H:%M:%S", &tm);
	jraw(j, "{\"event\":\"%s\",\"time\":\"%s.%03ldZ\"", event, t,
	     ts.tv_nsec / 1000000);
	jstr(j, "peer", s->peer);
	jstr(j, "client", s->client);
	jstr(j, "module", s->module);
	jstr(j, "op", s->role == WIRE_PUSH ? "push" : "pull");
}

/* Appends j's line (with its newline) in one write(). */
static void jsend(struct audit_log *a, struct jline *j)
{
	jraw(j, "}\n");
	if (j->cut) {
		log_warn("audit log: a line longer than %u bytes left out",
			 AUDIT_LINE_MAX);
		return;
	}
	pthread_mutex_lock(&a->lock);
	if (a->fd >= 0 && write(a->fd, j->buf, j->len) != (ssize_t)j->len)
		log_warn("cannot write audit log '%s': %s", a->path,
			 strerror(errno));
	/* --json: a reader that went away costs no more than the line */
	if (a->events && io_write_full(STDOUT_FILENO, j->buf, j->len))
		a->events = false;
	pthread_mutex_unlock(&a->lock);
}

/* Whether JSON lines go anywhere: the audit log, or stdout (--json). */
static bool jwanted(const struct audit_log *a)
{
	return a->fd >= 0 || a->events;
}

void audit_session(const struct srv_session *s, const struct xfer_stats *st,
		   enum xfer_fail v, double seconds)
{
	struct audit_log *a = &s->srv->alog;
	char line[512];

	unsigned int refused = atomic_load(&s->q.refused);

	snprintf(line, sizeof(line),
		 "session peer=%s client=%s module=%s op=%s files=%llu "
		 "failed=%llu refused=%u bytes=%llu result=%s seconds=%.2f",
		 s->peer, s->client, s->module,
		 s->role == WIRE_PUSH ? "push" : "pull",
		 (unsigned long long)st->files_ok,
		 (unsigned long long)st->files_failed, refused,
		 (unsigned long long)st->bytes, xfer_fail_name(v), seconds);
	/* An rdcp --server's user is its client, with its own summary. */
	if (s->srv->o->ssh.ssh_server)
		log_info("%s", line);
	else
		log_note("%s", line);
	if (jwanted(a)) {
		struct jline j = { .buf = malloc(AUDIT_LINE_MAX) };

		if (!j.buf)
			return;
		jhead(&j, "session", s);
		jraw(&j,
		     ",\"files\":%llu,\"failed\":%llu,\"refused\":%u,"
		     "\"bytes\":%llu",
		     (unsigned long long)st->files_ok,
		     (unsigned long long)st->files_failed, refused,
		     (unsigned long long)st->bytes);
		jstr(&j, "result", xfer_fail_name(v));
		jraw(&j, ",\"seconds\":%.3f", seconds);
		jsend(a, &j);
		free(j.buf);
	}
}

/*
 * The file's result word: ok, kept (left as it was), refused (a module's
 * byte limit, its rule beside it), or its class.
 */
static const char *file_result(const struct xfer_file_report *r)
{
	if (r->status && r->rule)
		return "refused";
	if (r->status)
		return xfer_fail_name(r->klass);
	return r->skipped ? "kept" : "ok";
}

void audit_file(void *arg, const struct xfer_file_report *r)
{
	struct srv_session *s = arg;
	struct audit_log *a = &s->srv->alog;
	int d = s->role == WIRE_PUSH ? METRICS_IN : METRICS_OUT;
	bool regular = r->kind && !strcmp(r->kind, "file");
	/* a split file's range: its bytes; it is one file, by its final */
	uint64_t bytes = r->range_count ? r->range_len : r->bytes;
	bool whole = !r->range_count || r->final;

	if (!r->done || r->deleted)
		return;
	if (r->status) {
		metrics_add(&s->mp->failed[d], 1);
	} else {
		metrics_add(&s->mp->files[d], whole);
		if (r->skipped)
			metrics_add(&s->srv->metrics.kept, whole);
		else if (regular && !r->dry) {
			metrics_add(&s->mp->bytes[d], bytes);
			metrics_add(&s->md->bytes[d], bytes);
		}
	}
	if (log_get_level() < LOG_INFO)
		return;
	{
		char path[4 * 4400];

		log_escape(path, sizeof(path), r->path ? r->path : "");
		log_info("file peer=%s client=%s module=%s op=%s path='%s' "
			 "bytes=%llu result=%s%s%s",
			 s->peer, s->client, s->module,
			 s->role == WIRE_PUSH ? "push" : "pull", path,
			 (unsigned long long)(regular ? bytes : 0),
			 file_result(r), r->rule ? " rule=" : "",
			 r->rule ? r->rule : "");
	}
	if (jwanted(a)) {
		struct jline j = { .buf = malloc(AUDIT_LINE_MAX) };

		if (!j.buf)
			return;
		jhead(&j, "file", s);
		jstr(&j, "path", r->path ? r->path : "");
		jstr(&j, "type", r->kind ? r->kind : "file");
		jraw(&j, ",\"bytes\":%llu",
		     (unsigned long long)(regular ? bytes : 0));
		jstr(&j, "result", file_result(r));
		if (r->rule)
			jstr(&j, "rule", r->rule);
		jsend(a, &j);
		free(j.buf);
	}
}
