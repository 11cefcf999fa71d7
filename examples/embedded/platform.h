/* What the embedded app needs from its platform: a way to print one NUL-terminated string.
 * platform_host.c (hosted: Linux, also under qemu-aarch64) and cortex-m4/startup.c
 * (semihosting) implement it. */
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
