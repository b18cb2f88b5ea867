/* Tuning profiles: MTU, NIC offloads and per-netns sysctls for job networks
 * (seed 000: the guest network stack needs the same care as the host's). */
#include "lib/tuning.h"
#include "lib/config.h"
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/parse.h"
#include "lib/paths.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OFF(f) offsetof(struct tuning, f)

static const struct cf_field offload_fields[] = {
	{ .key = "tso", .kind = CF_BOOL, .off = OFF(offload.tso) - OFF(offload) },
	{ .key = "gso", .kind = CF_BOOL, .off = OFF(offload.gso) - OFF(offload) },
	{ .key = "gro", .kind = CF_BOOL, .off = OFF(offload.gro) - OFF(offload) },
	{ .key = "sg", .kind = CF_BOOL, .off = OFF(offload.sg) - OFF(offload) },
	{ .key = "tx_csum", .kind = CF_BOOL, .off = OFF(offload.tx_csum) - OFF(offload) },
	{ .key = "rx_csum", .kind = CF_BOOL, .off = OFF(offload.rx_csum) - OFF(offload) },
	{ 0 }
};
static const struct cf_schema offload_schema = { "offload", sizeof(((struct tuning *)0)->offload), offload_fields };

static const struct cf_field tuning_fields[] = {
	{ .key = "name", .kind = CF_STR, .off = OFF(name), .flags = CF_REQUIRED },
	{ .key = "mtu", .kind = CF_INT, .off = OFF(mtu), .min = 576, .max = 65520, .what = "an MTU" },
	{ .key = "offload", .kind = CF_STRUCT, .off = OFF(offload), .sub = &offload_schema },
	{ .key = "vhost_net", .kind = CF_BOOL, .off = OFF(vhost_net) },
	{ .key = "sysctl", .kind = CF_STRMAP, .off = OFF(sysctl) },
	{ 0 }
};
const struct cf_schema tuning_schema = { "tuning", sizeof(struct tuning), tuning_fields };

/* Keys become paths under /proc/sys, so they are checked strictly. */
static bool sysctl_key_ok(const char *k)
{
	if (strncmp(k, "net.", 4) || strstr(k, "..") || k[strlen(k) - 1] == '.')
		return false;
	for (const char *p = k; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '.'))
			return false;
	return strlen(k) < 128;
}

static bool sysctl_val_ok(const char *v)
{
	if (!*v || strlen(v) > 128)
		return false;
	for (const char *p = v; *p; p++)
		if (!((*p >= '0' && *p <= '9') || *p == ' ' || *p == '-' || *p == '\t'))
			return false;
	return true;
}

int tuning_load(const char *name_or_path, struct tuning *t, struct verr *err)
{
	char path[PATH_MAX];
	size_t n = strlen(name_or_path);

	memset(t, 0, sizeof(*t));
	t->mtu = 1500;
	t->offload.tso = t->offload.gso = t->offload.gro = true;
	t->offload.sg = t->offload.tx_csum = t->offload.rx_csum = true;
	t->vhost_net = true;
	if (n > 5 && !strcmp(name_or_path + n - 5, ".yaml"))
		snprintf(path, sizeof(path), "%s", name_or_path);
	else if (!ident_ok(name_or_path, 64))
		return verr_set(err, "tuning profile name '%s' is not a plain name", name_or_path);
	else
		snprintf(path, sizeof(path), "%s/tuning/%s.yaml", vhpc_config_dir(), name_or_path);
	if (cf_bind_file(path, &tuning_schema, t, err) < 0) {
		tuning_free(t);
		return -1;
	}
	for (size_t i = 0; i < t->sysctl.n; i++) {
		if (!sysctl_key_ok(t->sysctl.key[i])) {
			verr_set(err, "%s: sysctl '%s': only per-network-namespace keys (net.*, letters, digits, _ and .) may be tuned",
				 path, t->sysctl.key[i]);
			tuning_free(t);
			return -1;
		}
		if (!sysctl_val_ok(t->sysctl.val[i])) {
			verr_set(err, "%s: sysctl '%s': value '%s' is not one or more integers",
				 path, t->sysctl.key[i], t->sysctl.val[i]);
			tuning_free(t);
			return -1;
		}
	}
	return 0;
}

void tuning_free(struct tuning *t)
{
	cf_release(&tuning_schema, t);
}

/* The kernel prints multi-value sysctls with tabs; compare by words. */
static bool same_words(const char *a, const char *b)
{
	for (;;) {
		while (*a == ' ' || *a == '\t' || *a == '\n')
			a++;
		while (*b == ' ' || *b == '\t' || *b == '\n')
			b++;
		if (!*a || !*b)
			return !*a && !*b;
		while (*a && *a != ' ' && *a != '\t' && *a != '\n') {
			if (*a != *b)
				return false;
			a++;
			b++;
		}
		if (*b && *b != ' ' && *b != '\t' && *b != '\n')
			return false;
	}
}

int tuning_apply_sysctls(const struct tuning *t, struct verr *err)
{
	for (size_t i = 0; i < t->sysctl.n; i++) {
		char path[256], *got;
		size_t len;

		snprintf(path, sizeof(path), "/proc/sys/%s", t->sysctl.key[i]);
		for (char *p = path + 10; *p; p++)
			if (*p == '.')
				*p = '/';
		if (write_str(path, t->sysctl.val[i], err) < 0)
			return verr_wrap(err, "tuning '%s': sysctl %s", t->name, t->sysctl.key[i]);
		if (read_file(path, &got, &len, 256, err) < 0)
			return verr_wrap(err, "tuning '%s'", t->name);
		if (!same_words(got, t->sysctl.val[i])) {
			verr_set(err, "tuning '%s': sysctl %s reads back '%.60s' after writing '%s'",
				 t->name, t->sysctl.key[i], got, t->sysctl.val[i]);
			free(got);
			return -1;
		}
		free(got);
	}
	return 0;
}
