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

static int state_fd = -1;
static uint64_t reserve;                 /* its size: ROOM_RESERVE_MAX, less on small filesystems */
static uint64_t spool_keep;
static bool have_reserve;

static uint64_t state_free(void)
{
	struct statvfs v;

	return fstatvfs(state_fd, &v) == 0 ? (uint64_t)v.f_bavail * v.f_frsize : 0;
}

static bool make_reserve(void)
{
	int fd = openat(state_fd, ROOM_FILE, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	int e;

	if (fd < 0)
		return false;
	e = posix_fallocate(fd, 0, (off_t)reserve);
	if (e == 0 && fsync(fd) < 0)
		e = errno;
	close(fd);
	if (e) {
		unlinkat(state_fd, ROOM_FILE, 0);
		return false;
	}
	return true;
}

static void give_up_reserve(const char *why)
{
	char a[32], b[32];

	unlinkat(state_fd, ROOM_FILE, 0);
	have_reserve = false;
	g.db_full = true;
	log_warn("the state folder %s is nearly full (%s): gave its %s reserve to the database; new jobs are "
		 "refused until there is room (%s free)", g.state_dir, why, fmt_size(reserve, a, sizeof(a)),
		 fmt_size(state_free(), b, sizeof(b)));
}

int ctld_room_open(struct verr *err)
{
	struct statvfs v;
	struct stat st;

	state_fd = open(g.state_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (state_fd < 0 || fstatvfs(state_fd, &v) < 0)
		return verr_errno(err, "state folder %s", g.state_dir);
	reserve = (uint64_t)v.f_blocks * v.f_frsize / 32;
	reserve = reserve > ROOM_RESERVE_MAX ? ROOM_RESERVE_MAX : reserve;
	spool_keep = SPOOL_KEEP_MIN;
	if (fstat(state_fd, &st) == 0 && st.st_dev == ctld_spool_dev())
		spool_keep += 3 * reserve;
	have_reserve = fstatat(state_fd, ROOM_FILE, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
		       (uint64_t)st.st_size >= reserve;
	/* A restart on a full disk starts with the room the reserve held. */
	ctld_room_check();
	return 0;
}

uint64_t ctld_room_spool_keep(void)
{
	return spool_keep;
}

void ctld_room_check(void)
{
	uint64_t f = state_free();
	char a[32];

	if (have_reserve && f < reserve) {
		give_up_reserve("below the reserve's size");
	} else if (!have_reserve && f >= 3 * reserve) {
		have_reserve = make_reserve();
		if (have_reserve && g.db_full)
			log_info("the state folder %s has room again (%s free): new jobs are taken again", g.state_dir,
				 fmt_size(f, a, sizeof(a)));
		g.db_full = !have_reserve;
	} else if (!have_reserve && !g.db_full) {
		g.db_full = true;
		log_warn("the state folder %s has %s free, too little for a reserve for the database: new jobs are "
			 "refused until there is room", g.state_dir, fmt_size(f, a, sizeof(a)));
	}
}

bool ctld_room_release(void)
{
	if (!have_reserve)
		return false;
	give_up_reserve("the database met a full disk");
	return true;
}

int ctld_room_for_jobs(char *why, size_t len)
{
	char a[32];

	ctld_room_check();
	if (!g.db_full)
		return ctld_spool_room(why, len);
	snprintf(why, len, "the state folder %s (the controller's database) is nearly full (%s free): new jobs are "
		 "refused until an admin makes room there", g.state_dir, fmt_size(state_free(), a, sizeof(a)));
	return -1;
}
