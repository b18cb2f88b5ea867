/* Internal interfaces of vhpc-hv: the VM, guest memory, I/O dispatch,
 * device registration and the ACPI/DSDT hooks devices use. */
#ifndef HV_VM_H
#define HV_VM_H

#include "config.h"
#include "lib/err.h"
#include <linux/kvm.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>


/* ------------------------------------------------------------ guest memory */

/* One contiguous host mapping of the RAM file; KVM slots map pieces of it
 * below the 32-bit hole and above 4 GiB. */
struct mem_slot {
	uint64_t gpa, size;
	uint64_t ram_off;          /* offset in the RAM mapping */
};

struct guest_mem {
	int fd;
	uint8_t *host;
	uint64_t size;
	uint64_t page_size;
	int nslots;
	struct mem_slot slot[2];
};

/* Creates the RAM file, binds each guest node's part to its host node,
 * prefaults it with `threads` threads (0 = none) and maps the slots.
 * *prefault_ns gets the time the prefault took. */
int mem_create(struct guest_mem *m, const struct hv_plan *p, int threads,
	       uint64_t *prefault_ns, struct verr *err);
void mem_destroy(struct guest_mem *m);
/* Guest RAM layout for a given size: low part below the hole, rest above
 * 4 GiB.  Shared by e820, SRAT and the slots. */
void mem_layout(uint64_t size, struct mem_slot slot[2], int *nslots);
/* GPA of a RAM-file offset (for SRAT ranges).  Splits at the hole:
 * writes up to two [gpa,len) pieces; returns how many. */
int mem_range_gpa(const struct guest_mem *m, uint64_t off, uint64_t len,
		  uint64_t gpa[2], uint64_t glen[2]);

/* Every guest address goes through these: [gpa, gpa+len) must lie inside one
 * RAM slot (overflow-safe).  gm_ptr returns NULL otherwise. */
void *gm_ptr(const struct guest_mem *m, uint64_t gpa, uint64_t len);
int gm_read(const struct guest_mem *m, uint64_t gpa, void *buf, uint64_t len);
int gm_write(const struct guest_mem *m, uint64_t gpa, const void *buf, uint64_t len);

/* ------------------------------------------------------------- I/O dispatch */

enum io_space { IO_PIO = 0, IO_MMIO = 1 };

/* Handlers get the offset from the region's base; data is little-endian,
 * len 1, 2, 4 or 8.  Unhandled reads return all ones. */
struct io_ops {
	void (*read)(void *opaque, uint64_t off, void *data, unsigned len);
	void (*write)(void *opaque, uint64_t off, const void *data, unsigned len);
};

struct io_region {
	uint64_t base, len;
	const struct io_ops *ops;
	void *opaque;
	char name[32];
};

struct io_bus {
	pthread_rwlock_t lock;
	struct io_region *r;       /* sorted by base, no overlaps */
	size_t n, cap;
	atomic_ulong unhandled;
};

int io_register(struct io_bus *b, uint64_t base, uint64_t len, const struct io_ops *ops,
		void *opaque, const char *name, struct verr *err);
int io_unregister(struct io_bus *b, uint64_t base);
/* Returns false when no region covers [addr, addr+len). */
bool io_dispatch(struct io_bus *b, uint64_t addr, void *data, unsigned len, bool write);
void io_bus_init(struct io_bus *b);
void io_bus_free(struct io_bus *b);

/* ---------------------------------------------------------------------- VM */

enum vm_state { VM_STARTING = 0, VM_RUNNING, VM_PAUSED, VM_STOPPING };

struct vm;

struct vcpu {
	struct vm *vm;
	int idx;
	uint32_t apic_id;
	int fd;
	struct kvm_run *run;
	pthread_t thread;
	atomic_int tid;
	int host_cpu;              /* -1: not pinned */
	bool started;
	bool paused;               /* parked in the pause wait */
	bool io_pending;           /* last exit was I/O: KVM_RUN completes it */
};

/* Called from the main loop when fd is readable. */
typedef void (*fd_cb)(struct vm *vm, int fd, void *opaque);

/* Registered devices (HV_DEVICE) a VM has room for. */
#define HV_MAX_DEVICES 32

struct aml;
typedef void (*dsdt_emit_fn)(struct aml *a, struct vm *vm, void *opaque);
/* Writes one whole ACPI table into buf (header by acpi_table_header) and
 * returns its length, or 0 when it does not fit in cap. */
typedef size_t (*acpi_table_fn)(struct vm *vm, uint8_t *buf, size_t cap, void *opaque);

struct vm {
	const struct hv_config *cfg;
	const struct hv_plan *plan;
	int kvm_fd, vm_fd;
	int run_size;
	struct guest_mem mem;
	struct io_bus pio, mmio;
	struct vcpu vcpu[HV_MAX_VCPUS];
	int nvcpus;
	struct kvm_cpuid2 *supported_cpuid;
	uint64_t t0_ns;             /* process start (monotonic) */
	atomic_ullong first_exit_ns;

	pthread_mutex_t lock;
	pthread_cond_t cond;
	enum vm_state state;
	bool pause_req;
	int nparked;

	atomic_int exit_status;     /* -1 until someone decides */
	char exit_reason[256];
	int stop_efd;               /* written when exit_status is set */

	struct { int fd; fd_cb cb; void *opaque; } watch[8];
	int nwatch;

	struct { dsdt_emit_fn fn; void *opaque; } dsdt[16];
	int ndsdt;
	struct { acpi_table_fn fn; void *opaque; } tables[8];
	int ntables;
	struct { uint64_t addr, size; } e820_resv[8];
	int ne820_resv;
	uint8_t fadt_boot_flags_clear;
	bool power_button_pending;
	uint64_t acpi_rsdp;

	/* The devices (devices.c), all zero before the first is created: each
	 * HV_DEVICE's instance, at its place in the hv_devices section, so a
	 * device needs no field here; and the order they were created in,
	 * which teardown reverses. */
	void *dev[HV_MAX_DEVICES];
	uint8_t dev_state[HV_MAX_DEVICES];
	uint8_t dev_order[HV_MAX_DEVICES];
	int ndev;

	/* PCI and virtio (irq.c, evloop.c). */
	struct irq_routes *irqr;    /* GSI routing for MSI(-X) through irqfd */
	int next_slot;              /* next free KVM memory slot (RAM uses 0, 1) */
	/* Set by the fuzzer and the net benchmark: device event loops start no
	 * thread and run only when evloop_run_all() is called. */
	bool manual_loops;
	pthread_mutex_t loops_lock;
	struct evloop *loops;
	atomic_ulong msi_sent;      /* MSIs delivered (irqfd or KVM_SIGNAL_MSI) */
	struct snap_host *snaph;    /* this host's type for snapshots (snapshot.h) */
};

/* First caller wins; wakes the main loop, which stops every vCPU. */
void vm_request_exit(struct vm *vm, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
int vm_watch_fd(struct vm *vm, int fd, fd_cb cb, void *opaque);
/* A listening unix socket at path, there only once it accepts (hv/uds.c). */
int uds_listen(const char *path, int type, int backlog, struct verr *err);
void vm_unwatch_fd(struct vm *vm, int fd);
/* Level-triggered GSI (IOAPIC pin / PIC line) through the in-kernel irqchip. */
void vm_set_irq(struct vm *vm, int gsi, int level);
int vm_pause(struct vm *vm, struct verr *err);
int vm_resume(struct vm *vm, struct verr *err);
/* Appends AML to the DSDT's \_SB scope (called while building ACPI). */
int vm_add_dsdt(struct vm *vm, dsdt_emit_fn fn, void *opaque);
/* Adds a table to the XSDT (MCFG for PCI ECAM, ...). */
int vm_add_acpi_table(struct vm *vm, acpi_table_fn fn, void *opaque);
/* Marks a guest-physical range reserved in e820 (ECAM, ...). */
int vm_reserve_e820(struct vm *vm, uint64_t addr, uint64_t size);
/* Fills a 36-byte ACPI header (length and checksum are set by acpi_build). */
void acpi_table_header(uint8_t *h, const char *sig, uint8_t rev);

/* -------------------------------------------------------------- devices */

/* Each device file registers itself with HV_DEVICE(name, create, destroy);
 * create runs before the kernel is loaded and may register I/O regions,
 * DSDT fragments and main-loop fds.  Adding a device touches no other file:
 * its instance lives in the VM's slot for it (vm_device), not in a field of
 * struct vm (a new device would edit this file) nor in a file-static (one
 * per process, outliving the VM it belongs to). */
struct snap_buf;
struct snap_rd;
struct hv_device {
	const char *name;
	int (*create)(struct vm *vm, struct verr *err);
	/* Also runs when create failed: it takes back whatever create got
	 * done, so create stores its instance before acquiring anything. */
	void (*destroy)(struct vm *vm);
	/* Snapshots (snapshot.h): save appends the instance's state (the VM
	 * is paused); load checks a hostile snapshot's state completely before
	 * it changes anything, then applies it.  A device with an instance and
	 * no save cannot be snapshotted, and a snapshot says which. */
	int (*save)(struct vm *vm, struct snap_buf *b, struct verr *err);
	int (*load)(struct vm *vm, struct snap_rd *r, struct verr *err);
	/* Optional: once the whole snapshot, RAM last, is written or has
	 * failed, for a device whose save held a back-end still that would
	 * otherwise write into guest RAM after its state was taken. */
	void (*saved)(struct vm *vm);
};
#define HV_DEVICE(nm, cr, de) HV_DEVICE_SNAP(nm, cr, de, NULL, NULL)
#define HV_DEVICE_SNAP(nm, cr, de, sv, ld) HV_DEVICE_SNAP_HELD(nm, cr, de, sv, ld, NULL)
#define HV_DEVICE_SNAP_HELD(nm, cr, de, sv, ld, sd)                            \
	static const struct hv_device hv_dev_##nm                              \
		__attribute__((used, section("hv_devices"), aligned(8))) = {   \
		.name = #nm, .create = cr, .destroy = de, .save = sv, .load = ld, .saved = sd }
/* Names hv_dev_NM before its HV_DEVICE (the file's last line), for the
 * device's functions that find their instance with vm_device. */
#define HV_DEVICE_DECLARE(nm) static const struct hv_device hv_dev_##nm

/* d's instance in vm; NULL until d's create stores one. */
void *vm_device(struct vm *vm, const struct hv_device *d);
void vm_device_set(struct vm *vm, const struct hv_device *d, void *inst);
/* Creates d now unless that has been done: for a device that others build
 * on (the PCI bus), so it is created before them and torn down after them
 * whatever the link order. */
int vm_device_need(struct vm *vm, const struct hv_device *d, struct verr *err);

/* Creates every device in link order; when one fails, those already
 * created (it included) are torn down in reverse before it returns. */
int devices_create(struct vm *vm, struct verr *err);
/* Tears the devices down in reverse creation order. */
void devices_destroy(struct vm *vm);
/* The registered devices, in link order, and how many (snapshots walk them). */
const struct hv_device *devices_list(size_t *n);
/* RAM and devices from a vhpc-hv command line, without KVM (nokvm.c). */
int vm_nokvm_init(struct vm *vm, struct hv_config *cfg, struct hv_plan *plan, int argc, char **argv,
		  bool manual_loops, struct verr *err);
void vm_nokvm_free(struct vm *vm, struct hv_config *cfg);

/* Power button press (control "poweroff"). */
void ged_power_button(struct vm *vm);

/* ------------------------------------------------------- device threads */

/* An epoll thread per device: fds (ioeventfds, taps, sockets) with
 * callbacks, and synchronous calls into the thread so that a device's state
 * is only ever touched by its own thread. */
struct evloop;
typedef void (*ev_cb)(void *opaque, uint32_t events);
struct evloop *evloop_new(struct vm *vm, const char *name, struct verr *err);
/* Watches fd for events (EPOLLIN/EPOLLOUT); events 0 keeps the fd quiet. */
int evloop_add(struct evloop *l, int fd, uint32_t events, ev_cb cb, void *opaque);
int evloop_mod(struct evloop *l, int fd, uint32_t events);
/* After this returns no callback for fd runs any more (unless called from
 * another thread while that callback runs: use evloop_call for teardown). */
void evloop_del(struct evloop *l, int fd);
/* Runs fn(arg) in the loop's thread and waits for it; runs it directly when
 * called from that thread or when the loop has no thread. */
void evloop_call(struct evloop *l, void (*fn)(void *), void *arg);
int evloop_start(struct evloop *l, struct verr *err);
/* Holds every device thread of vm between two callbacks (none is running
 * when this returns), or releases them: a paused guest's devices touch
 * neither its rings nor its RAM, so a snapshot sees them still.  Calls
 * (evloop_call) still run in a held thread. */
void evloop_hold_all(struct vm *vm, bool on);
/* Dispatches what is ready now (manual loops); returns events handled. */
int evloop_run_once(struct evloop *l, int timeout_ms);
int evloop_run_all(struct vm *vm);
void evloop_free(struct evloop *l);

/* --------------------------------------------------------------- interrupts */

/* MSI delivery.  irq_msi_gsi() gives an irqfd bound to a fresh GSI;
 * irq_msi_route() points that GSI at (addr, data).  Without KVM (fuzzer,
 * benchmark) these fail and irq_msi_signal() only counts. */
int irq_msi_gsi(struct vm *vm, int *gsi, int *irqfd);
int irq_msi_route(struct vm *vm, int gsi, uint64_t addr, uint32_t data);
int irq_msi_signal(struct vm *vm, uint64_t addr, uint32_t data);
void irq_routes_free(struct vm *vm);
/* A KVM memory slot number for device memory (ivshmem). */
int vm_alloc_slot(struct vm *vm);

/* -------------------------------------------------------------- vCPUs, boot */

struct boot_info {
	bool pvh;
	uint64_t entry;            /* RIP (64-bit Linux) or EIP (PVH) */
	uint64_t zero_page;        /* RSI for Linux */
	uint64_t start_info;       /* EBX for PVH */
};

int cpuid_setup(struct vm *vm, struct vcpu *c, struct verr *err);
int vcpu_create(struct vm *vm, int idx, struct verr *err);
int vcpu_boot_regs(struct vcpu *c, const struct boot_info *bi, struct verr *err);
int vcpus_start(struct vm *vm, struct verr *err);
void vcpus_stop(struct vm *vm);

int boot_load(struct vm *vm, struct boot_info *bi, struct verr *err);
int acpi_build(struct vm *vm, struct verr *err);

/* e820 entries of the configured layout (shared by both boot paths). */
struct e820e { uint64_t addr, size; uint32_t type; };
#define E820_RAM      1
#define E820_RESERVED 2
int e820_build(const struct vm *vm, struct e820e *e, int max);

int control_start(struct vm *vm, const char *path, struct verr *err);
/* One request line -> its reply (malloc'd JSON text). */
char *control_reply(struct vm *vm, const char *line);
void control_stop(void);

const char *vm_state_name(enum vm_state s);

#endif
