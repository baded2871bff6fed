/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * A module's byte limits (rdcp-modules.conf(5)): quota= (the bytes its
 * tree may hold) and max-bytes= (the bytes one push may write into it).
 *
 * Usage is measured cheaply for a big tree: a thread of its own walks
 * each quota= module's tree (the allocated blocks of its regular files,
 * on the file system of its path) when the receiver starts, after each
 * reload and every QUOTA_WALK_S; in between, the sessions keep it
 * current with what they place, replace and delete (the sink's budget,
 * role.h). A file whose announced size would take its module over
 * either limit is refused before anything of it is written; until a
 * module's first walk ends, its quota refuses every file (it fails
 * closed). Temporaries left by failed sessions and files changed by
 * others than rdcp count from the next walk on.
 *
 * What a client is told names its module, the rule and the limit, never
 * a path or another module's figures (doc/SECURITY.md); the figures are
 * in the metrics (operator-only).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "transfer/server/server_int.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/units.h"

/*
 * Directory levels a walk descends (an fd each). A deeper tree fails the
 * walk: what is beneath would go uncounted, so the usage kept is not
 * replaced (a module never walked refuses its files).
 */
#define QUOTA_DEPTH_MAX 256

/* The usage of module name, made if missing; srv->lock held. */
static struct module_usage *usage_of(struct server *srv, const char *name)
{
	struct module_usage *u;

	for (u = srv->usage; u; u = u->next)
		if (!strcmp(u->name, name))
			return u;
	u = calloc(1, sizeof(*u));
	if (!u)
		return NULL;
	snprintf(u->name, sizeof(u->name), "%s", name);
	u->mm = metrics_module(&srv->metrics, name);
	u->next = srv->usage;
	srv->usage = u;
	return u;
}

/* used moved by d (a signed change, never below 0); srv->lock held. */
static void usage_add(struct module_usage *u, int64_t d)
{
	if (d < 0 && (uint64_t)-d > u->used)
		u->used = 0;
	else
		u->used += (uint64_t)d;
	if (u->walking)
		u->delta += d;
	atomic_store_explicit(&u->mm->used, (int_fast64_t)u->used,
			      memory_order_relaxed);
}

/*
 * The allocated bytes of the regular files beneath fd (taken: closed
 * here), on file system dev, into *sum. 0, -ECANCELED when the
 * receiver stops, or -ELOOP: deeper than QUOTA_DEPTH_MAX. Entries that
 * cannot be looked at are left out.
 */
static int walk_dir(struct server *srv, int fd, dev_t dev, unsigned int depth,
		    uint64_t *sum)
{
	DIR *d = fdopendir(fd);
	struct dirent *de;
	int rc = 0;

	if (!d) {
		close(fd);
		return 0;
	}
	while (!rc && (de = readdir(d))) {
		struct stat st;
		int c;

		if (atomic_load_explicit(&srv->walk.stop,
					 memory_order_relaxed)) {
			rc = -ECANCELED;
			break;
		}
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (S_ISREG(st.st_mode)) {
			*sum += (uint64_t)st.st_blocks * 512;
			continue;
		}
		if (!S_ISDIR(st.st_mode) || st.st_dev != dev)
			continue;
		if (depth + 1 >= QUOTA_DEPTH_MAX) {
			rc = -ELOOP;
			break;
		}
		c = openat(dirfd(d), de->d_name,
			   O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (c >= 0)
			rc = walk_dir(srv, c, dev, depth + 1, sum);
	}
	closedir(d);
	return rc;
}

/* One walk of module m's tree: its usage measured and published. */
static void walk_module(struct server *srv, const struct modconf_module *m)
{
	struct module_usage *u;
	char sz[32];
	uint64_t sum = 0;
	double t0 = clock_now_s();
	bool known = false;
	struct stat st;
	int fd, rc;

	pthread_mutex_lock(&srv->lock);
	u = usage_of(srv, m->name);
	if (u) {
		known = u->known;
		u->walking = true;
		u->delta = 0;
		atomic_store_explicit(&u->mm->quota, m->quota,
				      memory_order_relaxed);
	}
	pthread_mutex_unlock(&srv->lock);
	if (!u) {
		log_err("module %s: out of memory for its usage", m->name);
		return;
	}
	fd = open(m->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		rc = -errno;
		if (fd >= 0)
			close(fd);
		log_err("module %s: cannot measure its path '%s' for its "
			"quota: %s",
			m->name, m->path, strerror(-rc));
	} else {
		rc = walk_dir(srv, fd, st.st_dev, 0, &sum);
		if (rc == -ELOOP)
			log_err("module %s: its tree is more than %d "
				"directories "
				"deep: not measured for its quota (%s)",
				m->name, QUOTA_DEPTH_MAX,
				known ? "the usage kept as it was"
				      : "its files refused");
	}
	pthread_mutex_lock(&srv->lock);
	u->walking = false;
	if (!rc) {
		int64_t used = (int64_t)sum + u->delta;

		u->used = used > 0 ? (uint64_t)used : 0;
		u->known = true;
		atomic_store_explicit(&u->mm->used, (int_fast64_t)u->used,
				      memory_order_relaxed);
		atomic_store_explicit(&u->mm->known, true,
				      memory_order_release);
	}
	pthread_mutex_unlock(&srv->lock);
	if (!rc)
		log_info("module %s: %s used of its quota (walked in %.2f s)",
			 m->name, units_format_size(u->used, sz, sizeof(sz)),
			 clock_now_s() - t0);
}

static void deadline_in(struct timespec *ts, unsigned int s)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += s;
}

static void *walker(void *arg)
{
	struct server *srv = arg;
	struct quota_walk *w = &srv->walk;
	struct timespec next;

	deadline_in(&next, QUOTA_WALK_S);
	pthread_mutex_lock(&srv->lock);
	for (;;) {
		struct access_cfg *c;

		while (!w->again &&
		       !atomic_load_explicit(&w->stop, memory_order_relaxed))
			if (pthread_cond_timedwait(&w->wake, &srv->lock,
						   &next) == ETIMEDOUT)
				break;
		if (atomic_load_explicit(&w->stop, memory_order_relaxed))
			break;
		w->again = false;
		c = srv->cfg;
		if (c)
			c->refs++;
		pthread_mutex_unlock(&srv->lock);
		for (size_t i = 0; c && i < c->mods.n; i++)
			if (c->mods.v[i].quota &&
			    !atomic_load_explicit(&w->stop,
						  memory_order_relaxed))
				walk_module(srv, &c->mods.v[i]);
		if (c)
			server_cfg_put(srv, c);
		deadline_in(&next, QUOTA_WALK_S);
		pthread_mutex_lock(&srv->lock);
	}
	pthread_mutex_unlock(&srv->lock);
	return NULL;
}

int server_quota_start(struct server *srv)
{
	struct quota_walk *w = &srv->walk;
	pthread_condattr_t ca;
	sigset_t all, old;
	int rc;

	atomic_init(&w->stop, false);
	w->again = true;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->wake, &ca);
	pthread_condattr_destroy(&ca);
	/* The signals are the listener's: no call of the walk is cut. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	rc = pthread_create(&w->tid, NULL, walker, srv);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		log_err("cannot start the walker of the modules' quotas: %s",
			strerror(rc));
		pthread_cond_destroy(&w->wake);
		return -rc;
	}
	w->started = true;
	return 0;
}

void server_quota_rewalk(struct server *srv)
{
	if (!srv->walk.started)
		return;
	pthread_mutex_lock(&srv->lock);
	srv->walk.again = true;
	pthread_cond_signal(&srv->walk.wake);
	pthread_mutex_unlock(&srv->lock);
}

void server_quota_stop(struct server *srv)
{
	struct quota_walk *w = &srv->walk;

	if (w->started) {
		pthread_mutex_lock(&srv->lock);
		atomic_store(&w->stop, true);
		pthread_cond_signal(&w->wake);
		pthread_mutex_unlock(&srv->lock);
		pthread_join(w->tid, NULL);
		pthread_cond_destroy(&w->wake);
		w->started = false;
	}
	while (srv->usage) {
		struct module_usage *u = srv->usage;

		srv->usage = u->next;
		free(u);
	}
}

/* A refusal by rule r: counted, and said to the client in msg. */
static int refuse(struct quota_session *q, enum metrics_rule r,
		  const char **rule)
{
	metrics_add(&q->mm->refused[r], 1);
	atomic_fetch_add(&q->refused, 1);
	*rule = r == METRICS_RULE_QUOTA ? "quota" : "max-bytes";
	return -EDQUOT;
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

static int q_take(void *arg, uint64_t size, uint64_t old, const char **rule,
		  char *msg, size_t msgsz)
{
	struct quota_session *q = arg;
	const struct modconf_module *m = q->mod;
	struct module_usage *u = q->u;
	char lim[32];
	int rc = 0;

	pthread_mutex_lock(&q->srv->lock);
	if (m->max_bytes &&
	    (size > m->max_bytes || q->written > m->max_bytes - size)) {
		snprintf(msg, msgsz,
			 "module %s takes at most %s from one session "
			 "(max-bytes)",
			 m->name,
			 units_format_size(m->max_bytes, lim, sizeof(lim)));
		rc = refuse(q, METRICS_RULE_MAX_BYTES, rule);
	} else if (m->quota && (!u || !u->known)) {
		/* fails closed: no file before the first walk's sum */
		snprintf(msg, msgsz,
			 "module %s is still measuring what it holds for its "
			 "quota, try again later",
			 m->name);
		rc = refuse(q, METRICS_RULE_QUOTA, rule);
	} else if (u && (u->used + size < u->used ||
			 u->used + size > sat_add(m->quota, old))) {
		snprintf(msg, msgsz,
			 "module %s would go over its quota of %s (quota)",
			 m->name,
			 units_format_size(m->quota, lim, sizeof(lim)));
		rc = refuse(q, METRICS_RULE_QUOTA, rule);
	}
	if (!rc) {
		q->written += size;
		if (u)
			usage_add(u, (int64_t)size - (int64_t)old);
	}
	pthread_mutex_unlock(&q->srv->lock);
	return rc;
}

static void q_give_back(void *arg, uint64_t size, uint64_t old)
{
	struct quota_session *q = arg;

	pthread_mutex_lock(&q->srv->lock);
	q->written -= size <= q->written ? size : q->written;
	if (q->u)
		usage_add(q->u, (int64_t)old - (int64_t)size);
	pthread_mutex_unlock(&q->srv->lock);
}

static void q_freed(void *arg, uint64_t bytes)
{
	struct quota_session *q = arg;

	if (!q->u)
		return;
	pthread_mutex_lock(&q->srv->lock);
	usage_add(q->u, -(int64_t)bytes);
	pthread_mutex_unlock(&q->srv->lock);
}

const struct sink_budget *server_quota_session(struct server *srv,
					       struct quota_session *q,
					       const struct modconf_module *m)
{
	if (!m || (!m->quota && !m->max_bytes))
		return NULL;
	q->srv = srv;
	q->mod = m;
	q->written = 0;
	q->mm = metrics_module(&srv->metrics, m->name);
	q->u = NULL;
	if (m->quota) {
		pthread_mutex_lock(&srv->lock);
		q->u = usage_of(srv, m->name);
		pthread_mutex_unlock(&srv->lock);
		/* out of memory: q_take refuses every file */
		atomic_store_explicit(&q->mm->quota, m->quota,
				      memory_order_relaxed);
	}
	q->budget = (struct sink_budget){
		.take = q_take,
		.give_back = q_give_back,
		.freed = q_freed,
		.arg = q,
	};
	return &q->budget;
}
