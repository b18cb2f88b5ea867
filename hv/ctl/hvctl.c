/* vhpc-hvctl: send one request to a vhpc-hv control socket and print the
 * reply (one JSON line).  Exit status 0 when the reply says "ok":true.
 *   vhpc-hvctl SOCKET status|pause|resume|poweroff|kill
 *   vhpc-hvctl SOCKET --raw 'JSON'        (for tests of bad requests) */
#include "lib/fdio.h"
#include "lib/parse.h"

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
	int fd;

	if (argc < 3 || (argc == 4 && strcmp(argv[2], "--raw")) || argc > 4) {
		fprintf(stderr, "usage: vhpc-hvctl SOCKET status|pause|resume|poweroff|kill\n"
				"       vhpc-hvctl SOCKET --raw JSON\n");
		return 2;
	}
	if (strlen(argv[1]) >= sizeof(a.sun_path)) {
		fprintf(stderr, "vhpc-hvctl: socket path too long\n");
		return 2;
	}
	strcpy(a.sun_path, argv[1]);
	if (argc == 4)
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
	if (write_full(fd, req, strlen(req)) < 0) {
		perror("vhpc-hvctl: write");
		return 1;
	}
	while (n < sizeof(reply) - 1) {
		ssize_t r;

		if (wait_readable(fd, 10000) != 0) {
			fprintf(stderr, "vhpc-hvctl: no reply within 10 s\n");
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
	return strstr(reply, "\"ok\":true") ? 0 : 1;
}
