/* Open MPI's BTLs for a job's ranks (mpibtl.h). */
#include "lib/mpibtl.h"

#include <stdio.h>

void mpibtl_list(char *buf, size_t len, bool vader, bool vmshm, bool fabric)
{
	snprintf(buf, len, "self,%s%s%stcp", vader ? "vader," : "", vmshm ? "vmshm," : "", fabric ? "ofi," : "");
}

const char *const mpibtl_fabric_mca[][2] = {
	{ "btl_ofi_provider_include", MPIBTL_FABRIC_PROVIDER },
	/* Both sided: sends for ob1's eager and rendezvous, RDMA reads for
	 * large messages (half the time of sends alone, nested/TCG). */
	{ "btl_ofi_mode", "2" },
	{ NULL, NULL },
};
