/* Config loading: values bind to structs, and every kind of bad input gets
 * an error naming file:line:column and what was expected. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "lib/config.h"
#include "lib/err.h"

struct net { char *subnet; long long mtu; };
struct node { char *name; long long cores; };
struct conf {
	char *name;
	long long guests;
	bool hugepages;
	uint64_t mem;
	int driver;
	struct cf_strlist cmd;
	struct cf_strmap sysctl;
	struct net net;
	struct cf_list nodes;
};

static const char *const drivers[] = { "auto", "container", "kvm", NULL };

static const struct cf_field net_fields[] = {
	{ .key = "subnet", .kind = CF_STR, .off = offsetof(struct net, subnet), .flags = CF_REQUIRED },
	{ .key = "mtu", .kind = CF_INT, .off = offsetof(struct net, mtu), .min = 576, .max = 65520 },
	{ 0 }
};
static const struct cf_schema net_schema = { "net", sizeof(struct net), net_fields };
static const struct cf_field node_fields[] = {
	{ .key = "name", .kind = CF_STR, .off = offsetof(struct node, name), .flags = CF_REQUIRED },
	{ .key = "cores", .kind = CF_INT, .off = offsetof(struct node, cores), .min = 1, .max = 4096 },
	{ 0 }
};
static const struct cf_schema node_schema = { "node", sizeof(struct node), node_fields };
static const struct cf_field conf_fields[] = {
	{ .key = "name", .kind = CF_STR, .off = offsetof(struct conf, name), .flags = CF_REQUIRED },
	{ .key = "guests", .kind = CF_INT, .off = offsetof(struct conf, guests), .min = 1, .max = 1024 },
	{ .key = "hugepages", .kind = CF_BOOL, .off = offsetof(struct conf, hugepages) },
	{ .key = "mem", .kind = CF_SIZE, .off = offsetof(struct conf, mem), .min = 1 << 20, .max = 1ll << 40 },
	{ .key = "driver", .kind = CF_ENUM, .off = offsetof(struct conf, driver), .names = drivers },
	{ .key = "command", .kind = CF_STRLIST, .off = offsetof(struct conf, cmd) },
	{ .key = "sysctl", .kind = CF_STRMAP, .off = offsetof(struct conf, sysctl) },
	{ .key = "network", .kind = CF_STRUCT, .off = offsetof(struct conf, net), .sub = &net_schema },
	{ .key = "nodes", .kind = CF_LIST, .off = offsetof(struct conf, nodes), .sub = &node_schema },
	{ 0 }
};
static const struct cf_schema conf_schema = { "conf", sizeof(struct conf), conf_fields };

static int bind_str(const char *text, struct conf *c, struct verr *err)
{
	cf_doc *d;
	int r;

	memset(c, 0, sizeof(*c));
	if (cf_load_string(&d, "t.yaml", text, strlen(text), err) < 0)
		return -1;
	r = cf_bind(d, cf_root(d), &conf_schema, c, err);
	cf_free_doc(d);
	return r;
}

static void good_file_binds_every_kind(void **state)
{
	struct conf c;
	struct verr err = { "" };
	const char *y =
		"name: job1\n"
		"guests: 4\n"
		"hugepages: yes\n"
		"mem: 2G\n"
		"driver: container\n"
		"command: [vhpc-mpibench, PingPong]\n"
		"sysctl:\n  net.ipv4.tcp_adv_win_scale: 1\n  net.core.rmem_max: '16777216'\n"
		"network: {subnet: 10.1.0.0/24, mtu: 9000}\n"
		"nodes:\n  - {name: a, cores: 8}\n  - name: b\n";

	(void)state;
	assert_int_equal(bind_str(y, &c, &err), 0);
	assert_string_equal(c.name, "job1");
	assert_int_equal(c.guests, 4);
	assert_true(c.hugepages);
	assert_int_equal(c.mem, 2ull << 30);
	assert_int_equal(c.driver, 1);
	assert_int_equal(c.cmd.n, 2);
	assert_string_equal(c.cmd.v[1], "PingPong");
	assert_int_equal(c.sysctl.n, 2);
	assert_string_equal(c.sysctl.key[0], "net.ipv4.tcp_adv_win_scale");
	assert_string_equal(c.sysctl.val[1], "16777216");
	assert_string_equal(c.net.subnet, "10.1.0.0/24");
	assert_int_equal(c.net.mtu, 9000);
	assert_int_equal(c.nodes.n, 2);
	assert_string_equal(((struct node *)c.nodes.v)[1].name, "b");
	assert_int_equal(((struct node *)c.nodes.v)[0].cores, 8);
	cf_release(&conf_schema, &c);
}

/* Each bad input and the words its error must contain, position first. */
static const struct { const char *yaml, *want1, *want2; } bad[] = {
	{ "name: a\nguests: many\n", "t.yaml:2:9:", "guests: expected an integer in 1..1024, got 'many'" },
	{ "name: a\nguests: 0\n", "t.yaml:2:9:", "in 1..1024" },
	{ "name: a\ncolour: red\n", "t.yaml:2:1:", "unknown key 'colour' (expected one of: name, guests" },
	{ "guests: 2\n", "t.yaml:1:1:", "missing required key 'name'" },
	{ "name: a\nmem: lots\n", "t.yaml:2:6:", "mem: expected a size such as 512M or 4G, got 'lots'" },
	{ "name: a\nmem: 1K\n", "t.yaml:2:6:", "outside 1 MiB..1 TiB" },
	{ "name: a\ndriver: xen\n", "t.yaml:2:9:", "expected one of auto, container, kvm, got 'xen'" },
	{ "name: a\nhugepages: maybe\n", "t.yaml:2:12:", "expected true or false" },
	{ "name: a\nname: b\n", "t.yaml:2:1:", "key 'name' appears twice" },
	{ "name: [a, b]\n", "t.yaml:1:7:", "name: expected a string, got a list" },
	{ "name: a\ncommand: ls\n", "t.yaml:2:10:", "expected a list of strings, got a scalar" },
	{ "name: a\ncommand: [ls, {a: b}]\n", "t.yaml:2:15:", "command: expected a string, got a mapping" },
	{ "name: a\nnetwork: {mtu: 9000}\n", "t.yaml:2:10:", "network: missing required key 'subnet'" },
	{ "name: a\nnetwork: {subnet: x, mtu: 100}\n", "t.yaml:2:27:", "network.mtu: expected an integer in 576..65520" },
	{ "name: a\nnodes:\n  - {name: a, cores: -1}\n", "t.yaml:3:22:", "nodes[0].cores" },
	{ "name: a\nsysctl: {a: 1, a: 2}\n", "t.yaml:2:16:", "key 'a' appears twice" },
	{ "name: a\n  guests: 2\n", "t.yaml:2:9:", "YAML syntax error" },
	{ "name: 'unterminated\n", "t.yaml:2:1:", "YAML syntax error" },
	{ "", "t.yaml", "the file is empty" },
	{ "- a\n- b\n", "t.yaml:1:1:", "expected a mapping (key: value lines), got a list" },
	{ "name: a\n---\nname: b\n", "t.yaml:3", "a second YAML document" },
	{ "name: &x [*x]\n", "t.yaml", "expected a string, got a list" },
	{ "name: a\nnodes: &x [*x]\n", "t.yaml", "expected a mapping" },
	{ "name: a\nnetwork: &x {subnet: a, mtu: *x}\n", "t.yaml", "network.mtu: expected an integer, got a mapping" },
};

static void bad_input_names_position_and_expectation(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct conf c;
		struct verr err = { "" };

		if (bind_str(bad[i].yaml, &c, &err) == 0)
			fail_msg("case %zu was accepted: %s", i, bad[i].yaml);
		if (!strstr(err.msg, bad[i].want1) || !strstr(err.msg, bad[i].want2))
			fail_msg("case %zu: error '%s' lacks '%s' / '%s'", i, err.msg,
				 bad[i].want1, bad[i].want2);
		cf_release(&conf_schema, &c);
	}
}

/* A self-nesting schema, so aliases can make deep or wide trees. */
struct tree { char *v; struct cf_list kids; };
static const struct cf_schema tree_schema;
static const struct cf_field tree_fields[] = {
	{ .key = "v", .kind = CF_STR, .off = offsetof(struct tree, v) },
	{ .key = "kids", .kind = CF_LIST, .off = offsetof(struct tree, kids), .sub = &tree_schema },
	{ 0 }
};
static const struct cf_schema tree_schema = { "tree", sizeof(struct tree), tree_fields };

static int bind_tree(const char *text, struct tree *t, struct verr *err)
{
	cf_doc *d;
	int r;

	memset(t, 0, sizeof(*t));
	if (cf_load_string(&d, "t.yaml", text, strlen(text), err) < 0)
		return -1;
	r = cf_bind(d, cf_root(d), &tree_schema, t, err);
	cf_free_doc(d);
	return r;
}

static void alias_bomb_is_refused(void **state)
{
	/* Eight levels of ten-fold aliases: 10^8 nodes if walked naively. */
	char y[4096];
	size_t off = 0;
	struct tree t;
	struct verr err = { "" };

	(void)state;
	off += snprintf(y + off, sizeof(y) - off, "kids:\n - &a0 {v: x}\n");
	for (int i = 1; i < 9; i++)
		off += snprintf(y + off, sizeof(y) - off,
				" - &a%d {kids: [*a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d]}\n",
				i, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1);
	assert_int_equal(bind_tree(y, &t, &err), -1);
	if (!strstr(err.msg, "alias bomb"))
		fail_msg("unexpected error: %s", err.msg);
	cf_release(&tree_schema, &t);
}

static void recursive_alias_is_refused(void **state)
{
	struct tree t;
	struct verr err = { "" };

	(void)state;
	assert_int_equal(bind_tree("kids: &x [{kids: *x}]\n", &t, &err), -1);
	if (!strstr(err.msg, "nested deeper than"))
		fail_msg("unexpected error: %s", err.msg);
	cf_release(&tree_schema, &t);
}

static void missing_file_is_named(void **state)
{
	struct conf c = { 0 };
	struct verr err = { "" };

	(void)state;
	assert_int_equal(cf_bind_file("/nonexistent/x.yaml", &conf_schema, &c, &err), -1);
	assert_non_null(strstr(err.msg, "/nonexistent/x.yaml"));
	assert_non_null(strstr(err.msg, "No such file"));
}

static void huge_file_is_refused(void **state)
{
	size_t n = CF_MAX_FILE + 10;
	char *big = malloc(n);
	cf_doc *d;
	struct verr err = { "" };

	(void)state;
	memset(big, 'a', n);
	assert_int_equal(cf_load_string(&d, "big.yaml", big, n, &err), -1);
	assert_non_null(strstr(err.msg, "big.yaml: larger than"));
	free(big);
}

static void nul_in_scalar_is_refused(void **state)
{
	const char y[] = "name: \"a\\0b\"\n";
	struct conf c;
	struct verr err = { "" };

	(void)state;
	assert_int_equal(bind_str(y, &c, &err), -1);
	assert_non_null(strstr(err.msg, "NUL"));
	cf_release(&conf_schema, &c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(good_file_binds_every_kind),
		cmocka_unit_test(bad_input_names_position_and_expectation),
		cmocka_unit_test(alias_bomb_is_refused),
		cmocka_unit_test(recursive_alias_is_refused),
		cmocka_unit_test(missing_file_is_named),
		cmocka_unit_test(huge_file_is_refused),
		cmocka_unit_test(nul_in_scalar_is_refused),
	};
	return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
