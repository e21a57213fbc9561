/* More device-side writes into a ready region (core_device_writes has the
 * memsets, device-to-device and 2D copies): 2D memsets, 3D copies (also
 * between contexts), peer copies, batches, stream memory operations
 * (cuStreamWriteValue32, cuStreamBatchMemOp), the memcpy and memset nodes of
 * a graph at its launch (built node by node, and with a node's parameters
 * changed in the executable graph, in both forms, or the executable graph
 * updated from another graph), and last kernels the application launches
 * with a pointer into a region -- a captured graph's kernel node into a
 * second region, then a launch -- (they write there over the bus, as a
 * GPU does, and the region passes through from then on).  Each writes new bytes
 * into one slice of the region without a CPU store; every copy from that slice
 * afterwards must bring them.  The driver is reached as cudart reaches it
 * (cuGetProcAddress_v2). Run under LD_PRELOAD=libibp.so with IBP_WAIT_READY=1
 * and SIMCUDA_KERNELS naming the test kernels (the same answers without
 * libibp). */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "sim_test_kernels.h"

#define N (4u << 20)
#define COPY (256u << 10)

static uint8_t *host, *host2, *dev, *src;
static int failures;

typedef CUresult (*getproc_fn)(const char *, void **, int, cuuint64_t,
                               CUdriverProcAddressQueryResult *);
static getproc_fn gpa;

#define CK(call)                                                               \
  do {                                                                         \
    if ((call) != 0) {                                                         \
      fprintf(stderr, "%s:%d: %s failed\n", __FILE__, __LINE__, #call);        \
      return 2;                                                                \
    }                                                                          \
  } while (0)

/* The driver's entry point `name` at ABI `version` (flags 0). */
static void *sym(const char *name, int version) {
  void *p = NULL;
  CUdriverProcAddressQueryResult st;
  if (gpa(name, &p, version, 0, &st) != CUDA_SUCCESS)
    p = NULL;
  if (!p)
    fprintf(stderr, "%s not found\n", name);
  return p;
}
#define SYM(var, name, version) var = sym(name, version)

/* Copies [off, off+COPY) of region `base` to the device and compares. */
static int check_in(const uint8_t *base, size_t off, const char *after) {
  static uint8_t back[COPY];
  CK(cudaMemcpy(dev, base + off, COPY, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(back, dev, COPY, cudaMemcpyDeviceToHost));
  if (memcmp(back, base + off, COPY) != 0) {
    fprintf(stderr, "after %s: stale bytes at offset %zu\n", after, off);
    failures++;
  }
  return 0;
}

static int check(size_t off, const char *after) {
  return check_in(host, off, after);
}

#define SLICE(i) ((CUdeviceptr)(uintptr_t)(host + (i)*COPY))
#define DEVP(p) ((CUdeviceptr)(uintptr_t)(p))

static CUresult (*memset2d8)(CUdeviceptr, size_t, unsigned char, size_t,
                             size_t);
static CUresult (*memset2d32_async)(CUdeviceptr, size_t, unsigned, size_t,
                                    size_t, CUstream);
static CUresult (*copy3d)(const CUDA_MEMCPY3D *);
static CUresult (*copy3d_peer_async)(const CUDA_MEMCPY3D_PEER *, CUstream);
static CUresult (*copy_peer)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext,
                             size_t);
static CUresult (*batch)(CUdeviceptr *, CUdeviceptr *, size_t *, size_t,
                         CUmemcpyAttributes *, size_t *, size_t, CUstream);
static CUresult (*batch3d)(size_t, CUDA_MEMCPY3D_BATCH_OP *, unsigned long long,
                           CUstream);
static CUresult (*ctx_current)(CUcontext *);
static CUresult (*stream_sync)(CUstream);

static int lookups(void) {
  void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  gpa = drv ? (getproc_fn)dlsym(drv, "cuGetProcAddress_v2") : NULL;
  if (!gpa)
    return 2;
  SYM(memset2d8, "cuMemsetD2D8", 3020);
  SYM(memset2d32_async, "cuMemsetD2D32Async", 3020);
  SYM(copy3d, "cuMemcpy3D", 3020);
  SYM(copy3d_peer_async, "cuMemcpy3DPeerAsync", 4000);
  SYM(copy_peer, "cuMemcpyPeer", 4000);
  SYM(batch, "cuMemcpyBatchAsync", 13000);
  SYM(batch3d, "cuMemcpy3DBatchAsync", 13000);
  SYM(ctx_current, "cuCtxGetCurrent", 4000);
  SYM(stream_sync, "cuStreamSynchronize", 2000);
  return memset2d8 && memset2d32_async && copy3d && copy3d_peer_async &&
                 copy_peer && batch && batch3d && ctx_current && stream_sync
             ? 0
             : 2;
}

/* ---- one case each ------------------------------------------------------- */

static int memsets_2d(CUstream s) {
  CK(memset2d8(SLICE(0) + 40, 1000, 0x5a, 300, 60));
  CK(check(0, "cuMemsetD2D8"));
  CK(memset2d32_async(SLICE(1) + 64, 2048, 0xdeadbeef, 100, 40, s));
  CK(stream_sync(s));
  return check(COPY, "cuMemsetD2D32Async");
}

static int copies_3d(CUcontext ctx, CUstream s) {
  CUDA_MEMCPY3D p = {0};
  p.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  p.srcDevice = DEVP(src);
  p.srcPitch = 512;
  p.srcHeight = 8;
  p.dstMemoryType = CU_MEMORYTYPE_HOST;
  p.dstHost = host + 2 * COPY;
  p.dstXInBytes = 16;
  p.dstY = 1;
  p.dstPitch = 4096;
  p.dstHeight = 10;
  p.WidthInBytes = 500;
  p.Height = 8;
  p.Depth = 5;
  CK(copy3d(&p));
  CK(check(2 * COPY, "cuMemcpy3D"));
  CUDA_MEMCPY3D_PEER q = {0};
  q.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  q.srcDevice = DEVP(src);
  q.srcContext = ctx;
  q.srcPitch = 700;
  q.srcHeight = 4;
  q.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
  q.dstDevice = SLICE(3);
  q.dstContext = ctx;
  q.dstPitch = 8192;
  q.dstHeight = 4;
  q.WidthInBytes = 700;
  q.Height = 4;
  q.Depth = 6;
  CK(copy3d_peer_async(&q, s));
  CK(stream_sync(s));
  return check(3 * COPY, "cuMemcpy3DPeerAsync");
}

static int peer_and_batches(CUcontext ctx, CUstream s) {
  CK(copy_peer(SLICE(4) + 3, ctx, DEVP(src), ctx, 20000));
  CK(check(4 * COPY, "cuMemcpyPeer"));
  CUdeviceptr dsts[2] = {SLICE(5) + 100, SLICE(5) + 70000};
  CUdeviceptr srcs[2] = {DEVP(src), DEVP(src) + 4096};
  size_t sizes[2] = {5000, 9000}, idx = 0;
  CUmemcpyAttributes attr = {0};
  attr.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
  CK(batch(dsts, srcs, sizes, 2, &attr, &idx, 1, s));
  CK(stream_sync(s));
  CK(check(5 * COPY, "cuMemcpyBatchAsync"));
  CUDA_MEMCPY3D_BATCH_OP op = {0};
  op.src.type = op.dst.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
  op.src.op.ptr.ptr = DEVP(src);
  op.dst.op.ptr.ptr = SLICE(6) + 8;
  op.dst.op.ptr.rowLength = 3000;
  op.dst.op.ptr.layerHeight = 5;
  op.extent = (CUextent3D){1000, 4, 3};
  op.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
  CK(batch3d(1, &op, 0, s));
  CK(stream_sync(s));
  return check(6 * COPY, "cuMemcpy3DBatchAsync");
}

static int mem_ops(CUstream s) {
  CUresult (*write32)(CUstream, CUdeviceptr, cuuint32_t, unsigned);
  CUresult (*batch_ops)(CUstream, unsigned, CUstreamBatchMemOpParams *,
                        unsigned);
  SYM(write32, "cuStreamWriteValue32", 12000);
  SYM(batch_ops, "cuStreamBatchMemOp", 12000);
  if (!write32 || !batch_ops)
    return 2;
  CK(write32(s, SLICE(13) + 4096, 0xfeedf00du, 0));
  CK(stream_sync(s));
  CK(check(13 * COPY, "cuStreamWriteValue32"));
  CUstreamBatchMemOpParams ops[2];
  memset(ops, 0, sizeof ops);
  for (int i = 0; i < 2; i++) {
    ops[i].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
    ops[i].writeValue.address = SLICE(14) + 8 * 1000 * (unsigned)(i + 1);
    ops[i].writeValue.value64 = 0x0123456789abcdefull + (unsigned)i;
  }
  CK(batch_ops(s, 2, ops, 0));
  CK(stream_sync(s));
  return check(14 * COPY, "cuStreamBatchMemOp");
}

static int graphs(CUcontext ctx, CUstream s) {
  CUresult (*create)(CUgraph *, unsigned);
  CUresult (*add_memset)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
                         const CUDA_MEMSET_NODE_PARAMS *, CUcontext);
  CUresult (*add_memcpy)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
                         const CUDA_MEMCPY3D *, CUcontext);
  CUresult (*instantiate)(CUgraphExec *, CUgraph, unsigned long long);
  CUresult (*launch)(CUgraphExec, CUstream);
  CUresult (*set_memset)(CUgraphExec, CUgraphNode,
                         const CUDA_MEMSET_NODE_PARAMS *, CUcontext);
  CUresult (*destroy_exec)(CUgraphExec);
  CUresult (*destroy)(CUgraph);
  SYM(create, "cuGraphCreate", 10000);
  SYM(add_memset, "cuGraphAddMemsetNode", 10000);
  SYM(add_memcpy, "cuGraphAddMemcpyNode", 10000);
  SYM(instantiate, "cuGraphInstantiateWithFlags", 11040);
  SYM(launch, "cuGraphLaunch", 10000);
  SYM(set_memset, "cuGraphExecMemsetNodeSetParams", 10020);
  SYM(destroy_exec, "cuGraphExecDestroy", 10000);
  SYM(destroy, "cuGraphDestroy", 10000);
  if (!create || !add_memset || !add_memcpy || !instantiate || !launch ||
      !set_memset || !destroy_exec || !destroy)
    return 2;
  /* a memset node and a memcpy node into the region, written at launch */
  CUgraph g;
  CUgraphNode set_node, copy_node;
  CK(create(&g, 0));
  CUDA_MEMSET_NODE_PARAMS ms = {0};
  ms.dst = SLICE(7) + 256;
  ms.pitch = 1024;
  ms.value = 0x77;
  ms.elementSize = 1;
  ms.width = 600;
  ms.height = 30;
  CK(add_memset(&set_node, g, NULL, 0, &ms, ctx));
  CUDA_MEMCPY3D p = {0};
  p.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  p.srcDevice = DEVP(src);
  p.srcPitch = 2000;
  p.dstMemoryType = CU_MEMORYTYPE_HOST;
  p.dstHost = host + 8 * COPY + 11;
  p.dstPitch = 2000;
  p.WidthInBytes = 2000;
  p.Height = 20;
  p.Depth = 1;
  CK(add_memcpy(&copy_node, g, &set_node, 1, &p, ctx));
  CUgraphExec e;
  CK(instantiate(&e, g, 0));
  CK(check(7 * COPY, "instantiating a graph (nothing written yet)"));
  CK(launch(e, s));
  CK(stream_sync(s));
  CK(check(7 * COPY, "a graph's memset node"));
  CK(check(8 * COPY, "a graph's memcpy node"));
  /* a memset node into device memory, moved into the region */
  CUgraph g2;
  CUgraphNode n2;
  CUgraphExec e2;
  CK(create(&g2, 0));
  ms.dst = DEVP(dev);
  ms.value = 0x31;
  CK(add_memset(&n2, g2, NULL, 0, &ms, ctx));
  CK(instantiate(&e2, g2, 0));
  ms.dst = SLICE(9) + 512;
  CK(set_memset(e2, n2, &ms, ctx));
  CK(launch(e2, s));
  CK(stream_sync(s));
  CK(check(9 * COPY, "a memset node moved into the region"));
  /* the generic form moves a memcpy node into the region */
  CUresult (*exec_node_set)(CUgraphExec, CUgraphNode, CUgraphNodeParams *);
  CUresult (*update)(CUgraphExec, CUgraph, CUgraphExecUpdateResultInfo *);
  SYM(exec_node_set, "cuGraphExecNodeSetParams", 12020);
  SYM(update, "cuGraphExecUpdate", 12000);
  if (!exec_node_set || !update)
    return 2;
  CUgraphNodeParams np = {0};
  np.type = CU_GRAPH_NODE_TYPE_MEMCPY;
  np.memcpy.copyCtx = ctx;
  np.memcpy.copyParams = p;
  np.memcpy.copyParams.dstHost = host + 11 * COPY + 5;
  CK(exec_node_set(e, copy_node, &np));
  CK(launch(e, s));
  CK(stream_sync(s));
  CK(check(11 * COPY, "a memcpy node moved into the region (generic form)"));
  /* an executable graph updated from a graph that writes into the region */
  CUgraph g3;
  CUgraphNode n3;
  CK(create(&g3, 0));
  ms.dst = SLICE(12) + 64;
  ms.value = 0x92;
  CK(add_memset(&n3, g3, NULL, 0, &ms, ctx));
  CUgraphExecUpdateResultInfo info;
  CK(update(e2, g3, &info));
  CK(launch(e2, s));
  CK(stream_sync(s));
  CK(check(12 * COPY, "an executable graph updated to write into it"));
  CK(destroy_exec(e));
  CK(destroy_exec(e2));
  CK(destroy(g));
  CK(destroy(g3));
  return destroy(g2) == CUDA_SUCCESS ? 0 : 2;
}

/* Last: the region passes through from now on. */
static int kernel(CUstream s) {
  static const unsigned long long image[2] = {0x00100001BA55ED50ull, 0};
  CUresult (*load)(CUmodule *, const void *);
  CUresult (*get)(CUfunction *, CUmodule, const char *);
  CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned,
                     unsigned, unsigned, unsigned, CUstream, void **, void **);
  SYM(load, "cuModuleLoadData", 2000);
  SYM(get, "cuModuleGetFunction", 2000);
  SYM(launch, "cuLaunchKernel", 4000);
  if (!load || !get || !launch)
    return 2;
  CUmodule m;
  CUfunction f;
  CK(load(&m, image));
  CK(get(&f, m, "sim_store_host_u32"));
  /* a kernel node of a captured graph, into the second region */
  CUresult (*begin)(CUstream, CUstreamCaptureMode);
  CUresult (*end)(CUstream, CUgraph *);
  CUresult (*instantiate)(CUgraphExec *, CUgraph, unsigned long long);
  CUresult (*glaunch)(CUgraphExec, CUstream);
  SYM(begin, "cuStreamBeginCapture", 10010);
  SYM(end, "cuStreamEndCapture", 10000);
  SYM(instantiate, "cuGraphInstantiateWithFlags", 11040);
  SYM(glaunch, "cuGraphLaunch", 10000);
  if (!begin || !end || !instantiate || !glaunch)
    return 2;
  CK(check_in(host2, COPY, "nothing"));
  sim_fill_args a = {(uint32_t *)(host2 + COPY + 512), 0x2000, 3000};
  void *params[] = {&a};
  CUgraph g;
  CUgraphExec e;
  CK(begin(s, CU_STREAM_CAPTURE_MODE_RELAXED));
  CK(launch(f, 4, 1, 1, 128, 1, 1, 0, s, params, NULL));
  CK(end(s, &g));
  CK(instantiate(&e, g, 0));
  CK(glaunch(e, s));
  CK(stream_sync(s));
  CK(check_in(host2, COPY, "a graph's kernel node storing into it"));
  /* a kernel launched directly, into the first */
  a = (sim_fill_args){(uint32_t *)(host + 10 * COPY + 1024), 0x1000, 5000};
  CK(launch(f, 8, 1, 1, 128, 1, 1, 0, s, params, NULL));
  CK(stream_sync(s));
  return check(10 * COPY, "a kernel storing through a pointer into it");
}

int main(void) {
  cudaStream_t s;
  CK(cudaHostAlloc((void **)&host, N, cudaHostAllocMapped));
  CK(cudaHostAlloc((void **)&host2, N / 2, cudaHostAllocMapped));
  CK(cudaMalloc((void **)&dev, COPY));
  CK(cudaMalloc((void **)&src, COPY));
  CK(cudaStreamCreate(&s));
  CK(lookups());
  CUcontext ctx;
  CK(ctx_current(&ctx));
  for (size_t i = 0; i < N; i++)
    host[i] = (uint8_t)(i % 89 < 70 ? 0x3f : i * 11);
  memcpy(host2, host, N / 2);
  for (size_t off = 0; off < N; off += COPY) /* ready, served, checked */
    CK(check(off, "nothing"));
  static uint8_t fresh[COPY]; /* what the device-side copies bring */
  for (size_t i = 0; i < COPY; i++)
    fresh[i] = (uint8_t)(i * 7 + 1);
  CK(cudaMemcpy(src, fresh, COPY, cudaMemcpyHostToDevice));
  CK(memsets_2d((CUstream)s));
  CK(copies_3d(ctx, (CUstream)s));
  CK(peer_and_batches(ctx, (CUstream)s));
  CK(mem_ops((CUstream)s));
  CK(graphs(ctx, (CUstream)s));
  CK(kernel((CUstream)s));
  if (failures)
    return 1;
  puts("core_write_paths: ok");
  return 0;
}
