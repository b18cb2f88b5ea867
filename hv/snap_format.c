/* The pieces of the snapshot format both sides use: crc32c, the section
 * buffer and cursor, this host's type and the machine's fingerprint. */
#include "lib/err.h"
#include "snapshot.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

/* crc32c (Castagnoli, reflected 0x82f63b78): SSE4.2 has an instruction
 * for it, which RAM-sized sections want; a table elsewhere. */
static uint32_t table[8][256];

static void table_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
		table[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xff];
}

static uint32_t crc_sw(uint32_t c, const uint8_t *p, size_t n)
{
	static bool ready;

	if (!ready) {
		table_init();
		ready = true;
	}
	while (n >= 8) {
		uint64_t v;

		memcpy(&v, p, 8);
		v ^= c;
		c = table[7][v & 0xff] ^ table[6][(v >> 8) & 0xff] ^ table[5][(v >> 16) & 0xff] ^
		    table[4][(v >> 24) & 0xff] ^ table[3][(v >> 32) & 0xff] ^ table[2][(v >> 40) & 0xff] ^
		    table[1][(v >> 48) & 0xff] ^ table[0][v >> 56];
		p += 8;
		n -= 8;
	}
	while (n--)
		c = (c >> 8) ^ table[0][(c ^ *p++) & 0xff];
	return c;
}

#ifdef __x86_64__
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t c, const uint8_t *p, size_t n)
{
	uint64_t c64 = c;

	while (n >= 8) {
		uint64_t v;

		memcpy(&v, p, 8);
		c64 = __builtin_ia32_crc32di(c64, v);
		p += 8;
		n -= 8;
	}
	c = (uint32_t)c64;
	while (n--)
		c = __builtin_ia32_crc32qi(c, *p++);
	return c;
}
#endif

uint32_t crc32c(uint32_t crc, const void *p, size_t n)
{
	uint32_t c = ~crc;

#ifdef __x86_64__
	if (__builtin_cpu_supports("sse4.2"))
		return ~crc_hw(c, p, n);
#endif
	return ~crc_sw(c, p, n);
}

void sb_put(struct snap_buf *b, const void *p, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		uint8_t *np;

		while (cap < b->len + n)
			cap *= 2;
		np = realloc(b->p, cap);
		if (!np) {
			b->oom = true;
			return;
		}
		b->p = np;
		b->cap = cap;
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
}

void sb_u32(struct snap_buf *b, uint32_t v) { sb_put(b, &v, 4); }
void sb_u64(struct snap_buf *b, uint64_t v) { sb_put(b, &v, 8); }

void sb_free(struct snap_buf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

bool rd_get(struct snap_rd *r, void *dst, size_t n)
{
	if (r->bad || n > r->len - r->off) {
		r->bad = true;
		memset(dst, 0, n);
		return false;
	}
	memcpy(dst, r->p + r->off, n);
	r->off += n;
	return true;
}

uint32_t rd_u32(struct snap_rd *r)
{
	uint32_t v;

	rd_get(r, &v, 4);
	return v;
}

uint64_t rd_u64(struct snap_rd *r)
{
	uint64_t v;

	rd_get(r, &v, 8);
	return v;
}

bool rd_done(const struct snap_rd *r)
{
	return !r->bad && r->off == r->len;
}

int snap_host_init(struct vm *vm, struct verr *err)
{
	struct snap_host *h = calloc(1, sizeof(*h));
	struct kvm_msr_list probe = { .nmsrs = 0 }, *list = NULL;
	int x;

	if (!h)
		return verr_set(err, "out of memory");
	vm->snaph = h;
	for (uint32_t i = 0; i < vm->supported_cpuid->nent; i++) {
		const struct kvm_cpuid_entry2 *e = &vm->supported_cpuid->entries[i];

		if (e->function == 0) {
			memcpy(h->vendor, &e->ebx, 4);
			memcpy(h->vendor + 4, &e->edx, 4);
			memcpy(h->vendor + 8, &e->ecx, 4);
		}
	}
	/* The feature words a guest may have used (and the XSAVE components
	 * and address widths), not the whole list: some leaves carry the ID
	 * of the host CPU the ioctl ran on and differ from call to call. */
	for (uint32_t i = 0; i < vm->supported_cpuid->nent; i++) {
		const struct kvm_cpuid_entry2 *e = &vm->supported_cpuid->entries[i];
		uint32_t w[6] = { e->function, e->index, 0, 0, 0, 0 };

		switch (e->function) {
		case 1: w[2] = e->ecx; w[3] = e->edx; break;
		case 7: w[2] = e->ebx; w[3] = e->ecx; w[4] = e->edx; w[5] = e->eax; break;
		case 0xd: if (e->index <= 1) { w[2] = e->eax; w[3] = e->edx; } break;
		case 0x80000001: w[2] = e->ecx; w[3] = e->edx; break;
		case 0x80000008: w[2] = e->eax & 0xffff; break;
		default: continue;
		}
		h->cpuid_crc = crc32c(h->cpuid_crc, w, sizeof(w));
	}
	h->kvm_api = KVM_API_VERSION;
	x = ioctl(vm->vm_fd, KVM_CHECK_EXTENSION, KVM_CAP_XSAVE2);
	h->xsave_size = x > (int)sizeof(struct kvm_xsave) ? (uint32_t)x : (uint32_t)sizeof(struct kvm_xsave);
	/* KVM's list of MSRs to save; those that vCPU 0 cannot read (features
	 * this guest's CPUID does not have) or take back unchanged are left
	 * out, so a restore never meets one KVM refuses.  Writing an MSR's own
	 * value before the guest has run changes nothing. */
	if (ioctl(vm->kvm_fd, KVM_GET_MSR_INDEX_LIST, &probe) < 0 && errno != E2BIG)
		return verr_errno(err, "KVM_GET_MSR_INDEX_LIST");
	list = calloc(1, sizeof(*list) + probe.nmsrs * sizeof(uint32_t));
	if (!list)
		return verr_set(err, "out of memory");
	list->nmsrs = probe.nmsrs;
	if (ioctl(vm->kvm_fd, KVM_GET_MSR_INDEX_LIST, list) < 0) {
		free(list);
		return verr_errno(err, "KVM_GET_MSR_INDEX_LIST");
	}
	for (uint32_t i = 0; i < list->nmsrs && h->nmsrs < SNAP_MAX_MSRS; i++) {
		union {
			struct kvm_msrs h;
			uint8_t b[sizeof(struct kvm_msrs) + sizeof(struct kvm_msr_entry)];
		} one;

		memset(&one, 0, sizeof(one));
		one.h.nmsrs = 1;
		one.h.entries[0].index = list->indices[i];
		if (ioctl(vm->vcpu[0].fd, KVM_GET_MSRS, &one) == 1 && ioctl(vm->vcpu[0].fd, KVM_SET_MSRS, &one) == 1)
			h->msr[h->nmsrs++] = list->indices[i];
	}
	free(list);
	h->msrs_crc = crc32c(0, h->msr, h->nmsrs * sizeof(uint32_t));
	return 0;
}

char *snap_fingerprint(const struct vm *vm)
{
	const struct hv_plan *p = vm->plan;
	const struct hv_devopt *const *opts;
	size_t cap = 8192, len = 0, ndev;
	char *s = malloc(cap);
	int nopts = hv_devopts(&opts);
	const struct hv_device *devs = devices_list(&ndev);

	if (!s)
		return NULL;
#define ADD(...) do { if (len < cap) len += (size_t)snprintf(s + len, cap - len, __VA_ARGS__); } while (0)
	ADD("vcpus=%d\n", p->nvcpus);
	ADD("mem=%llu\n", (unsigned long long)p->mem);
	ADD("page_size=%llu\n", (unsigned long long)p->page_size);
	ADD("topology=%d sockets x %d cores x %d threads\n", p->sockets, p->cores, p->threads);
	ADD("numa_nodes=%d\n", p->nnodes);
	for (int n = 0; n < p->nnodes; n++) {
		ADD("numa_node%d=%llu bytes, vCPUs", n, (unsigned long long)p->node[n].size);
		for (int c = 0; c < p->node[n].ncpus; c++)
			ADD(" %d", p->node[n].cpus[c]);
		ADD("\n");
	}
	ADD("apic_ids=");
	for (int i = 0; i < p->nvcpus; i++)
		ADD("%s%u", i ? "," : "", p->apic_id[i]);
	ADD("\ncpuid_hide=%x,%x,%x\n", (unsigned)p->hide_ecx1, (unsigned)p->hide_edx1, (unsigned)p->hide_ebx7);
	ADD("debug_exit=%d\n", vm->cfg->debug_exit ? 1 : 0);
	for (int i = 0; i < nopts; i++)
		ADD("--%s=%zu\n", opts[i]->name, hv_dev_count(vm->cfg, opts[i]));
	for (size_t i = 0; i < ndev; i++)
		if (vm->dev[i])
			ADD("device=%s\n", devs[i].name);
#undef ADD
	if (len >= cap) {
		free(s);
		return NULL;
	}
	return s;
}
