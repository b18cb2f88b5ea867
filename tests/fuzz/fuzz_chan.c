/* Hostile bytes from a channel peer: after the handshake, arbitrary frames
 * must end in an error or a frame, never a crash or an overread. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/chan.h"
#include "lib/err.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint8_t key[CHAN_KEY_LEN] = { 7 };
	int sv[2];
	struct chan c;
	struct verr err;

	if (size > 60000 || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
		return 0;
	/* The socket buffer holds the whole input, so one thread suffices. */
	if (write(sv[1], "VHPCCH1\0" "abcdefgh", 16) != 16 ||
	    (size && write(sv[1], data, size) != (ssize_t)size)) {
		close(sv[0]);
		close(sv[1]);
		return 0;
	}
	close(sv[1]);
	if (chan_server(&c, sv[0], key, 100, &err) == 0) {
		for (int i = 0; i < 16; i++) {
			uint8_t type;
			char *buf;
			size_t len;

			if (chan_recv(&c, &type, &buf, &len, 100, &err) != 0)
				break;
			free(buf);
		}
		chan_close(&c);
	} else {
		close(sv[0]);
	}
	return 0;
}
