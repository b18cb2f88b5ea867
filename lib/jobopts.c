/* The job's options (lib/jobopts.h). */
#include "lib/drivers.h"
#include "lib/jobopts.h"

#define ROW(i, n, l, a, h) { .id = (i), .name = (n), .letter = (l), .arg = (a), .help = (h) }

const struct job_opt job_opts[] = {
	{ ROW(JO_GUESTS, "guests", 'N', "N", "guests (default 1)"),
	  JO_NUMBER, "guests", "a number of guests in ", JO_RUN | JO_BENCH, NULL },
	{ ROW(JO_RANKS, "ranks", 'n', "N", "MPI ranks (default: guests x vCPUs)"),
	  JO_NUMBER, "ranks", "a number of ranks in ", JO_RUN | JO_BENCH | JO_MPIRUN, NULL },
	{ ROW(JO_IMAGE, "image", 0, "IMG", "node image (default: default; built if missing)"),
	  JO_NAME, "image", "an image name", JO_RUN | JO_BENCH | JO_SLURM,
	  "Run the tasks inside vhpc guests of node image IMG (`vhpc image list`); default: $SLURM_VHPC_IMAGE" },
	{ ROW(JO_DRIVER, "driver", 0, "NAME", VHPC_DRIVER_CHOICES " (default: auto)"),
	  JO_OWN, "driver", NULL, JO_RUN | JO_BENCH | JO_SLURM,
	  "vhpc guest driver: " VHPC_DRIVER_CHOICES " (default: the cluster's)" },
	{ ROW(JO_VCPUS, "vcpus", 0, "N", "vCPUs (host cores) per guest (default: ranks per\n"
	      "guest, or the largest equal share that fits)"),
	  JO_NUMBER, "vcpus", "", JO_RUN | JO_SLURM,
	  "vCPUs per vhpc guest; a node gets one guest per N of the job's CPUs there (default 1)" },
	{ ROW(JO_MEM, "mem", 0, "SIZE", "memory per guest, e.g. 512M, 2G (default 512M)"),
	  JO_SIZE, "mem", "512M or 2G", JO_RUN | JO_SLURM,
	  "Memory per vhpc guest, e.g. 2G (default: the cluster's)" },
	{ ROW(JO_TUNING, "tuning", 0, "NAME", "network tuning profile in configs/tuning (default: hpc)"),
	  JO_NAME, "tuning", "a profile name", JO_RUN, NULL },
	{ ROW(JO_USER, "user", 0, "NAME|UID", "(root) run the job as this user: what runs in the\n"
	      "guests is that uid and gid on the host"),
	  JO_OWN, NULL, NULL, JO_RUN, NULL },
	{ ROW(JO_EMUKVM, "allow-emulated-kvm", 0, NULL, "with --driver kvm on a host whose KVM lacks\n"
	      "hardware virtualization: start the guests anyway\n(they will not finish booting; for tests)"),
	  JO_OWN, NULL, NULL, JO_RUN, NULL },
	{ ROW(JO_TIMEOUT, "timeout", 0, "T", "job time limit: seconds, or 30s, 10m, 2h (default 1h)"),
	  JO_DURATION, "timeout", "seconds or a duration like 30s, 10m, 2h (at most 366d)", JO_RUN | JO_BENCH, NULL },
	{ ROW(JO_OVERSUB, "oversubscribe", 0, NULL, "let guests share host cores"),
	  JO_SET, "oversubscribe", NULL, JO_RUN, NULL },
	{ ROW(JO_MAPBY, "map-by", 0, "node|slot", "consecutive ranks in different guests (node, default)\n"
	      "or filling each guest first (slot)"),
	  JO_CHOICE, "map_by", NULL, JO_RUN | JO_MPIRUN, NULL },
	{ ROW(JO_NOVMSHM, "no-vmshm", 0, NULL, "TCP between guests on this host (for comparison)"),
	  JO_CLEAR, "vmshm", NULL, JO_RUN | JO_BENCH | JO_SLURM,
	  "No vmshm shared memory between a job's guests on one node" },
	{ ROW(JO_NOSINGLECOPY, "no-single-copy", 0, NULL, "container guests on one host keep vmshm but not\n"
	      "their pod: large messages cross in two copies, and\n"
	      "the job can be checkpointed (kvm: no change)"),
	  JO_CLEAR, "single_copy", NULL, JO_RUN | JO_BENCH | JO_SLURM,
	  "Container guests of a node keep vmshm but not their shared pod (no single copy), so the job can be "
	  "checkpointed; kvm: no change" },
	{ ROW(JO_RDMA, "rdma", 0, NULL, "the job needs the cluster's RDMA fabric: it waits for\n"
	      "nodes that have it (default: on where all its nodes do)"),
	  JO_VALUE, "rdma", "on", JO_RUN | JO_SLURM,
	  "The job's guests use the cluster's RDMA fabric (default: on where every node has it)" },
	{ ROW(JO_NORDMA, "no-rdma", 0, NULL, "TCP only between nodes, even where there is a fabric"),
	  JO_VALUE, "rdma", "off", JO_RUN | JO_SLURM,
	  "No RDMA fabric for the job's guests: TCP only between nodes" },
	{ ROW(JO_DEVICE, "device", 0, "CLASS[:N]", "N (default 1) PCI functions of CLASS (nic, gpu, vf,\n"
	      "...) passed through to each guest (repeatable)"),
	  JO_OWN, "devices", NULL, JO_RUN | JO_SLURM,
	  "N (default 1) PCI functions of CLASS (nic, gpu, vf, ...) passed to each vhpc guest; repeatable" },
	{ ROW(JO_SCRATCH, "scratch", 0, "SIZE", "an empty writable /scratch of SIZE in each guest,\n"
	      "removed with the job (kvm: a disk; container: tmpfs)"),
	  JO_SIZE, "scratch", "1G", JO_RUN, NULL },
	{ ROW(JO_JOB, "job", 0, "FILE", "take the job from a YAML file; later flags override"),
	  JO_OWN, NULL, NULL, JO_RUN, NULL },
	{ ROW(JO_ENV, NULL, 'x', "NAME[=VALUE]", "environment variable for the ranks (repeatable);\n"
	      "NAME alone passes your own value"),
	  JO_OWN, "env", NULL, JO_RUN | JO_MPIRUN, NULL },
	{ ROW(JO_BIND, "bind", 0, "SRC[:DST][:ro]", "share host path SRC at DST (default SRC) in\n"
	      "every guest (repeatable); your home, the current\n"
	      "directory and the cluster's site paths are shared\n"
	      "by default, and the job runs in this directory"),
	  JO_OWN, "binds", NULL, JO_RUN, NULL },
	{ ROW(JO_CHDIR, "chdir", 0, "DIR", "run the job in DIR instead of this directory"),
	  JO_OWN, "workdir", NULL, JO_RUN, NULL },
	{ ROW(JO_TOPOLOGY, "topology", 0, "SPEC", "place on an hwloc topology instead of this machine's\n"
	      "(testing: \"synthetic:numa:2 core:4\" or FILE.xml)"),
	  JO_OWN, NULL, NULL, JO_RUN, NULL },
	{ ROW(JO_HELP, "help", 'h', NULL, "this help"),
	  JO_OWN, NULL, NULL, JO_RUN | JO_BENCH | JO_MPIRUN, NULL },
	{ { 0 }, 0, NULL, NULL, 0, NULL }
};

const struct job_opt *job_opt_by_id(int id)
{
	for (const struct job_opt *r = job_opts; r->o.id; r++)
		if (r->o.id == id)
			return r;
	return NULL;
}
