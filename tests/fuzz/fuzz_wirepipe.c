/* Hostile bytes on the sealed side of a stream (lib/wirepipe.h: a relay
 * in between, or the network): they must end the stream, never crash it
 * or reach the plain side unauthenticated.  The plain side of this end
 * sends nothing, so only opened bytes can come out of it, and none can:
 * the fuzzer does not know the key. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/wirepipe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint8_t key[WPIPE_KEY_LEN] = { 9 };
	int sealed[2], plain[2];
	char out[64];

	if (size > 100000 || socketpair(AF_UNIX, SOCK_STREAM, 0, sealed) < 0)
		return 0;
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, plain) < 0) {
		close(sealed[0]);
		close(sealed[1]);
		return 0;
	}
	/* The socket buffers hold the input and the one FINAL message this
	 * end seals (its plain side ends at once). */
	if (size && write(sealed[1], data, size) != (ssize_t)size)
		abort();
	shutdown(sealed[1], SHUT_WR);
	shutdown(plain[1], SHUT_WR);
	if (wpipe_relay(plain[0], sealed[0], key, false) == 0)
		abort();   /* nothing unauthenticated ends a stream cleanly */
	if (read(plain[1], out, sizeof(out)) > 0)
		abort();   /* nor comes out of it */
	for (int i = 0; i < 2; i++) {
		close(sealed[i]);
		close(plain[i]);
	}
	return 0;
}
