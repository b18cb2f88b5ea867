#!/usr/bin/env bash
# timeout: 60
# needs: hardware-virtualization
# Interrupt delivery through the in-kernel LAPIC: a timer interrupt wakes
# hlt, and fixed IPIs go both ways between two vCPUs.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/hvlib.sh"

run_guest irq --vcpus 2 --mem 32M
guest_ok "irq guest"
guest_results "irq"
done_testing
