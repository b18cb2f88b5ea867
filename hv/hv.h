/*
 * vhpc-hv: the VMM for one guest on Linux KVM.  This header is everything
 * the node agent may rely on: the command line (and the equivalent YAML
 * keys), the control-socket protocol and the exit statuses.
 *
 * Command line (each option also has a YAML key in --config FILE; the
 * command line wins over the file):
 *
 *   --kernel FILE        bzImage (Linux 64-bit boot protocol) or ELF vmlinux
 *                        with a PVH note (XEN_ELFNOTE_PHYS32_ENTRY)   kernel:
 *   --initrd FILE                                                      initrd:
 *   --cmdline STR                                                      cmdline:
 *   --vcpus N            1..HV_MAX_VCPUS                               vcpus:
 *   --mem SIZE           "512M", "4G"; RAM above 3 GiB is placed above
 *                        4 GiB (the 32-bit hole is 3..4 GiB)           mem:
 *   --numa mem=SIZE[,cpus=LIST][,host-node=N]   one guest NUMA node per
 *                        use; the sizes must add up to --mem; without
 *                        cpus= the vCPUs are split evenly in order.    numa: [{mem, cpus, host_node}]
 *   --host-node N        bind all guest RAM to host node N (no --numa)  host_node:
 *   --cpu-affinity LIST  vCPU i runs only on the i-th CPU of LIST     cpu_affinity:
 *   --topology SxCxT     sockets x cores x threads (default: one socket
 *                        per guest node, one thread per core)         topology:
 *   --hugepages [2M|1G]  back RAM with hugetlb pages; fails at start when
 *                        the pool (per bound host node) is too small  hugepages:
 *   --prefault-threads N threads that fault RAM in (default: CPUs)    prefault_threads:
 *   --no-prefault        leave RAM to be faulted on first touch       prefault: false
 *   --serial stdio|none|file:PATH    COM1 backend (default stdio)     serial:
 *   --control PATH       control socket (unix, mode 0600)             control:
 *   --require-hw         refuse to run without hardware virtualization require_hw:
 *   --debug-exit         enable the test-guest exit port (HV_DEBUG_EXIT_PORT) debug_exit:
 *   --cpuid-hide LIST    hide CPUID features (cx16,xsave,avx,...)      cpuid_hide:
 *   --seccomp            once set up, run under a system-call allowlist
 *                        (a call outside it: HV_EXIT_SECCOMP)          seccomp:
 *   --seccomp-probe[=CALL]  --seccomp, then one forbidden call (the filter's
 *                        test): execve (default), tiocsti or connect
 *   --restore FILE|/dev/fd/N  start from a snapshot instead of booting (below);
 *                        the rest of the command line must describe the same
 *                        machine, or vhpc-hv exits HV_EXIT_ERROR naming what
 *                        differs                                      restore:
 *   --paused             start with the vCPUs stopped until "resume"  paused:
 *   --config FILE        YAML file with the keys above
 *   -v / -q              more / less logging (also $VHPC_LOG)
 *
 * Every file option (--kernel, --initrd, blk path=, shm path=) also takes
 * /dev/fd/N: descriptor N, opened by whoever started vhpc-hv, is used
 * instead of a path, so a vhpc-hv without access to the files (the node
 * agent runs it as an unprivileged uid) still gets them.  So does fs
 * socket=, where N is a unix stream socket already connected to the
 * back-end.
 *
 * Devices (PCI bus 0, slots from 00:01.0 in this order: shm, fs, blk,
 * console, net, vsock; each kind in the order given).  Values are key=value pairs
 * separated by commas; a bare key sets a flag (ro), a bare word the main
 * key (tap=, path=, to=).
 * In YAML each is a mapping (or a list of them), or the same string:
 *
 *   --net tap=NAME|fd=N[,mac=MAC][,mtu=N][,queues=N][,vhost=on|off][,vhostfd=N[:N...]]  up to 8
 *        virtio-net over a tap (vnet header, checksum/TSO offloads,
 *        mergeable RX buffers).  tap=NAME creates the tap (it goes away
 *        with vhpc-hv) or attaches to a persistent one created with the
 *        same flags: IFF_TAP|IFF_NO_PI|IFF_VNET_HDR, plus IFF_MULTI_QUEUE
 *        when queues>1 (queues=N: N queue pairs, N tap queues, 1..8).
 *        fd=N: an open tap fd (single queue).  mac= defaults to a random
 *        locally administered address; mtu= (68..65535) goes to the guest
 *        (VIRTIO_NET_F_MTU) and to the tap.  vhostfd=: open /dev/vhost-net
 *        descriptors, one per queue pair, for the kernel's data path;
 *        vhost=on: vhpc-hv opens them itself at set-up.  Where vhost-net
 *        cannot be used the userspace data path serves the same device
 *        (the log says why; hv/README.md).
 *                                 net: [{tap: t0, mac: "52:54:00:00:00:01", mtu: 9000, queues: 4}]
 *   --blk path=FILE[,ro][,serial=STR]                        up to 8
 *        virtio-blk on a raw image or block device: read, write, flush,
 *        get-id (serial, at most 20 characters); ro refuses writes.  The
 *        image is flock'ed (shared for ro, exclusive otherwise).
 *                                 blk: [{path: /img/root.raw, ro: true}]
 *   --console [stdio|none|file:PATH]                         one
 *        virtio-console (the guest's hvc0).  stdio: output to stdout,
 *        input from stdin unless COM1 (--serial) is on stdio too.
 *                                 console: "file:/run/vhpc/g1.console"
 *   --vsock cid=N,uds=PATH                                   one
 *        virtio-vsock (streams), guest CID N (3..2^32-2), bridged to unix
 *        sockets as Firecracker's hybrid vsock: vhpc-hv listens on PATH
 *        (mode 0600, root or our uid only); a host process connects,
 *        writes "CONNECT <port>
" and gets "OK <host port>
" once the
 *        guest accepted (the connection is closed if it refused); then
 *        the socket is the stream.  A CONNECT made before the guest's
 *        driver is up waits for it; vhpc-hv does not time out an unanswered
 *        CONNECT (the caller should).  A guest reset closes every stream.
 *        A guest connection to CID 2 port P is connected to the unix
 *        socket "PATH_P" (reset if none).
 *                                 vsock: {cid: 3, uds: /run/vhpc/g1.vsock}
 *   --fs tag=TAG,socket=PATH|/dev/fd/N[,queues=N][,queue-size=N][,timeout=MS]
 *                                                            up to 8
 *        virtio-fs (virtio ID 26) served by a vhost-user back-end such as
 *        virtiofsd --socket-path=PATH: the guest mounts it with
 *        `mount -t virtiofs TAG DIR`.  TAG: 1..36 bytes.  queues= request
 *        queues (1..8, default 1; the back-end must serve them: QEMU's C
 *        virtiofsd serves 1), queue-size= ring entries (power of two up to
 *        1024, default 1024), timeout= ms for each exchange with the
 *        back-end (default 10000).  vhpc-hv connects at start; a back-end
 *        that is missing, refuses or answers wrongly is a start-up error
 *        (HV_EXIT_ERROR).  Once the guest runs, a back-end that fails or
 *        exits leaves the device asking for a reset (DEVICE_NEEDS_RESET);
 *        there is no reconnection.  The back-end ends when vhpc-hv closes
 *        the connection (virtiofsd does).  No DAX window.
 *                                 fs: [{tag: share, socket: /run/vhpc/g1-fs.sock}]
 *   --shm path=FILE[,size=SIZE]                              up to 4
 *        shared memory compatible with QEMU's ivshmem-plain (PCI 1af4:1110,
 *        BAR2 = the region, 64-bit prefetchable, above RAM).  FILE in
 *        /dev/shm or on hugetlbfs, mapped shared by every vhpc-hv given
 *        it; created (0600) if missing and size= is given; never removed
 *        by vhpc-hv.  The size is a power of two.  How a guest maps it
 *        write-back: hv/README.md, "Shared memory".
 *                                 shm: [{path: /dev/shm/vhpc-job7, size: 1G}]
 *   --vfio container=N,device=N[,group=N][,name=DDDD:BB:DD.F] up to 4
 *        a host PCI function passed through (VFIO), after every other
 *        device on the bus.  N are descriptors the starter opened: a
 *        VFIO container set to type1v2 with the function's group in it,
 *        the group, and the device (VFIO_GROUP_GET_DEVICE_FD); vhpc-hv
 *        opens nothing itself.  Guest RAM is mapped for the device's DMA
 *        at start (RLIMIT_MEMLOCK must cover it); MSI-X only (no INTx or
 *        MSI); reset at exit.  hv/README.md, "PCI passthrough".
 *                                 vfio: [{container: 10, group: 11, device: 12}]
 *
 * Control socket: one JSON object per line in each direction.  Only root
 * or the uid that runs vhpc-hv may connect (SO_PEERCRED).  Requests:
 *   {"cmd":"status"}   -> {"ok":true,"state":"running"|"paused"|"stopping",
 *                          "pid":N,"uptime_ms":N,
 *                          "vcpus":[{"id":0,"apic_id":0,"tid":N,
 *                                    "affinity":"2","host_cpu":2}],
 *                          "memory":[{"guest_node":0,"gpa_ranges":[[start,end]],
 *                                     "size":N,"host_node":0|null,
 *                                     "hugepages":false}],
 *                          "net":[{"name":"vnet0","datapath":"vhost-net"|"userspace",
 *                                  "rx_frames":N,"tx_frames":N,"rx_drops":N,
 *                                  "tx_drops":N,"vhost_starts":N,"vhost_refused":N}]}
 *        (frames counted by vhpc-hv's userspace data path only: under
 *        vhost-net the tap's own statistics count them)
 *   {"cmd":"pause"} / {"cmd":"resume"}  -> {"ok":true,"state":...}
 *   {"cmd":"poweroff"}  presses the ACPI power button (the guest decides)
 *   {"cmd":"kill"}      stops the guest now; exit status HV_EXIT_KILLED
 *   {"cmd":"snapshot"}  with one descriptor sent in the same message
 *                       (SCM_RIGHTS): an empty regular file open for writing,
 *                       which the caller made (vhpc-hv opens no paths).  The
 *                       guest must be paused; it stays paused.  Writes the
 *                       snapshot there -> {"ok":true,"bytes":N,"ram_bytes":N,
 *                       "ms":N} (file size, RAM pages holding data, time).
 *                       On an error ({"ok":false,...}: not paused, not an empty
 *                       file, a device that cannot be saved, ENOSPC with the
 *                       offset) the file holds a partial snapshot: the caller
 *                       removes it.  vhpc-hvctl SOCKET snapshot FILE does this.
 *   {"cmd":"snapshot_check"}  whether "snapshot" could save this machine's
 *                       devices, asked before anything is paused ->
 *                       {"ok":true,"state":...}, or the error naming the
 *                       first device that cannot be saved.
 * Errors: {"ok":false,"error":"words"}.
 *
 * Snapshots (hv/README.md, "Snapshots", has the format):
 *   Saved: every vCPU (registers, special registers, XSAVE and XCRs, the
 *   MSRs KVM lists with the TSC, LAPIC, pending events, debug registers, MP
 *   state); the PICs, IOAPIC, PIT and KVM clock (the guest's clock goes on
 *   from where it stopped); RAM pages that hold data (never-touched and zero
 *   pages are left out); each device's own state: the UART, i8042, ACPI
 *   PM/GED and the PCI bus (every function's config space, BAR placement,
 *   MSI-X table and pending bits); the virtio-pci transport of virtio-blk
 *   and virtio-console (features, status, selects, each queue's size,
 *   vector, rings and the device's ring indexes: a pause holds the device
 *   threads, so every request they took is complete and the rest waits in
 *   its ring); ivshmem's region size and interrupt mask (where the guest
 *   put the region is config space).
 *   The caller's to keep unchanged between the save and the restore: each
 *   --blk image and each --shm region file.  Their contents are not in the
 *   snapshot (only their sizes, checked); a restore onto an image the
 *   guest did not leave so sees a disk that changed under it.
 *   Not yet saved (a snapshot with one of these is refused, naming it):
 *   virtio-net (and vhost-net's ring bases), virtio-vsock, virtio-fs.
 *   Never carried over, by design:
 *   - --vfio functions: their state is in the hardware; refused.
 *   - vsock: host-side streams are this process's sockets; once vsock is
 *     saved, a restored guest sees its open streams reset, listeners stay.
 *   - virtio-fs: the back-end's (virtiofsd's) state, the guest's FUSE node
 *     ids and open handles, lives in another process that Debian 12's
 *     virtiofsd cannot save; a guest must unmount its shares first.
 *   - host resources named on the command line (taps, files, sockets): a
 *     restore gets its own from its command line, which must describe the
 *     same machine (vCPUs, memory and NUMA layout, topology, CPUID hiding,
 *     devices: compared line by line, the first difference named).
 *   A snapshot records the format version, the vhpc version and the host
 *   type (CPU vendor, KVM API, XSAVE size, the CPUID KVM offers, the MSRs it
 *   saves); another of any is refused.  Each section has a crc32c; a
 *   corrupted or truncated file is refused naming the section, with exit
 *   status HV_EXIT_SNAPSHOT (the caller need not try it again).  A restore
 *   runs under the same --seccomp allowlist as a fresh start: the state is
 *   set before the filter is loaded; the allowlist has only the reads a
 *   snapshot makes (KVM_GET_*).
 */
#ifndef VHPC_HV_H
#define VHPC_HV_H

#define HV_MAX_VCPUS 256
#define HV_MAX_NODES 8

/* Exit statuses of vhpc-hv. */
#define HV_EXIT_POWEROFF    0   /* the guest powered off (ACPI S5) */
#define HV_EXIT_ERROR       1   /* set-up failed; the message says why */
#define HV_EXIT_USAGE       2   /* bad command line or config file */
#define HV_EXIT_RESET       3   /* the guest asked for a reset (reboot) */
#define HV_EXIT_CRASH       4   /* triple fault or KVM internal error */
#define HV_EXIT_KILLED      5   /* "kill" on the control socket, or SIGTERM/SIGINT */
#define HV_EXIT_NO_HW       6   /* --require-hw and no hardware virtualization */
#define HV_EXIT_SECCOMP     7   /* --seccomp: a system call outside the allowlist
                                 * (the log names it); the guest is gone */
#define HV_EXIT_SNAPSHOT    8   /* --restore: the snapshot is damaged (cut short,
                                 * a checksum wrong, a section malformed; the log
                                 * says where), so no host can restore it; one
                                 * from another version or host type is
                                 * HV_EXIT_ERROR */
/* With --debug-exit, a guest byte V written to HV_DEBUG_EXIT_PORT ends the
 * process with HV_EXIT_DEBUG_BASE + (V & 63): test guests write 0 for pass. */
#define HV_EXIT_DEBUG_BASE  64
#define HV_DEBUG_EXIT_PORT  0xf4

#endif
