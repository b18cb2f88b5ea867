/*
 * A kvm guest's part of a checkpoint (issue 36; nodeagent/README.md,
 * "Checkpoints"): pausing it through vhpc-hv's control socket, saving it
 * into the root-owned folder the job level gives (dirfd), and opening what
 * a restore starts from.  A guest's folder holds:
 *   snapshot     vhpc-hv's snapshot (hv/README.md, "Snapshots"): vCPUs,
 *                RAM, devices; written by vhpc-hv into a file made here
 *   config.ext4  the job's config disk as the guest mounted it: a new one
 *                made for the restored job could differ in layout, under
 *                a guest's page cache of the old one
 *   scratch.img  its scratch disk, data extents only (holes stay holes)
 *   image        the image id the guest booted: its root disk is the
 *                image's, read-only, so it is named, never copied
 * Every file is made with O_EXCL|O_NOFOLLOW under dirfd: nothing here
 * follows a path a user could change.
 */
#include "lib/err.h"
#include "lib/fdio.h"
#include "nodeagent/drivers/drivers.h"
#include "kvm_int.h"

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* One control request whose reply must say ok; the error vhpc-hv gives
 * otherwise, in its words.  *o (if given) keeps the parsed reply. */
static int control_ok(const struct na_kvm *k, const char *req, int fd, int timeout_ms, struct json_object **o,
		      struct verr *err)
{
	struct json_object *r, *v;
	char *reply;
	int rc = 0;

	if (kvm_control_fd(k->ctl, req, fd, &reply, timeout_ms, err) < 0)
		return -1;
	r = json_tokener_parse(reply);
	if (!r || !json_object_object_get_ex(r, "ok", &v) || !json_object_get_boolean(v)) {
		const char *why = reply;

		if (r && json_object_object_get_ex(r, "error", &v))
			why = json_object_get_string(v);
		rc = verr_set(err, "vhpc-hv: %.300s", why);
		json_object_put(r);
	} else if (o)
		*o = r;
	else
		json_object_put(r);
	free(reply);
	return rc;
}

int kvm_pause(struct na_kvm *k, bool pause, struct verr *err)
{
	struct json_object *o = NULL, *st;
	const char *want = pause ? "paused" : "running", *got;
	int rc = 0;

	if (control_ok(k, pause ? "{\"cmd\":\"pause\"}" : "{\"cmd\":\"resume\"}", -1,
		       (int)(5000 * na_kvm_time_scale()), &o, err) < 0)
		return verr_wrap(err, "guest %s: %s", k->name, pause ? "pause" : "resume");
	/* vhpc-hv answers once every vCPU is out of KVM_RUN: the state it
	 * reports is what a checkpoint relies on. */
	got = json_object_object_get_ex(o, "state", &st) ? json_object_get_string(st) : "?";
	if (strcmp(got, want))
		rc = verr_set(err, "guest %s: vhpc-hv is %.20s after %s", k->name, got, pause ? "pause" : "resume");
	json_object_put(o);
	return rc;
}

bool kvm_paused(const struct na_kvm *k)
{
	struct json_object *o = NULL, *st;
	struct verr e;
	bool paused;

	if (control_ok(k, "{\"cmd\":\"status\"}", -1, (int)(5000 * na_kvm_time_scale()), &o, &e) < 0)
		return false;
	paused = json_object_object_get_ex(o, "state", &st) && !strcmp(json_object_get_string(st), "paused");
	json_object_put(o);
	return paused;
}

int kvm_snapshot_check(const struct na_kvm *k, struct verr *err)
{
	if (control_ok(k, "{\"cmd\":\"snapshot_check\"}", -1, (int)(5000 * na_kvm_time_scale()), NULL, err) < 0)
		return verr_wrap(err, "guest %s", k->name);
	return 0;
}

/* name under dirfd, new, root's 0600. */
static int create_in(int dirfd, const char *name, struct verr *err)
{
	int fd = openat(dirfd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);

	if (fd < 0)
		return verr_errno(err, "%s", name);
	return fd;
}

static int copy_into(int dirfd, const char *name, int from, uint64_t *bytes, struct verr *err)
{
	int fd = create_in(dirfd, name, err), rc;

	if (fd < 0)
		return -1;
	rc = na_copy_sparse(from, fd, bytes, err);
	if (rc == 0 && fsync(fd) < 0)
		rc = verr_errno(err, "%s", name);
	close(fd);
	return rc < 0 ? verr_wrap(err, "%s", name) : 0;
}

int kvm_save(struct na_kvm *k, const struct kvm_save_in *in, int dirfd, uint64_t *bytes, struct verr *err)
{
	struct json_object *o = NULL;
	uint64_t n;
	struct stat st;
	int fd, rc, cfg;

	*bytes = 0;
	/* The image first: a folder without it cannot be restored anyway. */
	fd = create_in(dirfd, "image", err);
	if (fd < 0)
		return -1;
	rc = write_full(fd, in->image_id, strlen(in->image_id)) < 0 || write_full(fd, "\n", 1) < 0 ? -1 : 0;
	close(fd);
	if (rc < 0)
		return verr_errno(err, "image");
	fd = create_in(dirfd, "snapshot", err);
	if (fd < 0)
		return -1;
	/* vhpc-hv writes all of the guest's RAM before it replies. */
	rc = control_ok(k, "{\"cmd\":\"snapshot\"}", fd,
			(int)((30000 + (int)(in->mem >> 20) * 20) * na_kvm_time_scale()), &o, err);
	if (rc == 0 && fsync(fd) < 0)
		rc = verr_errno(err, "snapshot");
	if (rc == 0 && fstat(fd, &st) == 0)
		*bytes += (uint64_t)st.st_size;
	json_object_put(o);
	close(fd);
	if (rc < 0)
		return verr_wrap(err, "snapshot");
	cfg = open(in->config_disk, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (cfg < 0)
		return verr_errno(err, "config disk %s", in->config_disk);
	rc = copy_into(dirfd, "config.ext4", cfg, &n, err);
	close(cfg);
	if (rc < 0)
		return -1;
	*bytes += n;
	if (in->scratch_fd >= 0) {
		if (copy_into(dirfd, "scratch.img", in->scratch_fd, &n, err) < 0)
			return -1;
		*bytes += n;
	}
	return 0;
}

int kvm_restore_open(int dirfd, const char *image_id, bool scratch, struct kvm_restore_fds *r, struct verr *err)
{
	char id[80];
	ssize_t n;
	int fd;

	*r = (struct kvm_restore_fds){ -1, -1, -1 };
	fd = openat(dirfd, "image", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return verr_errno(err, "image");
	n = read(fd, id, sizeof(id) - 1);
	close(fd);
	if (n < 0)
		return verr_errno(err, "image");
	id[n] = 0;
	id[strcspn(id, "\n")] = 0;
	/* The RAM saved holds the guest's page cache of its root disk: any
	 * other disk under it would be read as garbage. */
	if (strcmp(id, image_id))
		return verr_set(err, "the guest was saved running image %.64s, this job has image %.64s "
				"(a snapshot restores only onto the image it ran)", id, image_id);
	struct {
		int *fd;
		const char *name;
		bool want;
	} t[] = {
		{ &r->snapshot, "snapshot", true },
		{ &r->config, "config.ext4", true },
		{ &r->scratch, "scratch.img", scratch },
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct stat st;

		if (!t[i].want)
			continue;
		*t[i].fd = openat(dirfd, t[i].name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
		if (*t[i].fd < 0 || fstat(*t[i].fd, &st) < 0 || !S_ISREG(st.st_mode)) {
			if (*t[i].fd >= 0 && S_ISREG(st.st_mode) == 0)
				verr_set(err, "%s: not a regular file", t[i].name);
			else
				verr_errno(err, "%s", t[i].name);
			kvm_restore_close(r);
			return -1;
		}
	}
	return 0;
}

void kvm_restore_close(struct kvm_restore_fds *r)
{
	int *all[] = { &r->snapshot, &r->config, &r->scratch };

	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (*all[i] >= 0) {
			close(*all[i]);
			*all[i] = -1;
		}
}
