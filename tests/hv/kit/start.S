/* Test-guest entry: PVH (32-bit flat, paging off, EBX = hvm_start_info),
 * then long mode with an identity map of the first 4 GiB, then C.
 * The same image wrapped in a bzImage setup header (hvt bzimage) enters
 * at 1 MiB + 0x200 through the Linux 64-bit boot protocol: long mode
 * already, the loader's identity map, RSI = the zero page.
 * APs come in through a real-mode trampoline copied to 0x8000 (SIPI vector
 * 8) and take the same 32-bit path. */
#define XEN_ELFNOTE_PHYS32_ENTRY 18
#define STACK_SIZE 16384
#define MAX_CPUS 64

	.section .note.Xen, "a"
	.align 4
	.long 4, 4, XEN_ELFNOTE_PHYS32_ENTRY
	.asciz "Xen"
	.long pvh_start32

	/* Linux 64-bit boot protocol entry: load our GDT and selectors, keep
	 * the loader's page tables, and let kmain_bz make a start_info from
	 * the zero page. */
	.section .text.bzentry, "ax"
	.code64
	.globl bz_entry64
bz_entry64:
	cli
	lgdt gdt_ptr64(%rip)
	leaq bsp_stack_top(%rip), %rsp
	pushq $0x18
	leaq 1f(%rip), %rax
	pushq %rax
	lretq
1:	movw $0x10, %ax
	movw %ax, %ds
	movw %ax, %es
	movw %ax, %ss
	xorl %eax, %eax
	movw %ax, %fs
	movw %ax, %gs
	movq %rsi, %rdi
	call kmain_bz
	jmp halt_forever

	.section .text.entry, "ax"
	.code32
	.globl pvh_start32
pvh_start32:
	cli
	movl %ebx, start_info_pa
	lgdt gdt_ptr
	ljmp $0x08, $1f
1:	movw $0x10, %ax
	movw %ax, %ds
	movw %ax, %es
	movw %ax, %ss
	/* PD entries: 2048 x 2 MiB, identity. */
	movl $pd, %edi
	xorl %ecx, %ecx
2:	movl %ecx, %eax
	shll $21, %eax
	orl $0x83, %eax
	movl %eax, (%edi,%ecx,8)
	movl %ecx, %eax
	shrl $11, %eax
	movl %eax, 4(%edi,%ecx,8)
	incl %ecx
	cmpl $2048, %ecx
	jne 2b
	/* PDPT -> 4 PDs, PML4 -> PDPT. */
	movl $pdpt, %edi
	movl $pd + 3, %eax
	movl %eax, 0(%edi)
	addl $4096, %eax
	movl %eax, 8(%edi)
	addl $4096, %eax
	movl %eax, 16(%edi)
	addl $4096, %eax
	movl %eax, 24(%edi)
	movl $pdpt + 3, %eax
	movl %eax, pml4
	movl $bsp_stack_top, %esp
	jmp enter_long

	/* Shared by BSP and APs: PAE, CR3, EFER.LME, paging, 64-bit jump. */
enter_long:
	movl %cr4, %eax
	orl $0x20, %eax
	movl %eax, %cr4
	movl $pml4, %eax
	movl %eax, %cr3
	movl $0xc0000080, %ecx
	rdmsr
	orl $0x100, %eax
	wrmsr
	movl %cr0, %eax
	orl $0x80000001, %eax
	movl %eax, %cr0
	ljmp $0x18, $long_entry

	.code64
long_entry:
	movw $0x10, %ax
	movw %ax, %ds
	movw %ax, %es
	movw %ax, %ss
	xorl %eax, %eax
	movw %ax, %fs
	movw %ax, %gs
	cmpl $0, ap_mode
	jne ap_long
	movl $bsp_stack_top, %esp
	movl start_info_pa, %edi
	call kmain
	jmp halt_forever

ap_long:
	/* Each AP takes the next stack. */
	movl $1, %eax
	lock xaddl %eax, ap_count
	cmpl $MAX_CPUS - 1, %eax
	jae halt_forever
	movl %eax, %edi
	incl %eax
	imull $STACK_SIZE, %eax
	leaq ap_stacks(%rax), %rsp
	incl %edi
	call ap_main
halt_forever:
	cli
	hlt
	jmp halt_forever

	.code32
	.globl ap_entry32
ap_entry32:
	movw $0x10, %ax
	movw %ax, %ds
	movw %ax, %es
	movw %ax, %ss
	jmp enter_long

	/* Real-mode trampoline; smp_start() copies it to 0x8000. */
	.code16
	.globl trampoline_start, trampoline_end
trampoline_start:
	cli
	movw %cs, %ax
	movw %ax, %ds
	lgdtl (tr_gdt_ptr - trampoline_start)
	movl %cr0, %eax
	orl $1, %eax
	movl %eax, %cr0
	ljmpl $0x08, $ap_entry32
	.align 4
tr_gdt_ptr:
	.word gdt_end - gdt - 1
	.long gdt
trampoline_end:

	/* Interrupt entry points: vector pushed, then a common C call. */
	.code64
	.align 16
	.globl isr_entries
isr_entries:
	.set vec, 0
	.rept 256
	.align 16
	pushq $vec
	jmp isr_common
	.set vec, vec + 1
	.endr

isr_common:
	pushq %rax
	pushq %rcx
	pushq %rdx
	pushq %rsi
	pushq %rdi
	pushq %r8
	pushq %r9
	pushq %r10
	pushq %r11
	movq 72(%rsp), %rdi
	leaq 80(%rsp), %rsi
	subq $8, %rsp
	call isr_dispatch
	addq $8, %rsp
	popq %r11
	popq %r10
	popq %r9
	popq %r8
	popq %rdi
	popq %rsi
	popq %rdx
	popq %rcx
	popq %rax
	addq $8, %rsp
	iretq

	.data
	.align 16
gdt:
	.quad 0
	.quad 0x00cf9a000000ffff	/* 0x08 code32 */
	.quad 0x00cf92000000ffff	/* 0x10 data */
	.quad 0x00af9a000000ffff	/* 0x18 code64 */
gdt_end:
gdt_ptr:
	.word gdt_end - gdt - 1
	.long gdt
	.align 8
gdt_ptr64:
	.word gdt_end - gdt - 1
	.quad gdt
	.globl start_info_pa, ap_mode, ap_count
start_info_pa: .long 0
ap_mode: .long 0
ap_count: .long 0

	.bss
	.align 4096
pml4: .space 4096
pdpt: .space 4096
pd: .space 4 * 4096
	.align 16
	.space STACK_SIZE
bsp_stack_top:
ap_stacks: .space STACK_SIZE * MAX_CPUS
