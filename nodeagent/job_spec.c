/* A job as its user described it, with the cluster's defaults, in the
 * words of the node agent: the one place that says what a field the user
 * left out means on a node, for every caller. */
#include "lib/cluster.h"
#include "lib/jobspec.h"
#include "nodeagent/nodeagent.h"

void na_job_spec_from(struct na_job_spec *s, const struct job_spec *js, const struct cluster_cfg *cl)
{
	s->driver = vhpc_driver_name(js->driver >= 0 ? js->driver : cl->default_driver);
	s->image = js->image ? js->image : cl->default_image;
	s->tuning = js->tuning ? js->tuning : cl->default_tuning;
	s->vcpus = (int)js->vcpus;
	s->mem = js->mem ? js->mem : cl->default_mem;
	s->oversubscribe = js->oversubscribe;
	/* Co-located guests talk through shared memory rather than TCP, and
	 * a single rank has nobody to talk to (ranks 0: not known here). */
	s->vmshm = js->vmshm && js->ranks != 1;
	s->single_copy = js->single_copy;
	s->scratch = js->scratch;
	s->job_timeout_s = js->timeout ? js->timeout : cl->default_timeout;
	s->guest_port = (int)cl->guest_port;
	s->image_policy = &cl->images;
}
