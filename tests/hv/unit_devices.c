/* Unit tests of the device registry (hv/devices.c) with devices of its own,
 * the only ones in the hv_devices section here: instances live in the VM,
 * teardown reverses creation, a device another one needs is created before
 * it and torn down after it, and a failed create tears down only what was
 * created.  The section's order within this file is the compiler's, so the
 * checks compare the two halves of the log, not a fixed order. */
#include "lib/err.h"
#include "lib/log.h"
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "hv/vm.h"

/* "+x" for x created, "!x" for x failing, "-x" for x torn down. */
static char events[256];
static char fail_in;            /* the device whose create fails */
static bool self_need;          /* device b needs itself */

static void note(char what, char dev)
{
	size_t n = strlen(events);

	if (n + 2 < sizeof(events)) {
		events[n] = what;
		events[n + 1] = dev;
		events[n + 2] = 0;
	}
}

HV_DEVICE_DECLARE(a);
HV_DEVICE_DECLARE(b);
HV_DEVICE_DECLARE(base);

static int create(struct vm *vm, const struct hv_device *d, char name, struct verr *err)
{
	char *inst = malloc(1);

	assert_non_null(inst);
	*inst = name;
	vm_device_set(vm, d, inst);
	if (fail_in == name) {
		note('!', name);
		return verr_set(err, "%c refused", name);
	}
	note('+', name);
	return 0;
}

static void destroy(struct vm *vm, const struct hv_device *d, char name)
{
	char *inst = vm_device(vm, d);

	/* NULL when create failed before it stored one. */
	if (inst)
		assert_int_equal(*inst, name);
	note('-', name);
	free(inst);
}

static int a_create(struct vm *vm, struct verr *err)
{
	if (vm_device_need(vm, &hv_dev_base, err) < 0)
		return -1;
	return create(vm, &hv_dev_a, 'a', err);
}

static int b_create(struct vm *vm, struct verr *err)
{
	if (self_need && vm_device_need(vm, &hv_dev_b, err) < 0)
		return -1;
	return create(vm, &hv_dev_b, 'b', err);
}

static int base_create(struct vm *vm, struct verr *err)
{
	return create(vm, &hv_dev_base, 'B', err);
}

static void a_destroy(struct vm *vm) { destroy(vm, &hv_dev_a, 'a'); }
static void b_destroy(struct vm *vm) { destroy(vm, &hv_dev_b, 'b'); }
static void base_destroy(struct vm *vm) { destroy(vm, &hv_dev_base, 'B'); }

HV_DEVICE(a, a_create, a_destroy);
HV_DEVICE(b, b_create, b_destroy);
HV_DEVICE(base, base_create, base_destroy);

static int reset(void **state)
{
	(void)state;
	events[0] = 0;
	fail_in = 0;
	self_need = false;
	return 0;
}

/* The device letters of events, in order, that are of kind what. */
static void of_kind(char what, char *out)
{
	for (const char *e = events; *e; e += 2)
		if (e[0] == what)
			*out++ = e[1];
	*out = 0;
}

static void assert_reversed(const char *x, const char *y)
{
	size_t n = strlen(x);

	assert_int_equal(strlen(y), n);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(x[i], y[n - 1 - i]);
}

static void teardown_reverses_creation(void **state)
{
	struct vm *vm = calloc(1, sizeof(*vm));
	struct verr err;
	char made[8], gone[8];

	(void)state;
	assert_int_equal(devices_create(vm, &err), 0);
	of_kind('+', made);
	assert_int_equal(strlen(made), 3);
	/* base is created once, before a, which needs it, wherever it is
	 * in the section. */
	assert_true(strchr(made, 'B') < strchr(made, 'a'));
	assert_int_equal(*(char *)vm_device(vm, &hv_dev_a), 'a');
	devices_destroy(vm);
	of_kind('-', gone);
	assert_reversed(made, gone);
	assert_null(vm_device(vm, &hv_dev_a));
	assert_null(vm_device(vm, &hv_dev_base));
	assert_int_equal(vm->ndev, 0);
	devices_destroy(vm);            /* nothing left: no second teardown */
	of_kind('-', gone);
	assert_int_equal(strlen(gone), 3);
	free(vm);
}

static void a_failed_create_tears_down_what_was_created(void **state)
{
	struct vm *vm = calloc(1, sizeof(*vm));
	struct verr err;
	char made[8], gone[8], all[8];
	const char *e = events;

	(void)state;
	fail_in = 'a';
	assert_int_equal(devices_create(vm, &err), -1);
	assert_non_null(strstr(err.msg, "device a"));
	assert_non_null(strstr(err.msg, "a refused"));
	/* What was created, the failing one included, in creation order. */
	all[0] = 0;
	for (char *p = all; *e && e[0] != '-'; e += 2) {
		*p++ = e[1];
		*p = 0;
	}
	/* Nothing after the failure; base, which a needs, before it. */
	assert_int_equal(all[strlen(all) - 1], 'a');
	assert_non_null(strchr(all, 'B'));
	of_kind('-', gone);
	assert_reversed(all, gone);
	of_kind('+', made);
	assert_null(strchr(made, 'a'));
	/* devices_create left nothing behind for the caller to tear down. */
	assert_int_equal(vm->ndev, 0);
	assert_null(vm_device(vm, &hv_dev_a));
	devices_destroy(vm);
	of_kind('-', gone);
	assert_reversed(all, gone);
	free(vm);
}

static void a_device_needing_itself_fails(void **state)
{
	struct vm *vm = calloc(1, sizeof(*vm));
	struct verr err;

	(void)state;
	self_need = true;
	assert_int_equal(devices_create(vm, &err), -1);
	assert_non_null(strstr(err.msg, "needs itself"));
	assert_int_equal(vm->ndev, 0);
	free(vm);
}

static void each_vm_has_its_own_instances(void **state)
{
	struct vm *v1 = calloc(1, sizeof(*v1)), *v2 = calloc(1, sizeof(*v2));
	struct verr err;

	(void)state;
	assert_int_equal(devices_create(v1, &err), 0);
	assert_int_equal(devices_create(v2, &err), 0);
	assert_non_null(vm_device(v1, &hv_dev_b));
	assert_ptr_not_equal(vm_device(v1, &hv_dev_b), vm_device(v2, &hv_dev_b));
	devices_destroy(v1);
	assert_null(vm_device(v1, &hv_dev_b));
	assert_non_null(vm_device(v2, &hv_dev_b));
	devices_destroy(v2);
	free(v1);
	free(v2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(teardown_reverses_creation, reset),
		cmocka_unit_test_setup(a_failed_create_tears_down_what_was_created, reset),
		cmocka_unit_test_setup(a_device_needing_itself_fails, reset),
		cmocka_unit_test_setup(each_vm_has_its_own_instances, reset),
	};

	vlog_init("unit-hv-devices");
	vlog_set_level(VLOG_ERR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
