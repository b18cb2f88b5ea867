/*
 * Room on disk for the state database.  A commit that fails stops the
 * controller (ctld_state.c), and a controller restarted on a disk that is
 * still full fails again: so the database is never the one left without
 * room.  A reserve file beside it (<state>/ctld.db-reserve, ROOM_RESERVE
 * at most, allocated) is given up the moment its filesystem is nearly full
 * (or a commit meets SQLITE_FULL anyway), and from then on new jobs are
 * refused with a message naming the folder, while the jobs that run go on
 * committing into the room it left.  Once the filesystem has room again
 * the reserve is made anew and jobs are taken again.  The spool, when it
 * shares that filesystem, stops well before (ctld_room_spool_keep).
 */
#include "lib/err.h"
#include "lib/log.h"
#include "lib/parse.h"
#include "ctld.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define ROOM_RESERVE_MAX (16ull << 20)   /* thousands of commits, and a restart */
#define ROOM_FILE        "ctld.db-reserve"
#define SPOOL_KEEP_MIN   (256ull << 10)  /* room for the lines that say output was cut */

static uint64_t state_free(struct ctld *ctl)
{
	struct statvfs v;

	return fstatvfs(ctl->room.state_fd, &v) == 0 ? (uint64_t)v.f_bavail * v.f_frsize : 0;
}

static bool make_reserve(struct ctld *ctl)
{
	int fd = openat(ctl->room.state_fd, ROOM_FILE, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	int e;

	if (fd < 0)
		return false;
	e = posix_fallocate(fd, 0, (off_t)ctl->room.reserve);
	if (e == 0 && fsync(fd) < 0)
		e = errno;
	close(fd);
	if (e) {
		unlinkat(ctl->room.state_fd, ROOM_FILE, 0);
		return false;
	}
	return true;
}

static void give_up_reserve(struct ctld *ctl, const char *why)
{
	char a[32], b[32];

	unlinkat(ctl->room.state_fd, ROOM_FILE, 0);
	ctl->room.have_reserve = false;
	ctl->db_full = true;
	log_warn("the state folder %s is nearly full (%s): gave its %s reserve to the database; new jobs are "
		 "refused until there is room (%s free)", ctl->state_dir, why, fmt_size(ctl->room.reserve, a, sizeof(a)),
		 fmt_size(state_free(ctl), b, sizeof(b)));
}

int ctld_room_open(struct ctld *ctl, struct verr *err)
{
	struct statvfs v;
	struct stat st;

	ctl->room.state_fd = open(ctl->state_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (ctl->room.state_fd < 0 || fstatvfs(ctl->room.state_fd, &v) < 0)
		return verr_errno(err, "state folder %s", ctl->state_dir);
	ctl->room.reserve = (uint64_t)v.f_blocks * v.f_frsize / 32;
	ctl->room.reserve = ctl->room.reserve > ROOM_RESERVE_MAX ? ROOM_RESERVE_MAX : ctl->room.reserve;
	ctl->room.spool_keep = SPOOL_KEEP_MIN;
	if (fstat(ctl->room.state_fd, &st) == 0 && st.st_dev == ctld_spool_dev(ctl))
		ctl->room.spool_keep += 3 * ctl->room.reserve;
	ctl->room.have_reserve = fstatat(ctl->room.state_fd, ROOM_FILE, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
				 S_ISREG(st.st_mode) && (uint64_t)st.st_size >= ctl->room.reserve;
	/* A restart on a full disk starts with the room the reserve held. */
	ctld_room_check(ctl);
	return 0;
}

uint64_t ctld_room_spool_keep(struct ctld *ctl)
{
	return ctl->room.spool_keep;
}

void ctld_room_check(struct ctld *ctl)
{
	uint64_t f = state_free(ctl);
	char a[32];

	if (ctl->room.have_reserve && f < ctl->room.reserve) {
		give_up_reserve(ctl, "below the reserve's size");
	} else if (!ctl->room.have_reserve && f >= 3 * ctl->room.reserve) {
		ctl->room.have_reserve = make_reserve(ctl);
		if (ctl->room.have_reserve && ctl->db_full)
			log_info("the state folder %s has room again (%s free): new jobs are taken again", ctl->state_dir,
				 fmt_size(f, a, sizeof(a)));
		ctl->db_full = !ctl->room.have_reserve;
	} else if (!ctl->room.have_reserve && !ctl->db_full) {
		ctl->db_full = true;
		log_warn("the state folder %s has %s free, too little for a reserve for the database: new jobs are "
			 "refused until there is room", ctl->state_dir, fmt_size(f, a, sizeof(a)));
	}
}

bool ctld_room_release(struct ctld *ctl)
{
	if (!ctl->room.have_reserve)
		return false;
	give_up_reserve(ctl, "the database met a full disk");
	return true;
}

int ctld_room_for_jobs(struct ctld *ctl, char *why, size_t len)
{
	char a[32];

	ctld_room_check(ctl);
	if (!ctl->db_full)
		return ctld_spool_room(ctl, why, len);
	snprintf(why, len, "the state folder %s (the controller's database) is nearly full (%s free): new jobs are "
		 "refused until an admin makes room there", ctl->state_dir, fmt_size(state_free(ctl), a, sizeof(a)));
	return -1;
}
