/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * rdcp --check [HOST]: this host's RDMA devices, ports, memlock and huge
 * pages (cm_check), then a receiver's own modules file and client keys,
 * or the receiver at HOST over ssh; one line each on stdout, tagged ok,
 * WARNING or PROBLEM, and the number of problems last.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cmd/args.h"
#include "cmd/exit_codes.h"
#include "cmd/run.h"
#include "util/hugemem.h"
#include "util/key_dir.h"
#include "util/modconf.h"

static void check_line(void *arg, enum cm_check_kind kind, const char *text)
{
	static const char *const tag[] = {
		[CM_CHECK_OK] = "ok      ",
		[CM_CHECK_INFO] = "        ",
		[CM_CHECK_PROBLEM] = "PROBLEM ",
		[CM_CHECK_WARN] = "WARNING ",
	};

	printf("%s%s\n", tag[kind], text);
}

/* A problem of the modules file, "FILE:LINE: what", counted. */
static void check_conf_err(void *arg, const char *line)
{
	(*(int *)arg)++;
	check_line(NULL, CM_CHECK_PROBLEM, line);
}

/*
 * rdcp --check: a receiver's modules file and client keys (--modules,
 * --clients, else the package's paths when they exist). Problems found.
 */
static int check_access(const struct run *run)
{
	const char *mf = run->o.serve.modules_file,
		   *cd = run->o.serve.clients_dir;
	char line[4200];
	int problems = 0;

	if (!mf && access(MODULES_DEFAULT, F_OK) == 0)
		mf = MODULES_DEFAULT;
	if (!cd && access(CLIENTS_DEFAULT, F_OK) == 0)
		cd = CLIENTS_DEFAULT;
	if (mf) {
		struct modconf mc;
		int rc = modconf_load(mf, &mc, check_conf_err, &problems);

		if (rc == -ENOMEM)
			problems++;
		for (size_t i = 0; !rc && i < mc.n; i++) {
			const struct modconf_module *m = &mc.v[i];

			if (access(m->path, F_OK) == 0)
				continue;
			snprintf(line, sizeof(line),
				 "%s:%u: module %s: path '%s': %s", mf,
				 m->line, m->name, m->path, strerror(errno));
			check_line(NULL, CM_CHECK_WARN, line);
		}
		if (!rc) {
			snprintf(line, sizeof(line), "modules file %s: %zu "
				 "module%s", mf, mc.n, mc.n == 1 ? "" : "s");
			check_line(NULL, CM_CHECK_OK, line);
		}
		modconf_release(&mc);
	}
	if (cd) {
		struct key_dir kd;

		/* key_dir_load said what is wrong, file by file */
		if (key_dir_load(cd, &kd)) {
			snprintf(line, sizeof(line),
				 "client keys in %s: not usable (above)", cd);
			check_line(NULL, CM_CHECK_PROBLEM, line);
			problems++;
		} else {
			snprintf(line, sizeof(line), "client keys in %s: %zu",
				 cd, kd.n);
			check_line(NULL, CM_CHECK_OK, line);
		}
		key_dir_release(&kd);
	}
	return problems;
}

int check_run(struct run *run)
{
	int problems;

	hugemem_set_mode(run->o.link.hugepages);
	problems = cm_check(&run->o.link.addr, xfer_pinned_bytes(&run->o),
			    check_line, NULL);
	if (!run->o.ssh.rsh)
		problems += check_access(run);

	if (run->o.ssh.rsh)
		problems += xfer_check_remote(&run->o, check_line, NULL);

	printf("%d problem%s found\n", problems, problems == 1 ? "" : "s");
	return problems ? RDCP_EXIT_RESOURCE : RDCP_EXIT_OK;
}
