/* Hostile frames at a daemon's socket (a request expected) or a client's
 * (a reply, or a daemon's notice): length headers, notices, credentials and
 * bodies from a peer that does not follow the protocol.  Credentials fail
 * munge decoding (no munged, or not valid), and every path must end in an
 * error, never a crash or an overread.  The first byte picks the side. */
#include <json-c/json.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/err.h"
#include "lib/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int sv[2];
	struct json_object *m;
	struct wire_peer peer;
	struct verr err;
	const char *answers;

	/* No munged here: decoding fails fast instead of queueing. */
	setenv("VHPC_MUNGE_SOCKET", "/nonexistent/vhpc-fuzz.sock", 1);
	if (size < 1 || size > 60000 || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
		return 0;
	answers = data[0] & 1 ? "0123456789abcdef0123456789abcdef" : NULL;
	data++;
	size--;
	if (size && write(sv[1], data, size) != (ssize_t)size) {
		close(sv[0]);
		close(sv[1]);
		return 0;
	}
	close(sv[1]);
	for (int i = 0; i < 4; i++) {
		if (wire_recv(sv[0], &m, &peer, answers, 100, &err) != 0)
			break;
		json_object_put(m);
	}
	close(sv[0]);
	return 0;
}
