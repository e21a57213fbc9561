/*
 * Executable graphs whose memcpy and memset nodes write into regions
 * (graph.c; docs/ARCHITECTURE.md "No stale byte").  Their writes happen at
 * each launch, long after the nodes were made, so what each executable
 * graph writes into regions is recorded when it is instantiated and when
 * its nodes' parameters are set, and invalidated before every launch.
 */
#ifndef IBP_PRELOAD_GRAPH_H
#define IBP_PRELOAD_GRAPH_H

#include <cuda.h>
#include <stddef.h>

/* After a successful instantiation: walks `graph` (child graphs too) and
 * records the destinations of its memcpy and memset nodes that lie in a
 * region, and scans its kernel nodes' parameters (serve/kernel_args.h):
 * a region among them passes through.  Also after cuGraphExecUpdate. */
void ibp__graph_record(CUgraphExec exec, CUgraph graph);

/* After cuGraphExec{Memcpy,Memset}NodeSetParams succeeded: the node now
 * writes [dst, dst+bytes) at each launch (recorded when in a region; the
 * old destination stays recorded: a superset). */
void ibp__graph_note(CUgraphExec exec, const void *dst, size_t bytes);
void ibp__graph_note_memcpy(CUgraphExec exec, const CUDA_MEMCPY3D *p);
void ibp__graph_note_memset(CUgraphExec exec, const CUDA_MEMSET_NODE_PARAMS *p);

/* The generic form (cuGraphExecNodeSetParams): memcpy and memset nodes
 * as above, a kernel node's parameters scanned (serve/kernel_args.h). */
void ibp__graph_note_params(CUgraphExec exec, const CUgraphNodeParams *p);

/* Around a launch: begin invalidates what exec writes into regions and
 * returns how many writes touched one; end is called with that count and
 * the stream when the launch was queued (NULL otherwise). */
size_t ibp__graph_launch_begin(CUgraphExec exec);
void ibp__graph_launch_end(size_t touched, CUstream stream);

/* The executable graph is destroyed. */
void ibp__graph_forget(CUgraphExec exec);

/* Child after fork: the parent's records and lock. */
void ibp__graph_after_fork_child(void);

#endif /* IBP_PRELOAD_GRAPH_H */
