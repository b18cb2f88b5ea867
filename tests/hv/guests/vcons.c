/* virtio-console from a test guest: text out through the transmit queue
 * (one buffer, and one message split over three descriptors), a character
 * through the emergency-write register, and, with input=WORD on the command
 * line, a line read from the receive queue and echoed back. */
#include "virtio.h"

static struct kvdev dev;

static void send(const char *const *parts, int n)
{
	struct kbuf b[4];
	uint32_t len;

	for (int i = 0; i < n; i++) {
		size_t l = strlen(parts[i]);
		char *p = kalloc(l, 1);

		memcpy(p, parts[i], l);
		b[i] = (struct kbuf){ p, (uint32_t)l, false };
	}
	vq_add(&dev.q[1], b, n, false);
	vq_kick(&dev.q[1]);
	check(vq_wait(&dev.q[1], &len, 500) >= 0, "transmit buffer of %d part(s) completed", n);
}

void test_main(void)
{
	char word[32], *in = kalloc(64, 8);
	bool want_input = cmdline_get("input", word, sizeof(word)) != 0;
	static const char *const one[] = { "hello from virtio-console\n" };
	static const char *const three[] = { "split ", "over ", "three descriptors\n" };
	int r;

	msix_handlers_install(4);
	r = vdev_open(&dev, 3, 0, 1ull << 2);
	check(r == 0, "virtio-console found (%d)", r);
	if (r)
		return;
	check(vcfg32(&dev, 4) == 1, "one port (max_nr_ports %u)", vcfg32(&dev, 4));
	msix_enable(dev.slot, 3, VIRTIO_VEC_BASE);
	check(vq_setup_(&dev, 0, 16, 1) == 0 && vq_setup_(&dev, 1, 16, 2) == 0, "receive and transmit queues");
	if (want_input) {
		struct kbuf b = { in, 63, true };

		vq_add(&dev.q[0], &b, 1, false);
	}
	vdev_driver_ok(&dev);
	send(one, 1);
	send(three, 3);
	if (dev.features & (1ull << 2)) {
		mmio_write8(dev.devcfg + 8, '!');
		mmio_write8(dev.devcfg + 8, '\n');
	}
	check(dev.features & (1ull << 2), "emergency write negotiated");
	if (want_input) {
		uint32_t len = 0;
		int h = vq_wait(&dev.q[0], &len, 1000);
		static const char *reply[2] = { "echo: ", 0 };

		in[len < 63 ? len : 63] = 0;
		check(h >= 0 && len >= strlen(word) && !memcmp(in, word, strlen(word)),
		      "input '%s' arrived on the receive queue (%u bytes)", word, len);
		reply[1] = in;
		send(reply, 2);
	}
}
