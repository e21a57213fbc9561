/*
 * Fiber context switch for x86-64 (System V ABI).
 *
 * A switch is a plain function call that pushes what the ABI says a callee
 * must preserve (rbx, rbp, r12-r15), swaps stack pointers and pops the
 * other context's copy.  No system call and no signal mask: glibc's
 * swapcontext makes one rt_sigprocmask call per switch, which would
 * dominate the emulator's time.
 *
 * The MXCSR control bits and the x87 control word are callee-saved too.
 * simt__ctx_swap_fpenv saves and restores them; it is used whenever the
 * launching host thread is one side of the switch, so the host's
 * floating-point environment is always restored exactly.  Between two
 * fibers of a launch simt__ctx_swap skips them: on our EPYC hosts they make
 * a switch cost 5 ns instead of 2 (bench_simt), and CUDA device code has no
 * dynamic floating-point environment to preserve (rounding is chosen per
 * instruction), so the fibers of a launch share the one they start with.
 *
 * Both leave the same frame on a suspended stack, from the saved stack
 * pointer upwards:
 *   [mxcsr:4 | x87 cw:2 | pad:2] r15 r14 r13 r12 rbx rbp <return address>
 * (the first slot is only written and read by the _fpenv variant).
 */
#include "simt_internal.h"

#if !defined(__x86_64__)
#error "the SIMT emulator's context switch is written for x86-64"
#endif

SIMT_HIDDEN void simt__ctx_trampoline(void);

__asm__(".text\n"
        /* void simt__ctx_swap(void **save_sp, void *load_sp) */
        ".globl simt__ctx_swap\n"
        ".hidden simt__ctx_swap\n"
        ".type simt__ctx_swap, @function\n"
        ".p2align 4\n"
        "simt__ctx_swap:\n"
        "  pushq %rbp\n"
        "  pushq %rbx\n"
        "  pushq %r12\n"
        "  pushq %r13\n"
        "  pushq %r14\n"
        "  pushq %r15\n"
        "  subq $8, %rsp\n"
        "  movq %rsp, (%rdi)\n"
        "  movq %rsi, %rsp\n"
        "  addq $8, %rsp\n"
        "  popq %r15\n"
        "  popq %r14\n"
        "  popq %r13\n"
        "  popq %r12\n"
        "  popq %rbx\n"
        "  popq %rbp\n"
        "  ret\n"
        ".size simt__ctx_swap, .-simt__ctx_swap\n"
        /* void simt__ctx_swap_fpenv(void **save_sp, void *load_sp) */
        ".globl simt__ctx_swap_fpenv\n"
        ".hidden simt__ctx_swap_fpenv\n"
        ".type simt__ctx_swap_fpenv, @function\n"
        ".p2align 4\n"
        "simt__ctx_swap_fpenv:\n"
        "  pushq %rbp\n"
        "  pushq %rbx\n"
        "  pushq %r12\n"
        "  pushq %r13\n"
        "  pushq %r14\n"
        "  pushq %r15\n"
        "  subq $8, %rsp\n"
        "  stmxcsr (%rsp)\n"
        "  fnstcw 4(%rsp)\n"
        "  movq %rsp, (%rdi)\n"
        "  movq %rsi, %rsp\n"
        "  ldmxcsr (%rsp)\n"
        "  fldcw 4(%rsp)\n"
        "  addq $8, %rsp\n"
        "  popq %r15\n"
        "  popq %r14\n"
        "  popq %r13\n"
        "  popq %r12\n"
        "  popq %rbx\n"
        "  popq %rbp\n"
        "  ret\n"
        ".size simt__ctx_swap_fpenv, .-simt__ctx_swap_fpenv\n"
        /* First code of a fiber, reached by the `ret` above: calls
         * r13(r12).  The undefined return address ends unwinding here. */
        ".globl simt__ctx_trampoline\n"
        ".hidden simt__ctx_trampoline\n"
        ".type simt__ctx_trampoline, @function\n"
        ".p2align 4\n"
        "simt__ctx_trampoline:\n"
        "  .cfi_startproc\n"
        "  .cfi_undefined rip\n"
        "  movq %r12, %rdi\n"
        "  callq *%r13\n"
        "  ud2\n"
        "  .cfi_endproc\n"
        ".size simt__ctx_trampoline, .-simt__ctx_trampoline\n");

/* The floating-point environment a fiber starts with: the ABI's defaults
 * (all exceptions masked, round to nearest; x87 extended precision). */
#define MXCSR_DEFAULT 0x1F80u
#define X87_CW_DEFAULT 0x037Fu

void *simt__ctx_prepare(void *stack_top, void (*fn)(void *), void *arg) {
  uint64_t *sp = (uint64_t *)((uintptr_t)stack_top & ~(uintptr_t)15);
  /* After `ret` pops the trampoline's address the stack pointer is
   * top - 16: 16-byte aligned, as the trampoline's call needs. */
  *--sp = 0; /* padding */
  *--sp = 0; /* above the trampoline: no caller */
  *--sp = (uint64_t)(uintptr_t)simt__ctx_trampoline; /* `ret` goes here */
  *--sp = 0;                        /* rbp: ends frame-pointer chains */
  *--sp = 0;                        /* rbx */
  *--sp = (uint64_t)(uintptr_t)arg; /* r12 */
  *--sp = (uint64_t)(uintptr_t)fn;  /* r13 */
  *--sp = 0;                        /* r14 */
  *--sp = 0;                        /* r15 */
  *--sp = (uint64_t)X87_CW_DEFAULT << 32 | MXCSR_DEFAULT;
  return sp;
}
