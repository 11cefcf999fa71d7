/* What a program on a board needs from its platform (examples/embedded, the harness of aicc's
 * runner): a way to print one NUL-terminated string. hosted.c (a hosted C library: Linux, also
 * under qemu-aarch64) and mps2-an386/startup.c (semihosting) implement it. */
#ifndef APP_PLATFORM_H
#define APP_PLATFORM_H

#ifdef __cplusplus
extern "C" {
#endif

void platform_write(const char *s);

#ifdef __cplusplus
}
#endif

#endif
