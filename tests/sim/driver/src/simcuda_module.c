/*
 * Libraries, modules, kernels and functions.
 *
 * Images.  cuLibraryLoadData / cuModuleLoadData / cuModuleLoadFatBinary
 * (and the file variants) accept a fatbinary (magic 0xBA55ED50), nvcc's
 * fatbinary wrapper (0x466243B1, as __cudaRegisterFatBinary receives it), a
 * cubin (ELF) or PTX text, checked by their first bytes only; anything else
 * is CUDA_ERROR_INVALID_IMAGE.  The device code inside is never used: a
 * kernel is found by NAME among the kernels registered with the emulator
 * (simt_kernel_find), whatever image it is asked from.  A name no emulated
 * kernel has is CUDA_ERROR_NOT_FOUND.  Images hold no globals
 * (cuModuleGetGlobal / cuLibraryGetGlobal: CUDA_ERROR_NOT_FOUND).
 *
 * Objects.  A library is context-independent; its kernels (CUkernel) are
 * also usable as CUfunction handles (cuKernelGetFunction returns the same
 * handle, and cuLaunchKernel accepts a CUkernel, as on NVIDIA's driver).
 * A module belongs to the context that loaded it; cuLibraryGetModule makes
 * one per context.  Unloading invalidates the handles of the kernels and
 * functions it gave out.
 */
#include "simcuda_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FATBIN_MAGIC 0xBA55ED50u
#define FATBIN_WRAPPER_MAGIC 0x466243B1u
#define MAX_IMAGE_FILE (1u << 30)

/* The kernels a library or module has handed out, by name. */
typedef struct names {
  pthread_mutex_t m;
  scu_func **v; /* referenced */
  size_t n, cap;
} names;

typedef struct scu_module {
  scu_obj hdr;
  names funcs;
  void *library; /* handle of the library it came from, or NULL */
} scu_module;

typedef struct lib_module {
  uint64_t ctx_uid;
  scu_module *mod; /* referenced */
} lib_module;

typedef struct scu_library {
  scu_obj hdr;
  names kernels;
  pthread_mutex_t m; /* modules */
  lib_module *modules;
  size_t nmodules;
} scu_library;

/* ---- images ----------------------------------------------------------- */

static CUresult check_image(const void *image) {
  scu_span sp;
  if (!image || scu_mem_check((uintptr_t)image, 4, false, &sp) != CUDA_SUCCESS)
    return CUDA_ERROR_INVALID_VALUE;
  const unsigned char *b = image;
  uint32_t magic;
  memcpy(&magic, b, 4);
  if (magic == FATBIN_MAGIC)
    return CUDA_SUCCESS;
  if (magic == FATBIN_WRAPPER_MAGIC) {
    struct {
      int magic, version;
      const unsigned long long *data;
      void *filename_or_fatbins;
    } w;
    if (scu_mem_check((uintptr_t)image, sizeof w, false, &sp) != CUDA_SUCCESS)
      return CUDA_ERROR_INVALID_IMAGE;
    memcpy(&w, image, sizeof w);
    return w.data &&
                   scu_mem_check((uintptr_t)w.data, 4, false, &sp) ==
                       CUDA_SUCCESS &&
                   *(const uint32_t *)w.data == FATBIN_MAGIC
               ? CUDA_SUCCESS
               : CUDA_ERROR_INVALID_IMAGE;
  }
  if (b[0] == 0x7f && b[1] == 'E' && b[2] == 'L' && b[3] == 'F')
    return CUDA_SUCCESS;
  size_t i = 0;
  while (i < 4 && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r'))
    i++;
  if (i < 4 && (b[i] == '/' || b[i] == '.'))
    return CUDA_SUCCESS; /* PTX: a comment or a directive */
  return CUDA_ERROR_INVALID_IMAGE;
}

static CUresult check_file(const char *path) {
  if (!path)
    return CUDA_ERROR_INVALID_VALUE;
  FILE *f = fopen(path, "rb");
  if (!f)
    return CUDA_ERROR_FILE_NOT_FOUND;
  unsigned char head[64] = {0};
  size_t n = fread(head, 1, sizeof head - 1, f);
  fclose(f);
  if (n < 4)
    return CUDA_ERROR_INVALID_IMAGE;
  uint32_t magic;
  memcpy(&magic, head, 4);
  if (magic == FATBIN_WRAPPER_MAGIC) /* holds a pointer: not a file format */
    return CUDA_ERROR_INVALID_IMAGE;
  return check_image(head);
}

/* ---- kernel namespaces -------------------------------------------------- */

static void names_init(names *ns) {
  pthread_mutex_init(&ns->m, NULL);
  ns->v = NULL;
  ns->n = ns->cap = 0;
}

/* Invalidates and drops every handed-out kernel. */
static void names_clear(names *ns) {
  pthread_mutex_lock(&ns->m);
  scu_func **v = ns->v;
  size_t n = ns->n;
  ns->v = NULL;
  ns->n = ns->cap = 0;
  pthread_mutex_unlock(&ns->m);
  for (size_t i = 0; i < n; i++) {
    scu_obj_unpublish(&v[i]->hdr);
    scu_obj_put(&v[i]->hdr);
  }
  free(v);
}

static void func_free(scu_obj *o) {
  scu_func *f = (scu_func *)o;
  free(f->name);
  free(f);
}

/* The kernel `name` of a namespace, made on first use (referenced). */
static CUresult names_get(names *ns, const char *name, scu_type type,
                          scu_ctx *owner, void *parent, scu_func **out) {
  if (!name)
    return CUDA_ERROR_INVALID_VALUE;
  CUresult r = CUDA_SUCCESS;
  pthread_mutex_lock(&ns->m);
  for (size_t i = 0; i < ns->n; i++) {
    if (strcmp(ns->v[i]->name, name) == 0) {
      scu_obj_ref(&ns->v[i]->hdr);
      *out = ns->v[i];
      pthread_mutex_unlock(&ns->m);
      return CUDA_SUCCESS;
    }
  }
  const simt_kernel *k = simt_kernel_find(name);
  scu_func *f = NULL;
  if (!k) {
    r = CUDA_ERROR_NOT_FOUND;
  } else if (ns->n == ns->cap) {
    size_t cap = ns->cap ? ns->cap * 2 : 8;
    scu_func **v = realloc(ns->v, cap * sizeof *v);
    if (!v)
      r = CUDA_ERROR_OUT_OF_MEMORY;
    else
      ns->v = v, ns->cap = cap;
  }
  if (r == CUDA_SUCCESS && !(f = calloc(1, sizeof *f)))
    r = CUDA_ERROR_OUT_OF_MEMORY;
  if (r == CUDA_SUCCESS) {
    scu_obj_init(&f->hdr, type, func_free);
    f->k = k;
    f->name = strdup(name);
    atomic_init(&f->max_dyn_shared, SCU_MAX_DYN_SHARED_DEFAULT);
    atomic_init(&f->carveout, -1);
    atomic_init(&f->cache_config, CU_FUNC_CACHE_PREFER_NONE);
    f->parent = parent;
    if (!f->name || !scu_obj_publish(&f->hdr, owner)) {
      scu_obj_put(&f->hdr);
      r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
      ns->v[ns->n++] = f; /* the cache keeps the caller's first reference */
      scu_obj_ref(&f->hdr);
      *out = f;
    }
  }
  pthread_mutex_unlock(&ns->m);
  return r;
}

CUresult scu_func_resolve(CUfunction h, scu_func **out) {
  scu_func *f =
      (scu_func *)scu_obj_get(h, SCU_MASK(SCU_T_FUNC) | SCU_MASK(SCU_T_KERNEL));
  if (!f)
    return CUDA_ERROR_INVALID_HANDLE;
  *out = f;
  return CUDA_SUCCESS;
}

/* ---- modules ------------------------------------------------------------ */

static void module_free(scu_obj *o) {
  scu_module *m = (scu_module *)o;
  names_clear(&m->funcs);
  pthread_mutex_destroy(&m->funcs.m);
  free(m);
}

/* Releasing a context destroys its modules: their functions go too. */
static CUresult module_new(void *library, scu_module **out, void **handle) {
  scu_ctx *c;
  CUresult r = scu_ctx_current(&c);
  if (r != CUDA_SUCCESS)
    return r;
  scu_module *m = calloc(1, sizeof *m);
  if (!m) {
    scu_ctx_put(c);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  scu_obj_init(&m->hdr, SCU_T_MODULE, module_free);
  names_init(&m->funcs);
  m->library = library;
  void *h = scu_obj_publish(&m->hdr, c);
  scu_ctx_put(c);
  if (!h) {
    scu_obj_put(&m->hdr);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *out = m;
  *handle = h;
  return CUDA_SUCCESS;
}

static CUresult module_load(CUmodule *pmod, CUresult image_check) {
  if (!pmod)
    return CUDA_ERROR_INVALID_VALUE;
  if (image_check != CUDA_SUCCESS)
    return image_check;
  scu_module *m;
  void *h;
  CUresult r = module_new(NULL, &m, &h);
  if (r == CUDA_SUCCESS) {
    *pmod = h;
    scu_obj_put(&m->hdr); /* the table keeps it */
  }
  return r;
}

CUresult CUDAAPI cuModuleLoad(CUmodule *module, const char *fname) {
  SCU_API("cuModuleLoad");
  SCU_RETURN(module_load(module, check_file(fname)));
}

CUresult CUDAAPI cuModuleLoadData(CUmodule *module, const void *image) {
  SCU_API("cuModuleLoadData");
  SCU_RETURN(module_load(module, check_image(image)));
}

CUresult CUDAAPI cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin) {
  SCU_API("cuModuleLoadFatBinary");
  SCU_RETURN(module_load(module, check_image(fatCubin)));
}

CUresult CUDAAPI cuModuleUnload(CUmodule hmod) {
  SCU_API("cuModuleUnload");
  scu_module *m = (scu_module *)scu_obj_take(hmod, SCU_MASK(SCU_T_MODULE));
  if (!m)
    SCU_RETURN(CUDA_ERROR_INVALID_HANDLE);
  names_clear(&m->funcs);
  scu_obj_put(&m->hdr);
  SCU_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod,
                                     const char *name) {
  SCU_API("cuModuleGetFunction");
  if (!hfunc || !name)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  scu_module *m = (scu_module *)scu_obj_get(hmod, SCU_MASK(SCU_T_MODULE));
  if (!m)
    SCU_RETURN(CUDA_ERROR_INVALID_HANDLE);
  scu_func *f;
  CUresult r = names_get(&m->funcs, name, SCU_T_FUNC, m->hdr.owner, hmod, &f);
  if (r == CUDA_SUCCESS) {
    *hfunc = scu_obj_handle(&f->hdr);
    scu_obj_put(&f->hdr);
  }
  scu_obj_put(&m->hdr);
  SCU_RETURN(r);
}

CUresult CUDAAPI cuModuleGetGlobal_v2(CUdeviceptr *dptr, size_t *bytes,
                                      CUmodule hmod, const char *name) {
  SCU_API("cuModuleGetGlobal");
  if (!name || (!dptr && !bytes))
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  scu_obj *m = scu_obj_get(hmod, SCU_MASK(SCU_T_MODULE));
  if (!m)
    SCU_RETURN(CUDA_ERROR_INVALID_HANDLE);
  scu_obj_put(m);
  SCU_RETURN(CUDA_ERROR_NOT_FOUND); /* emulated images have no globals */
}

CUresult CUDAAPI cuModuleGetLoadingMode(CUmoduleLoadingMode *mode) {
  SCU_API("cuModuleGetLoadingMode");
  if (!mode)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  const char *e = getenv("CUDA_MODULE_LOADING");
  *mode = e && strcmp(e, "EAGER") == 0 ? CU_MODULE_EAGER_LOADING
                                       : CU_MODULE_LAZY_LOADING;
  SCU_RETURN(CUDA_SUCCESS);
}

/* ---- libraries ----------------------------------------------------------- */

static void library_free(scu_obj *o) {
  scu_library *l = (scu_library *)o;
  names_clear(&l->kernels);
  for (size_t i = 0; i < l->nmodules; i++) {
    names_clear(&l->modules[i].mod->funcs);
    scu_obj_unpublish(&l->modules[i].mod->hdr);
    scu_obj_put(&l->modules[i].mod->hdr);
  }
  free(l->modules);
  pthread_mutex_destroy(&l->m);
  pthread_mutex_destroy(&l->kernels.m);
  free(l);
}

static CUresult check_options(unsigned n1, const void *a1, const void *b1,
                              unsigned n2, const void *a2, const void *b2) {
  if ((n1 && (!a1 || !b1)) || (n2 && (!a2 || !b2)))
    return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

static CUresult library_load(CUlibrary *plib, CUresult image_check) {
  if (!plib)
    return CUDA_ERROR_INVALID_VALUE;
  if (image_check != CUDA_SUCCESS)
    return image_check;
  scu_library *l = calloc(1, sizeof *l);
  if (!l)
    return CUDA_ERROR_OUT_OF_MEMORY;
  scu_obj_init(&l->hdr, SCU_T_LIBRARY, library_free);
  names_init(&l->kernels);
  pthread_mutex_init(&l->m, NULL);
  void *h = scu_obj_publish(&l->hdr, NULL);
  scu_obj_put(&l->hdr);
  if (!h)
    return CUDA_ERROR_OUT_OF_MEMORY;
  *plib = h;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuLibraryLoadData(CUlibrary *library, const void *code,
                                   CUjit_option *jitOptions,
                                   void **jitOptionsValues,
                                   unsigned int numJitOptions,
                                   CUlibraryOption *libraryOptions,
                                   void **libraryOptionValues,
                                   unsigned int numLibraryOptions) {
  SCU_API("cuLibraryLoadData");
  CUresult r =
      check_options(numJitOptions, jitOptions, jitOptionsValues,
                    numLibraryOptions, libraryOptions, libraryOptionValues);
  if (r == CUDA_SUCCESS)
    r = library_load(library, check_image(code));
  SCU_RETURN(r);
}

CUresult CUDAAPI cuLibraryLoadFromFile(CUlibrary *library, const char *fileName,
                                       CUjit_option *jitOptions,
                                       void **jitOptionsValues,
                                       unsigned int numJitOptions,
                                       CUlibraryOption *libraryOptions,
                                       void **libraryOptionValues,
                                       unsigned int numLibraryOptions) {
  SCU_API("cuLibraryLoadFromFile");
  CUresult r =
      check_options(numJitOptions, jitOptions, jitOptionsValues,
                    numLibraryOptions, libraryOptions, libraryOptionValues);
  if (r == CUDA_SUCCESS)
    r = library_load(library, check_file(fileName));
  SCU_RETURN(r);
}

CUresult CUDAAPI cuLibraryUnload(CUlibrary library) {
  SCU_API("cuLibraryUnload");
  scu_library *l =
      (scu_library *)scu_obj_take(library, SCU_MASK(SCU_T_LIBRARY));
  if (!l)
    SCU_RETURN(CUDA_ERROR_INVALID_HANDLE);
  names_clear(&l->kernels); /* kernel handles die now */
  scu_obj_put(&l->hdr);
  SCU_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library,
                                    const char *name) {
  SCU_API("cuLibraryGetKernel");
  if (!pKernel || !name)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  scu_library *l = (scu_library *)scu_obj_get(library, SCU_MASK(SCU_T_LIBRARY));
  if (!l)
    SCU_RETURN(CUDA_ERROR_INVALID_HANDLE);
  scu_func *f;
  CUresult r = names_get(&l->kernels, name, SCU_T_KERNEL, NULL, library, &f);
  if (r == CUDA_SUCCESS) {
    *pKernel = scu_obj_handle(&f->hdr);
    scu_obj_put(&f->hdr);
  }
  scu_obj_put(&l->hdr);
  SCU_RETURN(r);
}

CUresult CUDAAPI cuLibraryGetModule(CUmodule *pMod, CUlibrary library) {
  SCU_API("cuLibraryGetModule");
  if (!pMod)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  scu_library *l = (scu_library *)scu_obj_get(library, SCU_MASK(SCU_T_LIBRARY));
  if (!l)
    SCU_RETURN(CUDA_ERROR_INVALID_HANDLE);
  scu_ctx *c;
  CUresult r = scu_ctx_current(&c);
  if (r != CUDA_SUCCESS) {
    scu_obj_put(&l->hdr);
    SCU_RETURN(r);
  }
  pthread_mutex_lock(&l->m);
  void *h = NULL;
  for (size_t i = 0; i < l->nmodules && !h; i++)
    if (l->modules[i].ctx_uid == c->uid && l->modules[i].mod->hdr.published)
      h = scu_obj_handle(&l->modules[i].mod->hdr);
  if (!h) {
    lib_module *v = realloc(l->modules, (l->nmodules + 1) * sizeof *v);
    scu_module *m;
    if (!v) {
      r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
      l->modules = v;
      r = module_new(library, &m, &h);
      if (r == CUDA_SUCCESS)
        l->modules[l->nmodules++] = (lib_module){c->uid, m};
    }
  }
  pthread_mutex_unlock(&l->m);
  if (r == CUDA_SUCCESS)
    *pMod = h;
  scu_ctx_put(c);
  scu_obj_put(&l->hdr);
  SCU_RETURN(r);
}

CUresult CUDAAPI cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel) {
  SCU_API("cuKernelGetFunction");
  if (!pFunc)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  scu_obj *k = scu_obj_get(kernel, SCU_MASK(SCU_T_KERNEL));
  if (!k)
    SCU_RETURN(CUDA_ERROR_INVALID_HANDLE);
  scu_ctx *c;
  CUresult r = scu_ctx_current(&c);
  if (r == CUDA_SUCCESS) {
    *pFunc = scu_obj_handle(k); /* a CUkernel works as a CUfunction */
    scu_ctx_put(c);
  }
  scu_obj_put(k);
  SCU_RETURN(r);
}

CUresult CUDAAPI cuKernelGetLibrary(CUlibrary *pLib, CUkernel kernel) {
  SCU_API("cuKernelGetLibrary");
  if (!pLib)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  scu_func *f = (scu_func *)scu_obj_get(kernel, SCU_MASK(SCU_T_KERNEL));
  if (!f)
    SCU_RETURN(CUDA_ERROR_INVALID_HANDLE);
  *pLib = f->parent;
  scu_obj_put(&f->hdr);
  SCU_RETURN(CUDA_SUCCESS);
}

CUresult CUDAAPI cuFuncGetModule(CUmodule *hmod, CUfunction hfunc) {
  SCU_API("cuFuncGetModule");
  if (!hmod)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  scu_func *f = (scu_func *)scu_obj_get(hfunc, SCU_MASK(SCU_T_FUNC));
  if (!f)
    SCU_RETURN(CUDA_ERROR_INVALID_HANDLE);
  *hmod = f->parent;
  scu_obj_put(&f->hdr);
  SCU_RETURN(CUDA_SUCCESS);
}

static CUresult no_global(CUdeviceptr *dptr, size_t *bytes, CUlibrary library,
                          const char *name) {
  if (!name || (!dptr && !bytes))
    return CUDA_ERROR_INVALID_VALUE;
  scu_obj *l = scu_obj_get(library, SCU_MASK(SCU_T_LIBRARY));
  if (!l)
    return CUDA_ERROR_INVALID_HANDLE;
  scu_obj_put(l);
  return CUDA_ERROR_NOT_FOUND;
}

CUresult CUDAAPI cuLibraryGetGlobal(CUdeviceptr *dptr, size_t *bytes,
                                    CUlibrary library, const char *name) {
  SCU_API("cuLibraryGetGlobal");
  SCU_RETURN(no_global(dptr, bytes, library, name));
}

CUresult CUDAAPI cuLibraryGetManaged(CUdeviceptr *dptr, size_t *bytes,
                                     CUlibrary library, const char *name) {
  SCU_API("cuLibraryGetManaged");
  SCU_RETURN(no_global(dptr, bytes, library, name));
}

/* ---- function and kernel attributes -------------------------------------- */

static CUresult get_attr(int *pi, CUfunction_attribute a, scu_func *f) {
  switch (a) {
  case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
    *pi = 1024;
    break;
  case CU_FUNC_ATTRIBUTE_NUM_REGS:
    *pi = 32;
    break;
  case CU_FUNC_ATTRIBUTE_PTX_VERSION:
  case CU_FUNC_ATTRIBUTE_BINARY_VERSION:
    *pi = 90;
    break;
  case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
    *pi = (int)atomic_load(&f->max_dyn_shared);
    break;
  case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
    *pi = atomic_load(&f->carveout);
    break;
  case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: /* static: not known here */
  case CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES:
  case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES:
  case CU_FUNC_ATTRIBUTE_CACHE_MODE_CA:
  case CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET:
  case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
  case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
  case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
  case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
  case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
    *pi = 0;
    break;
  default:
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

static CUresult set_attr(CUfunction_attribute a, int v, scu_func *f) {
  switch (a) {
  case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
    if (v < 0 || (unsigned)v > SCU_MAX_SHARED_OPTIN)
      return CUDA_ERROR_INVALID_VALUE;
    atomic_store(&f->max_dyn_shared, (unsigned)v);
    return CUDA_SUCCESS;
  case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
    if (v < -1 || v > 100)
      return CUDA_ERROR_INVALID_VALUE;
    atomic_store(&f->carveout, v);
    return CUDA_SUCCESS;
  case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
    return CUDA_SUCCESS;
  case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
  case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
  case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
  case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
    return CUDA_ERROR_NOT_SUPPORTED; /* no cluster launch */
  default:
    return CUDA_ERROR_INVALID_VALUE;
  }
}

/* The function behind a CUfunction or CUkernel handle, or the error. */
#define WITH_FUNC(handle, mask, f, body)                                       \
  do {                                                                         \
    scu_func *f = (scu_func *)scu_obj_get(handle, mask);                       \
    if (!f)                                                                    \
      SCU_RETURN(CUDA_ERROR_INVALID_HANDLE);                                   \
    CUresult r_ = (body);                                                      \
    scu_obj_put(&f->hdr);                                                      \
    SCU_RETURN(r_);                                                            \
  } while (0)
#define ANY_FUNC (SCU_MASK(SCU_T_FUNC) | SCU_MASK(SCU_T_KERNEL))

CUresult CUDAAPI cuFuncGetAttribute(int *pi, CUfunction_attribute attrib,
                                    CUfunction hfunc) {
  SCU_API("cuFuncGetAttribute");
  if (!pi)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  WITH_FUNC(hfunc, ANY_FUNC, f, get_attr(pi, attrib, f));
}

CUresult CUDAAPI cuFuncSetAttribute(CUfunction hfunc,
                                    CUfunction_attribute attrib, int value) {
  SCU_API("cuFuncSetAttribute");
  WITH_FUNC(hfunc, ANY_FUNC, f, set_attr(attrib, value, f));
}

static CUresult set_cache(scu_func *f, CUfunc_cache config) {
  if ((unsigned)config > CU_FUNC_CACHE_PREFER_EQUAL)
    return CUDA_ERROR_INVALID_VALUE;
  atomic_store(&f->cache_config, (int)config);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuFuncSetCacheConfig(CUfunction hfunc, CUfunc_cache config) {
  SCU_API("cuFuncSetCacheConfig");
  WITH_FUNC(hfunc, ANY_FUNC, f, set_cache(f, config));
}

static CUresult get_name(const char **name, scu_func *f) {
  *name = f->name;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuFuncGetName(const char **name, CUfunction hfunc) {
  SCU_API("cuFuncGetName");
  if (!name)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  WITH_FUNC(hfunc, ANY_FUNC, f, get_name(name, f));
}

/* An emulated kernel takes one parameter: its argument struct. */
static CUresult param_info(scu_func *f, size_t index, size_t *offset,
                           size_t *size) {
  if (index != 0 || f->k->args_bytes == 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (offset)
    *offset = 0;
  if (size)
    *size = f->k->args_bytes;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuFuncGetParamInfo(CUfunction func, size_t paramIndex,
                                    size_t *paramOffset, size_t *paramSize) {
  SCU_API("cuFuncGetParamInfo");
  WITH_FUNC(func, ANY_FUNC, f,
            param_info(f, paramIndex, paramOffset, paramSize));
}

static CUresult loaded(CUfunctionLoadingState *state) {
  *state = CU_FUNCTION_LOADING_STATE_LOADED;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuFuncIsLoaded(CUfunctionLoadingState *state,
                                CUfunction function) {
  SCU_API("cuFuncIsLoaded");
  if (!state)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  WITH_FUNC(function, ANY_FUNC, f, ((void)f, loaded(state)));
}

CUresult CUDAAPI cuFuncLoad(CUfunction function) {
  SCU_API("cuFuncLoad");
  WITH_FUNC(function, ANY_FUNC, f, ((void)f, CUDA_SUCCESS));
}

CUresult CUDAAPI cuKernelGetAttribute(int *pi, CUfunction_attribute attrib,
                                      CUkernel kernel, CUdevice dev) {
  SCU_API("cuKernelGetAttribute");
  if (!pi)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  if (scu_check_device(dev) != CUDA_SUCCESS)
    SCU_RETURN(CUDA_ERROR_INVALID_DEVICE);
  WITH_FUNC(kernel, SCU_MASK(SCU_T_KERNEL), f, get_attr(pi, attrib, f));
}

CUresult CUDAAPI cuKernelSetAttribute(CUfunction_attribute attrib, int val,
                                      CUkernel kernel, CUdevice dev) {
  SCU_API("cuKernelSetAttribute");
  if (scu_check_device(dev) != CUDA_SUCCESS)
    SCU_RETURN(CUDA_ERROR_INVALID_DEVICE);
  WITH_FUNC(kernel, SCU_MASK(SCU_T_KERNEL), f, set_attr(attrib, val, f));
}

CUresult CUDAAPI cuKernelSetCacheConfig(CUkernel kernel, CUfunc_cache config,
                                        CUdevice dev) {
  SCU_API("cuKernelSetCacheConfig");
  if (scu_check_device(dev) != CUDA_SUCCESS)
    SCU_RETURN(CUDA_ERROR_INVALID_DEVICE);
  WITH_FUNC(kernel, SCU_MASK(SCU_T_KERNEL), f, set_cache(f, config));
}

CUresult CUDAAPI cuKernelGetName(const char **name, CUkernel hfunc) {
  SCU_API("cuKernelGetName");
  if (!name)
    SCU_RETURN(CUDA_ERROR_INVALID_VALUE);
  WITH_FUNC(hfunc, SCU_MASK(SCU_T_KERNEL), f, get_name(name, f));
}

CUresult CUDAAPI cuKernelGetParamInfo(CUkernel kernel, size_t paramIndex,
                                      size_t *paramOffset, size_t *paramSize) {
  SCU_API("cuKernelGetParamInfo");
  WITH_FUNC(kernel, SCU_MASK(SCU_T_KERNEL), f,
            param_info(f, paramIndex, paramOffset, paramSize));
}
