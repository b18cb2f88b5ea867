/* Hostile vhost-user back-end replies (hv/vhost_user.c): whatever bytes
 * and descriptors come back for a request, the front-end either takes a
 * well-formed reply or fails with a reason and a broken connection; it
 * never reads past what it was given, never keeps a descriptor, and never
 * waits (the peer's bytes are all there, or the peer is gone, or the time
 * limit is 0 ms).
 *
 * Input: one control byte (request, whether acks are negotiated, how many
 * descriptors ride along, whether the peer closes), then the stream the
 * back-end sends, in two writes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "hv/vhost_user.h"

static int lowest_free_fd(void)
{
	int fd = dup(0);

	if (fd >= 0)
		close(fd);
	return fd;
}

static void send_with_fds(int fd, const uint8_t *p, size_t n, int nfds, int extra)
{
	char ctl[CMSG_SPACE(sizeof(int) * 3)];
	struct iovec iov = { (void *)p, n };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	int fds[3] = { extra, extra, extra };

	if (nfds && n) {
		struct cmsghdr *h;

		memset(ctl, 0, sizeof(ctl));
		mh.msg_control = ctl;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		h = CMSG_FIRSTHDR(&mh);
		h->cmsg_level = SOL_SOCKET;
		h->cmsg_type = SCM_RIGHTS;
		h->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(h), fds, sizeof(int) * (size_t)nfds);
	}
	if (n && sendmsg(fd, &mh, MSG_NOSIGNAL) < 0) {
		/* the socket holds far more than an input */
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint32_t reqs[] = {
		VHU_GET_FEATURES, VHU_GET_PROTOCOL_FEATURES, VHU_GET_QUEUE_NUM, VHU_GET_VRING_BASE,
		VHU_SET_OWNER, VHU_SET_FEATURES, VHU_SET_VRING_ENABLE, VHU_SET_MEM_TABLE,
	};
	struct vhu_conn c;
	struct vhu_msg m;
	struct vhu_region r = { .gpa = 0, .size = 4096, .uaddr = 4096, .fd = 0 };
	uint8_t ctl;
	uint32_t req;
	int sv[2], fds_before, extra, nfds, rc;
	bool acks, close_peer;
	uint64_t v = 0;
	size_t half;

	if (size < 1 || size > 8192)
		return 0;
	ctl = data[0];
	req = reqs[ctl & 7];
	acks = ctl & 8;
	nfds = (ctl >> 4) & 3;
	close_peer = ctl & 0x40;
	data++;
	size--;
	fds_before = lowest_free_fd();
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
		return 0;
	extra = memfd_create("fuzz-stray", 0);
	half = size / 2;
	send_with_fds(sv[1], data, half, nfds, extra);
	send_with_fds(sv[1], data + half, size - half, nfds, extra);
	if (extra >= 0)
		close(extra);
	if (close_peer)
		close(sv[1]);
	vhu_attach(&c, sv[0], 0);
	if (acks)
		c.protocol = 1ull << VHU_PF_REPLY_ACK;
	if (req == VHU_GET_VRING_BASE) {
		uint32_t base;

		rc = vhu_get_vring_base(&c, 2, &base);
	} else if (req == VHU_SET_MEM_TABLE) {
		vhu_msg_mem_table(&m, &r, 1);
		rc = vhu_call(&c, &m, &v);
	} else if (req == VHU_SET_VRING_ENABLE) {
		rc = vhu_set_state(&c, req, 1, 1);
	} else if (vhu_has_reply(req)) {
		rc = vhu_get_u64(&c, req, &v);
	} else {
		rc = vhu_set_u64(&c, req, 1);
	}
	if (rc == 0 && (vhu_has_reply(req) || acks)) {
		char why[160];

		/* Taken: the stream really began with a reply to this request. */
		if (size < VHU_HDR_SIZE + VHU_REPLY_SIZE || vhu_check_reply(data, req, why, sizeof(why)) != 0)
			abort();
		if (!vhu_has_reply(req) && memcmp(data + VHU_HDR_SIZE, "\0\0\0\0\0\0\0\0", 8))
			abort();          /* a refusal taken as success */
	}
	if (rc == 0 && !vhu_has_reply(req) && !acks && c.stray_fds)
		abort();                  /* nothing was to be read at all */
	if (rc != 0 && (!c.broken || !c.err[0]))
		abort();
	vhu_close(&c);
	if (!close_peer)
		close(sv[1]);
	/* Every descriptor that came with the reply was closed. */
	if (lowest_free_fd() != fds_before)
		abort();
	return 0;
}
