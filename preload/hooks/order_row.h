/* hooks.def's reading of an order.def row: a hook like any other (the
 * stream is the hook body's business, hooks_order.c).  In a header of its
 * own so that checks/libc_hooks_listed.sh reads order.def's rows by their
 * own name. */
#ifndef IBP_PRELOAD_ORDER_ROW_H
#define IBP_PRELOAD_ORDER_ROW_H
#define IBP_ORDER_AS_HOOK(sym, params, args, stream) IBP_HOOK(sym, params, args)
#endif
