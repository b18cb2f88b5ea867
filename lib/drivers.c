/* The guest drivers' names (lib/drivers.h). */
#include "lib/drivers.h"

#include <stddef.h>
#include <string.h>

const char *const vhpc_driver_names[] = { VHPC_DRIVER_NAMES, NULL };

const char *vhpc_driver_name(int d)
{
	if (d < 0 || (size_t)d >= sizeof(vhpc_driver_names) / sizeof(vhpc_driver_names[0]))
		return NULL;
	return vhpc_driver_names[d];
}

int vhpc_driver_index(const char *name)
{
	for (int i = 0; name && vhpc_driver_names[i]; i++)
		if (!strcmp(vhpc_driver_names[i], name))
			return i;
	return -1;
}
