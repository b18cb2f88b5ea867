#include "lib/binds.h"
#include "lib/err.h"
#include "lib/log.h"
#include "lib/jobpaths.h"

#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

int job_paths_plan(const struct cluster_cfg *cl, const struct job_spec *j, uid_t uid,
		   struct job_paths *out, struct verr *err)
{
	struct bind_req r = {
		.site = (const char *const *)cl->binds.v, .nsite = cl->binds.n,
		.allow = (const char *const *)cl->bind_allow.v, .nallow = cl->bind_allow.n,
		.user = (const char *const *)j->binds.v, .nuser = j->binds.n,
		.workdir = cl->bind_workdir ? j->workdir : NULL,
	};
	struct passwd pw, *p = NULL;
	char buf[4096], why[600], note[600];
	struct stat st;

	memset(out, 0, sizeof(*out));
	snprintf(out->home, sizeof(out->home), "/tmp");
	snprintf(out->wdir, sizeof(out->wdir), "/tmp");
	/* The home of the uid's passwd entry (not the caller's $HOME, which
	 * the caller chooses), when it is a folder here. */
	if (cl->bind_home && getpwuid_r(uid, &pw, buf, sizeof(buf), &p) == 0 && p && p->pw_dir &&
	    stat(p->pw_dir, &st) == 0 && S_ISDIR(st.st_mode) &&
	    bind_path_check("home", p->pw_dir, why, sizeof(why)) == 0 && !bind_dst_protected(p->pw_dir))
		r.home = p->pw_dir;
	if (bind_plan(&r, &out->binds, out->wdir, sizeof(out->wdir), note, sizeof(note), why, sizeof(why)) < 0)
		return verr_set(err, "%s", why);
	if (note[0])
		log_info("%s", note);
	if (r.home)
		snprintf(out->home, sizeof(out->home), "%s", r.home);
	return 0;
}
