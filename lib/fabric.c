/* The fabric's words (lib/fabric.h). */
#include "lib/fabric.h"
#include "lib/parse.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <net/if.h>
#include <string.h>

const char *const fabric_mode_names[] = { "none", "roce", "soft-roce", "ib", NULL };
const char *const job_rdma_names[] = { "auto", "on", "off", NULL };

bool fabric_class_ok(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (n == 0 || n > FABRIC_CLASS_MAX || s[0] < 'a' || s[0] > 'z')
		return false;
	for (size_t i = 1; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '-'))
			return false;
	return true;
}

int job_device_parse(const char *s, char cls[FABRIC_CLASS_MAX + 1], int *n, char *why, size_t len)
{
	const char *colon = s ? strchr(s, ':') : NULL;
	size_t cl = colon ? (size_t)(colon - s) : (s ? strlen(s) : 0);
	char name[FABRIC_CLASS_MAX + 1];
	long long v = 1;

	if (!s || cl == 0 || cl > FABRIC_CLASS_MAX) {
		snprintf(why, len, "device '%.40s': expected CLASS[:N], a class of at most %d characters such as nic or gpu",
			 s ? s : "", FABRIC_CLASS_MAX);
		return -1;
	}
	memcpy(name, s, cl);
	name[cl] = 0;
	if (!fabric_class_ok(name)) {
		snprintf(why, len, "device '%.40s': class '%s' is not a class name (a lowercase letter, then "
			 "lowercase letters, digits, '_' or '-')", s, name);
		return -1;
	}
	if (colon && parse_ll(colon + 1, 1, JOB_DEVICE_N_MAX, &v) < 0) {
		snprintf(why, len, "device '%.40s': expected a count of 1..%d after the ':', got '%.20s'", s,
			 JOB_DEVICE_N_MAX, colon + 1);
		return -1;
	}
	memcpy(cls, name, cl + 1);
	*n = (int)v;
	return 0;
}

static bool hex_digits(const char *s, int n, unsigned long *out)
{
	unsigned long v = 0;

	for (int i = 0; i < n; i++) {
		char c = s[i];

		if (c >= '0' && c <= '9')
			v = v * 16 + (unsigned long)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v = v * 16 + (unsigned long)(c - 'a' + 10);
		else
			return false;
	}
	*out = v;
	return true;
}

bool pci_addr_ok(const char *s)
{
	unsigned long dom, bus, dev, fn;

	return s && strlen(s) == PCI_ADDR_LEN && s[4] == ':' && s[7] == ':' && s[10] == '.' &&
	       hex_digits(s, 4, &dom) && hex_digits(s + 5, 2, &bus) && hex_digits(s + 8, 2, &dev) &&
	       hex_digits(s + 11, 1, &fn) && dev <= 0x1f && fn <= 7;
}

bool netdev_name_ok(const char *s)
{
	/* ident_ok: no '/', no spaces, no ':'; 15 bytes is IFNAMSIZ less its NUL. */
	return ident_ok(s, 15) && strcmp(s, ".") && strcmp(s, "..");
}

bool netdev_exists(const char *s)
{
	return netdev_name_ok(s) && if_nametoindex(s) != 0;
}

static int number(const char *s, size_t n, long long *out)
{
	char buf[24], *end;
	long long v;

	if (n == 0 || n >= sizeof(buf))
		return -1;
	memcpy(buf, s, n);
	buf[n] = 0;
	if (buf[0] < '0' || buf[0] > '9')
		return -1;
	errno = 0;
	v = strtoll(buf, &end, buf[0] == '0' && (buf[1] == 'x' || buf[1] == 'X') ? 16 : 10);
	if (errno || *end)
		return -1;
	*out = v;
	return 0;
}

int fabric_range_parse(const char *s, long long min, long long max, long long *lo, long long *hi)
{
	const char *dash = s ? strchr(s, '-') : NULL;

	if (!s)
		return -1;
	if (dash ? number(s, (size_t)(dash - s), lo) < 0 || number(dash + 1, strlen(dash + 1), hi) < 0
		 : number(s, strlen(s), lo) < 0)
		return -1;
	if (!dash)
		*hi = *lo;
	return *lo >= min && *hi <= max && *lo <= *hi ? 0 : -1;
}
