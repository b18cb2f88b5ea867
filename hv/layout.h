/*
 * Every fixed guest-physical address and I/O port vhpc-hv uses, in one place
 * so that boot code, ACPI tables, e820 and devices cannot disagree.
 *
 *   0x0000_0000  real-mode IVT/BDA (left as RAM, unused by us)
 *   0x0000_1000  GDT for the 64-bit Linux entry
 *   0x0000_6000  PVH hvm_start_info, module list, memory map
 *   0x0000_7000  Linux zero page (boot_params)
 *   0x0000_9000  identity page tables (PML4, PDPT, 4 PDs = first 4 GiB)
 *   0x0002_0000  kernel command line (up to 64 KiB)
 *   0x0009_fc00  EBDA .. 1 MiB: reserved (e820), ACPI tables at 0xe0000
 *   0x0010_0000  kernel (bzImage protected-mode part, or ELF segments)
 *   ...          RAM up to min(mem, 3 GiB)
 *   0xc000_0000  32-bit hole: PCI MMIO window, ECAM, IOAPIC, LAPIC
 *   0x1_0000_0000 RAM above 4 GiB (what did not fit below the hole)
 *   RAM end rounded up to 64 GiB: 64-bit PCI window (shared-memory BARs)
 */
#ifndef HV_LAYOUT_H
#define HV_LAYOUT_H

#include "hv.h"

#define GPA_GDT            0x1000ull
#define GPA_PVH_INFO       0x6000ull
#define GPA_PVH_MODLIST    0x6040ull
#define GPA_PVH_MEMMAP     0x6100ull   /* up to 0x7000: 150 entries */
#define GPA_ZERO_PAGE      0x7000ull
#define GPA_PML4           0x9000ull
#define GPA_PDPT           0xa000ull
#define GPA_PD             0xb000ull   /* 4 pages: 0xb000..0xefff */
#define GPA_CMDLINE        0x20000ull
#define CMDLINE_MAX        0x10000ull

#define GPA_EBDA           0x9fc00ull  /* low RAM ends here */
#define GPA_ACPI           0xe0000ull  /* RSDP here, then the other tables */
#define ACPI_MAX           0x20000ull  /* up to 1 MiB */
#define GPA_HIGH_START     0x100000ull /* 1 MiB */
#define GPA_KERNEL         0x100000ull

#define GPA_HOLE_START     0xc0000000ull  /* 3 GiB */
#define GPA_4G             0x100000000ull
#define GPA_PCI_MMIO       0xc0000000ull  /* 32-bit BARs */
#define PCI_MMIO_SIZE      0x20000000ull
#define GPA_ECAM           0xe0000000ull  /* PCIe ECAM, buses 0-255 (MCFG) */
#define ECAM_SIZE          0x10000000ull
/* 64-bit BARs (ivshmem regions) go above RAM: the window starts at RAM's
 * end rounded up to PCI_MMIO64_ALIGN and is that large. */
#define PCI_MMIO64_ALIGN   (64ull << 30)
#define GPA_IOAPIC         0xfec00000ull
#define GPA_LAPIC          0xfee00000ull

/* KVM_SET_TSS_ADDR wants three pages no one else uses. */
#define GPA_TSS            0xfffbd000ull

/* I/O ports. */
#define PORT_I8042_DATA    0x60
#define PORT_I8042_CMD     0x64
#define PORT_PCI_CONFIG    0xcf8      /* 0xcf8 address, 0xcfc data, 0xcf9 reset */
#define PORT_COM1          0x3f8
#define IRQ_COM1           4
#define PORT_ACPI_SLEEP_CTL 0x600   /* FADT sleep control register */
#define PORT_ACPI_SLEEP_STS 0x601   /* FADT sleep status register */
#define PORT_ACPI_GED      0x602   /* GED event selector (read by _EVT) */
#define GSI_GED            9       /* power button events */
#define PORT_DEBUG_EXIT    HV_DEBUG_EXIT_PORT  /* public: hv.h */
#define ACPI_S5_TYP        5

#define NR_IOAPIC_PINS     24

#endif
