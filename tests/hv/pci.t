#!/usr/bin/env bash
# timeout: 60
# needs: hardware-virtualization
# The PCI host bridge and the virtio transport from a test guest (see
# tests/hv/guests/pci.c): MCFG/e820/DSDT, ECAM vs 0xCF8, BAR sizing and
# moves, MSI-X masking and the PBA, the PCI-cfg window, refusals.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/hvlib.sh"
HVT=$VHPC_TOP/$B/hv-tools/hvt

"$HVT" pattern "$T/d.img" 65536 1
run_guest pci --vcpus 1 --mem 32M --blk "path=$T/d.img"
guest_ok "pci guest"
guest_results "pci"
done_testing
