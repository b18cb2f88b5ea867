/* The node agent connects to guest agents through sockets in directories
 * the guests can write; a symlink planted there must not redirect it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <cmocka.h>

#include "lib/chan.h"
#include "lib/err.h"
#include "lib/fdio.h"
#include "lib/gexec.h"

static void planted_symlink_is_not_followed(void **state)
{
	char dir[] = "/tmp/vhpc-gexec-XXXXXX", real[128], link[128];
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	uint8_t key[CHAN_KEY_LEN] = { 1 };
	struct chan c;
	struct verr err;
	int l;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(real, sizeof(real), "%s/host.sock", dir);
	snprintf(link, sizeof(link), "%s/ctl.sock", dir);
	l = socket(AF_UNIX, SOCK_STREAM, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", real);
	assert_int_equal(bind(l, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(l, 4), 0);
	assert_int_equal(symlink(real, link), 0);
	assert_int_equal(gexec_connect_unix(&c, link, key, 500, &err), -1);
	assert_non_null(strstr(err.msg, "not a socket"));
	/* Nothing reached the host socket. */
	assert_int_equal(wait_readable(l, 50), 1);
	/* The real socket is connectable (the handshake then times out). */
	assert_int_equal(gexec_connect_unix(&c, real, key, 300, &err), -1);
	assert_int_equal(wait_readable(l, 50), 0);
	unlink(link);
	unlink(real);
	close(l);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(planted_symlink_is_not_followed),
	};
	return cmocka_run_group_tests_name("gexec", tests, NULL, NULL);
}
