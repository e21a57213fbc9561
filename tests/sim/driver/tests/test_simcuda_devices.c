/*
 * Tests of the simulated driver: several devices (SIMCUDA_DEVICES=3: their
 * identity, primary contexts, memory ownership, peer access), copies
 * between contexts and in 3D, batches, and graphs built node by node
 * (parameters read back, set in the executable graph, updated).
 * Reaches libcuda.so.1 the cudart way (simcuda_test.h).
 */
#include "simcuda_test.h"

#include <stdint.h>

static t_api A;

#define PROC(var, name, version) var = t_proc(name, version, 0)

static void test_devices(void) {
  int n = 0;
  OK(A.DeviceGetCount(&n));
  REQUIRE(n == 3);
  CUdevice d;
  OK(A.DeviceGet(&d, 2));
  CHECK(d == 2);
  EXPECT(CUDA_ERROR_INVALID_DEVICE, A.DeviceGet(&d, 3));
  char bus[32];
  OK(A.DeviceGetPCIBusId(bus, sizeof bus, 1));
  CHECK(strcmp(bus, "00000000:5B:00.0") == 0);
  OK(A.DeviceGetByPCIBusId(&d, "0000:5c:00.0"));
  CHECK(d == 2);
  EXPECT(CUDA_ERROR_INVALID_DEVICE, A.DeviceGetByPCIBusId(&d, "0000:5d:00.0"));
  CUuuid u0, u2;
  OK(A.DeviceGetUuid(&u0, 0));
  OK(A.DeviceGetUuid(&u2, 2));
  CHECK(memcmp(&u0, &u2, sizeof u0) != 0);
  /* one primary context per device, each answering its own device */
  CUcontext p[3];
  for (int i = 0; i < 3; i++) {
    OK(A.PrimaryCtxRetain(&p[i], i));
    OK(A.CtxPushCurrent(p[i]));
    OK(A.CtxGetDevice(&d));
    CHECK(d == i);
    CUdeviceptr m;
    OK(A.MemAlloc(&m, 4096));
    int ord = -1;
    OK(A.PointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, m));
    CHECK(ord == i);
    OK(A.MemFree(m));
    CUcontext ignored;
    OK(A.CtxPopCurrent(&ignored));
  }
  CHECK(p[0] != p[1] && p[1] != p[2]);
  /* peers */
  CUresult (*can)(int *, CUdevice, CUdevice);
  CUresult (*enable)(CUcontext, unsigned);
  CUresult (*disable)(CUcontext);
  CUresult (*p2p)(int *, CUdevice_P2PAttribute, CUdevice, CUdevice);
  PROC(can, "cuDeviceCanAccessPeer", 4000);
  PROC(enable, "cuCtxEnablePeerAccess", 4000);
  PROC(disable, "cuCtxDisablePeerAccess", 4000);
  PROC(p2p, "cuDeviceGetP2PAttribute", 8000);
  REQUIRE(can && enable && disable && p2p);
  int v = -1;
  OK(can(&v, 0, 1));
  CHECK(v == 1);
  OK(can(&v, 1, 1));
  CHECK(v == 0);
  EXPECT(CUDA_ERROR_INVALID_DEVICE, can(&v, 0, 3));
  OK(p2p(&v, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, 0, 2));
  CHECK(v == 1);
  EXPECT(CUDA_ERROR_INVALID_DEVICE,
         p2p(&v, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, 1, 1));
  OK(A.CtxSetCurrent(p[0]));
  EXPECT(CUDA_ERROR_INVALID_VALUE, enable(p[1], 1));
  OK(enable(p[1], 0));
  EXPECT(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, enable(p[1], 0));
  EXPECT(CUDA_ERROR_INVALID_DEVICE, enable(p[0], 0));
  OK(disable(p[1]));
  EXPECT(CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, disable(p[1]));
  for (int i = 1; i < 3; i++)
    OK(A.PrimaryCtxRelease(i));
}

/* cuMemcpyPeer and cuMemcpy3D(Peer): the bytes land where they should. */
static void test_copies(CUcontext c0, CUcontext c1) {
  CUresult (*peer)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t);
  CUresult (*copy3d)(const CUDA_MEMCPY3D *);
  CUresult (*copy3d_peer)(const CUDA_MEMCPY3D_PEER *);
  PROC(peer, "cuMemcpyPeer", 4000);
  PROC(copy3d, "cuMemcpy3D", 3020);
  PROC(copy3d_peer, "cuMemcpy3DPeer", 4000);
  REQUIRE(peer && copy3d && copy3d_peer);
  enum { N = 1 << 16 };
  uint8_t *h = malloc(N), *back = malloc(N);
  REQUIRE(h && back);
  for (int i = 0; i < N; i++)
    h[i] = (uint8_t)(i * 13 + 5);
  CUdeviceptr a, b;
  OK(A.CtxSetCurrent(c0));
  OK(A.MemAlloc(&a, N));
  OK(A.MemcpyHtoD(a, h, N));
  OK(A.CtxSetCurrent(c1));
  OK(A.MemAlloc(&b, N));
  OK(A.MemsetD8(b, 0, N));
  OK(peer(b, c1, a, c0, N));
  OK(A.MemcpyDtoH(back, b, N));
  CHECK(memcmp(back, h, N) == 0);
  EXPECT(CUDA_ERROR_INVALID_CONTEXT, peer(b, NULL, a, c0, N));
  /* 3D: 4 slices of 5 rows of 100 bytes, source tight, destination in a
   * 8-row x 256-byte layout from row 1, byte 3 */
  CUDA_MEMCPY3D p = {0};
  p.srcMemoryType = CU_MEMORYTYPE_HOST;
  p.srcHost = h;
  p.srcPitch = 100;
  p.srcHeight = 5;
  p.dstMemoryType = CU_MEMORYTYPE_HOST;
  p.dstHost = back;
  p.dstXInBytes = 3;
  p.dstY = 1;
  p.dstPitch = 256;
  p.dstHeight = 8;
  p.WidthInBytes = 100;
  p.Height = 5;
  p.Depth = 4;
  memset(back, 0xee, N);
  OK(copy3d(&p));
  int bad = 0;
  for (int z = 0; z < 4; z++)
    for (int y = 0; y < 5; y++)
      bad |=
          memcmp(back + (z * 8 + y + 1) * 256 + 3, h + (z * 5 + y) * 100, 100);
  CHECK(!bad);
  CHECK(back[0] == 0xee && back[256 + 2] == 0xee && back[256 + 103] == 0xee);
  p.dstHeight = 4; /* slices smaller than the copy's rows */
  EXPECT(CUDA_ERROR_INVALID_VALUE, copy3d(&p));
  CUDA_MEMCPY3D_PEER q = {0};
  q.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  q.srcDevice = a;
  q.srcContext = c0;
  q.srcPitch = 1000;
  q.srcHeight = 2;
  q.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  q.dstDevice = b;
  q.dstContext = c1;
  q.dstPitch = 1000;
  q.dstHeight = 2;
  q.WidthInBytes = 1000;
  q.Height = 2;
  q.Depth = 3;
  OK(A.MemsetD8(b, 0, N));
  OK(copy3d_peer(&q));
  OK(A.MemcpyDtoH(back, b, 6000));
  CHECK(memcmp(back, h, 6000) == 0);
  OK(A.MemFree(b));
  OK(A.CtxSetCurrent(c0));
  OK(A.MemFree(a));
  free(h);
  free(back);
}

static void test_batches(void) {
  CUresult (*batch)(CUdeviceptr *, CUdeviceptr *, size_t *, size_t,
                    CUmemcpyAttributes *, size_t *, size_t, CUstream);
  CUresult (*batch12)(CUdeviceptr *, CUdeviceptr *, size_t *, size_t,
                      CUmemcpyAttributes *, size_t *, size_t, size_t *,
                      CUstream);
  CUresult (*batch3d)(size_t, CUDA_MEMCPY3D_BATCH_OP *, unsigned long long,
                      CUstream);
  PROC(batch, "cuMemcpyBatchAsync", 13000);
  PROC(batch12, "cuMemcpyBatchAsync", 12080);
  PROC(batch3d, "cuMemcpy3DBatchAsync", 13000);
  REQUIRE(batch && batch12 && batch3d);
  uint8_t *pin;
  OK(A.MemHostAlloc((void **)&pin, 1 << 16, 0));
  for (int i = 0; i < 4096; i++)
    pin[i] = (uint8_t)(i ^ 0x5a);
  CUdeviceptr d;
  OK(A.MemAlloc(&d, 1 << 16));
  CUstream s;
  OK(A.StreamCreate(&s, 0));
  CUdeviceptr dsts[2] = {d, d + 8192},
              srcs[2] = {(CUdeviceptr)pin, (CUdeviceptr)pin + 1000};
  size_t sizes[2] = {4096, 3000}, idx[2] = {0, 1};
  CUmemcpyAttributes attrs[2] = {{0}};
  attrs[0].srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
  attrs[1].srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL;
  EXPECT(CUDA_ERROR_INVALID_VALUE,
         batch(dsts, srcs, sizes, 2, attrs, idx, 2, NULL)); /* legacy NULL */
  size_t wrong[2] = {1, 1}, fail = 0;
  EXPECT(CUDA_ERROR_INVALID_VALUE,
         batch(dsts, srcs, sizes, 2, attrs, wrong, 2, s)); /* not increasing */
  OK(batch(dsts, srcs, sizes, 2, attrs, idx, 2, s));
  OK(A.StreamSynchronize(s));
  uint8_t back[4096];
  OK(A.MemcpyDtoH(back, d, 4096));
  CHECK(memcmp(back, pin, 4096) == 0);
  OK(A.MemcpyDtoH(back, d + 8192, 3000));
  CHECK(memcmp(back, pin + 1000, 3000) == 0);
  sizes[1] = 1u << 20; /* past the allocation: failIdx names it */
  EXPECT(CUDA_ERROR_INVALID_VALUE,
         batch12(dsts, srcs, sizes, 2, attrs, idx, 2, &fail, s));
  CHECK(fail == 1);
  CUDA_MEMCPY3D_BATCH_OP op = {0};
  op.src.type = op.dst.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
  op.src.op.ptr.ptr = (CUdeviceptr)pin;
  op.dst.op.ptr.ptr = d;
  op.dst.op.ptr.rowLength = 64;
  op.extent = (CUextent3D){32, 4, 2};
  op.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
  OK(batch3d(1, &op, 0, s));
  OK(A.StreamSynchronize(s));
  OK(A.MemcpyDtoH(back, d, 64 * 8));
  int bad = 0;
  for (int r = 0; r < 8; r++)
    bad |= memcmp(back + r * 64, pin + r * 32, 32);
  CHECK(!bad);
  op.extent.depth = 0;
  EXPECT(CUDA_ERROR_INVALID_VALUE, batch3d(1, &op, 0, s));
  OK(A.StreamDestroy(s));
  OK(A.MemFree(d));
  OK(A.MemFreeHost(pin));
}

static void test_graph_nodes(CUcontext c) {
  CUresult (*create)(CUgraph *, unsigned);
  CUresult (*add_set)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
                      const CUDA_MEMSET_NODE_PARAMS *, CUcontext);
  CUresult (*add_copy)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
                       const CUDA_MEMCPY3D *, CUcontext);
  CUresult (*nodes)(CUgraph, CUgraphNode *, size_t *);
  CUresult (*type)(CUgraphNode, CUgraphNodeType *);
  CUresult (*copy_params)(CUgraphNode, CUDA_MEMCPY3D *);
  CUresult (*set_params)(CUgraphNode, CUDA_MEMSET_NODE_PARAMS *);
  CUresult (*exec_set)(CUgraphExec, CUgraphNode,
                       const CUDA_MEMSET_NODE_PARAMS *, CUcontext);
  PROC(create, "cuGraphCreate", 10000);
  PROC(add_set, "cuGraphAddMemsetNode", 10000);
  PROC(add_copy, "cuGraphAddMemcpyNode", 10000);
  PROC(nodes, "cuGraphGetNodes", 10000);
  PROC(type, "cuGraphNodeGetType", 10000);
  PROC(copy_params, "cuGraphMemcpyNodeGetParams", 10000);
  PROC(set_params, "cuGraphMemsetNodeGetParams", 10000);
  PROC(exec_set, "cuGraphExecMemsetNodeSetParams", 10020);
  REQUIRE(create && add_set && add_copy && nodes && type && copy_params &&
          set_params && exec_set);
  CUdeviceptr d;
  OK(A.MemAlloc(&d, 8192));
  uint8_t *pin;
  OK(A.MemHostAlloc((void **)&pin, 8192, 0));
  CUgraph g;
  CUgraphNode ns, nc;
  OK(create(&g, 0));
  CUDA_MEMSET_NODE_PARAMS ms = {0};
  ms.dst = d;
  ms.value = 0x42;
  ms.elementSize = 1;
  ms.width = 4096;
  ms.height = 1;
  OK(add_set(&ns, g, NULL, 0, &ms, c));
  CUDA_MEMCPY3D p = {0};
  p.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  p.srcDevice = d;
  p.dstMemoryType = CU_MEMORYTYPE_HOST;
  p.dstHost = pin;
  p.WidthInBytes = 4096;
  p.Height = p.Depth = 1;
  OK(add_copy(&nc, g, &ns, 1, &p, c));
  CUgraphNode bogus = (CUgraphNode)&p;
  EXPECT(CUDA_ERROR_INVALID_VALUE, add_copy(&nc, g, &bogus, 1, &p, c));
  size_t n = 0;
  OK(nodes(g, NULL, &n));
  CHECK(n == 2);
  CUgraphNode all[2];
  OK(nodes(g, all, &n));
  CUgraphNodeType t;
  OK(type(all[0], &t));
  CHECK(t == CU_GRAPH_NODE_TYPE_MEMSET);
  OK(type(all[1], &t));
  CHECK(t == CU_GRAPH_NODE_TYPE_MEMCPY);
  CUDA_MEMCPY3D got;
  OK(copy_params(all[1], &got));
  CHECK(got.dstDevice == (CUdeviceptr)pin && got.WidthInBytes == 4096);
  CUDA_MEMSET_NODE_PARAMS gs;
  OK(set_params(all[0], &gs));
  CHECK(gs.dst == d && gs.value == 0x42 && gs.width == 4096);
  CUgraphExec e;
  OK(A.GraphInstantiateWithFlags(&e, g, 0));
  ms.value = 0x17; /* the executable graph's node only */
  OK(exec_set(e, ns, &ms, c));
  OK(A.GraphLaunch(e, NULL));
  OK(A.CtxSynchronize());
  CHECK(pin[0] == 0x17 && pin[4095] == 0x17);
  OK(set_params(ns, &gs));
  CHECK(gs.value == 0x42); /* the graph keeps its own */
  /* updated from a graph of the same shape; refused for another shape */
  CUresult (*update)(CUgraphExec, CUgraph, CUgraphExecUpdateResultInfo *);
  PROC(update, "cuGraphExecUpdate", 12000);
  REQUIRE(update);
  CUgraph g2, g3;
  CUgraphNode n2, n3;
  OK(create(&g2, 0));
  ms.value = 0x66;
  OK(add_set(&n2, g2, NULL, 0, &ms, c));
  OK(add_copy(&n3, g2, &n2, 1, &p, c));
  CUgraphExecUpdateResultInfo info;
  OK(update(e, g2, &info));
  CHECK(info.result == CU_GRAPH_EXEC_UPDATE_SUCCESS);
  OK(A.GraphLaunch(e, NULL));
  OK(A.CtxSynchronize());
  CHECK(pin[0] == 0x66 && pin[4095] == 0x66);
  OK(create(&g3, 0));
  OK(add_set(&n3, g3, NULL, 0, &ms, c));
  EXPECT(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, update(e, g3, &info));
  CHECK(info.result == CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
  OK(A.GraphDestroy(g2));
  OK(A.GraphDestroy(g3));
  OK(A.GraphExecDestroy(e));
  OK(A.GraphDestroy(g));
  OK(A.MemFreeHost(pin));
  OK(A.MemFree(d));
}

int main(void) {
  t_open();
  t_load(&A, 0);
  CUcontext c0 = t_start(&A), c1;
  test_devices();
  OK(A.PrimaryCtxRetain(&c1, 1));
  test_copies(c0, c1);
  OK(A.PrimaryCtxRelease(1));
  OK(A.CtxSetCurrent(c0));
  test_batches();
  test_graph_nodes(c0);
  return t_finish("test_simcuda_devices");
}
