/* platform.h on a hosted C library (Linux, macOS, qemu-user). */
#include <stdio.h>

#include "platform.h"

void platform_write(const char *s)
{
    fputs(s, stdout);
    fflush(stdout);
}
