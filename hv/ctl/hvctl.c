/* vhpc-hvctl: send one request to a vhpc-hv control socket and print the
 * reply (one JSON line).  Exit status 0 when the reply says "ok":true.
 *   vhpc-hvctl SOCKET status|pause|resume|snapshot_check|poweroff|kill
 *   vhpc-hvctl SOCKET snapshot FILE       (FILE created 0600, must not exist;
 *                                          removed again when the snapshot fails)
 *   vhpc-hvctl SOCKET --raw 'JSON'        (for tests of bad requests) */
#include "lib/fdio.h"
#include "lib/parse.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	char req[4200], reply[1 << 16];
	size_t n = 0;
	int fd, sfd = -1;
	bool snap = argc == 4 && !strcmp(argv[2], "snapshot");

	if (argc < 3 || (argc == 4 && strcmp(argv[2], "--raw") && !snap) || argc > 4 ||
	    (argc == 3 && !strcmp(argv[2], "snapshot"))) {
		fprintf(stderr, "usage: vhpc-hvctl SOCKET status|pause|resume|snapshot_check|poweroff|kill\n"
				"       vhpc-hvctl SOCKET snapshot FILE\n"
				"       vhpc-hvctl SOCKET --raw JSON\n");
		return 2;
	}
	if (strlen(argv[1]) >= sizeof(a.sun_path)) {
		fprintf(stderr, "vhpc-hvctl: socket path too long\n");
		return 2;
	}
	strcpy(a.sun_path, argv[1]);
	if (snap) {
		/* vhpc-hv opens no paths: it writes into the descriptor sent
		 * with the request. */
		sfd = open(argv[3], O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (sfd < 0) {
			fprintf(stderr, "vhpc-hvctl: %s: %s\n", argv[3], strerror(errno));
			return 1;
		}
		snprintf(req, sizeof(req), "{\"cmd\":\"snapshot\"}\n");
	} else if (argc == 4)
		snprintf(req, sizeof(req), "%s\n", argv[3]);
	else if (ident_ok(argv[2], 32))
		snprintf(req, sizeof(req), "{\"cmd\":\"%s\"}\n", argv[2]);
	else {
		fprintf(stderr, "vhpc-hvctl: '%s' is not a command name\n", argv[2]);
		return 2;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		perror("vhpc-hvctl: connect");
		return 1;
	}
	if (sfd >= 0) {
		union {
			struct cmsghdr h;
			char b[CMSG_SPACE(sizeof(int))];
		} cm;
		struct iovec iov = { req, strlen(req) };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &cm,
				     .msg_controllen = sizeof(cm) };

		memset(&cm, 0, sizeof(cm));
		cm.h.cmsg_level = SOL_SOCKET;
		cm.h.cmsg_type = SCM_RIGHTS;
		cm.h.cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(&cm.h), &sfd, sizeof(int));
		if (sendmsg(fd, &mh, MSG_NOSIGNAL) != (ssize_t)iov.iov_len) {
			perror("vhpc-hvctl: sendmsg");
			unlink(argv[3]);
			return 1;
		}
		close(sfd);
	} else if (write_full(fd, req, strlen(req)) < 0) {
		perror("vhpc-hvctl: write");
		return 1;
	}
	while (n < sizeof(reply) - 1) {
		ssize_t r;

		/* A snapshot writes all of RAM before it replies. */
		if (wait_readable(fd, snap ? 600000 : 10000) != 0) {
			fprintf(stderr, "vhpc-hvctl: no reply within %d s\n", snap ? 600 : 10);
			if (snap)
				unlink(argv[3]);
			return 1;
		}
		r = read(fd, reply + n, sizeof(reply) - 1 - n);
		if (r <= 0)
			break;
		n += (size_t)r;
		if (memchr(reply, '\n', n))
			break;
	}
	reply[n] = 0;
	close(fd);
	fputs(reply, stdout);
	if (n && reply[n - 1] != '\n')
		putchar('\n');
	if (!strstr(reply, "\"ok\":true")) {
		if (snap)
			unlink(argv[3]);
		return 1;
	}
	return 0;
}
