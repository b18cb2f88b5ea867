/* vhpc-rsh parses its arguments as ssh does: options before and after the
 * destination, bundled flags, attached values, and the command words
 * joined with single spaces, exactly. */
#include "lib/err.h"
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "mpi-plugins/rsh/args.h"

static int run(struct rsh_args *a, struct verr *e, ...)
{
	char *argv[64] = { "vhpc-rsh" };
	int argc = 1;
	va_list ap;

	va_start(ap, e);
	while ((argv[argc] = va_arg(ap, char *)))
		argc++;
	va_end(ap);
	return rsh_parse_args(argc, argv, a, e);
}

static void joins_words_like_ssh(void **state)
{
	struct rsh_args a;
	struct verr e;

	(void)state;
	assert_int_equal(run(&a, &e, "node1", "echo", "a b", "'c'", "$HOME", NULL), 0);
	assert_string_equal(a.host, "node1");
	assert_false(a.is_unix);
	assert_string_equal(a.command, "echo a b 'c' $HOME");
	rsh_args_free(&a);
	/* Empty words still count as words (ssh keeps their spaces). */
	assert_int_equal(run(&a, &e, "h", "echo", "", "x", NULL), 0);
	assert_string_equal(a.command, "echo  x");
	rsh_args_free(&a);
	/* Words after the command that look like options belong to it. */
	assert_int_equal(run(&a, &e, "h", "ls", "-l", "-p", "9", NULL), 0);
	assert_string_equal(a.command, "ls -l -p 9");
	assert_int_equal(a.port, 0);
	rsh_args_free(&a);
}

static void open_mpi_style_calls(void **state)
{
	struct rsh_args a;
	struct verr e;

	(void)state;
	/* What plm_rsh passes, roughly: agent args, host, then the orted line. */
	assert_int_equal(run(&a, &e, "-x", "-T", "guest-1", "PATH=/usr/bin:$PATH", ";", "export",
			     "PATH", ";", "/usr/bin/orted", "-mca", "ess", "\"env\"", NULL), 0);
	assert_string_equal(a.host, "guest-1");
	assert_string_equal(a.command,
			    "PATH=/usr/bin:$PATH ; export PATH ; /usr/bin/orted -mca ess \"env\"");
	rsh_args_free(&a);
}

static void options_before_and_after_host(void **state)
{
	struct rsh_args a;
	struct verr e;

	(void)state;
	assert_int_equal(run(&a, &e, "-xTn", "-p2222", "-l", "root", "-i", "/id", "-o",
			     "StrictHostKeyChecking=no", "-oConnectTimeout=3", "-q", "h", "-v",
			     "-4", "true", NULL), 0);
	assert_int_equal(a.port, 2222);
	assert_int_equal(a.connect_timeout_ms, 3000);
	assert_true(a.quiet);
	assert_int_equal(a.verbose, 1);
	assert_string_equal(a.host, "h");
	assert_string_equal(a.command, "true");
	rsh_args_free(&a);
	assert_int_equal(run(&a, &e, "-o", "Port 99", "root@h", "--", "-x", NULL), 0);
	assert_int_equal(a.port, 99);
	assert_string_equal(a.host, "h");
	assert_string_equal(a.command, "-x");
	rsh_args_free(&a);
	/* "--" before the destination ends option parsing for good. */
	assert_int_equal(run(&a, &e, "--", "h", "-x", NULL), 0);
	assert_string_equal(a.command, "-x");
	rsh_args_free(&a);
}

static void destinations(void **state)
{
	struct rsh_args a;
	struct verr e;

	(void)state;
	assert_int_equal(run(&a, &e, "ssh://u@host:2200", "true", NULL), 0);
	assert_string_equal(a.host, "host");
	assert_int_equal(a.port, 2200);
	rsh_args_free(&a);
	assert_int_equal(run(&a, &e, "ssh://[fd00::2]:7", "true", NULL), 0);
	assert_string_equal(a.host, "fd00::2");
	assert_int_equal(a.port, 7);
	rsh_args_free(&a);
	assert_int_equal(run(&a, &e, "10.0.0.2", "true", NULL), 0);
	assert_string_equal(a.host, "10.0.0.2");
	rsh_args_free(&a);
	assert_int_equal(run(&a, &e, "/run/vhpc/g0.sock", "true", NULL), 0);
	assert_true(a.is_unix);
	assert_string_equal(a.host, "/run/vhpc/g0.sock");
	rsh_args_free(&a);
	assert_int_equal(run(&a, &e, "--hello", "h", NULL), 0);
	assert_true(a.hello);
	assert_null(a.command);
	rsh_args_free(&a);
}

static void errors_name_the_problem(void **state)
{
	struct rsh_args a;
	struct verr e;

	(void)state;
	assert_int_equal(run(&a, &e, NULL), -1);
	assert_non_null(strstr(e.msg, "no destination"));
	assert_int_equal(run(&a, &e, "h", NULL), -1);
	assert_non_null(strstr(e.msg, "no command given"));
	assert_int_equal(run(&a, &e, "h", "", NULL), -1);
	assert_non_null(strstr(e.msg, "no command given"));
	assert_int_equal(run(&a, &e, "-p", NULL), -1);
	assert_non_null(strstr(e.msg, "-p needs a value"));
	assert_int_equal(run(&a, &e, "-p", "0", "h", "x", NULL), -1);
	assert_non_null(strstr(e.msg, "not a port number"));
	assert_int_equal(run(&a, &e, "-Z", "h", "x", NULL), -1);
	assert_non_null(strstr(e.msg, "unknown option -Z"));
	assert_int_equal(run(&a, &e, "-L", "80:x:80", "h", "x", NULL), -1);
	assert_non_null(strstr(e.msg, "forwarding"));
	assert_int_equal(run(&a, &e, "-N", "h", NULL), -1);
	assert_int_equal(run(&a, &e, "-f", "h", "x", NULL), -1);
	assert_int_equal(run(&a, &e, "-o", "ProxyCommand=nc %h", "h", "x", NULL), -1);
	assert_int_equal(run(&a, &e, "-o", "ConnectTimeout=soon", "h", "x", NULL), -1);
	assert_int_equal(run(&a, &e, "--long", "h", "x", NULL), -1);
	assert_int_equal(run(&a, &e, "--hello", "h", "x", NULL), -1);
	assert_int_equal(run(&a, &e, "u@", "x", NULL), -1);
	assert_non_null(strstr(e.msg, "names no host"));
	assert_int_equal(run(&a, &e, "ssh://[::1", "x", NULL), -1);
	assert_int_equal(run(&a, &e, "-V", NULL), 0);
	assert_true(a.version);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(joins_words_like_ssh),
		cmocka_unit_test(open_mpi_style_calls),
		cmocka_unit_test(options_before_and_after_host),
		cmocka_unit_test(destinations),
		cmocka_unit_test(errors_name_the_problem),
	};
	return cmocka_run_group_tests_name("rsh_args", tests, NULL, NULL);
}
