/* The numbers IMB-MPI1 fixes by definition: repetitions per message size
 * and how many message sizes one measured time moves. */
#include <string.h>
#include <strings.h>

#include "bench.h"

long long imb_reps(long long bytes, long long max_reps, long long overall_vol)
{
	long long r;

	if (max_reps < 1)
		max_reps = 1;
	if (bytes <= 0)
		return max_reps;
	r = overall_vol / bytes;
	if (r < 1)
		r = 1;
	return r < max_reps ? r : max_reps;
}

static const char *strip_multi(const char *bench)
{
	return strncasecmp(bench, "Multi-", 6) ? bench : bench + 6;
}

/* PingPong moves one message per half round trip (IMB halves its time);
 * PingPing one each way at once; Sendrecv sends and receives one; Exchange
 * sends two and receives two. */
static const struct { const char *name; double factor; bool pair; } known[] = {
	{ "PingPong", 1, true },
	{ "PingPongAnySource", 1, true },
	{ "PingPongSpecificSource", 1, true },
	{ "PingPing", 1, true },
	{ "PingPingAnySource", 1, true },
	{ "PingPingSpecificSource", 1, true },
	{ "Sendrecv", 2, false },
	{ "Exchange", 4, false },
};

double imb_bw_factor(const char *bench)
{
	bench = strip_multi(bench);
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (!strcasecmp(bench, known[i].name))
			return known[i].factor;
	return 0;
}

bool imb_is_pair(const char *bench)
{
	bench = strip_multi(bench);
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (!strcasecmp(bench, known[i].name))
			return known[i].pair;
	return false;
}
