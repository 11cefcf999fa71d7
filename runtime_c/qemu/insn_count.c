/* A QEMU TCG plugin that counts executed guest instructions, for `aicc bench` on emulated
 * targets (aicc/runner/count.py). Built by `make qemu-plugin` against the qemu-plugin.h of the
 * installed QEMU (from Debian's qemu source package).
 *
 * Arguments (-plugin libaicc_insns.so,out=FILE[,mark=ADDR]):
 *   out=FILE   where the counts go, one decimal number per line
 *   mark=ADDR  guest address (hex) of a function: each time it is entered, the number of
 *              instructions executed so far is written as a line "m N"
 * At exit the total is written as "t N".
 *
 * Counting is per translation block: a block adds its instruction count when it starts. A
 * mark therefore also counts the rest of the marking function's first block; that is the same
 * constant at every mark, so the difference between two marks is exact. One vCPU only (the
 * targets aicc runs under QEMU are single-threaded programs). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <qemu-plugin.h>

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

static uint64_t executed;
static uint64_t mark_addr;
static int have_mark;
static FILE *out;

static void on_mark(unsigned int vcpu, void *udata)
{
    (void)vcpu;
    (void)udata;
    fprintf(out, "m %" PRIu64 "\n", executed);
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    size_t n = qemu_plugin_tb_n_insns(tb), i;
    (void)id;
    qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &executed, n);
    if (!have_mark) {
        return;
    }
    for (i = 0; i < n; ++i) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        if (qemu_plugin_insn_vaddr(insn) == mark_addr) {
            qemu_plugin_register_vcpu_insn_exec_cb(insn, on_mark, QEMU_PLUGIN_CB_NO_REGS, NULL);
        }
    }
}

static void on_qemu_exit(qemu_plugin_id_t id, void *udata)
{
    (void)id;
    (void)udata;
    fprintf(out, "t %" PRIu64 "\n", executed);
    fclose(out);
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
                                           int argc, char **argv)
{
    const char *path = NULL;
    int i;
    (void)info;
    for (i = 0; i < argc; ++i) {
        if (strncmp(argv[i], "out=", 4) == 0) {
            path = argv[i] + 4;
        } else if (strncmp(argv[i], "mark=", 5) == 0) {
            char *end;
            mark_addr = strtoull(argv[i] + 5, &end, 16);
            have_mark = *end == '\0';
            if (!have_mark) {
                fprintf(stderr, "aicc insn_count: bad mark address '%s'\n", argv[i] + 5);
                return 1;
            }
        } else {
            fprintf(stderr, "aicc insn_count: unknown argument '%s'\n", argv[i]);
            return 1;
        }
    }
    if (path == NULL) {
        fprintf(stderr, "aicc insn_count: needs out=FILE\n");
        return 1;
    }
    out = fopen(path, "w");
    if (out == NULL) {
        fprintf(stderr, "aicc insn_count: cannot write '%s'\n", path);
        return 1;
    }
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_atexit_cb(id, on_qemu_exit, NULL);
    return 0;
}
