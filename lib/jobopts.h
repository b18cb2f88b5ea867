/*
 * The job's options, declared once: `vhpc run` and `vhpc submit` take them
 * all, `vhpc bench` passes some on to vhpc run, and the Slurm plugin offers
 * some as --vhpc-NAME.  Each front-end builds its getopt_long array (or
 * Slurm's struct spank_option array) and its --help from these rows.
 *
 * Plain data with no libvhpc calls: the Slurm plugin, which links none of
 * vhpc's archives, is built with this file compiled in.
 */
#ifndef VHPC_LIB_JOBOPTS_H
#define VHPC_LIB_JOBOPTS_H

#include <stddef.h>

/* What any command-line option is, for getopt_long and --help. */
struct opt {
	int id;               /* what getopt_long returns: the letter, or >= 256 */
	const char *name;     /* --NAME; NULL: the letter only */
	char letter;          /* -L; 0: none */
	const char *arg;      /* the value's name in --help; NULL: a flag */
	const char *help;     /* lines separated by '\n' */
};

/* Which front-ends offer a row. */
#define JO_RUN   1u       /* vhpc run, vhpc submit */
#define JO_BENCH 2u       /* vhpc bench (its own --help words, bench/) */
#define JO_SLURM 4u       /* srun, sbatch, salloc: --vhpc-NAME */
#define JO_MPIRUN 8u      /* vhpc mpirun in a Slurm batch script (its own --help words) */

/* How a value becomes part of the job.  The ranges and choices are the
 * job file's field named by key (job_spec_schema), so a flag and its YAML
 * key cannot disagree. */
enum jo_kind {
	JO_NUMBER = 1,        /* CF_INT: "OPT: expected EXPECTMIN..MAX, got 'V'" */
	JO_SIZE,              /* CF_SIZE: "... a size from MIN to MAX such as EXPECT ..." */
	JO_CHOICE,            /* CF_ENUM: "... expected a, b or c, got 'V'" */
	JO_NAME,              /* CF_STR, a plain name: "OPT: 'V' is not EXPECT" */
	JO_DURATION,          /* CF_INT seconds, or 30s, 10m, 2h, 1d: "... expected EXPECT ..." */
	JO_SET,               /* a flag: the CF_BOOL becomes true */
	JO_CLEAR,             /* a flag: the CF_BOOL becomes false */
	JO_VALUE,             /* a flag: the CF_ENUM becomes the name in expect */
	JO_OWN,               /* the front-end's own code, by id */
};

enum jo_id {
	JO_GUESTS = 'N', JO_RANKS = 'n', JO_ENV = 'x', JO_HELP = 'h',
	JO_IMAGE = 256, JO_DRIVER, JO_VCPUS, JO_MEM, JO_TUNING, JO_USER, JO_EMUKVM,
	JO_TIMEOUT, JO_OVERSUB, JO_MAPBY, JO_NOVMSHM, JO_SCRATCH, JO_JOB, JO_BIND,
	JO_CHDIR, JO_TOPOLOGY, JO_RDMA, JO_NORDMA, JO_DEVICE, JO_NOSINGLECOPY,
	JO_ID_END             /* front-ends' own ids start here */
};

struct job_opt {
	struct opt o;
	enum jo_kind kind;
	const char *key;      /* the job file's key it sets; NULL: not a job field */
	const char *expect;   /* the words of a bad value's error (above) */
	unsigned fronts;      /* JO_RUN | JO_BENCH | JO_SLURM | JO_MPIRUN */
	const char *slurm_help; /* srun --help, where every plugin's options are listed */
};

/* In --help order; the JO_SLURM rows in the order srun --help lists them.
 * Ends with a row whose id is 0. */
extern const struct job_opt job_opts[];
const struct job_opt *job_opt_by_id(int id);

#endif
