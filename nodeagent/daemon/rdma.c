/* The node's RDMA devices, as libibverbs lists them, for registration (an
 * empty list where there are none, as on the development machines), each
 * with the network interface its port 1 carries (RoCE, soft-RoCE, IPoIB)
 * and its NUMA node, from sysfs. */
#include "lib/fabric.h"
#include "lib/parse.h"
#include "daemon.h"

#include <endian.h>
#include <infiniband/verbs.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>

struct json_object *vd_rdma_devices(void)
{
	struct json_object *a = json_object_new_array();
	struct ibv_device **list;
	int n = 0;

	list = ibv_get_device_list(&n);
	for (int i = 0; list && i < n && i < 64; i++) {
		struct json_object *o = json_object_new_object();
		const char *name = ibv_get_device_name(list[i]);
		struct ibv_context *ctx;
		char guid[24];

		if (!name || !ident_ok(name, 64)) {
			json_object_put(o);
			continue;
		}
		json_object_object_add(o, "name", json_object_new_string(name));
		snprintf(guid, sizeof(guid), "%016llx", (unsigned long long)be64toh(ibv_get_device_guid(list[i])));
		json_object_object_add(o, "node_guid", json_object_new_string(guid));
		{
			char rel[128], nd[32], num[16];

			/* The names are libibverbs' and checked plain above. */
			snprintf(rel, sizeof(rel), "%s/ports/1/gid_attrs/ndevs/0", name);
			if (vd_sysfs_read("/sys/class/infiniband", rel, nd, sizeof(nd)) == 0 && netdev_name_ok(nd))
				json_object_object_add(o, "netdev", json_object_new_string(nd));
			snprintf(rel, sizeof(rel), "%s/device/numa_node", name);
			if (vd_sysfs_read("/sys/class/infiniband", rel, num, sizeof(num)) == 0 && atoi(num) >= 0 &&
			    atoi(num) <= 4095)
				json_object_object_add(o, "numa", json_object_new_int(atoi(num)));
		}
		ctx = ibv_open_device(list[i]);
		if (ctx) {
			struct ibv_device_attr attr;

			if (ibv_query_device(ctx, &attr) == 0)
				json_object_object_add(o, "ports", json_object_new_int(attr.phys_port_cnt));
			ibv_close_device(ctx);
		}
		json_object_array_add(a, o);
	}
	if (list)
		ibv_free_device_list(list);
	return a;
}
