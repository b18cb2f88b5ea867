/* COM1: a 16550A UART at 0x3f8, IRQ 4.  Output goes to the chosen backend
 * (stdout, a file, or nowhere); input comes from stdin when the backend is
 * stdio.  Enough of the chip for Linux's 8250 driver to detect a 16550A
 * (FIFO bits in IIR, scratch register, loopback) and run it by interrupt. */
#include "lib/err.h"
#include "lib/fdio.h"
#include "lib/log.h"
#include "vm.h"
#include "layout.h"
#include "snapshot.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RX_SIZE 256

enum { IER_RDI = 1, IER_THRI = 2, IER_RLSI = 4, IER_MSI = 8 };
enum { LSR_DR = 0x01, LSR_OE = 0x02, LSR_THRE = 0x20, LSR_TEMT = 0x40 };
enum { MCR_DTR = 1, MCR_RTS = 2, MCR_OUT1 = 4, MCR_OUT2 = 8, MCR_LOOP = 0x10 };

struct uart {
	struct vm *vm;
	pthread_mutex_t lock;
	int out_fd;
	bool own_fd;
	uint8_t ier, lcr, mcr, lsr, msr, scr, fcr, dll, dlm;
	bool thri_pending;
	uint8_t rx[RX_SIZE];
	unsigned rx_head, rx_n;
	int irq_level;
};

HV_DEVICE_DECLARE(uart);

static unsigned pending(struct uart *u)
{
	if ((u->ier & IER_RLSI) && (u->lsr & LSR_OE))
		return 0x06;
	if ((u->ier & IER_RDI) && u->rx_n)
		return 0x04;
	if ((u->ier & IER_THRI) && u->thri_pending)
		return 0x02;
	return 0x01;
}

/* The IRQ line reaches the interrupt controller only through OUT2, as on a PC. */
static void update_irq(struct uart *u)
{
	int level = pending(u) != 0x01 && (u->mcr & MCR_OUT2) && !(u->mcr & MCR_LOOP);

	if (level != u->irq_level) {
		u->irq_level = level;
		vm_set_irq(u->vm, IRQ_COM1, level);
	}
}

static void rx_push(struct uart *u, uint8_t c)
{
	if (u->rx_n == RX_SIZE) {
		u->lsr |= LSR_OE;
		return;
	}
	u->rx[(u->rx_head + u->rx_n) % RX_SIZE] = c;
	u->rx_n++;
}

static void uart_write(void *opaque, uint64_t off, const void *data, unsigned len)
{
	struct uart *u = opaque;
	uint8_t v = *(const uint8_t *)data;

	(void)len;
	pthread_mutex_lock(&u->lock);
	switch (off) {
	case 0:
		if (u->lcr & 0x80) {
			u->dll = v;
		} else if (u->mcr & MCR_LOOP) {
			rx_push(u, v);
			u->thri_pending = true;
		} else {
			if (u->out_fd >= 0 && write_full(u->out_fd, &v, 1) < 0 && errno != EAGAIN) {
				log_warn("serial output failed: %s; dropping further output", strerror(errno));
				if (u->own_fd)
					close(u->out_fd);
				u->out_fd = -1;
			}
			u->thri_pending = true;
		}
		break;
	case 1:
		if (u->lcr & 0x80) {
			u->dlm = v;
		} else {
			/* Enabling THRI with an empty THR raises it at once. */
			if (!(u->ier & IER_THRI) && (v & IER_THRI))
				u->thri_pending = true;
			u->ier = v & 0x0f;
		}
		break;
	case 2:
		u->fcr = v;
		if (v & 2) {
			u->rx_n = 0;
			u->lsr &= (uint8_t)~LSR_DR;
		}
		break;
	case 3: u->lcr = v; break;
	case 4: u->mcr = v & 0x1f; break;
	case 7: u->scr = v; break;
	default: break;
	}
	update_irq(u);
	pthread_mutex_unlock(&u->lock);
}

static void uart_read(void *opaque, uint64_t off, void *data, unsigned len)
{
	struct uart *u = opaque;
	uint8_t v = 0xff;

	memset(data, 0xff, len);
	pthread_mutex_lock(&u->lock);
	switch (off) {
	case 0:
		if (u->lcr & 0x80) {
			v = u->dll;
		} else {
			v = 0;
			if (u->rx_n) {
				v = u->rx[u->rx_head];
				u->rx_head = (u->rx_head + 1) % RX_SIZE;
				u->rx_n--;
			}
		}
		break;
	case 1: v = (u->lcr & 0x80) ? u->dlm : u->ier; break;
	case 2:
		v = (uint8_t)pending(u);
		if (v == 0x02)
			u->thri_pending = false;
		if (u->fcr & 1)
			v |= 0xc0;               /* FIFOs enabled: a 16550A */
		break;
	case 3: v = u->lcr; break;
	case 4: v = u->mcr; break;
	case 5:
		v = LSR_THRE | LSR_TEMT | (u->rx_n ? LSR_DR : 0) | (u->lsr & LSR_OE);
		u->lsr &= (uint8_t)~LSR_OE;
		break;
	case 6:
		if (u->mcr & MCR_LOOP)
			v = (uint8_t)(((u->mcr & MCR_RTS) ? 0x10 : 0) | ((u->mcr & MCR_DTR) ? 0x20 : 0) |
				      ((u->mcr & MCR_OUT1) ? 0x40 : 0) | ((u->mcr & MCR_OUT2) ? 0x80 : 0));
		else
			v = 0xb0;                /* CTS, DSR, DCD: a cable is there */
		break;
	case 7: v = u->scr; break;
	}
	*(uint8_t *)data = v;
	update_irq(u);
	pthread_mutex_unlock(&u->lock);
}

static const struct io_ops uart_ops = { .read = uart_read, .write = uart_write };

static void stdin_ready(struct vm *vm, int fd, void *opaque)
{
	struct uart *u = opaque;
	uint8_t buf[64];
	ssize_t n = read(fd, buf, sizeof(buf));

	if (n <= 0) {
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		vm_unwatch_fd(vm, fd);       /* EOF: no more input */
		return;
	}
	pthread_mutex_lock(&u->lock);
	for (ssize_t i = 0; i < n; i++)
		rx_push(u, buf[i]);
	update_irq(u);
	pthread_mutex_unlock(&u->lock);
}

static int uart_create(struct vm *vm, struct verr *err)
{
	const char *be = vm->cfg->serial ? vm->cfg->serial : "stdio";
	struct uart *u = calloc(1, sizeof(*u));

	if (!u)
		return verr_set(err, "out of memory");
	u->vm = vm;
	pthread_mutex_init(&u->lock, NULL);
	u->lsr = LSR_THRE | LSR_TEMT;
	u->out_fd = -1;
	if (!strcmp(be, "stdio")) {
		u->out_fd = STDOUT_FILENO;
	} else if (!strncmp(be, "file:", 5) && be[5]) {
		u->out_fd = open(be + 5, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
		if (u->out_fd < 0) {
			verr_errno(err, "serial: opening %s", be + 5);
			free(u);
			return -1;
		}
		u->own_fd = true;
	} else if (strcmp(be, "none")) {
		free(u);
		return verr_set(err, "serial: '%s' is not stdio, none or file:PATH", be);
	}
	vm_device_set(vm, &hv_dev_uart, u);
	if (io_register(&vm->pio, PORT_COM1, 8, &uart_ops, u, "COM1", err) < 0)
		return -1;
	/* poll() says when one read will not block; stdin stays blocking
	 * because a terminal shares its flags with stdout. */
	if (!strcmp(be, "stdio") && fcntl(STDIN_FILENO, F_GETFL) >= 0)
		vm_watch_fd(vm, STDIN_FILENO, stdin_ready, u);
	return 0;
}

static void uart_destroy(struct vm *vm)
{
	struct uart *u = vm_device(vm, &hv_dev_uart);

	if (!u)
		return;
	if (u->own_fd && u->out_fd >= 0)
		close(u->out_fd);
	pthread_mutex_destroy(&u->lock);
	free(u);
}

/* The registers and the receive FIFO; the output backend is this
 * process's.  The line's level is in the restored irqchip already. */
static int uart_save(struct vm *vm, struct snap_buf *b, struct verr *err)
{
	struct uart *u = vm_device(vm, &hv_dev_uart);
	uint8_t r[12];

	(void)err;
	pthread_mutex_lock(&u->lock);
	r[0] = u->ier; r[1] = u->lcr; r[2] = u->mcr; r[3] = u->lsr; r[4] = u->msr; r[5] = u->scr;
	r[6] = u->fcr; r[7] = u->dll; r[8] = u->dlm; r[9] = u->thri_pending; r[10] = (uint8_t)u->irq_level; r[11] = 0;
	sb_put(b, r, sizeof(r));
	sb_u32(b, u->rx_head);
	sb_u32(b, u->rx_n);
	sb_put(b, u->rx, sizeof(u->rx));
	pthread_mutex_unlock(&u->lock);
	return 0;
}

static int uart_load(struct vm *vm, struct snap_rd *rd, struct verr *err)
{
	struct uart *u = vm_device(vm, &hv_dev_uart);
	uint8_t r[12], rx[RX_SIZE];
	uint32_t head, n;

	rd_get(rd, r, sizeof(r));
	head = rd_u32(rd);
	n = rd_u32(rd);
	rd_get(rd, rx, sizeof(rx));
	if (!rd_done(rd))
		return verr_set(err, "state of %zu bytes, not %zu", rd->len, sizeof(r) + 8 + sizeof(rx));
	if (r[0] & ~0x0f || r[2] & ~0x1f || r[3] & ~(LSR_DR | LSR_OE | LSR_THRE | LSR_TEMT) || r[9] > 1 || r[10] > 1 || r[11])
		return verr_set(err, "register values no UART holds (IER 0x%x, MCR 0x%x, LSR 0x%x)", r[0], r[2], r[3]);
	if (head >= RX_SIZE || n > RX_SIZE)
		return verr_set(err, "receive FIFO at %u with %u bytes (it holds %d)", head, n, RX_SIZE);
	pthread_mutex_lock(&u->lock);
	u->ier = r[0]; u->lcr = r[1]; u->mcr = r[2]; u->lsr = r[3]; u->msr = r[4]; u->scr = r[5];
	u->fcr = r[6]; u->dll = r[7]; u->dlm = r[8]; u->thri_pending = r[9]; u->irq_level = r[10];
	u->rx_head = head;
	u->rx_n = n;
	memcpy(u->rx, rx, sizeof(rx));
	pthread_mutex_unlock(&u->lock);
	return 0;
}

HV_DEVICE_SNAP(uart, uart_create, uart_destroy, uart_save, uart_load);
