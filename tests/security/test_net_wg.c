/* Underlay encryption's parts that need no WireGuard in the kernel: the
 * cluster file's option, the nodes' addresses and their keys (checked
 * against wireguard-tools' own `wg pubkey` where it is installed). */
#include "lib/cluster.h"
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/inet.h"
#include "lib/proc.h"
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sodium.h>
#include <unistd.h>
#include <cmocka.h>

#include "nodeagent/net/net.h"

static uint32_t ip(const char *s)
{
	uint32_t a = 0;

	assert_int_equal(ipv4_parse(s, &a), 0);
	return a;
}

static void the_cluster_file_names_key_pool_and_port(void **state)
{
	char path[] = "/tmp/vhpc-wgcl.XXXXXX";
	int fd = mkstemp(path);
	struct cluster_cfg c;
	struct verr e;
	static const char ok[] = "name: t\njob_network:\n  pool: 10.213.0.0/16\n"
				 "  underlay_encryption:\n    key: /etc/vhpc/underlay.key\n    pool: 10.254.0.0/16\n";

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(write_file(path, ok, sizeof(ok) - 1, 0600, &e), 0);
	assert_int_equal(cluster_load(path, &c, &e), 0);
	assert_string_equal(c.wg.key, "/etc/vhpc/underlay.key");
	assert_int_equal(c.wg.pool.addr, ip("10.254.0.0"));
	assert_int_equal(c.wg.pool.prefix, 16);
	assert_int_equal(c.wg.port, 51820);
	cluster_free(&c);
	/* off unless asked for */
	static const char off[] = "name: t\njob_network:\n  pool: 10.213.0.0/16\n";
	assert_int_equal(write_file(path, off, sizeof(off) - 1, 0600, &e), 0);
	assert_int_equal(cluster_load(path, &c, &e), 0);
	assert_null(c.wg.key);
	cluster_free(&c);
	/* a pool too small for node addresses is refused, named */
	static const char bad[] = "name: t\njob_network:\n  pool: 10.213.0.0/16\n"
				  "  underlay_encryption:\n    key: /k\n    pool: 10.254.0.0/28\n";
	assert_int_equal(write_file(path, bad, sizeof(bad) - 1, 0600, &e), 0);
	assert_int_equal(cluster_load(path, &c, &e), -1);
	assert_non_null(strstr(e.msg, "underlay_encryption.pool"));
	unlink(path);
}

static void node_addresses_keep_the_underlay_host_bits(void **state)
{
	struct cluster_wg w = { .pool = { 0, 16 } };

	(void)state;
	w.pool.addr = ip("10.254.0.0");
	assert_int_equal(na_wg_addr(&w, ip("198.18.0.11")), ip("10.254.0.11"));
	assert_int_equal(na_wg_addr(&w, ip("192.168.7.200")), ip("10.254.7.200"));
}

static void keys_are_per_node_and_per_secret(void **state)
{
	const uint8_t s1[] = "0123456789abcdef0123", s2[] = "fedcba9876543210fedc";
	uint8_t a[32], pa[32], b[32], pb[32], c[32], pc[32], d[32], pd[32];
	struct verr e;

	(void)state;
	assert_int_equal(na_wg_keys(s1, 20, ip("198.18.0.11"), a, pa, &e), 0);
	assert_int_equal(na_wg_keys(s1, 20, ip("198.18.0.11"), b, pb, &e), 0);
	assert_memory_equal(pa, pb, 32);
	assert_int_equal(na_wg_keys(s1, 20, ip("198.18.0.12"), c, pc, &e), 0);
	assert_memory_not_equal(pa, pc, 32);
	assert_int_equal(na_wg_keys(s2, 20, ip("198.18.0.11"), d, pd, &e), 0);
	assert_memory_not_equal(pa, pd, 32);
	if (access("/usr/bin/wg", X_OK) == 0) {
		/* WireGuard derives the same public key from the private one */
		char k[45], want[45], cmd[128];
		FILE *f;

		sodium_bin2base64(k, sizeof(k), a, 32, sodium_base64_VARIANT_ORIGINAL);
		sodium_bin2base64(want, sizeof(want), pa, 32, sodium_base64_VARIANT_ORIGINAL);
		snprintf(cmd, sizeof(cmd), "echo %s | /usr/bin/wg pubkey", k);
		assert_non_null(f = popen(cmd, "r"));
		assert_non_null(fgets(k, sizeof(k), f));
		pclose(f);
		assert_string_equal(k, want);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(the_cluster_file_names_key_pool_and_port),
		cmocka_unit_test(node_addresses_keep_the_underlay_host_bits),
		cmocka_unit_test(keys_are_per_node_and_per_secret),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
