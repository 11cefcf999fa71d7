/* Minimal bare-metal startup for a Cortex-M4F: the MPS2 AN386 board (QEMU mps2-an386).
 * Vector table, reset handler (FPU on, .data copied from flash, .bss zeroed, main), and the
 * platform.h output through Arm semihosting (bkpt 0xab; qemu -semihosting-config
 * enable=on,target=native). main's return value becomes QEMU's exit status. No libc.
 * The same file serves the Cortex-M7 on MPS2 AN500 and the Cortex-M55 on MPS3 AN547 (their
 * linker scripts: ../mps2-an500/, ../mps3-an547/): the vector table's layout and CPACR are
 * those of Armv7-M and Armv8-M Mainline; the M55 starts in the Secure state with the SAU
 * off, so every address is Secure and needs no set-up; the M7's caches stay off (QEMU models
 * none); faults that are not enabled (MemManage, BusFault, UsageFault, SecureFault) escalate
 * to HardFault. */
#include <stdint.h>

#include "platform.h"

extern uint32_t _sidata[], _sdata[], _edata[], _sbss[], _ebss[], _estack[];
int main(void);
void Reset_Handler(void);
void Fault_Handler(void);

typedef void (*handler_fn)(void);

/* initial stack pointer, then the 15 system exception handlers (no device interrupts) */
struct vector_table {
    uint32_t *stack_top;
    handler_fn handlers[15];
};

__attribute__((section(".vectors"), used))
const struct vector_table vectors = {
    _estack,
    { Reset_Handler, Fault_Handler, Fault_Handler, Fault_Handler, Fault_Handler,
      Fault_Handler, 0, 0, 0, 0, Fault_Handler, Fault_Handler, 0, Fault_Handler,
      Fault_Handler }
};

#define SYS_WRITE0 0x04
#define SYS_EXIT 0x18
#define SYS_EXIT_EXTENDED 0x20
#define ADP_STOPPED_APPLICATION_EXIT 0x20026u
#define ADP_STOPPED_RUNTIME_ERROR 0x20023u

static int semihost(int op, const void *arg)
{
    register int r0 __asm__("r0") = op;
    register const void *r1 __asm__("r1") = arg;
    __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}

void platform_write(const char *s)
{
    (void)semihost(SYS_WRITE0, s);
}

static void platform_exit(int status)
{
    uint32_t block[2];
    block[0] = ADP_STOPPED_APPLICATION_EXIT;
    block[1] = (uint32_t)status;
    (void)semihost(SYS_EXIT_EXTENDED, block);
    /* a debugger without the extended call: exit with success or failure only */
    (void)semihost(SYS_EXIT, (const void *)(uintptr_t)(status == 0 ? ADP_STOPPED_APPLICATION_EXIT
                                                                  : ADP_STOPPED_RUNTIME_ERROR));
    for (;;) {
    }
}

void Fault_Handler(void)
{
    platform_write("FAIL: fault exception\n");
    platform_exit(3);
}

void Reset_Handler(void)
{
    uint32_t *src = _sidata, *dst = _sdata;
    /* CPACR: full access to CP10/CP11 (the FPU) before any floating-point instruction */
    *(volatile uint32_t *)0xE000ED88u |= 0xFu << 20;
    __asm__ volatile("dsb\n\tisb" ::: "memory");
    while (dst < _edata) {
        *dst++ = *src++;
    }
    for (dst = _sbss; dst < _ebss; ++dst) {
        *dst = 0u;
    }
    platform_exit(main());
}
