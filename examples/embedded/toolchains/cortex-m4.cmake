# CMake toolchain file: Cortex-M4F bare metal with Debian's arm-none-eabi-gcc; programs run
# on QEMU's MPS2 AN386 board with semihosting (cmake --build B --target run).
set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR arm)
set(CMAKE_C_COMPILER arm-none-eabi-gcc)
set(CMAKE_ASM_COMPILER arm-none-eabi-gcc)
set(CMAKE_AR arm-none-eabi-ar)
# no OS to link a test program against
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-system-arm;-M;mps2-an386;-cpu;cortex-m4;-nographic;-monitor;none
    -serial;none;-chardev;stdio,id=semihost;-semihosting-config;enable=on,target=native,chardev=semihost
    -kernel)
