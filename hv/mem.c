/* Guest RAM: one memfd (hugetlb when asked), each guest node's part bound
 * strictly to its host node with mbind, prefaulted by parallel threads with
 * MADV_POPULATE_WRITE so that a short hugepage pool is an error at start and
 * never a SIGBUS later (seed 002: allocation cost per GiB matters). */
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/fsutil.h"
#include "lib/parse.h"
#include "vm.h"
#include "layout.h"

#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/memfd.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#define MPOL_BIND_    2
#define MPOL_MF_STRICT_ 1
#define MPOL_MF_MOVE_   2

void mem_layout(uint64_t size, struct mem_slot slot[2], int *nslots)
{
	uint64_t low = size < GPA_HOLE_START ? size : GPA_HOLE_START;

	slot[0] = (struct mem_slot){ .gpa = 0, .size = low, .ram_off = 0 };
	*nslots = 1;
	if (size > low) {
		slot[1] = (struct mem_slot){ .gpa = GPA_4G, .size = size - low, .ram_off = low };
		*nslots = 2;
	}
}

int mem_range_gpa(const struct guest_mem *m, uint64_t off, uint64_t len,
		  uint64_t gpa[2], uint64_t glen[2])
{
	int n = 0;

	for (int i = 0; i < m->nslots && len; i++) {
		const struct mem_slot *s = &m->slot[i];
		uint64_t a, b;

		if (off >= s->ram_off + s->size || off + len <= s->ram_off)
			continue;
		a = off > s->ram_off ? off : s->ram_off;
		b = off + len < s->ram_off + s->size ? off + len : s->ram_off + s->size;
		gpa[n] = s->gpa + (a - s->ram_off);
		glen[n] = b - a;
		n++;
	}
	return n;
}

void *gm_ptr(const struct guest_mem *m, uint64_t gpa, uint64_t len)
{
	for (int i = 0; i < m->nslots; i++) {
		const struct mem_slot *s = &m->slot[i];

		/* Written without gpa+len so that huge values cannot wrap. */
		if (gpa >= s->gpa && gpa - s->gpa <= s->size && len <= s->size - (gpa - s->gpa))
			return m->host + s->ram_off + (gpa - s->gpa);
	}
	return NULL;
}

int gm_read(const struct guest_mem *m, uint64_t gpa, void *buf, uint64_t len)
{
	void *p = gm_ptr(m, gpa, len);

	if (!p)
		return -1;
	memcpy(buf, p, len);
	return 0;
}

int gm_write(const struct guest_mem *m, uint64_t gpa, const void *buf, uint64_t len)
{
	void *p = gm_ptr(m, gpa, len);

	if (!p)
		return -1;
	memcpy(p, buf, len);
	return 0;
}

static long read_long(const char *path)
{
	char *buf;
	size_t len;
	struct verr e;
	long v;

	if (read_file(path, &buf, &len, 4096, &e) < 0)
		return -1;
	v = strtol(buf, NULL, 10);
	free(buf);
	return v;
}

static int check_host_node(int node, struct verr *err)
{
	char path[128], *buf;
	size_t len;
	int ids[1024];
	size_t n;
	struct verr e;
	bool has = false;

	snprintf(path, sizeof(path), "/sys/devices/system/node/node%d", node);
	if (access(path, F_OK) < 0)
		return verr_set(err, "host NUMA node %d does not exist on this machine", node);
	if (read_file("/sys/devices/system/node/has_memory", &buf, &len, 4096, &e) == 0) {
		if (cpulist_parse(buf, ids, 1024, &n) == 0)
			for (size_t i = 0; i < n; i++)
				has |= ids[i] == node;
		free(buf);
		if (!has)
			return verr_set(err, "host NUMA node %d has no memory", node);
	}
	return 0;
}

/* hugetlb reservations are global, binding is per node: check both, so a
 * short pool fails here with numbers instead of a SIGBUS in a vCPU. */
static int check_hugepages(const struct hv_plan *p, struct verr *err)
{
	char path[160];
	unsigned long kb = (unsigned long)(p->page_size >> 10);
	long free_g, resv_g, need_total = 0;
	long need_node[1024] = { 0 };

	snprintf(path, sizeof(path), "/sys/kernel/mm/hugepages/hugepages-%lukB/free_hugepages", kb);
	free_g = read_long(path);
	if (free_g < 0)
		return verr_set(err, "hugepages of %lu KiB are not supported by this kernel (%s missing)", kb, path);
	snprintf(path, sizeof(path), "/sys/kernel/mm/hugepages/hugepages-%lukB/resv_hugepages", kb);
	resv_g = read_long(path);
	if (resv_g < 0)
		resv_g = 0;
	for (int i = 0; i < p->nnodes; i++) {
		long need = (long)(p->node[i].size / p->page_size);

		need_total += need;
		if (p->node[i].host_node >= 0)
			need_node[p->node[i].host_node] += need;
	}
	if (free_g - resv_g < need_total)
		return verr_set(err, "hugepage pool too small: guest needs %ld pages of %lu KiB, %ld free "
				"(%ld of them reserved); raise /sys/kernel/mm/hugepages/hugepages-%lukB/nr_hugepages",
				need_total, kb, free_g, resv_g, kb);
	for (int h = 0; h < 1024; h++) {
		long fn;

		if (!need_node[h])
			continue;
		snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/hugepages/hugepages-%lukB/free_hugepages", h, kb);
		fn = read_long(path);
		if (fn < need_node[h])
			return verr_set(err, "hugepage pool of host node %d too small: guest needs %ld pages of %lu KiB there, %ld free; "
					"raise /sys/devices/system/node/node%d/hugepages/hugepages-%lukB/nr_hugepages",
					h, need_node[h], kb, fn < 0 ? 0 : fn, h, kb);
	}
	return 0;
}

struct pf_job {
	uint8_t *addr;
	uint64_t len;
	int host_node;
	int err;
};

/* Prefault threads run on the CPUs of the node they fill, so the kernel's
 * page clearing reads and writes local memory. */
static void pin_to_node(int node)
{
	char path[96], *buf;
	size_t len, n;
	int ids[1024];
	struct verr e;
	cpu_set_t set;

	if (node < 0)
		return;
	snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/cpulist", node);
	if (read_file(path, &buf, &len, 8192, &e) < 0)
		return;
	if (cpulist_parse(buf, ids, 1024, &n) == 0 && n) {
		CPU_ZERO(&set);
		for (size_t i = 0; i < n; i++)
			if (ids[i] < CPU_SETSIZE)
				CPU_SET(ids[i], &set);
		sched_setaffinity(0, sizeof(set), &set);
	}
	free(buf);
}

static void *pf_thread(void *arg)
{
	struct pf_job *j = arg;

	pin_to_node(j->host_node);
	if (madvise(j->addr, j->len, MADV_POPULATE_WRITE) < 0)
		j->err = errno;
	return NULL;
}

static int prefault(struct guest_mem *m, const struct hv_plan *p, int threads, struct verr *err)
{
	struct pf_job *jobs;
	pthread_t *tid;
	int njobs = 0, rc = 0;
	uint64_t chunk;

	if (threads < 1)
		threads = 1;
	jobs = calloc((size_t)threads + HV_MAX_NODES, sizeof(*jobs));
	tid = calloc((size_t)threads + HV_MAX_NODES, sizeof(*tid));
	if (!jobs || !tid) {
		free(jobs);
		free(tid);
		return verr_set(err, "out of memory");
	}
	/* Split every node into page-aligned chunks, about `threads` in all. */
	chunk = (m->size / (uint64_t)threads + p->page_size - 1) / p->page_size * p->page_size;
	if (chunk < p->page_size)
		chunk = p->page_size;
	for (int i = 0; i < p->nnodes; i++) {
		for (uint64_t off = 0; off < p->node[i].size; off += chunk) {
			uint64_t len = p->node[i].size - off < chunk ? p->node[i].size - off : chunk;

			if (njobs == threads + HV_MAX_NODES)
				break;
			jobs[njobs++] = (struct pf_job){ m->host + p->node[i].ram_off + off, len,
							 p->node[i].host_node, 0 };
		}
	}
	for (int i = 0; i < njobs; i++)
		if (pthread_create(&tid[i], NULL, pf_thread, &jobs[i]) != 0) {
			jobs[i].err = -1;
			pf_thread(&jobs[i]);
			tid[i] = 0;
		}
	for (int i = 0; i < njobs; i++) {
		if (tid[i])
			pthread_join(tid[i], NULL);
		if (jobs[i].err > 0 && !rc) {
			errno = jobs[i].err;
			rc = verr_errno(err, "prefaulting guest RAM at offset %llu MiB%s",
					(unsigned long long)((uint64_t)(jobs[i].addr - m->host) >> 20),
					p->page_size > 4096 ? " (hugepage pool exhausted on the bound node?)" : "");
		}
	}
	free(jobs);
	free(tid);
	return rc;
}

int mem_create(struct guest_mem *m, const struct hv_plan *p, int threads,
	       uint64_t *prefault_ns, struct verr *err)
{
	unsigned flags = MFD_CLOEXEC;

	memset(m, 0, sizeof(*m));
	m->fd = -1;
	m->size = p->mem;
	m->page_size = p->page_size;
	for (int i = 0; i < p->nnodes; i++)
		if (p->node[i].host_node >= 0 && check_host_node(p->node[i].host_node, err) < 0)
			return -1;
	if (p->page_size > 4096) {
		if (check_hugepages(p, err) < 0)
			return -1;
		flags |= MFD_HUGETLB | (p->page_size == (1u << 30) ? MFD_HUGE_1GB : MFD_HUGE_2MB);
	}
	m->fd = memfd_create("vhpc-guest-ram", flags);
	if (m->fd < 0)
		return verr_errno(err, "memfd_create for %llu MiB of guest RAM",
				  (unsigned long long)(m->size >> 20));
	if (ftruncate(m->fd, (off_t)m->size) < 0) {
		verr_errno(err, "sizing guest RAM to %llu MiB", (unsigned long long)(m->size >> 20));
		goto fail;
	}
	m->host = mmap(NULL, m->size, PROT_READ | PROT_WRITE, MAP_SHARED, m->fd, 0);
	if (m->host == MAP_FAILED) {
		m->host = NULL;
		verr_errno(err, "mapping %llu MiB of guest RAM%s", (unsigned long long)(m->size >> 20),
			   p->page_size > 4096 ? " (hugepage pool too small?)" : "");
		goto fail;
	}
	for (int i = 0; i < p->nnodes; i++) {
		const struct hv_gnode *g = &p->node[i];
		unsigned long mask[1024 / (8 * sizeof(unsigned long))] = { 0 };

		if (g->host_node < 0)
			continue;
		mask[g->host_node / (8 * sizeof(unsigned long))] |= 1ul << (g->host_node % (8 * sizeof(unsigned long)));
		if (syscall(SYS_mbind, m->host + g->ram_off, g->size, MPOL_BIND_, mask, 1024ul,
			    MPOL_MF_STRICT_ | MPOL_MF_MOVE_) < 0) {
			verr_errno(err, "binding guest node %d (%llu MiB) to host node %d", i,
				   (unsigned long long)(g->size >> 20), g->host_node);
			goto fail;
		}
	}
	if (threads > 0) {
		uint64_t t0 = now_ns();

		if (prefault(m, p, threads, err) < 0)
			goto fail;
		if (prefault_ns)
			*prefault_ns = now_ns() - t0;
	}
	mem_layout(m->size, m->slot, &m->nslots);
	return 0;
fail:
	mem_destroy(m);
	return -1;
}

void mem_destroy(struct guest_mem *m)
{
	if (m->host)
		munmap(m->host, m->size);
	if (m->fd >= 0)
		close(m->fd);
	m->host = NULL;
	m->fd = -1;
}
